// Private to src/gguf: the parsed context shared by the reader (gguf_read.c) and the accessors (gguf_kv.c).
#ifndef TACHYON_GGUF_INTERNAL_H
#define TACHYON_GGUF_INTERNAL_H

#include "gguf/gguf.h"

typedef struct gguf_kv {
    gguf_str key;
    gguf_type type;
    union {
        uint64_t u; // UINT8/16/32/64, BOOL (0/1)
        int64_t i;  // INT8/16/32/64
        double f;   // FLOAT32/64
    } v;
    gguf_str str; // STRING
    // ARRAY
    gguf_type arr_type;
    uint64_t arr_n;
    const uint8_t *arr_data;  // numeric: packed elements; string: the first length prefix
    const uint64_t *arr_soff; // string arrays: (arr_n,) byte offsets of each length prefix from the file start
} gguf_kv;

struct gguf_ctx {
    const uint8_t *base; // borrowed (memory) or owned mapping (file)
    size_t size;         // bytes
    int mapped;          // 1 when base is our mmap
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset; // bytes from the file start to the data section

    int64_t n_kv;
    gguf_kv *kv; // (n_kv,) owned
    int64_t n_tensors;
    gguf_tensor *tensors; // (n_tensors,) owned

    // open-addressing hash indexes: slot holds index+1, 0 = empty; capacity a power of two
    uint64_t *kv_index;  // (kv_cap,) owned
    uint64_t kv_cap;
    uint64_t *t_index; // (t_cap,) owned
    uint64_t t_cap;
};

uint64_t gguf_hash(const char *s, uint64_t len);
// Builds an index over n names (name_at(ctx, i)); returns 0, TC_ERR_NOMEM, or TC_ERR_FORMAT on a duplicate,
// with *dup set to the index of the second occurrence.
int gguf_index_build(const gguf_str *(*name_at)(const gguf_ctx *, int64_t), const gguf_ctx *ctx, int64_t n,
                     uint64_t **index, uint64_t *cap, int64_t *dup);
// Index of name in the table, or -1.
int64_t gguf_index_find(const gguf_str *(*name_at)(const gguf_ctx *, int64_t), const gguf_ctx *ctx,
                        const uint64_t *index, uint64_t cap, const char *name, uint64_t len);

// Block size (elements) and bytes per block of a ggml tensor type; 0 if unknown.
int gguf_ttype_info(uint32_t type, int64_t *block_size, uint64_t *type_size);

#endif
