// GGUF reader (v2, v3) over mmap, and writer. Every count, offset, size and string length in a file is
// checked against the file size and against overflow before use: a truncated, corrupted or hostile file
// gives TC_ERR_FORMAT with a message, never a crash or an out-of-bounds read.
#ifndef TACHYON_GGUF_H
#define TACHYON_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef enum {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} gguf_type;

#define GGUF_MAX_DIMS 4

typedef struct gguf_str {
    const char *ptr; // borrowed, points into the mapping; NOT NUL-terminated
    uint64_t len;    // bytes
} gguf_str;

typedef struct gguf_tensor {
    gguf_str name;
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS]; // ne[0] is the contiguous (row) dimension; unused dims are 1
    uint32_t type;             // ggml type id (see tensor/ttype.h); validated to be a known type
    uint64_t offset;           // from the start of the data section
    uint64_t size;             // bytes, computed from type and shape
    const void *data;          // borrowed, into the mapping; aligned to the file's alignment
} gguf_tensor;

typedef struct gguf_ctx gguf_ctx; // opaque

// Opens and validates a file (mmap'd read-only). *out is owned by the caller: free with gguf_close.
int gguf_open(const char *path, gguf_ctx **out, tc_err *err);
// Same over a caller-owned buffer that must outlive the context (fuzzing, tests). No copy is made.
int gguf_open_memory(const void *data, size_t size, gguf_ctx **out, tc_err *err);
void gguf_close(gguf_ctx *ctx);

uint32_t gguf_version(const gguf_ctx *ctx);
uint64_t gguf_alignment(const gguf_ctx *ctx);
uint64_t gguf_file_size(const gguf_ctx *ctx);

// --- key/value metadata
int64_t gguf_n_kv(const gguf_ctx *ctx);
int64_t gguf_find_key(const gguf_ctx *ctx, const char *key); // index, or -1 if absent
gguf_str gguf_kv_key(const gguf_ctx *ctx, int64_t i);
gguf_type gguf_kv_type(const gguf_ctx *ctx, int64_t i);

// Typed getters by key: return 0 and fill *out, or TC_ERR_INVALID when the key is absent or has a type
// that cannot be converted losslessly (any integer type converts to another if the value fits; f32/f64
// convert to each other; bool reads as integer 0/1).
int gguf_get_u32(const gguf_ctx *ctx, const char *key, uint32_t *out);
int gguf_get_i64(const gguf_ctx *ctx, const char *key, int64_t *out);
int gguf_get_f32(const gguf_ctx *ctx, const char *key, float *out);
int gguf_get_bool(const gguf_ctx *ctx, const char *key, int *out);
int gguf_get_str(const gguf_ctx *ctx, const char *key, gguf_str *out);

// Arrays (by kv index). gguf_arr_data returns a pointer to the packed little-endian elements for
// numeric element types (NULL for strings); strings are read one by one with gguf_arr_str. The pointer is
// into the file and NOT necessarily aligned to the element size: read elements with memcpy.
gguf_type gguf_arr_type(const gguf_ctx *ctx, int64_t i);
uint64_t gguf_arr_n(const gguf_ctx *ctx, int64_t i);
const void *gguf_arr_data(const gguf_ctx *ctx, int64_t i);
gguf_str gguf_arr_str(const gguf_ctx *ctx, int64_t i, uint64_t j);
// Scalars by index (for dumping): the value as double / u64 when numeric or bool.
double gguf_kv_as_f64(const gguf_ctx *ctx, int64_t i);

// --- tensors
int64_t gguf_n_tensors(const gguf_ctx *ctx);
const gguf_tensor *gguf_tensor_at(const gguf_ctx *ctx, int64_t i);
const gguf_tensor *gguf_find_tensor(const gguf_ctx *ctx, const char *name); // NULL if absent

const char *gguf_type_name(gguf_type t);

// --- writer: builds a file in memory-bounded streaming fashion (metadata first, then tensor data).
typedef struct gguf_writer gguf_writer; // opaque

gguf_writer *gguf_writer_new(void); // NULL on OOM; free with gguf_writer_free
void gguf_writer_free(gguf_writer *w);
int gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
int gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
int gguf_writer_set_bool(gguf_writer *w, const char *key, int v);
int gguf_writer_set_str(gguf_writer *w, const char *key, const char *v);
int gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_type elem, const void *data, uint64_t n);
int gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n);
// A value already serialized as GGUF stores it after the type field (scalars: the little-endian bytes;
// strings: u64 length + bytes; arrays: u32 element type, u64 count, elements). The caller vouches for the
// encoding; used to copy metadata verbatim from another file (gguf_writer_copy_kv).
int gguf_writer_set_raw(gguf_writer *w, const char *key, gguf_type type, const void *val, size_t len);
// Copies metadata entry i of src (any type, arrays of strings included) under the same key. Keys holding a
// NUL byte cannot be written (TC_ERR_INVALID); general.alignment is the writer's own and is skipped.
int gguf_writer_copy_kv(gguf_writer *w, const gguf_ctx *src, int64_t i);
// Adds a tensor whose data (already in the target ggml type, `size` bytes) is copied or, when the writer
// streams, pulled by a callback; ne as in gguf_tensor.
int gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                           const void *data, uint64_t size);
// Streaming: a tensor added with data == NULL is produced while the file is written, by
// fill(user, index, name, dst, size) filling `size` bytes at dst (a buffer reused between tensors), called
// once per such tensor in the order they were added; it returns 0 or a negative TC_ERR_* (which aborts).
typedef int (*gguf_writer_fill_fn)(void *user, int64_t index, const char *name, void *dst, uint64_t size);
void gguf_writer_set_fill(gguf_writer *w, gguf_writer_fill_fn fn, void *user);
// Writes a v3 file with alignment 32 (keys in the order first set; a key set twice keeps its last value).
// On failure the partial file is removed. Setters and add_tensor return 0, TC_ERR_NOMEM, or TC_ERR_INVALID
// (unknown type, bad shape, size != the size of the shape, duplicate tensor name).
int gguf_writer_write_file(gguf_writer *w, const char *path, tc_err *err);

#endif
