// GGUF writer: collects metadata and tensor descriptions, then writes a v3 file (alignment 32) in one pass:
// header, kvs, tensor infos, padding, tensor data each padded to the alignment. Tensors added without data are
// produced at write time by the fill callback into one reused buffer, so a large model never sits in memory.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "tensor/ttype.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF writer serializes with memcpy and assumes a little-endian host"
#endif

#define GGUF_WRITER_ALIGNMENT 32

typedef struct {
    char *key;  // owned
    uint32_t type;
    uint8_t *val; // owned: the value exactly as serialized after the type field
    size_t val_len;
} wkv;

typedef struct {
    char *name; // owned
    uint32_t type, n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    uint64_t size, offset;
    void *data; // owned copy, or NULL: produced by the fill callback
} wtensor;

struct gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    uint64_t data_size; // bytes of the data section so far (padded)
    gguf_writer_fill_fn fill;
    void *fill_user;
};

gguf_writer *gguf_writer_new(void) { return calloc(1, sizeof(gguf_writer)); }

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) free(w->kv[i].key), free(w->kv[i].val);
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name), free(w->t[i].data);
    free(w->kv);
    free(w->t);
    free(w);
}

void gguf_writer_set_fill(gguf_writer *w, gguf_writer_fill_fn fn, void *user) {
    w->fill = fn;
    w->fill_user = user;
}

// --- metadata

// Replaces the value of an existing key, or appends a new one; takes ownership of val.
static int set_kv(gguf_writer *w, const char *key, uint32_t type, uint8_t *val, size_t len) {
    if (!key || !val) {
        free(val);
        return key ? TC_ERR_NOMEM : TC_ERR_INVALID;
    }
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) {
            free(w->kv[i].val);
            w->kv[i].type = type, w->kv[i].val = val, w->kv[i].val_len = len;
            return 0;
        }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 16;
        wkv *n = realloc(w->kv, cap * sizeof *n);
        if (!n) return free(val), TC_ERR_NOMEM;
        w->kv = n, w->cap_kv = cap;
    }
    char *k = strdup(key);
    if (!k) return free(val), TC_ERR_NOMEM;
    w->kv[w->n_kv++] = (wkv){k, type, val, len};
    return 0;
}

static int set_scalar(gguf_writer *w, const char *key, gguf_type t, const void *v, size_t n) {
    uint8_t *b = malloc(n);
    if (b) memcpy(b, v, n);
    return set_kv(w, key, t, b, n);
}

int gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v) {
    if (key && !strcmp(key, "general.alignment") && v != GGUF_WRITER_ALIGNMENT) return TC_ERR_INVALID;
    return set_scalar(w, key, GGUF_TYPE_UINT32, &v, 4);
}
int gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v) {
    return set_scalar(w, key, GGUF_TYPE_INT32, &v, 4);
}
int gguf_writer_set_f32(gguf_writer *w, const char *key, float v) {
    return set_scalar(w, key, GGUF_TYPE_FLOAT32, &v, 4);
}
int gguf_writer_set_bool(gguf_writer *w, const char *key, int v) {
    uint8_t b = v ? 1 : 0;
    return set_scalar(w, key, GGUF_TYPE_BOOL, &b, 1);
}

int gguf_writer_set_str(gguf_writer *w, const char *key, const char *v) {
    if (!v) return TC_ERR_INVALID;
    uint64_t n = strlen(v);
    uint8_t *b = malloc(8 + n);
    if (b) memcpy(b, &n, 8), memcpy(b + 8, v, n);
    return set_kv(w, key, GGUF_TYPE_STRING, b, 8 + n);
}

int gguf_writer_set_raw(gguf_writer *w, const char *key, gguf_type type, const void *val, size_t len) {
    if ((unsigned)type >= GGUF_TYPE_COUNT || (len && !val)) return TC_ERR_INVALID;
    uint8_t *b = malloc(len ? len : 1);
    if (b && len) memcpy(b, val, len);
    return set_kv(w, key, type, b, len);
}

static size_t elem_size(gguf_type t) {
    static const uint8_t sz[GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return (unsigned)t < GGUF_TYPE_COUNT ? sz[t] : 0;
}

int gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_type elem, const void *data, uint64_t n) {
    size_t es = elem_size(elem);
    if (!es || (n && !data) || n > (SIZE_MAX - 12) / es) return TC_ERR_INVALID;
    uint8_t *b = malloc(12 + n * es);
    if (b) {
        uint32_t t = elem;
        memcpy(b, &t, 4), memcpy(b + 4, &n, 8);
        if (n) memcpy(b + 12, data, n * es);
    }
    return set_kv(w, key, GGUF_TYPE_ARRAY, b, 12 + n * es);
}

int gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n) {
    if (n && !v) return TC_ERR_INVALID;
    size_t len = 12;
    for (uint64_t i = 0; i < n; i++) {
        if (!v[i]) return TC_ERR_INVALID;
        len += 8 + strlen(v[i]);
    }
    uint8_t *b = malloc(len);
    if (b) {
        uint32_t t = GGUF_TYPE_STRING;
        memcpy(b, &t, 4), memcpy(b + 4, &n, 8);
        size_t at = 12;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t sl = strlen(v[i]);
            memcpy(b + at, &sl, 8), memcpy(b + at + 8, v[i], sl);
            at += 8 + sl;
        }
    }
    return set_kv(w, key, GGUF_TYPE_ARRAY, b, len);
}

