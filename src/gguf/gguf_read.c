// GGUF reader: parses and validates a whole file (header, metadata, tensor infos, data section bounds) into a
// gguf_ctx. Every read goes through the cursor below, which checks the bytes remaining first; every size
// computed from file values is checked for overflow before it is used.
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf_internal.h"

#define GGUF_MAGIC 0x46554747u // "GGUF" little-endian
#define GGUF_DEFAULT_ALIGNMENT 32

// --- bounded little-endian cursor

typedef struct {
    const uint8_t *p;
    size_t size;
    size_t pos;
    tc_err *err;
} rd;

static size_t rd_left(const rd *r) { return r->size - r->pos; }

static int rd_need(rd *r, uint64_t n, const char *what) {
    if (n > rd_left(r))
        return tc_err_set(r->err, TC_ERR_FORMAT,
                          "gguf: truncated reading %s at byte %zu: need %llu bytes, %zu left", what, r->pos,
                          (unsigned long long)n, rd_left(r));
    return 0;
}

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static int rd_uint(rd *r, int n, uint64_t *out, const char *what) {
    int rc = rd_need(r, (uint64_t)n, what);
    if (rc) return rc;
    *out = le(r->p + r->pos, n);
    r->pos += (size_t)n;
    return 0;
}

static int rd_u32(rd *r, uint32_t *out, const char *what) {
    uint64_t v;
    int rc = rd_uint(r, 4, &v, what);
    if (!rc) *out = (uint32_t)v;
    return rc;
}

static int rd_u64(rd *r, uint64_t *out, const char *what) { return rd_uint(r, 8, out, what); }

static int rd_str(rd *r, gguf_str *s, const char *what) {
    size_t at = r->pos;
    uint64_t len;
    int rc = rd_u64(r, &len, what);
    if (rc) return rc;
    if (len > rd_left(r))
        return tc_err_set(r->err, TC_ERR_FORMAT,
                          "gguf: %s at byte %zu has length %llu but only %zu bytes remain", what, at,
                          (unsigned long long)len, rd_left(r));
    s->ptr = (const char *)r->p + r->pos;
    s->len = len;
    r->pos += (size_t)len;
    return 0;
}

// --- value types

static uint64_t type_size(gguf_type t) {
    switch (t) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64:
    case GGUF_TYPE_INT64:
    case GGUF_TYPE_FLOAT64: return 8;
    default: return 0; // STRING, ARRAY: variable
    }
}

static int is_signed(gguf_type t) {
    return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 || t == GGUF_TYPE_INT64;
}

