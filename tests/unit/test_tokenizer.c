// Tokenizer tests: llama.cpp's reference vectors (vocab/*.inp/.out), loading every test vocab, round trips
// on tricky text, special tokens, streaming detokenization, hostile input (timed).
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_util.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

#define VOCAB_DIR "../shared/testdata/vocab"

// CPU seconds of this process: the test machine is shared, so wall time would measure the neighbours
static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (b) b[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return b;
}

typedef struct {
    gguf_ctx *g;
    tok_vocab *v;
} vocab_h;

static int open_vocab(const char *path, vocab_h *h, tc_err *err) {
    h->g = NULL, h->v = NULL;
    int rc = gguf_open(path, &h->g, err);
    if (!rc) rc = tok_load(h->g, &h->v, err);
    if (h->g) gguf_close(h->g), h->g = NULL; // the vocab copies what it needs
    return rc;
}

static void print_ids(const char *label, const int32_t *ids, int n) {
    fprintf(stderr, "  %s (%d):", label, n);
    for (int i = 0; i < n && i < 64; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, n > 64 ? " …\n" : "\n");
}

// --- reference vectors

static void test_vectors(const char *inp_path) {
    char out_path[512];
    snprintf(out_path, sizeof out_path, "%.*s.out", (int)(strlen(inp_path) - 4), inp_path);
    char gguf_path[512];
    snprintf(gguf_path, sizeof gguf_path, "%.*s", (int)(strlen(inp_path) - 4), inp_path);
    size_t ni, no;
    char *inp = read_file(inp_path, &ni), *outs = read_file(out_path, &no);
    CHECK_MSG(inp && outs, "cannot read %s / %s", inp_path, out_path);
    vocab_h h;
    tc_err err = {0};
    int rc = open_vocab(gguf_path, &h, &err);
    CHECK_MSG(rc == 0, "%s: %s", gguf_path, err.msg);
    if (!inp || !outs || rc) goto done;
    const char *sep = "\n__ggml_vocab_test__\n";
    char *p = inp, *q = outs;
    int n_cases = 0, n_ok = 0;
    for (;;) {
        char *e = strstr(p, sep);
        if (!e) break;
        char *qe = strchr(q, '\n');
        if (!qe) break;
        *qe = 0;
        int32_t want[4096];
        int n_want = 0;
        for (char *t = q; *t;) {
            char *end;
            long x = strtol(t, &end, 10);
            if (end == t) break;
            if (n_want < 4096) want[n_want++] = (int32_t)x;
            t = end;
        }
        int32_t *ids;
        int n;
        rc = tok_encode(h.v, p, (size_t)(e - p), 0, &ids, &n, &err);
        int same = rc == 0 && n == n_want && !memcmp(ids, want, (size_t)n * sizeof *ids);
        n_cases++;
        n_ok += same;
        CHECK_MSG(same, "%s case %d '%.*s'", gguf_path, n_cases, (int)(e - p), p);
        if (!same) {
            print_ids("want", want, n_want);
            if (rc == 0) print_ids("got ", ids, n);
        }
        if (rc == 0) free(ids);
        p = e + strlen(sep);
        q = qe + 1;
    }
    CHECK_MSG(n_cases >= 40, "%s: only %d cases parsed", inp_path, n_cases);
    printf("%-45s %d/%d cases match\n", gguf_path, n_ok, n_cases);
    tok_free(h.v);
done:
    free(inp);
    free(outs);
}

static void test_all_vectors(void) {
    DIR *d = opendir(VOCAB_DIR);
    CHECK_MSG(d != NULL, "cannot open %s", VOCAB_DIR);
    if (!d) return;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 4 && !strcmp(e->d_name + l - 4, ".inp")) {
            char path[512];
            snprintf(path, sizeof path, "%s/%s", VOCAB_DIR, e->d_name);
            test_vectors(path);
            n++;
        }
    }
    closedir(d);
    CHECK_MSG(n >= 4, "found %d .inp files", n);
}

// --- every test vocabulary loads (or is refused clearly) and round-trips tricky text

