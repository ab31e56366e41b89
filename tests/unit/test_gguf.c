// GGUF reader: known facts of the test-data files, every getter on a hand-built file of every value type, and
// hand-broken files (truncations, bad counts, bad types, bad shapes, bad offsets …) that must all fail with
// TC_ERR_FORMAT and a message. Every open of a broken file uses a buffer of exactly its size so the ASan
// build catches any read past the end.
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf/gguf.h"
#include "tensor/ttype.h"
#include "test_util.h"

#define TD "../shared/testdata/"

static int str_is(gguf_str s, const char *z) { return s.ptr && s.len == strlen(z) && !memcmp(s.ptr, z, s.len); }

static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(sz > 0 ? (size_t)sz : 1);
    if (p && fread(p, 1, (size_t)sz, f) != (size_t)sz) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *n = (size_t)sz;
    return p;
}

// Opens a copy of exactly n bytes of p; returns the rc and leaves the message in *e.
static int open_copy(const uint8_t *p, size_t n, tc_err *e) {
    uint8_t *q = malloc(n ? n : 1);
    if (n) memcpy(q, p, n);
    gguf_ctx *c = NULL;
    memset(e, 0, sizeof *e);
    int rc = gguf_open_memory(q, n, &c, e);
    if (!rc) {
        // walk everything a consumer could touch
        for (int64_t i = 0; i < gguf_n_kv(c); i++)
            for (uint64_t j = 0; gguf_arr_type(c, i) == GGUF_TYPE_STRING && j < gguf_arr_n(c, i); j++)
                (void)gguf_arr_str(c, i, j).len;
    }
    gguf_close(c);
    free(q);
    return rc;
}

// Must fail with TC_ERR_FORMAT and a message that contains `expect` (the reason, not just any failure).
static void expect_fail(const uint8_t *p, size_t n, const char *what, const char *expect) {
    tc_err e;
    int rc = open_copy(p, n, &e);
    CHECK_MSG(rc == TC_ERR_FORMAT && e.msg[0] && strstr(e.msg, expect), "%s: rc=%d msg='%s', expected '%s'", what,
              rc, e.msg, expect);
    if (rc == TC_ERR_FORMAT) printf("  %-28s -> %s\n", what, e.msg);
}

// --- real files