static double bits_to_f64(uint64_t b, int n) {
    if (n == 4) {
        uint32_t u = (uint32_t)b;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    double d;
    memcpy(&d, &b, 8);
    return d;
}

// Reads one scalar (non-string, non-array) value of type t into kv->v.
static int rd_scalar(rd *r, gguf_kv *kv, gguf_type t) {
    size_t at = r->pos;
    int n = (int)type_size(t);
    uint64_t b;
    int rc = rd_uint(r, n, &b, "value");
    if (rc) return rc;
    if (t == GGUF_TYPE_FLOAT32 || t == GGUF_TYPE_FLOAT64) kv->v.f = bits_to_f64(b, n);
    else if (is_signed(t)) {
        int sh = 64 - 8 * n; // sign-extend
        kv->v.i = (int64_t)(b << sh) >> sh;
    } else if (t == GGUF_TYPE_BOOL) {
        if (b > 1)
            return tc_err_set(r->err, TC_ERR_FORMAT, "gguf: bool value %llu at byte %zu is not 0 or 1",
                              (unsigned long long)b, at);
        kv->v.u = b;
    } else kv->v.u = b;
    return 0;
}

static int rd_array(rd *r, gguf_kv *kv) {
    size_t at = r->pos;
    uint32_t et;
    uint64_t n;
    int rc = rd_u32(r, &et, "array element type");
    if (rc) return rc;
    if (et == GGUF_TYPE_ARRAY)
        return tc_err_set(r->err, TC_ERR_FORMAT, "gguf: nested arrays are not supported (array at byte %zu)",
                          at);
    if (et >= GGUF_TYPE_COUNT)
        return tc_err_set(r->err, TC_ERR_FORMAT, "gguf: unknown array element type %u at byte %zu", et, at);
    if ((rc = rd_u64(r, &n, "array length"))) return rc;
    kv->arr_type = (gguf_type)et;
    kv->arr_n = n;
    kv->arr_data = r->p + r->pos;
    if (et == GGUF_TYPE_STRING) {
        // each string needs at least its 8-byte length: bound n before allocating the offset table
        if (n > rd_left(r) / 8)
            return tc_err_set(r->err, TC_ERR_FORMAT,
                              "gguf: string array at byte %zu claims %llu elements but only %zu bytes remain", at,
                              (unsigned long long)n, rd_left(r));
        uint64_t *off = malloc((n ? n : 1) * sizeof *off);
        if (!off) return tc_err_set(r->err, TC_ERR_NOMEM, "gguf: out of memory for a %llu-string array",
                                    (unsigned long long)n);
        kv->arr_soff = off;
        for (uint64_t j = 0; j < n; j++) {
            gguf_str s;
            off[j] = r->pos;
            if ((rc = rd_str(r, &s, "array string"))) return rc;
        }
        return 0;
    }
    uint64_t es = type_size((gguf_type)et);
    if (n > rd_left(r) / es)
        return tc_err_set(r->err, TC_ERR_FORMAT,
                          "gguf: array at byte %zu: %llu elements of %llu bytes exceed the %zu bytes remaining", at,
                          (unsigned long long)n, (unsigned long long)es, rd_left(r));
    if (et == GGUF_TYPE_BOOL)
        for (uint64_t j = 0; j < n; j++)
            if (kv->arr_data[j] > 1)
                return tc_err_set(r->err, TC_ERR_FORMAT, "gguf: bool array element %llu at byte %zu is not 0/1",
                                  (unsigned long long)j, r->pos + (size_t)j);
    r->pos += (size_t)(n * es);
    return 0;
}

static int rd_kv(rd *r, gguf_kv *kv) {
    size_t at = r->pos;
    uint32_t t;
    int rc = rd_str(r, &kv->key, "metadata key");
    if (rc) return rc;
    if ((rc = rd_u32(r, &t, "metadata value type"))) return rc;
    if (t >= GGUF_TYPE_COUNT)
        return tc_err_set(r->err, TC_ERR_FORMAT, "gguf: key '%.*s' at byte %zu has unknown value type %u",
                          (int)(kv->key.len > 200 ? 200 : kv->key.len), kv->key.ptr, at, t);
    kv->type = (gguf_type)t;
    if (t == GGUF_TYPE_STRING) rc = rd_str(r, &kv->str, "string value");
    else if (t == GGUF_TYPE_ARRAY) rc = rd_array(r, kv);
    else rc = rd_scalar(r, kv, kv->type);
    if (rc) tc_err_wrap(r->err, "key '%.*s'", (int)(kv->key.len > 200 ? 200 : kv->key.len), kv->key.ptr);
    return rc;
}

// --- tensor infos

static int rd_tensor(rd *r, gguf_tensor *t, uint64_t alignment) {
    size_t at = r->pos;
    int rc = rd_str(r, &t->name, "tensor name");
    if (rc) return rc;
    int nl = (int)(t->name.len > 200 ? 200 : t->name.len);
    if ((rc = rd_u32(r, &t->n_dims, "tensor n_dims"))) return rc;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return tc_err_set(r->err, TC_ERR_FORMAT, "gguf: tensor '%.*s' at byte %zu has n_dims %u (must be 1..%d)",
                          nl, t->name.ptr, at, t->n_dims, GGUF_MAX_DIMS);
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t v;
        if ((rc = rd_u64(r, &v, "tensor dimension"))) return rc;
        if (v == 0 || v > (uint64_t)INT64_MAX)
            return tc_err_set(r->err, TC_ERR_FORMAT, "gguf: tensor '%.*s' at byte %zu: ne[%u] = %llu is invalid",
                              nl, t->name.ptr, at, d, (unsigned long long)v);
        t->ne[d] = (int64_t)v;
    }
    if ((rc = rd_u32(r, &t->type, "tensor type"))) return rc;
    if ((rc = rd_u64(r, &t->offset, "tensor offset"))) return rc;

    int64_t bs;
    uint64_t ts;
    if (!gguf_ttype_info(t->type, &bs, &ts))
        return tc_err_set(r->err, TC_ERR_FORMAT, "gguf: tensor '%.*s' at byte %zu has unknown type %u", nl,
                          t->name.ptr, at, t->type);
    if (t->ne[0] % bs)
        return tc_err_set(r->err, TC_ERR_FORMAT,
                          "gguf: tensor '%.*s' at byte %zu: ne[0] = %lld is not a multiple of the block size %lld",
                          nl, t->name.ptr, at, (long long)t->ne[0], (long long)bs);
    // size = ne0/bs * ts * ne1 * ne2 * ne3, each step checked
    uint64_t size = (uint64_t)(t->ne[0] / bs);
    if (size > UINT64_MAX / ts) goto overflow;
    size *= ts;
    for (int d = 1; d < GGUF_MAX_DIMS; d++) {
        if (size > UINT64_MAX / (uint64_t)t->ne[d]) goto overflow;
        size *= (uint64_t)t->ne[d];
    }
    // the element count must also fit in int64 for the rest of the code base
    uint64_t nel = (uint64_t)t->ne[0];
    for (int d = 1; d < GGUF_MAX_DIMS; d++) {
        if (nel > (uint64_t)INT64_MAX / (uint64_t)t->ne[d]) goto overflow;
        nel *= (uint64_t)t->ne[d];
    }
    t->size = size;
    if (t->offset % alignment)
        return tc_err_set(r->err, TC_ERR_FORMAT,
                          "gguf: tensor '%.*s' at byte %zu: offset %llu is not a multiple of the alignment %llu", nl,
                          t->name.ptr, at, (unsigned long long)t->offset, (unsigned long long)alignment);
    return 0;
overflow:
    return tc_err_set(r->err, TC_ERR_FORMAT, "gguf: tensor '%.*s' at byte %zu: shape overflows", nl, t->name.ptr,
                      at);
}

