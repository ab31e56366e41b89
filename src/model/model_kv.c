// Paged KV storage: one pool of blocks for every layer, sized once at start-up. Rows are f16 or quantized
// (q8_0 / q4_0 blocks of 32 values along the head dimension), so the same bytes hold more positions.
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"

int model_kv_type_parse(const char *s, tt_type *out, tc_err *err) {
    static const struct { const char *name; tt_type t; } types[] = {{"f16", TT_F16}, {"q8_0", TT_Q8_0}, {"q4_0", TT_Q4_0}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (s && !strcmp(s, types[i].name)) {
            *out = types[i].t;
            return 0;
        }
    return tc_err_set(err, TC_ERR_INVALID, "unknown KV cache type '%s' (f16, q8_0 or q4_0)", s ? s : "");
}

// Bytes of one head row, 0 if the type cannot hold head_dim values.
static size_t row_bytes(tt_type t, int head_dim) {
    if (t != TT_F16 && t != TT_Q8_0 && t != TT_Q4_0) return 0;
    if (head_dim % tt_get(t)->block_size) return 0;
    return tt_row_size(t, head_dim);
}

size_t model_kv_block_bytes(const model *m, int block_size, tt_type k_type, tt_type v_type) {
    const model_hparams *hp = &m->hp;
    size_t kr = row_bytes(k_type, hp->head_dim), vr = row_bytes(v_type, hp->head_dim);
    if (!kr || !vr) return 0;
    return (size_t)hp->n_layers * hp->n_kv_heads * (size_t)block_size * (kr + vr);
}

int model_kv_new(const model *m, int n_blocks, int block_size, tt_type k_type, tt_type v_type, model_kv **out,
                 tc_err *err) {
    *out = NULL;
    if (n_blocks <= 0 || block_size <= 0 || block_size > 64)
        return tc_err_set(err, TC_ERR_INVALID, "invalid KV geometry: %d blocks of %d tokens (block size 1..64)",
                          n_blocks, block_size);
    size_t kr = row_bytes(k_type, m->hp.head_dim), vr = row_bytes(v_type, m->hp.head_dim);
    if (!kr || !vr)
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "KV cache types %s/%s not supported for head dim %d (quantized "
                          "types need a multiple of 32)", tt_name(k_type), tt_name(v_type), m->hp.head_dim);
    model_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    kv->n_blocks = n_blocks;
    kv->block_size = block_size;
    kv->n_layers = m->hp.n_layers;
    kv->n_kv_heads = m->hp.n_kv_heads;
    kv->head_dim = m->hp.head_dim;
    kv->k_type = k_type;
    kv->v_type = v_type;
    kv->k_row = kr;
    kv->v_row = vr;
    size_t rows = (size_t)n_blocks * kv->n_kv_heads * block_size;
    kv->k_layer = rows * kr;
    kv->v_layer = rows * vr;
    // calloc: untouched pages cost nothing until a block is first written.
    kv->k = calloc(1, kv->k_layer * kv->n_layers);
    kv->v = calloc(1, kv->v_layer * kv->n_layers);
    if (!kv->k || !kv->v) {
        size_t mib = (kv->k_layer + kv->v_layer) * kv->n_layers >> 20;
        model_kv_free(kv);
        return tc_err_set(err, TC_ERR_NOMEM, "cannot allocate KV cache of %zu MiB", mib);
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
    size_t rows = (size_t)kv->n_kv_heads * kv->block_size;
    for (int l = 0; l < kv->n_layers; l++) {
        memcpy(kv->k + model_kv_offset(kv, kv->k_row, kv->k_layer, l, dst, 0, 0),
               kv->k + model_kv_offset(kv, kv->k_row, kv->k_layer, l, src, 0, 0), rows * kv->k_row);
        memcpy(kv->v + model_kv_offset(kv, kv->v_row, kv->v_layer, l, dst, 0, 0),
               kv->v + model_kv_offset(kv, kv->v_row, kv->v_layer, l, src, 0, 0), rows * kv->v_row);
    }
}
