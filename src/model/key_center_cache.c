// The key-centering calibration on disk (see key_center_cache.h).
#include "model/key_center_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "cpu/cpu.h"

#define KCC_MAGIC "TKC1" // file: magic, uint64 n, n floats, uint64 XXH3 of the floats

// Bytes per element of a numeric GGUF type; 0 for strings and arrays.
static size_t elem_size(gguf_type t) {
    switch (t) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_BOOL:
        return 1;
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_INT16:
        return 2;
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_FLOAT32:
        return 4;
    case GGUF_TYPE_UINT64:
    case GGUF_TYPE_INT64:
    case GGUF_TYPE_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

static void hash_str(XXH3_state_t *st, gguf_str s) {
    XXH3_64bits_update(st, &s.len, sizeof s.len);
    if (s.len) XXH3_64bits_update(st, s.ptr, s.len);
}

// Every metadata key with its type and value (arrays element by element).
static void hash_kv(XXH3_state_t *st, const gguf_ctx *g) {
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        gguf_str key = gguf_kv_key(g, i);
        gguf_type t = gguf_kv_type(g, i);
        char k[256];
        hash_str(st, key);
        XXH3_64bits_update(st, &t, sizeof t);
        if (t == GGUF_TYPE_ARRAY) {
            gguf_type at = gguf_arr_type(g, i);
            uint64_t n = gguf_arr_n(g, i);
            XXH3_64bits_update(st, &at, sizeof at);
            XXH3_64bits_update(st, &n, sizeof n);
            if (at == GGUF_TYPE_STRING)
                for (uint64_t j = 0; j < n; j++)
                    hash_str(st, gguf_arr_str(g, i, j));
            else if (elem_size(at) && gguf_arr_data(g, i))
                XXH3_64bits_update(st, gguf_arr_data(g, i), n * elem_size(at));
        } else if (t == GGUF_TYPE_STRING) {
            gguf_str v = {0};
            size_t kl = key.len < sizeof k - 1 ? key.len : sizeof k - 1;
            memcpy(k, key.ptr, kl), k[kl] = 0;
            if (!gguf_get_str(g, k, &v)) hash_str(st, v);
        } else {
            double v = gguf_kv_as_f64(g, i);
            XXH3_64bits_update(st, &v, sizeof v);
        }
    }
}

// Every tensor's name, type, shape and bytes.
static void hash_tensors(XXH3_state_t *st, const gguf_ctx *g) {
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        hash_str(st, t->name);
        XXH3_64bits_update(st, &t->type, sizeof t->type);
        XXH3_64bits_update(st, t->ne, sizeof t->ne);
        XXH3_64bits_update(st, t->data, t->size);
    }
}

static void hash_env(XXH3_state_t *st, const char *name) {
    const char *v = getenv(name);
    XXH3_64bits_update(st, name, strlen(name) + 1);
    if (v)
        XXH3_64bits_update(st, v, strlen(v) + 1);
    else
        XXH3_64bits_update(st, "\x01unset", 7);
}

int kcc_path(const gguf_ctx *g, const int32_t *ids, int n_ids, int n_threads, double alpha, char *out,
             size_t cap) {
    const char *dir = getenv("TACHYON_KV_CENTER_CACHE");
    if (!dir || !*dir) return 0;
    XXH3_state_t *st = XXH3_createState();
    if (!st) return 0;
    XXH3_64bits_reset(st);
    const char *isa = cpu_isa_name(cpu_best_isa());
    XXH3_64bits_update(st, KCC_MAGIC, 4);
    XXH3_64bits_update(st, isa, strlen(isa) + 1);
    XXH3_64bits_update(st, &n_threads, sizeof n_threads);
    XXH3_64bits_update(st, &alpha, sizeof alpha);
    XXH3_64bits_update(st, &n_ids, sizeof n_ids);
    XXH3_64bits_update(st, ids, (size_t)n_ids * sizeof *ids);
    hash_env(st, "TACHYON_PRECISE");
    hash_env(st, "TACHYON_REPACK");
    hash_env(st, "TACHYON_KV_QUANT");
    hash_kv(st, g);
    hash_tensors(st, g);
    unsigned long long h = (unsigned long long)XXH3_64bits_digest(st);
    XXH3_freeState(st);
    int w = snprintf(out, cap, "%s/kv-center-%016llx-%s.bin", dir, h, isa);
    return w > 0 && (size_t)w < cap;
}

int kcc_load(const char *path, float *buf, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char magic[4];
    uint64_t fn = 0, sum = 0;
    int ok = fread(magic, 1, 4, f) == 4 && !memcmp(magic, KCC_MAGIC, 4) && fread(&fn, sizeof fn, 1, f) == 1 &&
             fn == (uint64_t)n && fread(buf, sizeof *buf, n, f) == n && fread(&sum, sizeof sum, 1, f) == 1 &&
             fgetc(f) == EOF && sum == (uint64_t)XXH3_64bits(buf, n * sizeof *buf);
    fclose(f);
    return ok ? 0 : -1;
}

int kcc_store(const char *path, const float *buf, size_t n) {
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) return -1;
    FILE *f = fopen(tmp, "wb");
    if (!f) return -1;
    uint64_t fn = n, sum = (uint64_t)XXH3_64bits(buf, n * sizeof *buf);
    int ok = fwrite(KCC_MAGIC, 1, 4, f) == 4 && fwrite(&fn, sizeof fn, 1, f) == 1 &&
             fwrite(buf, sizeof *buf, n, f) == n && fwrite(&sum, sizeof sum, 1, f) == 1;
    ok = (fclose(f) == 0) && ok;
    if (ok && rename(tmp, path) == 0) return 0;
    remove(tmp);
    return -1;
}