static void test_stories260k(void) {
    gguf_ctx *c;
    tc_err e = {0};
    int rc = gguf_open(TD "models/stories260K.gguf", &c, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc) return;
    CHECK_EQ_INT(gguf_version(c), 3);
    CHECK_EQ_INT(gguf_alignment(c), 32);
    CHECK_EQ_INT(gguf_file_size(c), 1185376);
    CHECK_EQ_INT(gguf_n_kv(c), 19);
    CHECK_EQ_INT(gguf_n_tensors(c), 48);
    uint32_t u = 0;
    CHECK(gguf_get_u32(c, "llama.embedding_length", &u) == 0 && u == 64);
    CHECK(gguf_get_u32(c, "llama.block_count", &u) == 0 && u == 5);
    CHECK(gguf_get_u32(c, "llama.feed_forward_length", &u) == 0 && u == 172);
    CHECK(gguf_get_u32(c, "llama.attention.head_count_kv", &u) == 0 && u == 4);
    CHECK(gguf_get_u32(c, "tokenizer.ggml.padding_token_id", &u) == 0 && u == 4294967295u);
    int64_t i64 = 0;
    CHECK(gguf_get_i64(c, "tokenizer.ggml.seperator_token_id", &i64) == 0 && i64 == 4294967295LL);
    float f = 0;
    CHECK(gguf_get_f32(c, "llama.attention.layer_norm_rms_epsilon", &f) == 0);
    CHECK_NEAR(f, 1e-5, 1e-9);
    gguf_str s;
    CHECK(gguf_get_str(c, "tokenizer.ggml.model", &s) == 0 && str_is(s, "llama"));
    CHECK(gguf_get_str(c, "general.architecture", &s) == 0 && str_is(s, "llama"));
    CHECK(gguf_get_u32(c, "no.such.key", &u) == TC_ERR_INVALID);
    CHECK(gguf_get_str(c, "llama.block_count", &s) == TC_ERR_INVALID);

    int64_t k = gguf_find_key(c, "tokenizer.ggml.tokens");
    CHECK(k >= 0);
    CHECK(str_is(gguf_kv_key(c, k), "tokenizer.ggml.tokens"));
    CHECK_EQ_INT(gguf_kv_type(c, k), GGUF_TYPE_ARRAY);
    CHECK_EQ_INT(gguf_arr_type(c, k), GGUF_TYPE_STRING);
    CHECK_EQ_INT(gguf_arr_n(c, k), 512);
    CHECK(gguf_arr_data(c, k) == NULL);
    CHECK(str_is(gguf_arr_str(c, k, 0), "<unk>"));
    CHECK(str_is(gguf_arr_str(c, k, 1), "<s>"));
    CHECK(str_is(gguf_arr_str(c, k, 3), "<0x00>"));
    CHECK(str_is(gguf_arr_str(c, k, 259), "\xe2\x96\x81t"));
    CHECK(str_is(gguf_arr_str(c, k, 511), "\xe2\x80\x8a"));
    CHECK(gguf_arr_str(c, k, 512).ptr == NULL);
    int64_t ks = gguf_find_key(c, "tokenizer.ggml.scores");
    CHECK(ks >= 0 && gguf_arr_type(c, ks) == GGUF_TYPE_FLOAT32 && gguf_arr_n(c, ks) == 512);
    if (ks >= 0 && gguf_arr_data(c, ks)) {
        float sc;
        memcpy(&sc, (const char *)gguf_arr_data(c, ks) + 300 * 4, 4);
        CHECK_NEAR(sc, -41.0, 0);
    }
    int64_t kt = gguf_find_key(c, "tokenizer.ggml.token_type");
    CHECK(kt >= 0 && gguf_arr_type(c, kt) == GGUF_TYPE_INT32 && gguf_arr_n(c, kt) == 512);
    if (kt >= 0 && gguf_arr_data(c, kt)) {
        int32_t tt;
        memcpy(&tt, (const char *)gguf_arr_data(c, kt) + 5 * 4, 4);
        CHECK_EQ_INT(tt, 6);
    }
    CHECK_NEAR(gguf_kv_as_f64(c, gguf_find_key(c, "llama.context_length")), 2048, 0);

    const gguf_tensor *t = gguf_find_tensor(c, "token_embd.weight");
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ_INT(t->n_dims, 2);
        CHECK(t->ne[0] == 64 && t->ne[1] == 512 && t->ne[2] == 1 && t->ne[3] == 1);
        CHECK_EQ_INT(t->type, TT_F32);
        CHECK_EQ_INT(t->size, 64 * 512 * 4);
        CHECK_EQ_INT((const char *)t->data - (const char *)gguf_tensor_at(c, 0)->data, 0);
        CHECK_EQ_INT((uintptr_t)t->data % 32, 0);
        float v[3];
        memcpy(v, t->data, sizeof v);
        CHECK_NEAR(v[0], -0.29474878, 1e-7);
        CHECK_NEAR(v[1], 0.5618956, 1e-7);
        CHECK_NEAR(v[2], 0.17542253, 1e-7);
    }
    const gguf_tensor *last = gguf_find_tensor(c, "blk.4.ffn_norm.weight");
    CHECK(last && last->n_dims == 1 && last->ne[0] == 64 && last->size == 256 && last->offset == 1185120 - 14176);
    CHECK(gguf_find_tensor(c, "blk.5.ffn_norm.weight") == NULL);
    const gguf_tensor *kw = gguf_find_tensor(c, "blk.0.attn_k.weight");
    CHECK(kw && kw->ne[0] == 64 && kw->ne[1] == 32);
    // every tensor is findable by its own name
    int found = 0;
    for (int64_t i = 0; i < gguf_n_tensors(c); i++) {
        const gguf_tensor *ti = gguf_tensor_at(c, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)ti->name.len, ti->name.ptr);
        found += gguf_find_tensor(c, name) == ti;
    }
    CHECK_EQ_INT(found, 48);
    CHECK(gguf_tensor_at(c, 48) == NULL && gguf_tensor_at(c, -1) == NULL);
    gguf_close(c);
}