// --- whole file

static const gguf_str *kv_name(const gguf_ctx *c, int64_t i) { return &c->kv[i].key; }
static const gguf_str *t_name(const gguf_ctx *c, int64_t i) { return &c->tensors[i].name; }

static int parse(gguf_ctx *c, tc_err *err) {
    rd r = {c->base, c->size, 0, err};
    uint32_t magic;
    uint64_t n_tensors, n_kv;
    int rc;
    if ((rc = rd_u32(&r, &magic, "magic"))) return rc;
    if (magic != GGUF_MAGIC)
        return tc_err_set(err, TC_ERR_FORMAT, "gguf: bad magic 0x%08x at byte 0 (not a GGUF file)", magic);
    if ((rc = rd_u32(&r, &c->version, "version"))) return rc;
    if (c->version == 1)
        return tc_err_set(err, TC_ERR_FORMAT, "gguf: version 1 is not supported (only 2 and 3)");
    if (c->version != 2 && c->version != 3)
        return tc_err_set(err, TC_ERR_FORMAT, "gguf: unsupported version %u at byte 4%s", c->version,
                          (c->version & 0xffff) == 0 ? " (big-endian file?)" : "");
    if ((rc = rd_u64(&r, &n_tensors, "tensor count"))) return rc;
    if ((rc = rd_u64(&r, &n_kv, "metadata count"))) return rc;

    // each kv needs >= 8 (key length) + 4 (type) + 1 (smallest value) bytes, each tensor info >= 8 + 4 + 8 + 4 + 8
    if (n_kv > rd_left(&r) / 13)
        return tc_err_set(err, TC_ERR_FORMAT, "gguf: metadata count %llu at byte 16 exceeds what %zu bytes can hold",
                          (unsigned long long)n_kv, rd_left(&r));
    if (n_tensors > rd_left(&r) / 32)
        return tc_err_set(err, TC_ERR_FORMAT, "gguf: tensor count %llu at byte 8 exceeds what %zu bytes can hold",
                          (unsigned long long)n_tensors, rd_left(&r));
    c->kv = calloc(n_kv ? n_kv : 1, sizeof *c->kv);
    c->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *c->tensors);
    if (!c->kv || !c->tensors) return tc_err_set(err, TC_ERR_NOMEM, "gguf: out of memory");

    c->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < n_kv; i++) {
        gguf_kv *kv = &c->kv[i];
        c->n_kv = (int64_t)i + 1; // so gguf_close frees a partly read array
        if ((rc = rd_kv(&r, kv))) {
            tc_err_wrap(err, "metadata entry %llu", (unsigned long long)i);
            return rc;
        }
        static const char ak[] = "general.alignment";
        if (kv->key.len == sizeof ak - 1 && !memcmp(kv->key.ptr, ak, sizeof ak - 1)) {
            if (kv->type != GGUF_TYPE_UINT32)
                return tc_err_set(err, TC_ERR_FORMAT, "gguf: general.alignment has type %s, expected uint32",
                                  gguf_type_name(kv->type));
            if (kv->v.u == 0 || (kv->v.u & (kv->v.u - 1)))
                return tc_err_set(err, TC_ERR_FORMAT, "gguf: general.alignment %llu is not a power of two",
                                  (unsigned long long)kv->v.u);
            c->alignment = kv->v.u;
        }
    }
    int64_t dup;
    if ((rc = gguf_index_build(kv_name, c, c->n_kv, &c->kv_index, &c->kv_cap, &dup))) {
        if (rc == TC_ERR_FORMAT)
            return tc_err_set(err, rc, "gguf: duplicate metadata key '%.*s' (entry %lld)",
                              (int)(c->kv[dup].key.len > 200 ? 200 : c->kv[dup].key.len), c->kv[dup].key.ptr,
                              (long long)dup);
        return tc_err_set(err, rc, "gguf: out of memory");
    }

    for (uint64_t i = 0; i < n_tensors; i++) {
        c->n_tensors = (int64_t)i + 1;
        if ((rc = rd_tensor(&r, &c->tensors[i], c->alignment))) {
            tc_err_wrap(err, "tensor info %llu", (unsigned long long)i);
            return rc;
        }
    }
    if ((rc = gguf_index_build(t_name, c, c->n_tensors, &c->t_index, &c->t_cap, &dup))) {
        if (rc == TC_ERR_FORMAT)
            return tc_err_set(err, rc, "gguf: duplicate tensor name '%.*s' (tensor %lld)",
                              (int)(c->tensors[dup].name.len > 200 ? 200 : c->tensors[dup].name.len),
                              c->tensors[dup].name.ptr, (long long)dup);
        return tc_err_set(err, rc, "gguf: out of memory");
    }

    // data section: next multiple of the alignment (files without tensors may end before it)
    uint64_t pos = r.pos, pad = (c->alignment - pos % c->alignment) % c->alignment;
    c->data_offset = pos + pad;
    if (c->data_offset > c->size) {
        if (n_tensors)
            return tc_err_set(err, TC_ERR_FORMAT, "gguf: data section at byte %llu starts past the end of the file (%zu)",
                              (unsigned long long)c->data_offset, c->size);
        c->data_offset = c->size;
    }
    uint64_t avail = c->size - c->data_offset;
    for (int64_t i = 0; i < c->n_tensors; i++) {
        gguf_tensor *t = &c->tensors[i];
        if (t->offset > avail || t->size > avail - t->offset)
            return tc_err_set(err, TC_ERR_FORMAT,
                              "gguf: tensor '%.*s' data [%llu, +%llu) lies outside the data section (%llu bytes at byte %llu)",
                              (int)(t->name.len > 200 ? 200 : t->name.len), t->name.ptr,
                              (unsigned long long)t->offset, (unsigned long long)t->size, (unsigned long long)avail,
                              (unsigned long long)c->data_offset);
        t->data = c->base + c->data_offset + t->offset;
    }
    return 0;
}