static const char *const tricky[] = {
    "Hello world",
    " leading space",
    "   three leading, two trailing  ",
    "a  b   c    d\t\te\n\nf\r\ng",
    "\n\n\n",
    "\t",
    " ",
    "中文文本测试：你好，世界！日本語のテキスト。한국어",
    "👨\xe2\x80\x8d👩\xe2\x80\x8d👧\xe2\x80\x8d👦 family, 🏳️\xe2\x80\x8d🌈 flag, 👋🏽 wave, ❤️\xe2\x80\x8d🔥",
    "Déjà vu, naïve café, Ångström, e\xcc\x81 (combining), Straße",
    "1 12 123 1234 12345 3.14159 1e-10 -42 ½ ٣ ४",
    "def f(x):\n    return {'a': [x, x ** 2]}  # comment\n",
    "int main(void) { printf(\"%d\\n\", 42); return 0; }",
    "Русский текст, العربية, हिन्दी, Ελληνικά, עברית, ไทย",
    "I'm sure they've done it, haven't they? We'd better go. YOU'LL see",
    "!!!???...,,,;;;:::---___+++===<<<>>>",
    "<|endoftext|> <s> </s> <unk> <|im_end|> [INST]",
    "\xc2\xa0nbsp\xe3\x80\x80ideographic\xc2\x85nel",
};

static int is_valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        int l = tok_utf8_valid_len((const uint8_t *)s + i, n - i);
        if (l <= 0) return 0;
        i += (size_t)l;
    }
    return 1;
}

// Reference sanitizer for the stream's contract: each byte that does not start a valid sequence → U+FFFD.
static char *sanitize(const char *s, size_t n, size_t *out_n) {
    char *o = malloc(3 * n + 1);
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        int l = tok_utf8_valid_len((const uint8_t *)s + i, n - i);
        if (l > 0) memcpy(o + w, s + i, (size_t)l), w += (size_t)l, i += (size_t)l;
        else memcpy(o + w, "\xef\xbf\xbd", 3), w += 3, i++;
    }
    *out_n = w;
    return o;
}

// Streams ids through a tok_stream with a deliberately small buffer first; checks validity and that the
// result equals the sanitized whole decode.
static void check_stream(const tok_vocab *v, const int32_t *ids, int n, int flags, const char *label) {
    char *whole;
    size_t wn;
    tc_err err = {0};
    if (tok_decode(v, ids, n, flags, &whole, &wn, &err)) {
        CHECK_MSG(0, "%s: decode: %s", label, err.msg);
        return;
    }
    size_t want_n;
    char *want = sanitize(whole, wn, &want_n);
    tok_stream *s = tok_stream_new(v, flags);
    size_t cap = want_n + 64, got_n = 0;
    char *got = malloc(cap);
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        char small[2];
        int r = tok_stream_push(s, ids[i], small, 1); // may ask for more room without consuming
        if (r > 1) r = tok_stream_push(s, ids[i], got + got_n, (int)(cap - got_n));
        else if (r > 0) memcpy(got + got_n, small, (size_t)r);
        if (r < 0) ok = 0;
        else {
            if (!is_valid_utf8(got + got_n, (size_t)r)) ok = 0;
            got_n += (size_t)r;
        }
    }
    int r = tok_stream_flush(s, got + got_n, (int)(cap - got_n));
    if (r >= 0) got_n += (size_t)r;
    CHECK_MSG(ok && r >= 0 && got_n == want_n && !memcmp(got, want, want_n), "%s: stream (%zu bytes) != decode (%zu)",
              label, got_n, want_n);
    CHECK_MSG(is_valid_utf8(got, got_n), "%s: stream emitted invalid UTF-8", label);
    tok_stream_free(s);
    free(got);
    free(want);
    free(whole);
}

// exact: the decoded text must equal the input (false where the vocab cannot represent it, see callers)
static void check_roundtrip(const tok_vocab *v, const char *text, size_t len, int exact, const char *label) {
    int32_t *ids;
    int n;
    tc_err err = {0};
    int rc = tok_encode(v, text, len, TOK_ENC_ADD_BOS, &ids, &n, &err);
    CHECK_MSG(rc == 0, "%s: encode: %s", label, err.msg);
    if (rc) return;
    int in_range = 1;
    for (int i = 0; i < n; i++) in_range &= ids[i] >= 0 && ids[i] < tok_n_vocab(v);
    CHECK_MSG(in_range, "%s: id out of range", label);
    CHECK_MSG(len == 0 || n > (tok_bos(v) >= 0 ? 1 : 0), "%s: no tokens for %zu bytes", label, len);
    char *back;
    size_t bn;
    rc = tok_decode(v, ids, n, TOK_DEC_SKIP_SPECIAL, &back, &bn, &err);
    CHECK_MSG(rc == 0 && (!exact || (bn == len && !memcmp(back, text, len))), "%s: round trip of '%.*s' gave '%.*s'", label,
              (int)(len > 80 ? 80 : len), text, rc ? 0 : (int)(bn > 80 ? 80 : bn), rc ? "" : back);
    if (rc == 0) free(back);
    check_stream(v, ids, n, TOK_DEC_SKIP_SPECIAL, label);
    check_stream(v, ids, n, 0, label);
    free(ids);
}