static void test_other_files(void) {
    struct {
        const char *path;
        int64_t n_kv, n_tensors, n_tokens;
        const char *model;
    } files[] = {
        {TD "models/llama-2-tiny-random.gguf", 18, 12, 32000, "llama"},
        {TD "vocab/ggml-vocab-baichuan.gguf", 18, 0, 64000, "llama"},
        {TD "vocab/ggml-vocab-bert-bge.gguf", 20, 0, 30522, "bert"},
        {TD "vocab/ggml-vocab-deepseek-coder.gguf", 25, 0, 32256, "gpt2"},
        {TD "vocab/ggml-vocab-deepseek-llm.gguf", 23, 0, 102400, "gpt2"},
        {TD "vocab/ggml-vocab-falcon.gguf", 18, 0, 65024, "gpt2"},
        {TD "vocab/ggml-vocab-gpt-2.gguf", 16, 0, 50257, "gpt2"},
        {TD "vocab/ggml-vocab-gpt-neox.gguf", 17, 0, 50432, "gpt2"},
        {TD "vocab/ggml-vocab-llama-spm.gguf", 22, 0, 32000, "llama"},
        {TD "vocab/ggml-vocab-mpt.gguf", 17, 0, 50432, "gpt2"},
        {TD "vocab/ggml-vocab-phi-3.gguf", 26, 0, 32064, "llama"},
        {TD "vocab/ggml-vocab-refact.gguf", 18, 0, 49216, "gpt2"},
        {TD "vocab/ggml-vocab-starcoder.gguf", 19, 0, 49152, "gpt2"},
        {"models/SmolLM2-135M-Instruct.Q4_1.gguf", 33, 272, 49152, "gpt2"},
    };
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        struct stat st;
        if (stat(files[f].path, &st) != 0) {
            printf("  (skipping %s: not present)\n", files[f].path);
            continue;
        }
        gguf_ctx *c;
        tc_err e = {0};
        int rc = gguf_open(files[f].path, &c, &e);
        CHECK_MSG(rc == 0, "%s: %s", files[f].path, e.msg);
        if (rc) continue;
        CHECK_MSG(gguf_n_kv(c) == files[f].n_kv, "%s: n_kv %lld", files[f].path, (long long)gguf_n_kv(c));
        CHECK_MSG(gguf_n_tensors(c) == files[f].n_tensors, "%s: n_tensors %lld", files[f].path,
                  (long long)gguf_n_tensors(c));
        int64_t k = gguf_find_key(c, "tokenizer.ggml.tokens");
        CHECK_MSG(k >= 0 && (int64_t)gguf_arr_n(c, k) == files[f].n_tokens, "%s: tokens %llu", files[f].path,
                  (unsigned long long)gguf_arr_n(c, k));
        gguf_str s = {0};
        CHECK_MSG(gguf_get_str(c, "tokenizer.ggml.model", &s) == 0 && str_is(s, files[f].model), "%s: model",
                  files[f].path);
        // every string of the vocabulary lies inside the file
        const char *lo = NULL, *hi = NULL;
        for (uint64_t j = 0; k >= 0 && j < gguf_arr_n(c, k); j++) {
            gguf_str t = gguf_arr_str(c, k, j);
            if (!lo || t.ptr < lo) lo = t.ptr;
            if (!hi || t.ptr + t.len > hi) hi = t.ptr + t.len;
        }
        CHECK(hi && lo && (uint64_t)(hi - lo) < gguf_file_size(c));
        gguf_close(c);
    }
    // SmolLM2 specifics (the default model; absent in a checkout without `make models`)
    gguf_ctx *c;
    if (gguf_open("models/SmolLM2-135M-Instruct.Q4_1.gguf", &c, NULL) == 0) {
        const gguf_tensor *t = gguf_find_tensor(c, "token_embd.weight");
        CHECK(t && t->type == TT_Q8_0 && t->ne[0] == 576 && t->ne[1] == 49152 && t->size == 576 / 32 * 34 * 49152);
        const gguf_tensor *q = gguf_find_tensor(c, "blk.0.attn_q.weight");
        CHECK(q && q->type == TT_Q4_1 && q->ne[0] == 576 && q->ne[1] == 576);
        const gguf_tensor *n = gguf_find_tensor(c, "blk.29.ffn_norm.weight");
        CHECK(n && n->type == TT_F32 && n->ne[0] == 576);
        uint32_t u;
        CHECK(gguf_get_u32(c, "llama.block_count", &u) == 0 && u == 30);
        int b = -1;
        CHECK(gguf_get_bool(c, "tokenizer.ggml.add_bos_token", &b) == 0 && (b == 0 || b == 1));
        gguf_close(c);
    }
    tc_err e = {0};
    CHECK(gguf_open(TD "models/no-such-file.gguf", &c, &e) == TC_ERR_IO && e.msg[0]);
}