int gguf_open_memory(const void *data, size_t size, gguf_ctx **out, tc_err *err) {
    *out = NULL;
    if (!data && size) return tc_err_set(err, TC_ERR_INVALID, "gguf: NULL buffer");
    gguf_ctx *c = calloc(1, sizeof *c);
    if (!c) return tc_err_set(err, TC_ERR_NOMEM, "gguf: out of memory");
    c->base = data ? data : (const uint8_t *)"";
    c->size = size;
    int rc = parse(c, err);
    if (rc) {
        gguf_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

int gguf_open(const char *path, gguf_ctx **out, tc_err *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tc_err_set(err, TC_ERR_IO, "gguf: cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return tc_err_set(err, TC_ERR_IO, "gguf: cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return tc_err_set(err, TC_ERR_IO, "gguf: '%s' is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return tc_err_set(err, TC_ERR_FORMAT, "gguf: '%s' is empty", path);
    }
    size_t size = (size_t)st.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return tc_err_set(err, TC_ERR_IO, "gguf: cannot mmap '%s': %s", path, strerror(e));
    gguf_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        munmap(map, size);
        return tc_err_set(err, TC_ERR_NOMEM, "gguf: out of memory");
    }
    c->base = map;
    c->size = size;
    c->mapped = 1;
    int rc = parse(c, err);
    if (rc) {
        gguf_close(c);
        tc_err_wrap(err, "%s", path);
        return rc;
    }
    *out = c;
    return 0;
}

void gguf_close(gguf_ctx *c) {
    if (!c) return;
    for (int64_t i = 0; i < c->n_kv; i++) free((void *)c->kv[i].arr_soff);
    free(c->kv);
    free(c->tensors);
    free(c->kv_index);
    free(c->t_index);
    if (c->mapped) munmap((void *)c->base, c->size);
    free(c);
}
