// libFuzzer target: parse arbitrary bytes as GGUF, then touch everything the public API exposes (every kv,
// every array element, every tensor's name and data bytes) so ASan sees any pointer that escaped validation.
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"

static volatile uint64_t sink;

static void touch(const void *p, uint64_t n) {
    const uint8_t *b = p;
    uint64_t acc = 0;
    if (!n) return;
    acc += b[0] + b[n - 1]; // the ends are enough for ASan to check the range
    for (uint64_t i = 0; i < n; i += 4096) acc += b[i];
    sink += acc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_ctx *c = NULL;
    tc_err e = {0};
    int rc = gguf_open_memory(data, size, &c, &e);
    if (rc) {
        if (rc != TC_ERR_FORMAT || !e.msg[0] || c) __builtin_trap(); // contract: format error with a message
        return 0;
    }
    sink += gguf_version(c) + gguf_alignment(c) + gguf_file_size(c);
    for (int64_t i = 0; i < gguf_n_kv(c); i++) {
        gguf_str k = gguf_kv_key(c, i);
        touch(k.ptr, k.len);
        char key[256];
        if (k.len < sizeof key) {
            memcpy(key, k.ptr, k.len);
            key[k.len] = 0;
            if (!memchr(key, 0, k.len) && gguf_find_key(c, key) != i) __builtin_trap();
            uint32_t u;
            int64_t s;
            float f;
            int b;
            gguf_str str;
            if (!gguf_get_u32(c, key, &u)) sink += u;
            if (!gguf_get_i64(c, key, &s)) sink += (uint64_t)s;
            if (!gguf_get_f32(c, key, &f)) sink += (uint64_t)(f == f);
            if (!gguf_get_bool(c, key, &b)) sink += (uint64_t)b;
            if (!gguf_get_str(c, key, &str)) touch(str.ptr, str.len);
        }
        double d = gguf_kv_as_f64(c, i);
        sink += (uint64_t)(d == d);
        if (gguf_kv_type(c, i) != GGUF_TYPE_ARRAY) continue;
        gguf_type at = gguf_arr_type(c, i);
        uint64_t n = gguf_arr_n(c, i);
        if (at == GGUF_TYPE_STRING) {
            for (uint64_t j = 0; j < n; j++) {
                gguf_str s = gguf_arr_str(c, i, j);
                touch(s.ptr, s.len);
            }
        } else {
            const void *p = gguf_arr_data(c, i);
            static const uint8_t sz[GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
            if (!p && n) __builtin_trap();
            touch(p, n * sz[at]);
        }
    }
    for (int64_t i = 0; i < gguf_n_tensors(c); i++) {
        const gguf_tensor *t = gguf_tensor_at(c, i);
        touch(t->name.ptr, t->name.len);
        touch(t->data, t->size);
        char name[256];
        if (t->name.len < sizeof name) {
            memcpy(name, t->name.ptr, t->name.len);
            name[t->name.len] = 0;
            if (!memchr(name, 0, t->name.len) && gguf_find_tensor(c, name) != t) __builtin_trap();
        }
    }
    gguf_close(c);
    return 0;
}
