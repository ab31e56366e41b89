// Paged KV storage: one pool of f16 blocks for every layer, sized once at start-up.
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"

size_t model_kv_block_bytes(const model *m, int block_size) {
    const model_hparams *hp = &m->hp;
    return 2u * (size_t)hp->n_layers * hp->n_kv_heads * (size_t)block_size * hp->head_dim * sizeof(uint16_t);
}

int model_kv_new(const model *m, int n_blocks, int block_size, model_kv **out, tc_err *err) {
    *out = NULL;
    if (n_blocks <= 0 || block_size <= 0 || block_size > 64)
        return tc_err_set(err, TC_ERR_INVALID, "invalid KV geometry: %d blocks of %d tokens (block size 1..64)",
                          n_blocks, block_size);
    model_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    kv->n_blocks = n_blocks;
    kv->block_size = block_size;
    kv->n_layers = m->hp.n_layers;
    kv->n_kv_heads = m->hp.n_kv_heads;
    kv->head_dim = m->hp.head_dim;
    kv->layer_stride = (size_t)n_blocks * kv->n_kv_heads * block_size * kv->head_dim;
    size_t bytes = kv->layer_stride * kv->n_layers * sizeof(uint16_t);
    // calloc: untouched pages cost nothing until a block is first written.
    kv->k = calloc(1, bytes);
    kv->v = calloc(1, bytes);
    if (!kv->k || !kv->v) {
        model_kv_free(kv);
        return tc_err_set(err, TC_ERR_NOMEM, "cannot allocate KV cache of 2 x %zu MiB", bytes >> 20);
    }
    *out = kv;
    return 0;
}

void model_kv_free(model_kv *kv) {
    if (!kv) return;
    free(kv->k);
    free(kv->v);
    free(kv);
}

int model_kv_n_blocks(const model_kv *kv) { return kv->n_blocks; }
int model_kv_block_size(const model_kv *kv) { return kv->block_size; }

void model_kv_copy_block(model_kv *kv, int src, int dst) {
    size_t n = (size_t)kv->n_kv_heads * kv->block_size * kv->head_dim;
    for (int l = 0; l < kv->n_layers; l++) {
        memcpy(kv->k + model_kv_offset(kv, l, dst, 0, 0), kv->k + model_kv_offset(kv, l, src, 0, 0), n * 2);
        memcpy(kv->v + model_kv_offset(kv, l, dst, 0, 0), kv->v + model_kv_offset(kv, l, src, 0, 0), n * 2);
    }
}