// --- tensors

int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                           const void *data, uint64_t size) {
    const tt_traits *tr = tt_get(type);
    if (!name || !ne || !tr || n_dims < 1 || n_dims > GGUF_MAX_DIMS) return TC_ERR_INVALID;
    for (size_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name)) return TC_ERR_INVALID;
    wtensor t = {.type = type, .n_dims = n_dims, .ne = {1, 1, 1, 1}};
    uint64_t nel = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] <= 0 || nel > (uint64_t)INT64_MAX / (uint64_t)ne[d]) return TC_ERR_INVALID;
        t.ne[d] = ne[d];
        nel *= (uint64_t)ne[d];
    }
    if (t.ne[0] % tr->block_size) return TC_ERR_INVALID;
    uint64_t rows = nel / (uint64_t)t.ne[0], row = tt_row_size(type, t.ne[0]);
    if (row && rows > UINT64_MAX / row) return TC_ERR_INVALID;
    t.size = rows * row;
    if (size != t.size) return TC_ERR_INVALID;
    if (w->data_size > UINT64_MAX - t.size - GGUF_WRITER_ALIGNMENT) return TC_ERR_INVALID;
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 64;
        wtensor *n = realloc(w->t, cap * sizeof *n);
        if (!n) return TC_ERR_NOMEM;
        w->t = n, w->cap_t = cap;
    }
    if (!(t.name = strdup(name))) return TC_ERR_NOMEM;
    if (data) {
        if (size > SIZE_MAX || !(t.data = malloc(size ? (size_t)size : 1))) {
            free(t.name);
            return TC_ERR_NOMEM;
        }
        memcpy(t.data, data, (size_t)size);
    }
    t.offset = w->data_size;
    w->data_size += (t.size + GGUF_WRITER_ALIGNMENT - 1) / GGUF_WRITER_ALIGNMENT * GGUF_WRITER_ALIGNMENT;
    w->t[w->n_t++] = t;
    return 0;
}

// --- file

static int put(FILE *f, const void *p, size_t n) { return fwrite(p, 1, n, f) == n ? 0 : -1; }
static int put_u32(FILE *f, uint32_t v) { return put(f, &v, 4); }
static int put_u64(FILE *f, uint64_t v) { return put(f, &v, 8); }
static int put_str(FILE *f, const char *s) {
    uint64_t n = strlen(s);
    return put_u64(f, n) || put(f, s, n);
}
static int put_pad(FILE *f, uint64_t pos) {
    static const uint8_t zero[GGUF_WRITER_ALIGNMENT];
    return put(f, zero, (size_t)((GGUF_WRITER_ALIGNMENT - pos % GGUF_WRITER_ALIGNMENT) % GGUF_WRITER_ALIGNMENT));
}

int gguf_writer_write_file(gguf_writer *w, const char *path, tc_err *err) {
    uint64_t fill_max = 0;
    for (size_t i = 0; i < w->n_t; i++)
        if (!w->t[i].data && w->t[i].size > fill_max) fill_max = w->t[i].size;
    if (fill_max && !w->fill)
        return tc_err_set(err, TC_ERR_INVALID, "gguf writer: tensors without data but no fill callback");
    FILE *f = fopen(path, "wb");
    if (!f) return tc_err_set(err, TC_ERR_IO, "gguf writer: cannot create '%s': %s", path, strerror(errno));
    char *iobuf = malloc(1 << 20);
    if (iobuf) setvbuf(f, iobuf, _IOFBF, 1 << 20);
    void *buf = NULL;
    int rc = TC_ERR_IO;
    if (fill_max && !(buf = malloc((size_t)fill_max))) {
        rc = tc_err_set(err, TC_ERR_NOMEM, "gguf writer: out of memory for a %llu-byte tensor",
                        (unsigned long long)fill_max);
        goto fail;
    }
    if (put_u32(f, 0x46554747u) || put_u32(f, 3) || put_u64(f, w->n_t) || put_u64(f, w->n_kv)) goto io;
    for (size_t i = 0; i < w->n_kv; i++)
        if (put_str(f, w->kv[i].key) || put_u32(f, w->kv[i].type) || put(f, w->kv[i].val, w->kv[i].val_len))
            goto io;
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        if (put_str(f, t->name) || put_u32(f, t->n_dims)) goto io;
        for (uint32_t d = 0; d < t->n_dims; d++)
            if (put_u64(f, (uint64_t)t->ne[d])) goto io;
        if (put_u32(f, t->type) || put_u64(f, t->offset)) goto io;
    }
    long pos = ftell(f);
    if (pos < 0 || put_pad(f, (uint64_t)pos)) goto io;
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        const void *src = t->data;
        if (!src) {
            if ((rc = w->fill(w->fill_user, (int64_t)i, t->name, buf, t->size))) {
                tc_err_set(err, rc, "gguf writer: producing tensor '%s' failed", t->name);
                goto fail;
            }
            src = buf;
        }
        if (put(f, src, (size_t)t->size) || put_pad(f, t->size)) goto io;
    }
    if (fclose(f) != 0) {
        f = NULL;
        goto io;
    }
    free(iobuf);
    free(buf);
    return 0;
io:
    rc = tc_err_set(err, TC_ERR_IO, "gguf writer: writing '%s': %s", path, strerror(errno));
fail:
    if (f) fclose(f);
    unlink(path);
    free(iobuf);
    free(buf);
    return rc;
}
