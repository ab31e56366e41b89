// GGUF accessors: name indexes (hash), typed metadata getters with lossless conversion, arrays, tensors.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf_internal.h"

// --- name index (open addressing, linear probing; slots hold index + 1)

uint64_t gguf_hash(const char *s, uint64_t len) {
    uint64_t h = 1469598103934665603ull; // FNV-1a
    for (uint64_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static int str_eq(const gguf_str *a, const char *s, uint64_t len) {
    return a->len == len && (len == 0 || !memcmp(a->ptr, s, len));
}

int gguf_index_build(const gguf_str *(*name_at)(const gguf_ctx *, int64_t), const gguf_ctx *ctx, int64_t n,
                     uint64_t **index, uint64_t *cap, int64_t *dup) {
    uint64_t c = 8;
    while (c < 2 * (uint64_t)n) c <<= 1;
    uint64_t *t = calloc(c, sizeof *t);
    if (!t) return TC_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++) {
        const gguf_str *s = name_at(ctx, i);
        uint64_t h = gguf_hash(s->ptr, s->len) & (c - 1);
        while (t[h]) {
            if (str_eq(name_at(ctx, (int64_t)t[h] - 1), s->ptr, s->len)) {
                *dup = i;
                free(t);
                return TC_ERR_FORMAT;
            }
            h = (h + 1) & (c - 1);
        }
        t[h] = (uint64_t)i + 1;
    }
    *index = t;
    *cap = c;
    return 0;
}

int64_t gguf_index_find(const gguf_str *(*name_at)(const gguf_ctx *, int64_t), const gguf_ctx *ctx,
                        const uint64_t *index, uint64_t cap, const char *name, uint64_t len) {
    if (!index) return -1;
    uint64_t h = gguf_hash(name, len) & (cap - 1);
    while (index[h]) {
        int64_t i = (int64_t)index[h] - 1;
        if (str_eq(name_at(ctx, i), name, len)) return i;
        h = (h + 1) & (cap - 1);
    }
    return -1;
}

static const gguf_str *kv_name(const gguf_ctx *c, int64_t i) { return &c->kv[i].key; }
static const gguf_str *t_name(const gguf_ctx *c, int64_t i) { return &c->tensors[i].name; }

// --- file

uint32_t gguf_version(const gguf_ctx *ctx) { return ctx->version; }
uint64_t gguf_alignment(const gguf_ctx *ctx) { return ctx->alignment; }
uint64_t gguf_file_size(const gguf_ctx *ctx) { return ctx->size; }

// --- metadata

int64_t gguf_n_kv(const gguf_ctx *ctx) { return ctx->n_kv; }

int64_t gguf_find_key(const gguf_ctx *ctx, const char *key) {
    if (!key) return -1;
    return gguf_index_find(kv_name, ctx, ctx->kv_index, ctx->kv_cap, key, strlen(key));
}

static const gguf_kv *kv_at(const gguf_ctx *ctx, int64_t i) {
    return (i >= 0 && i < ctx->n_kv) ? &ctx->kv[i] : NULL;
}

gguf_str gguf_kv_key(const gguf_ctx *ctx, int64_t i) {
    const gguf_kv *kv = kv_at(ctx, i);
    return kv ? kv->key : (gguf_str){NULL, 0};
}

gguf_type gguf_kv_type(const gguf_ctx *ctx, int64_t i) {
    const gguf_kv *kv = kv_at(ctx, i);
    return kv ? kv->type : GGUF_TYPE_COUNT;
}

static int is_uint(gguf_type t) {
    return t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_UINT16 || t == GGUF_TYPE_UINT32 || t == GGUF_TYPE_UINT64 ||
           t == GGUF_TYPE_BOOL;
}
static int is_sint(gguf_type t) {
    return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 || t == GGUF_TYPE_INT64;
}
static int is_float(gguf_type t) { return t == GGUF_TYPE_FLOAT32 || t == GGUF_TYPE_FLOAT64; }

static const gguf_kv *kv_by_key(const gguf_ctx *ctx, const char *key) { return kv_at(ctx, gguf_find_key(ctx, key)); }

// Integer value of a kv as (negative flag, magnitude-carrying fields); returns 0 when not an integer/bool.
static int kv_int(const gguf_kv *kv, int *neg, uint64_t *u, int64_t *s) {
    if (is_uint(kv->type)) {
        *neg = 0;
        *u = kv->v.u;
        *s = 0;
        return 1;
    }
    if (is_sint(kv->type)) {
        *neg = kv->v.i < 0;
        *s = kv->v.i;
        *u = kv->v.i < 0 ? 0 : (uint64_t)kv->v.i;
        return 1;
    }
    return 0;
}

int gguf_get_u32(const gguf_ctx *ctx, const char *key, uint32_t *out) {
    const gguf_kv *kv = kv_by_key(ctx, key);
    int neg;
    uint64_t u;
    int64_t s;
    if (!kv || !kv_int(kv, &neg, &u, &s) || neg || u > UINT32_MAX) return TC_ERR_INVALID;
    *out = (uint32_t)u;
    return 0;
}

int gguf_get_i64(const gguf_ctx *ctx, const char *key, int64_t *out) {
    const gguf_kv *kv = kv_by_key(ctx, key);
    int neg;
    uint64_t u;
    int64_t s;
    if (!kv || !kv_int(kv, &neg, &u, &s)) return TC_ERR_INVALID;
    if (is_sint(kv->type)) *out = s;
    else if (u > (uint64_t)INT64_MAX) return TC_ERR_INVALID;
    else *out = (int64_t)u;
    return 0;
}

int gguf_get_f32(const gguf_ctx *ctx, const char *key, float *out) {
    const gguf_kv *kv = kv_by_key(ctx, key);
    if (!kv || !is_float(kv->type)) return TC_ERR_INVALID;
    *out = (float)kv->v.f;
    return 0;
}

int gguf_get_bool(const gguf_ctx *ctx, const char *key, int *out) {
    const gguf_kv *kv = kv_by_key(ctx, key);
    int neg;
    uint64_t u;
    int64_t s;
    if (!kv || !kv_int(kv, &neg, &u, &s) || neg || u > 1) return TC_ERR_INVALID;
    *out = (int)u;
    return 0;
}

int gguf_get_str(const gguf_ctx *ctx, const char *key, gguf_str *out) {
    const gguf_kv *kv = kv_by_key(ctx, key);
    if (!kv || kv->type != GGUF_TYPE_STRING) return TC_ERR_INVALID;
    *out = kv->str;
    return 0;
}

// --- arrays

gguf_type gguf_arr_type(const gguf_ctx *ctx, int64_t i) {
    const gguf_kv *kv = kv_at(ctx, i);
    return kv && kv->type == GGUF_TYPE_ARRAY ? kv->arr_type : GGUF_TYPE_COUNT;
}

uint64_t gguf_arr_n(const gguf_ctx *ctx, int64_t i) {
    const gguf_kv *kv = kv_at(ctx, i);
    return kv && kv->type == GGUF_TYPE_ARRAY ? kv->arr_n : 0;
}

const void *gguf_arr_data(const gguf_ctx *ctx, int64_t i) {
    const gguf_kv *kv = kv_at(ctx, i);
    if (!kv || kv->type != GGUF_TYPE_ARRAY || kv->arr_type == GGUF_TYPE_STRING) return NULL;
    return kv->arr_data;
}

gguf_str gguf_arr_str(const gguf_ctx *ctx, int64_t i, uint64_t j) {
    const gguf_kv *kv = kv_at(ctx, i);
    if (!kv || kv->type != GGUF_TYPE_ARRAY || kv->arr_type != GGUF_TYPE_STRING || j >= kv->arr_n)
        return (gguf_str){NULL, 0};
    const uint8_t *p = ctx->base + kv->arr_soff[j];
    uint64_t len = 0;
    for (int b = 7; b >= 0; b--) len = (len << 8) | p[b]; // validated at open
    return (gguf_str){(const char *)p + 8, len};
}

double gguf_kv_as_f64(const gguf_ctx *ctx, int64_t i) {
    const gguf_kv *kv = kv_at(ctx, i);
    if (!kv) return NAN;
    if (is_uint(kv->type)) return (double)kv->v.u;
    if (is_sint(kv->type)) return (double)kv->v.i;
    if (is_float(kv->type)) return kv->v.f;
    return NAN;
}

// --- tensors

int64_t gguf_n_tensors(const gguf_ctx *ctx) { return ctx->n_tensors; }

const gguf_tensor *gguf_tensor_at(const gguf_ctx *ctx, int64_t i) {
    return (i >= 0 && i < ctx->n_tensors) ? &ctx->tensors[i] : NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_ctx *ctx, const char *name) {
    if (!name) return NULL;
    return gguf_tensor_at(ctx, gguf_index_find(t_name, ctx, ctx->t_index, ctx->t_cap, name, strlen(name)));
}

const char *gguf_type_name(gguf_type t) {
    static const char *const names[GGUF_TYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64",
    };
    return (unsigned)t < GGUF_TYPE_COUNT ? names[t] : "?";
}