// Truncating a real file anywhere before the end of its last tensor must fail cleanly.
static void test_truncations_real(void) {
    size_t n;
    uint8_t *p = read_all(TD "models/stories260K.gguf", &n);
    CHECK(p != NULL);
    if (!p) return;
    const size_t data_off = 14176; // from the independent python reader
    int bad = 0;
    tc_err e;
    for (size_t cut = 0; cut <= data_off; cut++) {
        int rc = open_copy(p, cut, &e);
        if (rc != TC_ERR_FORMAT || !e.msg[0]) {
            if (bad++ < 5) fprintf(stderr, "cut %zu: rc=%d msg='%s'\n", cut, rc, e.msg);
        }
    }
    CHECK_MSG(bad == 0, "%d header truncations did not fail cleanly", bad);
    bad = 0;
    for (size_t cut = data_off; cut < n; cut += 7919) bad += open_copy(p, cut, &e) != TC_ERR_FORMAT;
    bad += open_copy(p, n - 1, &e) != TC_ERR_FORMAT;
    CHECK_MSG(bad == 0, "%d data truncations did not fail", bad);
    CHECK_EQ_INT(open_copy(p, n, &e), 0);
    free(p);
}

// --- hand-built files

typedef struct {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void put_u8(buf *b, uint8_t v) { put(b, &v, 1); }
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); } // the test host is little-endian like the format
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void put_key(buf *b, const char *k, uint32_t type) {
    put_str(b, k);
    put_u32(b, type);
}

// What to break; fields with has_* unset keep their valid value.
typedef struct {
    uint32_t version;
    int has_n_tensors, has_n_kv, has_str_len, has_arr_n, has_vtype, has_ttype, has_ndims, has_ne, has_off, has_align;
    uint64_t n_tensors, n_kv, str_len, arr_n, ne0, ne1, off;
    uint32_t vtype, ttype, ndims, align, arr_elem, bool_val;
    int dup_key, dup_tensor, str_arr_n_huge;
} spec;

#define N_KV_BASE 17

