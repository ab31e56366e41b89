// libFuzzer target: model_load's metadata and tensor-shape validation. The input is a whole GGUF file
// (seeds: tiny valid llama/qwen2/qwen3 models, tests/fuzz/make_gguf_seeds.py), written to a memfd and
// loaded through its /proc path exactly as `tachyon serve -m` loads a file. model_load must either fail
// with a message or return a model the rest of the engine can trust: so an accepted model also gets its
// tokenizer loaded and chat template detected (what the server does next), and runs one forward step of
// two tokens through a KV cache; any shape the validation let through that the forward pass cannot handle
// shows up here as an ASan/UBSan report.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/model.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

#define CHECK(c)                                                                                             \
    do {                                                                                                     \
        if (!(c)) __builtin_trap();                                                                          \
    } while (0)

static void after_load(model *m) {
    const model_hparams *hp = model_get_hparams(m);
    CHECK(hp->n_vocab > 0 && hp->dim > 0 && hp->n_layers > 0 && hp->n_heads > 0 && hp->n_kv_heads > 0);
    CHECK(hp->n_heads % hp->n_kv_heads == 0 && hp->head_dim > 0 && hp->rope_dim > 0 && hp->rope_dim <= hp->head_dim);
    tc_err err = {0};
    tok_vocab *v = NULL;
    if (tok_load(model_gguf(m), &v, &err) == 0) tok_free(v);
    else CHECK(err.msg[0]);
    gguf_str s;
    if (gguf_get_str(model_gguf(m), "tokenizer.chat_template", &s) == 0 && s.len < 65536) {
        char *t = strndup(s.ptr, s.len);
        if (t) (void)chat_detect(t);
        free(t);
    }
    // one step: tokens 0 and n_vocab-1 at positions 0 and 1 of sequence 0, logits for the last one
    model_ctx *ctx = NULL;
    model_kv *kv = NULL;
    float *logits = NULL;
    memset(&err, 0, sizeof err);
    if (model_ctx_new(m, 2, 1, &ctx, &err)) {
        CHECK(err.msg[0]);
        return;
    }
    if (model_kv_new(m, 1, 16, &kv, &err)) {
        CHECK(err.msg[0]);
        goto out;
    }
    logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    if (!logits) goto out;
    int32_t tokens[2] = {0, hp->n_vocab - 1}, pos[2] = {0, 1}, seq[2] = {0, 0}, block0[1] = {0}, rows[1] = {1};
    const int32_t *tables[1] = {block0};
    model_batch b = {.n_tokens = 2, .tokens = tokens, .pos = pos, .seq = seq, .n_seqs = 1, .block_tables = tables,
                     .n_logits = 1, .logits_rows = rows};
    if (model_forward(ctx, kv, &b, logits, &err)) CHECK(err.msg[0]);
out:
    free(logits);
    model_kv_free(kv);
    model_ctx_free(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fuzz_model_load", 0);
        if (fd < 0) {
            perror("memfd_create");
            abort();
        }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
    model *m = NULL;
    tc_err err = {0};
    int rc = model_load(path, &m, &err);
    if (rc) {
        CHECK(rc < 0 && !m && err.msg[0]); // an error code with a message, nothing to free
        return 0;
    }
    CHECK(m);
    after_load(m);
    model_free(m);
    return 0;
}
