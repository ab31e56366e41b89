// GGUF writer round trip: everything written (every setter, arrays, copied and streamed tensors of several
// types) reads back identically through gguf_open; invalid tensors are refused; failures leave no file.
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "tensor/ttype.h"
#include "test_util.h"

static int str_is(gguf_str s, const char *z) { return s.ptr && s.len == strlen(z) && !memcmp(s.ptr, z, s.len); }

// Streamed tensor i is filled with bytes (i * 31 + j) & 0xff.
static int fill(void *user, int64_t index, const char *name, void *dst, uint64_t size) {
    int *calls = user;
    (*calls)++;
    if (!strcmp(name, "fail")) return TC_ERR_INVALID;
    for (uint64_t j = 0; j < size; j++) ((uint8_t *)dst)[j] = (uint8_t)((uint64_t)index * 31 + j);
    return 0;
}

static void test_round_trip(const char *path) {
    gguf_writer *w = gguf_writer_new();
    CHECK(w != NULL);
    CHECK(gguf_writer_set_str(w, "general.architecture", "llama") == 0);
    CHECK(gguf_writer_set_u32(w, "llama.block_count", 22) == 0);
    CHECK(gguf_writer_set_u32(w, "general.alignment", 64) == TC_ERR_INVALID); // the writer aligns to 32
    CHECK(gguf_writer_set_i32(w, "t.i32", -123456) == 0);
    CHECK(gguf_writer_set_f32(w, "t.f32", 1e-5f) == 0);
    CHECK(gguf_writer_set_bool(w, "t.bool", 1) == 0);
    CHECK(gguf_writer_set_bool(w, "t.false", 0) == 0);
    CHECK(gguf_writer_set_str(w, "t.empty", "") == 0);
    CHECK(gguf_writer_set_u32(w, "t.twice", 1) == 0);
    CHECK(gguf_writer_set_u32(w, "t.twice", 2) == 0); // replaces
    float scores[5] = {0.0f, -1.5f, 2.25f, -1e30f, 3.0f};
    int32_t types[5] = {2, 3, 3, 6, 1};
    const char *toks[5] = {"<unk>", "<s>", "</s>", "<0x00>", "\xe2\x96\x81" "a"};
    CHECK(gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, 5) == 0);
    CHECK(gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 5) == 0);
    CHECK(gguf_writer_set_arr(w, "t.empty_arr", GGUF_TYPE_UINT8, NULL, 0) == 0);
    CHECK(gguf_writer_set_arr(w, "t.bad", GGUF_TYPE_STRING, toks, 5) == TC_ERR_INVALID);
    CHECK(gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 5) == 0);

    float f32[2 * 8];
    for (int i = 0; i < 16; i++) f32[i] = (float)i * 0.25f - 1.0f;
    tt_f16 f16[64];
    for (int i = 0; i < 64; i++) f16[i] = tt_f32_to_f16((float)i);
    uint8_t q8[3 * 34];
    for (int i = 0; i < (int)sizeof q8; i++) q8[i] = (uint8_t)(i * 7);
    CHECK(gguf_writer_add_tensor(w, "w.f32", TT_F32, 2, (int64_t[]){8, 2}, f32, sizeof f32) == 0);
    CHECK(gguf_writer_add_tensor(w, "w.f16", TT_F16, 1, (int64_t[]){64}, f16, sizeof f16) == 0);
    CHECK(gguf_writer_add_tensor(w, "w.q8", TT_Q8_0, 3, (int64_t[]){32, 3, 1}, q8, sizeof q8) == 0);
    CHECK(gguf_writer_add_tensor(w, "s.q4k", TT_Q4_K, 2, (int64_t[]){256, 5}, NULL, 5 * 144) == 0);
    CHECK(gguf_writer_add_tensor(w, "s.q6k", TT_Q6_K, 4, (int64_t[]){512, 1, 2, 1}, NULL, 4 * 210) == 0);
    // refused: wrong size, unknown type, ne0 not a block multiple, bad dims, duplicate name
    CHECK(gguf_writer_add_tensor(w, "x", TT_F32, 1, (int64_t[]){8}, f32, 31) == TC_ERR_INVALID);
    CHECK(gguf_writer_add_tensor(w, "x", 4, 1, (int64_t[]){8}, f32, 32) == TC_ERR_INVALID);
    CHECK(gguf_writer_add_tensor(w, "x", TT_Q8_0, 1, (int64_t[]){33}, NULL, 34) == TC_ERR_INVALID);
    CHECK(gguf_writer_add_tensor(w, "x", TT_F32, 0, (int64_t[]){8}, f32, 32) == TC_ERR_INVALID);
    CHECK(gguf_writer_add_tensor(w, "x", TT_F32, 5, (int64_t[]){1, 1, 1, 1, 8}, f32, 32) == TC_ERR_INVALID);
    CHECK(gguf_writer_add_tensor(w, "x", TT_F32, 2, (int64_t[]){8, -1}, f32, 32) == TC_ERR_INVALID);
    CHECK(gguf_writer_add_tensor(w, "w.f32", TT_F32, 1, (int64_t[]){8}, f32, 32) == TC_ERR_INVALID);

    tc_err e = {0};
    CHECK(gguf_writer_write_file(w, path, &e) == TC_ERR_INVALID && e.msg[0]); // streamed tensors, no callback
    int calls = 0;
    gguf_writer_set_fill(w, fill, &calls);
    int rc = gguf_writer_write_file(w, path, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    CHECK_EQ_INT(calls, 2);
    gguf_writer_free(w);
    if (rc) return;

    gguf_ctx *c;
    rc = gguf_open(path, &c, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc) return;
    CHECK_EQ_INT(gguf_version(c), 3);
    CHECK_EQ_INT(gguf_alignment(c), 32);
    CHECK_EQ_INT(gguf_n_kv(c), 12);
    CHECK(str_is(gguf_kv_key(c, 0), "general.architecture")); // insertion order kept
    gguf_str s;
    uint32_t u;
    int64_t i64;
    float f;
    int b;
    CHECK(gguf_get_str(c, "general.architecture", &s) == 0 && str_is(s, "llama"));
    CHECK(gguf_get_u32(c, "llama.block_count", &u) == 0 && u == 22);
    CHECK(gguf_get_i64(c, "t.i32", &i64) == 0 && i64 == -123456);
    CHECK(gguf_get_f32(c, "t.f32", &f) == 0 && f == 1e-5f);
    CHECK(gguf_get_bool(c, "t.bool", &b) == 0 && b == 1);
    CHECK(gguf_get_bool(c, "t.false", &b) == 0 && b == 0);
    CHECK(gguf_get_str(c, "t.empty", &s) == 0 && s.len == 0);
    CHECK(gguf_get_u32(c, "t.twice", &u) == 0 && u == 2);
    CHECK(gguf_find_key(c, "general.alignment") < 0 && gguf_find_key(c, "t.bad") < 0);
    int64_t k = gguf_find_key(c, "tokenizer.ggml.scores");
    CHECK(gguf_arr_type(c, k) == GGUF_TYPE_FLOAT32 && gguf_arr_n(c, k) == 5);
    CHECK(gguf_arr_data(c, k) && !memcmp(gguf_arr_data(c, k), scores, sizeof scores));
    k = gguf_find_key(c, "tokenizer.ggml.token_type");
    CHECK(gguf_arr_type(c, k) == GGUF_TYPE_INT32 && gguf_arr_data(c, k) && !memcmp(gguf_arr_data(c, k), types, 20));
    k = gguf_find_key(c, "t.empty_arr");
    CHECK(k >= 0 && gguf_arr_type(c, k) == GGUF_TYPE_UINT8 && gguf_arr_n(c, k) == 0);
    k = gguf_find_key(c, "tokenizer.ggml.tokens");
    CHECK(gguf_arr_type(c, k) == GGUF_TYPE_STRING && gguf_arr_n(c, k) == 5);
    for (int j = 0; j < 5; j++) CHECK_MSG(str_is(gguf_arr_str(c, k, (uint64_t)j), toks[j]), "token %d", j);

    CHECK_EQ_INT(gguf_n_tensors(c), 5);
    const gguf_tensor *t = gguf_find_tensor(c, "w.f32");
    CHECK(t && t->type == TT_F32 && t->n_dims == 2 && t->ne[0] == 8 && t->ne[1] == 2 && t->size == sizeof f32);
    CHECK(t && !memcmp(t->data, f32, sizeof f32));
    t = gguf_find_tensor(c, "w.f16");
    CHECK(t && t->type == TT_F16 && t->n_dims == 1 && t->ne[0] == 64 && !memcmp(t->data, f16, sizeof f16));
    t = gguf_find_tensor(c, "w.q8");
    CHECK(t && t->type == TT_Q8_0 && t->n_dims == 3 && t->ne[1] == 3 && t->ne[2] == 1 && !memcmp(t->data, q8, sizeof q8));
    for (int idx = 3; idx < 5; idx++) {
        t = gguf_tensor_at(c, idx);
        CHECK(t && (uintptr_t)t->data % 32 == 0);
        int bad = 0;
        for (uint64_t j = 0; t && j < t->size; j++) bad += ((const uint8_t *)t->data)[j] != (uint8_t)(idx * 31 + j);
        CHECK_MSG(bad == 0, "streamed tensor %d: %d bytes differ", idx, bad);
    }
    t = gguf_find_tensor(c, "s.q6k");
    CHECK(t && t->type == TT_Q6_K && t->n_dims == 4 && t->ne[0] == 512 && t->ne[2] == 2 && t->size == 840);
    gguf_close(c);
}

