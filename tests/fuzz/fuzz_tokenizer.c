// libFuzzer target: encode arbitrary bytes (with and without PARSE_SPECIAL) with a byte-level BPE vocab and
// an SPM vocab, decode the result and check the round trip, and stream-decode arbitrary ids checking that
// only valid UTF-8 comes out. Vocabularies are loaded once (run from the repository root).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

static tok_vocab *vocabs[2];
static int n_vocabs;

static void load(const char *path) {
    gguf_ctx *g;
    tc_err err = {0};
    if (gguf_open(path, &g, &err)) {
        fprintf(stderr, "fuzz_tokenizer: %s: %s (run from the repository root)\n", path, err.msg);
        abort();
    }
    if (tok_load(g, &vocabs[n_vocabs], &err)) {
        fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path, err.msg);
        abort();
    }
    gguf_close(g);
    n_vocabs++;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    load("../shared/testdata/vocab/ggml-vocab-gpt-2.gguf");
    load("../shared/testdata/vocab/ggml-vocab-llama-spm.gguf");
    return 0;
}

static int valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        int l = tok_utf8_valid_len((const uint8_t *)s + i, n - i);
        if (l <= 0) return 0;
        i += (size_t)l;
    }
    return 1;
}

static void stream_ids(const tok_vocab *v, const int32_t *ids, int n, int flags) {
    tok_stream *s = tok_stream_new(v, flags);
    if (!s) return;
    char out[512];
    for (int i = 0; i < n; i++) {
        int r = tok_stream_push(s, ids[i], out, sizeof out);
        if (r > (int)sizeof out) continue; // too long for this buffer: nothing consumed, skip it
        if (r > 0 && !valid_utf8(out, (size_t)r)) abort();
    }
    int r = tok_stream_flush(s, out, sizeof out);
    if (r > 0 && r <= (int)sizeof out && !valid_utf8(out, (size_t)r)) abort();
    tok_stream_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int k = 0; k < n_vocabs; k++) {
        const tok_vocab *v = vocabs[k];
        for (int flags = 0; flags <= TOK_ENC_PARSE_SPECIAL; flags += TOK_ENC_PARSE_SPECIAL) {
            int32_t *ids;
            int n;
            tc_err err;
            if (tok_encode(v, (const char *)data, size, flags, &ids, &n, &err)) abort(); // never fails on bytes
            for (int i = 0; i < n; i++)
                if (ids[i] < 0 || ids[i] >= tok_n_vocab(v)) abort();
            char *text;
            size_t len;
            if (tok_decode(v, ids, n, 0, &text, &len, &err)) abort();
            // both test vocabs have a token for every byte, so plain-text encoding round-trips exactly
            // (SPM modulo the space it adds after a special token, and modulo a literal U+2581 "▁" in the
            // text: SentencePiece's space marker, which decodes as a space — sentencepiece and llama.cpp do
            // the same)
            if (!flags && (len != size || memcmp(text, data, size))) {
                int spm_special = v->kind == TOK_KIND_SPM &&
                                  (memmem(data, size, "</s>", 4) || memmem(data, size, "\xe2\x96\x81", 3));
                if (!spm_special) abort();
            }
            free(text);
            stream_ids(v, ids, n, TOK_DEC_SKIP_SPECIAL);
            free(ids);
        }
        // the input read as raw ids (any value, in range or not)
        int n = (int)(size / 4);
        int32_t *raw = malloc((size_t)(n ? n : 1) * sizeof *raw);
        if (!raw) continue;
        memcpy(raw, data, (size_t)n * 4);
        for (int i = 0; i < n; i++) raw[i] = (int32_t)((uint32_t)raw[i] % (uint32_t)(tok_n_vocab(v) + 8)) - 4;
        char *text;
        size_t len;
        tc_err err;
        int rc = tok_decode(v, raw, n, 0, &text, &len, &err);
        if (rc == 0) free(text);
        int good = 0;
        for (int i = 0; i < n; i++)
            if (raw[i] >= 0 && raw[i] < tok_n_vocab(v)) raw[good++] = raw[i];
        stream_ids(v, raw, good, 0);
        stream_ids(v, raw, good, TOK_DEC_SKIP_SPECIAL);
        free(raw);
    }
    return 0;
}