static void test_vocab_file(const char *path) {
    vocab_h h;
    tc_err err = {0};
    int rc = open_vocab(path, &h, &err);
    if (strstr(path, "bert")) { // WordPiece is not supported: a clear refusal is the contract
        CHECK_MSG(rc == TC_ERR_UNSUPPORTED && strstr(err.msg, "bert"), "%s: rc %d '%s'", path, rc, err.msg);
        return;
    }
    CHECK_MSG(rc == 0, "%s: %s", path, err.msg);
    if (rc) return;
    const tok_vocab *v = h.v;
    CHECK(tok_n_vocab(v) > 0);
    for (size_t i = 0; i < sizeof tricky / sizeof tricky[0]; i++) {
        char label[600];
        snprintf(label, sizeof label, "%s #%zu", path, i);
        // SPM puts a ▁ after every special token (user-defined ones are matched even as plain text), so
        // text containing special-token strings only round-trips modulo that space
        int has_special = strstr(tricky[i], "</s>") != NULL;
        check_roundtrip(v, tricky[i], strlen(tricky[i]), !(has_special && tok_get_kind(v) == TOK_KIND_SPM), label);
    }
    // invalid UTF-8 and NUL bytes survive byte-exact (byte fallback / byte-level symbols)
    static const char junk[] = "ok\xff\xfe bad \xc3( \xe2\x82 \xed\xa0\x80 \xf4\x90\x80\x80 nul\0 \x80\x80 end\xe4\xb8";
    char label[600];
    snprintf(label, sizeof label, "%s junk", path);
    // exact only when every byte has its own plain token (some BPE vocabs never saw bytes like 0xFF, or
    // cover them with user-defined tokens that render as text)
    int all_bytes = 1;
    for (size_t i = 0; i < sizeof junk - 1; i++) {
        int32_t b = v->byte_tok[(uint8_t)junk[i]];
        all_bytes &= b >= 0 && (v->type[b] == TOK_TYPE_NORMAL || v->type[b] == TOK_TYPE_BYTE);
    }
    check_roundtrip(v, junk, sizeof junk - 1, all_bytes, label);
    if (strstr(path, "gpt-2") || strstr(path, "llama-spm"))
        CHECK_MSG(all_bytes, "%s: expected every byte to have a token", path);
    tok_free(h.v);
}

static void test_all_vocabs(void) {
    const char *dirs[] = {VOCAB_DIR, "../shared/testdata/models"};
    int n = 0;
    for (int k = 0; k < 2; k++) {
        DIR *d = opendir(dirs[k]);
        if (!d) continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t l = strlen(e->d_name);
            if (l > 5 && !strcmp(e->d_name + l - 5, ".gguf")) {
                char path[512];
                snprintf(path, sizeof path, "%s/%s", dirs[k], e->d_name);
                test_vocab_file(path);
                n++;
            }
        }
        closedir(d);
    }
    CHECK_MSG(n >= 12, "found only %d vocab files", n);
}

// --- special tokens, BOS/EOS metadata, piece rendering