static void test_failures(const char *path) {
    gguf_writer *w = gguf_writer_new();
    int calls = 0;
    gguf_writer_set_fill(w, fill, &calls);
    CHECK(gguf_writer_add_tensor(w, "ok", TT_F32, 1, (int64_t[]){4}, NULL, 16) == 0);
    CHECK(gguf_writer_add_tensor(w, "fail", TT_F32, 1, (int64_t[]){4}, NULL, 16) == 0);
    tc_err e = {0};
    unlink(path);
    CHECK(gguf_writer_write_file(w, path, &e) == TC_ERR_INVALID && strstr(e.msg, "fail"));
    struct stat st;
    CHECK(stat(path, &st) != 0); // partial file removed
    CHECK(gguf_writer_write_file(w, "/nonexistent-dir/x.gguf", &e) == TC_ERR_IO && e.msg[0]);
    gguf_writer_free(w);

    // an empty writer makes a valid empty file
    w = gguf_writer_new();
    CHECK(gguf_writer_write_file(w, path, &e) == 0);
    gguf_writer_free(w);
    gguf_ctx *c;
    CHECK(gguf_open(path, &c, &e) == 0);
    if (c) {
        CHECK(gguf_n_kv(c) == 0 && gguf_n_tensors(c) == 0);
        gguf_close(c);
    }
}

int main(void) {
    char path[] = "/tmp/tachyon_test_gguf_writer_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) TEST_MAIN_END();
    close(fd);
    test_round_trip(path);
    test_failures(path);
    unlink(path);
    TEST_MAIN_END();
}