// Valid layout: 17 kvs of every type, tensors "w" F32 {8,2} at 0 and "q" Q8_0 {32,3} at 64; the data section
// holds floats 0..15 then 102 bytes of 0x5A.
static buf build(const spec *s) {
    buf b = {0};
    put_u32(&b, 0x46554747u);
    put_u32(&b, s->version ? s->version : 3);
    put_u64(&b, s->has_n_tensors ? s->n_tensors : 2);
    put_u64(&b, s->has_n_kv ? s->n_kv : (uint64_t)(N_KV_BASE + (s->has_align ? 1 : 0) + (s->dup_key ? 1 : 0)));
    put_key(&b, "general.architecture", GGUF_TYPE_STRING);
    put_str(&b, "llama");
    if (s->has_align) put_key(&b, "general.alignment", GGUF_TYPE_UINT32), put_u32(&b, s->align);
    put_key(&b, "t.u8", GGUF_TYPE_UINT8), put_u8(&b, 200);
    put_key(&b, "t.i8", GGUF_TYPE_INT8), put_u8(&b, (uint8_t)-5);
    put_key(&b, "t.u16", GGUF_TYPE_UINT16), put_u8(&b, 0x60), put_u8(&b, 0xEA); // 60000
    put_key(&b, "t.i16", GGUF_TYPE_INT16), put_u8(&b, 0xD4), put_u8(&b, 0xFE); // -300
    put_key(&b, "t.u32", s->has_vtype ? s->vtype : GGUF_TYPE_UINT32), put_u32(&b, 4000000000u);
    put_key(&b, "t.i32", GGUF_TYPE_INT32), put_u32(&b, (uint32_t)-7);
    float f = 1.5f;
    uint32_t fb;
    memcpy(&fb, &f, 4);
    put_key(&b, "t.f32", GGUF_TYPE_FLOAT32), put_u32(&b, fb);
    put_key(&b, "t.bool", GGUF_TYPE_BOOL), put_u8(&b, (uint8_t)(s->bool_val ? s->bool_val : 1));
    put_key(&b, "t.u64", GGUF_TYPE_UINT64), put_u64(&b, 1ull << 40);
    put_key(&b, "t.u64max", GGUF_TYPE_UINT64), put_u64(&b, UINT64_MAX);
    put_key(&b, "t.i64", GGUF_TYPE_INT64), put_u64(&b, (uint64_t)-(1ll << 40));
    double d = 2.25;
    uint64_t db;
    memcpy(&db, &d, 8);
    put_key(&b, "t.f64", GGUF_TYPE_FLOAT64), put_u64(&b, db);
    put_key(&b, "t.name", GGUF_TYPE_STRING);
    put_u64(&b, s->has_str_len ? s->str_len : 5), put(&b, "hello", 5);
    put_key(&b, "t.arr_i32", GGUF_TYPE_ARRAY), put_u32(&b, s->arr_elem ? s->arr_elem : GGUF_TYPE_INT32);
    put_u64(&b, s->has_arr_n ? s->arr_n : 3);
    for (int32_t i = 1; i <= 3; i++) put_u32(&b, (uint32_t)(i * 10));
    put_key(&b, "t.arr_str", GGUF_TYPE_ARRAY), put_u32(&b, GGUF_TYPE_STRING);
    put_u64(&b, s->str_arr_n_huge ? (1ull << 61) : 3);
    put_str(&b, "a"), put_str(&b, "bc"), put_str(&b, "");
    put_key(&b, "t.empty", GGUF_TYPE_STRING), put_str(&b, "");
    if (s->dup_key) put_key(&b, "t.u8", GGUF_TYPE_UINT8), put_u8(&b, 1);

    put_str(&b, "w");
    put_u32(&b, 2), put_u64(&b, 8), put_u64(&b, 2);
    put_u32(&b, TT_F32), put_u64(&b, 0);
    put_str(&b, s->dup_tensor ? "w" : "q");
    uint32_t nd = s->has_ndims ? s->ndims : 2;
    put_u32(&b, nd);
    for (uint32_t i = 0; i < nd && i < 8; i++)
        put_u64(&b, i == 0 ? (s->has_ne ? s->ne0 : 32u) : i == 1 ? (s->has_ne ? s->ne1 : 3u) : 1u);
    put_u32(&b, s->has_ttype ? s->ttype : TT_Q8_0), put_u64(&b, s->has_off ? s->off : 64);

    uint64_t align = s->has_align && s->align && !(s->align & (s->align - 1)) ? s->align : 32;
    while (b.n % align) put_u8(&b, 0);
    for (int i = 0; i < 16; i++) {
        float v = (float)i;
        put(&b, &v, 4);
    }
    for (int i = 0; i < 102; i++) put_u8(&b, 0x5A);
    return b;
}