static void test_specials(void) {
    vocab_h h;
    tc_err err = {0};
    int rc = open_vocab(VOCAB_DIR "/ggml-vocab-gpt-2.gguf", &h, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (rc) return;
    tok_vocab *v = h.v;
    CHECK_EQ_INT(tok_get_kind(v), TOK_KIND_BPE);
    CHECK_EQ_INT(tok_find(v, "<|endoftext|>"), 50256);
    CHECK_EQ_INT(tok_eos(v), 50256);
    CHECK(tok_is_eog(v, 50256));
    CHECK(tok_is_control(v, 50256));
    CHECK(!tok_is_control(v, 100));
    CHECK_EQ_INT(tok_add_bos(v), 0);
    const char *t = "a<|endoftext|>b";
    int32_t *ids;
    int n;
    CHECK(tok_encode(v, t, strlen(t), 0, &ids, &n, &err) == 0);
    int has = 0;
    for (int i = 0; i < n; i++) has |= ids[i] == 50256;
    CHECK_MSG(!has && n > 3, "control token parsed without PARSE_SPECIAL (n=%d)", n);
    free(ids);
    CHECK(tok_encode(v, t, strlen(t), TOK_ENC_PARSE_SPECIAL, &ids, &n, &err) == 0);
    CHECK_MSG(n == 3 && ids[1] == 50256, "PARSE_SPECIAL: n=%d", n);
    char *s;
    size_t sn;
    CHECK(tok_decode(v, ids, n, 0, &s, &sn, &err) == 0 && !strcmp(s, t));
    free(s);
    CHECK(tok_decode(v, ids, n, TOK_DEC_SKIP_SPECIAL, &s, &sn, &err) == 0 && !strcmp(s, "ab"));
    free(s);
    free(ids);
    char buf[32];
    CHECK_EQ_INT(tok_piece(v, 50256, 0, buf, sizeof buf), 13);
    CHECK_EQ_INT(tok_piece(v, 50256, TOK_DEC_SKIP_SPECIAL, buf, sizeof buf), 0);
    CHECK_EQ_INT(tok_piece(v, 220, 0, buf, sizeof buf), 1); // "Ġ" → ' '
    CHECK(buf[0] == ' ');
    CHECK(tok_piece(v, -1, 0, buf, sizeof buf) < 0);
    CHECK(tok_piece(v, 50257, 0, buf, sizeof buf) < 0);
    int32_t bad = 60000;
    CHECK(tok_decode(v, &bad, 1, 0, &s, &sn, &err) == TC_ERR_INVALID);
    tok_free(v);

    // SPM: BOS added by default, the leading space rule, byte pieces
    rc = open_vocab(VOCAB_DIR "/ggml-vocab-llama-spm.gguf", &h, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (rc) return;
    v = h.v;
    CHECK_EQ_INT(tok_get_kind(v), TOK_KIND_SPM);
    CHECK_EQ_INT(tok_bos(v), 1);
    CHECK_EQ_INT(tok_eos(v), 2);
    CHECK_EQ_INT(tok_add_bos(v), 1);
    CHECK(tok_encode(v, "Hello", 5, TOK_ENC_ADD_BOS, &ids, &n, &err) == 0);
    CHECK_MSG(n == 2 && ids[0] == 1 && ids[1] == 15043, "n=%d", n); // ▁Hello
    CHECK_EQ_INT(tok_piece(v, 15043, 0, buf, sizeof buf), 6);
    CHECK(!memcmp(buf, " Hello", 6));
    CHECK(tok_decode(v, ids, n, 0, &s, &sn, &err) == 0 && !strcmp(s, "<s>Hello"));
    free(s);
    free(ids);
    CHECK_EQ_INT(tok_piece(v, tok_find(v, "<0x0A>"), 0, buf, sizeof buf), 1);
    CHECK(buf[0] == '\n');
    // a split multi-byte character across byte tokens is held back by the stream until complete
    int32_t cjk[3] = {tok_find(v, "<0xE4>"), tok_find(v, "<0xB8>"), tok_find(v, "<0xAD>")};
    tok_stream *st = tok_stream_new(v, 0);
    char o[16];
    CHECK_EQ_INT(tok_stream_push(st, cjk[0], o, sizeof o), 0);
    CHECK_EQ_INT(tok_stream_push(st, cjk[1], o, sizeof o), 0);
    CHECK_EQ_INT(tok_stream_push(st, cjk[2], o, sizeof o), 3);
    CHECK(!memcmp(o, "\xe4\xb8\xad", 3));
    CHECK_EQ_INT(tok_stream_push(st, cjk[0], o, sizeof o), 0);
    CHECK_EQ_INT(tok_stream_flush(st, o, sizeof o), 3); // dangling lead byte → U+FFFD
    CHECK(!memcmp(o, "\xef\xbf\xbd", 3));
    tok_stream_free(st);
    tok_free(v);
}

// --- pre-tokenizer regexes without a test vocab: splits as HF `tokenizers` gives them

static void check_split(const char *pre, const char *text, const char *const *want, int n_want) {
    tok_pretok *p;
    int im;
    tc_err err = {0};
    int rc = tok_pretok_new(pre, &p, &im, &err);
    CHECK_MSG(rc == 0, "%s: %s", pre, err.msg);
    if (rc) return;
    tok_span *sp;
    size_t n;
    rc = tok_pretok_split(p, text, strlen(text), &sp, &n, &err);
    int same = rc == 0 && (int)n == n_want;
    for (int i = 0; same && i < n_want; i++)
        same = sp[i].len == strlen(want[i]) && !memcmp(text + sp[i].off, want[i], sp[i].len);
    CHECK_MSG(same, "%s split of '%s' differs (%zu pieces)", pre, text, rc ? 0 : n);
    if (!same && rc == 0)
        for (size_t i = 0; i < n; i++) fprintf(stderr, "  [%.*s]\n", (int)sp[i].len, text + sp[i].off);
    if (rc == 0) free(sp);
    tok_pretok_free(p);
}

#define SPLIT(pre, text, ...)                                                                                \
    do {                                                                                                     \
        const char *const w_[] = {__VA_ARGS__};                                                              \
        check_split(pre, text, w_, (int)(sizeof w_ / sizeof w_[0]));                                         \
    } while (0)

static void test_pretok(void) {
    SPLIT("llama-bpe", "Hello world 12345", "Hello", " world", " ", "123", "45");
    SPLIT("llama-bpe", "  hello", " ", " hello");
    SPLIT("llama-bpe", "I'm OK, YOU'RE fine", "I", "'m", " OK", ",", " YOU", "'RE", " fine");
    SPLIT("llama-bpe", "x!!!\n  y", "x", "!!!\n", " ", " y");
    SPLIT("llama-bpe", "中文 text\t\tend  ", "中文", " text", "\t", "\tend", "  ");
    SPLIT("qwen2", "a123456b", "a", "1", "2", "3", "4", "5", "6", "b");
    SPLIT("qwen2", "Hello\n\nWorld", "Hello", "\n\n", "World");
    SPLIT("smollm", "abc 2024!", "abc", " ", "2", "0", "2", "4", "!");
    // o200k (gpt-oss): splits as HF tokenizers' Split(Regex(tokenizer.json's pattern), "isolated") gives them
    SPLIT("gpt-4o", "I'm OK, YOU'RE fine", "I'm", " OK", ",", " YOU'RE", " fine");
    SPLIT("gpt-4o", "HelloWorld 12345 abc", "Hello", "World", " ", "123", "45", " abc");
    SPLIT("gpt-4o", "x!!!\n  y", "x", "!!!\n", " ", " y");
    SPLIT("gpt-4o", "path/to/file\n\nnext", "path", "/to", "/file", "\n\n", "next");
    SPLIT("gpt-4o", "Ünïcödé CamelCase", "Ünïcödé", " Camel", "Case");
    // every name resolves and compiles; an unknown one is refused by name
    const char *names[] = {"default", "llama3", "llama-bpe", "dbrx", "deepseek-llm", "deepseek-coder", "deepseek-v3",
                           "falcon", "mpt", "starcoder", "gpt-2", "phi-2", "refact", "command-r", "qwen2", "stablelm2",
                           "olmo", "gpt-neox", "smollm", "poro-chat", "viking", "tekken", "chatglm-bpe", "exaone", "gpt-4o"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        tok_pretok *p = NULL;
        int im;
        tc_err err = {0};
        CHECK_MSG(tok_pretok_new(names[i], &p, &im, &err) == 0, "%s: %s", names[i], err.msg);
        tok_pretok_free(p);
    }
    tok_pretok *p = NULL;
    int im;
    tc_err err = {0};
    CHECK(tok_pretok_new("no-such-pre", &p, &im, &err) == TC_ERR_UNSUPPORTED && strstr(err.msg, "no-such-pre"));
}

// --- hostile input: a long run of one repeated unit must tokenize in time linear in its length and round-trip.
// Checked as a ratio (a quarter of the input, then all of it) so that the test holds on a slow or loaded CI
// machine and under sanitizers: linear work takes ~4x, quadratic work ~16x. Absolute speed is `make bench`'s job;
// the cap below only catches a hang.

#define HOSTILE_RATIO 8.0
#define HOSTILE_SLACK_S 0.05   // fixed costs and timer noise on the short run
#define HOSTILE_CAP_S_PER_MB 60.0

static double encode_cpu_s(vocab_h *h, const char *buf, size_t n, int32_t **ids, int *n_ids, int *rc, tc_err *err) {
    double t0 = now_s();
    *rc = tok_encode(h->v, buf, n, TOK_ENC_PARSE_SPECIAL, ids, n_ids, err);
    return now_s() - t0;
}

static void hostile_vocab(const char *file, size_t size, double *worst, char *worst_what, size_t ww) {
    const char *units[] = {"a", " ", "\n", "1", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "\xff", "\0", ".", " a", "  \xe4\xb8\xad"};
    char path[256];
    snprintf(path, sizeof path, VOCAB_DIR "/%s", file);
    vocab_h h;
    tc_err err = {0};
    if (open_vocab(path, &h, &err)) {
        CHECK_MSG(0, "%s: %s", path, err.msg);
        return;
    }
    char *buf = malloc(size + 8);
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        size_t ul = units[u][0] ? strlen(units[u]) : 1, n = 0;
        while (n + ul <= size) memcpy(buf + n, units[u], ul), n += ul;
        int representable = 1; // every byte has a plain token (some BPE vocabs lack bytes like 0xFF)
        for (size_t i = 0; i < ul; i++) {
            int32_t b = h.v->byte_tok[(uint8_t)units[u][i]];
            representable &= b >= 0 && (h.v->type[b] == TOK_TYPE_NORMAL || h.v->type[b] == TOK_TYPE_BYTE);
        }
        int32_t *ids = NULL;
        int n_ids = 0, rc;
        size_t quarter = (n / 4) / ul * ul;
        double dq = encode_cpu_s(&h, buf, quarter, &ids, &n_ids, &rc, &err);
        if (rc == 0) free(ids);
        double dt = encode_cpu_s(&h, buf, n, &ids, &n_ids, &rc, &err);
        if (dt >= HOSTILE_RATIO * dq + HOSTILE_SLACK_S) { // once more: a neighbour's burst is not this
            if (rc == 0) free(ids);
            dq = encode_cpu_s(&h, buf, quarter, &ids, &n_ids, &rc, &err);
            if (rc == 0) free(ids);
            dt = encode_cpu_s(&h, buf, n, &ids, &n_ids, &rc, &err);
        }
        CHECK_MSG(rc == 0 && (n_ids > 0 || !representable), "%s unit %zu: rc %d %s", file, u, rc, err.msg);
        if (dt > *worst) *worst = dt, snprintf(worst_what, ww, "%s unit %zu", file, u);
        CHECK_MSG(dt < HOSTILE_RATIO * dq + HOSTILE_SLACK_S, "%s unit %zu: %zu bytes took %.3f s, a quarter %.3f s (not linear)",
                  file, u, n, dt, dq);
        CHECK_MSG(dt < HOSTILE_CAP_S_PER_MB * (double)size / (1 << 20), "%s unit %zu: %zu bytes took %.3f s", file, u, n, dt);
        if (rc) continue;
        char *back;
        size_t bn;
        rc = tok_decode(h.v, ids, n_ids, 0, &back, &bn, &err);
        CHECK_MSG(rc == 0 && (!representable || (bn == n && !memcmp(back, buf, n))), "%s unit %zu: round trip", file, u);
        if (rc == 0) free(back);
        free(ids);
    }
    free(buf);
    tok_free(h.v);
}

static void test_hostile(void) {
    double worst = 0;
    char what[128] = "";
    const size_t MB = 1 << 20;
    hostile_vocab("ggml-vocab-gpt-2.gguf", MB, &worst, what, sizeof what);
    hostile_vocab("ggml-vocab-llama-spm.gguf", MB, &worst, what, sizeof what);
    hostile_vocab("ggml-vocab-deepseek-llm.gguf", MB, &worst, what, sizeof what);
    hostile_vocab("ggml-vocab-starcoder.gguf", MB / 8, &worst, what, sizeof what);
    hostile_vocab("ggml-vocab-falcon.gguf", MB / 8, &worst, what, sizeof what);
    hostile_vocab("ggml-vocab-deepseek-coder.gguf", MB / 8, &worst, what, sizeof what);
    printf("hostile inputs: slowest %.3f s CPU (%s)\n", worst, what);
}

int main(void) {
    test_all_vectors();
    test_all_vocabs();
    test_specials();
    test_pretok();
    test_hostile();
    TEST_MAIN_END();
}
