// Paged KV storage: the bytes of the cache in CPU memory, one pool of blocks for every layer, sized once at
// start-up. Block b holds positions [b*block_size, (b+1)*block_size) of whichever sequence owns it, for every
// layer; which sequence owns which block is kv.h's job. Rows are f16 or quantized (q8_0 / q4_0 blocks of 32
// values along the head dimension, ggml's layouts, chosen for K and V separately as llama.cpp's -ctk / -ctv),
// so the same bytes hold more positions. The layout is public: the CPU forward pass writes and reads the rows
// in place (kv_store_offset), and the CUDA backend mirrors it.
// The storage knows layer counts and shapes only; the model binds its layers to it (model.h, model_kv_new).
#ifndef TACHYON_KV_STORE_H
#define TACHYON_KV_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "tensor/ttype.h"

// The shape of what one position stores: every layer's K and V rows, one per KV head.
typedef struct kv_shape {
    int n_layers, n_kv_heads, head_dim;
    const uint8_t *local; // (n_layers) 1: a sliding-window layer, stored apart when n_blocks_swa > 0; or NULL
} kv_shape;

typedef struct kv_store {
    int n_blocks, block_size;
    int n_blocks_swa;       // blocks of the local (sliding-window) layers' own storage; 0: they share the global one
    int n_layers, n_kv_heads, head_dim;
    tt_type k_type, v_type; // F16, Q8_0 or Q4_0 (quantized: blocks of 32 values along head_dim)
    size_t k_row, v_row;    // bytes of one head's row of head_dim values
    uint8_t *k, *v;         // (n_global, n_blocks, n_kv_heads, block_size) rows of k_row / v_row bytes; with
                            // n_blocks_swa == 0 every layer is "global" here
    uint8_t *k_swa, *v_swa; // (n_local, n_blocks_swa, n_kv_heads, block_size) rows, or NULL
    uint8_t **k_l, **v_l;   // (n_layers) each layer's base in k/k_swa and v/v_swa
    uint8_t *swa_l;         // (n_layers) 1: the layer lives in k_swa/v_swa
    // Recurrent state of hybrid models beside the blocks (model.h: model_rs_*): rs_slots slots of rs_floats,
    // zeroed pages untouched until a sequence uses its slot; NULL when the model has none. Owned, freed with kv.
    float *rs;
    int rs_slots;
    size_t rs_floats;
    // (rs_ckpt_slots, rs_ckpt_n, rs_floats) the states after each row of a kept item (speculation's verify rows),
    // for slots 0..rs_ckpt_slots-1; NULL until reserved (model_rs_reserve_ckpt). Owned.
    float *rs_ckpt;
    int rs_ckpt_slots, rs_ckpt_n;
    // (n_blocks, rs_floats) the state after each full block's last position, written by the sequence that
    // computed it, for prefix-cache hits; NULL when it would not fit (model_kv.c). Owned.
    float *rs_blk;
} kv_store;

// "f16", "q8_0", "q4_0" → type; TC_ERR_INVALID (message names the choices) otherwise.
int kv_type_parse(const char *s, tt_type *out, tc_err *err);
// Bytes of one head's row of head_dim values of type t; 0 if t cannot hold them (not a KV type, or a
// quantized type and head_dim not a multiple of its block).
size_t kv_row_bytes(tt_type t, int head_dim);
// Bytes one block of block_size positions takes over n_layers layers of n_kv_heads heads, K and V; 0 if a
// type does not fit head_dim.
size_t kv_block_bytes(int n_layers, int n_kv_heads, int head_dim, int block_size, tt_type k_type, tt_type v_type);

// n_blocks blocks of block_size (1..64) positions for the global layers, and when n_blocks_swa > 0 a storage
// of n_blocks_swa blocks for the layers s->local marks (none marked: no such storage). Pages are untouched
// until first written. Owned by the caller: free with kv_store_free. Errors: TC_ERR_INVALID (geometry),
// TC_ERR_UNSUPPORTED (a type that does not fit head_dim), TC_ERR_NOMEM.
int kv_store_new(const kv_shape *s, int n_blocks, int n_blocks_swa, int block_size, tt_type k_type, tt_type v_type,
                 kv_store **out, tc_err *err);
void kv_store_free(kv_store *kv);
int kv_store_n_blocks(const kv_store *kv);
int kv_store_block_size(const kv_store *kv);
// Copies every layer's K/V of block src to dst (copy-on-write of a shared partial block); with a separate
// local storage, the global layers' only.
void kv_store_copy_block(kv_store *kv, int src, int dst);

// 1 when layer l's KV lives in the local layers' storage (and is addressed by the batch's swa tables).
static inline int kv_store_layer_is_swa(const kv_store *kv, int l) { return kv->swa_l[l]; }

// Byte offset of row (block, head, slot) from a layer's base (k_l[l] with k_row, v_l[l] with v_row).
static inline size_t kv_store_offset(const kv_store *kv, size_t row, int block, int head, int slot) {
    return (((size_t)block * kv->n_kv_heads + head) * kv->block_size + slot) * row;
}

#endif