static void test_built_valid(void) {
    spec s = {0};
    buf b = build(&s);
    gguf_ctx *c;
    tc_err e = {0};
    int rc = gguf_open_memory(b.p, b.n, &c, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc) goto done;
    CHECK_EQ_INT(gguf_n_kv(c), N_KV_BASE);
    uint32_t u;
    int64_t i;
    float f;
    int bo;
    gguf_str str;
    CHECK(gguf_get_u32(c, "t.u8", &u) == 0 && u == 200);
    CHECK(gguf_get_u32(c, "t.i8", &u) == TC_ERR_INVALID); // negative
    CHECK(gguf_get_i64(c, "t.i8", &i) == 0 && i == -5);
    CHECK(gguf_get_u32(c, "t.u16", &u) == 0 && u == 60000);
    CHECK(gguf_get_i64(c, "t.i16", &i) == 0 && i == -300);
    CHECK(gguf_get_u32(c, "t.u32", &u) == 0 && u == 4000000000u);
    CHECK(gguf_get_i64(c, "t.u32", &i) == 0 && i == 4000000000ll);
    CHECK(gguf_get_i64(c, "t.i32", &i) == 0 && i == -7);
    CHECK(gguf_get_u32(c, "t.u64", &u) == TC_ERR_INVALID); // does not fit
    CHECK(gguf_get_i64(c, "t.u64", &i) == 0 && i == (1ll << 40));
    CHECK(gguf_get_i64(c, "t.u64max", &i) == TC_ERR_INVALID);
    CHECK(gguf_get_i64(c, "t.i64", &i) == 0 && i == -(1ll << 40));
    CHECK(gguf_get_f32(c, "t.f32", &f) == 0 && f == 1.5f);
    CHECK(gguf_get_f32(c, "t.f64", &f) == 0 && f == 2.25f);
    CHECK(gguf_get_f32(c, "t.u32", &f) == TC_ERR_INVALID);
    CHECK(gguf_get_u32(c, "t.f32", &u) == TC_ERR_INVALID);
    CHECK(gguf_get_bool(c, "t.bool", &bo) == 0 && bo == 1);
    CHECK(gguf_get_u32(c, "t.bool", &u) == 0 && u == 1);
    CHECK(gguf_get_bool(c, "t.u8", &bo) == TC_ERR_INVALID);
    CHECK(gguf_get_str(c, "t.name", &str) == 0 && str_is(str, "hello"));
    CHECK(gguf_get_str(c, "t.empty", &str) == 0 && str.len == 0);
    CHECK(gguf_get_str(c, "t.u8", &str) == TC_ERR_INVALID);
    CHECK(gguf_get_u32(c, "t.arr_i32", &u) == TC_ERR_INVALID);
    CHECK(gguf_get_u32(c, "t.u", &u) == TC_ERR_INVALID); // prefix of a key is not the key
    CHECK_NEAR(gguf_kv_as_f64(c, gguf_find_key(c, "t.i16")), -300, 0);
    CHECK_NEAR(gguf_kv_as_f64(c, gguf_find_key(c, "t.f64")), 2.25, 0);
    CHECK(isnan(gguf_kv_as_f64(c, gguf_find_key(c, "t.name"))));
    CHECK_EQ_INT(gguf_kv_type(c, gguf_find_key(c, "t.i16")), GGUF_TYPE_INT16);
    CHECK_EQ_INT(gguf_kv_type(c, 999), GGUF_TYPE_COUNT);
    int64_t k = gguf_find_key(c, "t.arr_i32");
    CHECK(k >= 0 && gguf_arr_type(c, k) == GGUF_TYPE_INT32 && gguf_arr_n(c, k) == 3);
    int32_t a[3] = {0};
    if (gguf_arr_data(c, k)) memcpy(a, gguf_arr_data(c, k), sizeof a); // elements may be unaligned
    CHECK(a[0] == 10 && a[1] == 20 && a[2] == 30);
    k = gguf_find_key(c, "t.arr_str");
    CHECK(k >= 0 && gguf_arr_type(c, k) == GGUF_TYPE_STRING && gguf_arr_n(c, k) == 3);
    CHECK(str_is(gguf_arr_str(c, k, 0), "a") && str_is(gguf_arr_str(c, k, 1), "bc"));
    CHECK(gguf_arr_str(c, k, 2).ptr != NULL && gguf_arr_str(c, k, 2).len == 0);
    CHECK(gguf_arr_n(c, gguf_find_key(c, "t.u8")) == 0 && gguf_arr_data(c, gguf_find_key(c, "t.u8")) == NULL);
    CHECK(!strcmp(gguf_type_name(GGUF_TYPE_FLOAT32), "f32") && !strcmp(gguf_type_name(GGUF_TYPE_COUNT), "?"));

    const gguf_tensor *w = gguf_find_tensor(c, "w"), *q = gguf_find_tensor(c, "q");
    CHECK(w && w->type == TT_F32 && w->ne[0] == 8 && w->ne[1] == 2 && w->size == 64);
    CHECK(q && q->type == TT_Q8_0 && q->ne[0] == 32 && q->ne[1] == 3 && q->size == 102 && q->offset == 64);
    if (w && q) {
        const float *wv = w->data;
        CHECK(wv[0] == 0.0f && wv[15] == 15.0f);
        CHECK(((const uint8_t *)q->data)[0] == 0x5A && ((const uint8_t *)q->data)[101] == 0x5A);
        CHECK_EQ_INT((const uint8_t *)q->data + 102 - b.p, b.n); // data ends at the end of the buffer
    }
    gguf_close(c);

    // a non-default (valid) alignment moves the data section
    s.has_align = 1, s.align = 64;
    buf b2 = build(&s);
    rc = gguf_open_memory(b2.p, b2.n, &c, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (!rc) {
        CHECK_EQ_INT(gguf_alignment(c), 64);
        CHECK_EQ_INT(((const uint8_t *)gguf_find_tensor(c, "w")->data - b2.p) % 64, 0);
        gguf_close(c);
    }
    free(b2.p);
    // version 2 is accepted too
    s = (spec){.version = 2};
    b2 = build(&s);
    rc = gguf_open_memory(b2.p, b2.n, &c, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (!rc) {
        CHECK_EQ_INT(gguf_version(c), 2);
        gguf_close(c);
    }
    free(b2.p);
done:
    free(b.p);
}

static void broken(const spec *s, const char *what, const char *expect) {
    buf b = build(s);
    expect_fail(b.p, b.n, what, expect);
    free(b.p);
}

static void test_built_broken(void) {
    spec s0 = {0};
    buf b = build(&s0);
    int bad = 0;
    tc_err e;
    for (size_t cut = 0; cut < b.n; cut++) {
        int rc = open_copy(b.p, cut, &e);
        if (rc != TC_ERR_FORMAT || !e.msg[0]) {
            if (bad++ < 5) fprintf(stderr, "built cut %zu: rc=%d msg='%s'\n", cut, rc, e.msg);
        }
    }
    CHECK_MSG(bad == 0, "%d truncations of the built file did not fail cleanly", bad);
    uint8_t *m = malloc(b.n);
    memcpy(m, b.p, b.n);
    m[0] = 'X';
    expect_fail(m, b.n, "bad magic", "bad magic");
    free(m);
    free(b.p);

    spec s;
#define BROKEN(what, expect, ...)                                                                            \
    do {                                                                                                     \
        s = (spec){__VA_ARGS__};                                                                             \
        broken(&s, what, expect);                                                                            \
    } while (0)
    BROKEN("version 1", "version 1", .version = 1);
    BROKEN("version 99", "version 99", .version = 99);
    BROKEN("big-endian version", "big-endian", .version = 3u << 24);
    BROKEN("n_tensors huge", "tensor count", .has_n_tensors = 1, .n_tensors = UINT64_MAX);
    BROKEN("n_tensors 2^40", "tensor count", .has_n_tensors = 1, .n_tensors = 1ull << 40);
    BROKEN("n_tensors one too many", "tensor info 2", .has_n_tensors = 1, .n_tensors = 3);
    BROKEN("n_kv huge", "metadata count", .has_n_kv = 1, .n_kv = UINT64_MAX);
    BROKEN("n_kv 2^33", "metadata count", .has_n_kv = 1, .n_kv = 1ull << 33);
    BROKEN("n_kv one too many", "", .has_n_kv = 1, .n_kv = N_KV_BASE + 1);
    BROKEN("string length past EOF", "has length 100000", .has_str_len = 1, .str_len = 100000);
    BROKEN("string length UINT64_MAX", "has length", .has_str_len = 1, .str_len = UINT64_MAX);
    BROKEN("string length 2^63", "has length", .has_str_len = 1, .str_len = 1ull << 63);
    BROKEN("array count overflow", "elements of 4 bytes", .has_arr_n = 1, .arr_n = (1ull << 62) + 1); // *4 wraps to 4
    BROKEN("array count UINT64_MAX", "elements of 4 bytes", .has_arr_n = 1, .arr_n = UINT64_MAX);
    BROKEN("array count past EOF", "elements of 4 bytes", .has_arr_n = 1, .arr_n = 100000);
    BROKEN("string array count huge", "string array", .str_arr_n_huge = 1);
    BROKEN("nested array", "nested", .arr_elem = GGUF_TYPE_ARRAY);
    BROKEN("unknown array elem type", "element type 77", .arr_elem = 77);
    BROKEN("unknown value type", "unknown value type 13", .has_vtype = 1, .vtype = 13);
    BROKEN("value type 2^31", "unknown value type", .has_vtype = 1, .vtype = 0x80000000u);
    BROKEN("bool value 2", "bool", .bool_val = 2);
    BROKEN("unknown tensor type 4", "unknown type 4", .has_ttype = 1, .ttype = 4);
    BROKEN("unknown tensor type 9999", "unknown type 9999", .has_ttype = 1, .ttype = 9999);
    BROKEN("n_dims 0", "n_dims 0", .has_ndims = 1, .ndims = 0);
    BROKEN("n_dims 5", "n_dims 5", .has_ndims = 1, .ndims = 5);
    BROKEN("n_dims 2^32-1", "n_dims 4294967295", .has_ndims = 1, .ndims = UINT32_MAX);
    BROKEN("ne zero", "ne[1] = 0", .has_ne = 1, .ne0 = 32, .ne1 = 0);
    BROKEN("ne negative", "ne[1]", .has_ne = 1, .ne0 = 32, .ne1 = (uint64_t)-3);
    BROKEN("ne product overflow", "overflow", .has_ne = 1, .ne0 = 1ull << 40, .ne1 = 1ull << 40);
    BROKEN("ne bytes overflow", "overflow", .has_ne = 1, .ne0 = 1ull << 62, .ne1 = 8);
    BROKEN("ne huge, no overflow", "outside the data section", .has_ne = 1, .ne0 = 32ull << 50, .ne1 = 1);
    BROKEN("ne0 not block multiple", "block size", .has_ne = 1, .ne0 = 33, .ne1 = 3);
    BROKEN("tensor larger than file", "outside the data section", .has_ne = 1, .ne0 = 32, .ne1 = 4);
    BROKEN("misaligned offset", "alignment", .has_off = 1, .off = 65);
    BROKEN("offset out of file", "outside the data section", .has_off = 1, .off = 1 << 20);
    BROKEN("offset near UINT64_MAX", "outside the data section", .has_off = 1, .off = UINT64_MAX - 31);
    BROKEN("alignment 0", "power of two", .has_align = 1, .align = 0);
    BROKEN("alignment 3", "power of two", .has_align = 1, .align = 3);
    BROKEN("alignment 2^31+1", "power of two", .has_align = 1, .align = 0x80000001u);
    BROKEN("duplicate key", "duplicate metadata key 't.u8'", .dup_key = 1);
    BROKEN("duplicate tensor name", "duplicate tensor name 'w'", .dup_tensor = 1);
#undef BROKEN
    gguf_ctx *c = (gguf_ctx *)1;
    CHECK(gguf_open_memory(NULL, 0, &c, &e) == TC_ERR_FORMAT && c == NULL);
}

int main(void) {
    test_stories260k();
    test_other_files();
    test_truncations_real();
    test_built_valid();
    test_built_broken();
    TEST_MAIN_END();
}
