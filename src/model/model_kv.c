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

static int count_swa_layers(const model_hparams *hp) {
    int n = 0;
    for (int l = 0; l < hp->n_layers; l++) n += model_layer_is_swa(hp, l);
    return n;
}

size_t model_kv_group_block_bytes(const model *m, int swa, int block_size, tt_type k_type, tt_type v_type) {
    const model_hparams *hp = &m->hp;
    int n_local = count_swa_layers(hp), n = swa ? n_local : hp->n_layers - n_local;
    size_t all = model_kv_block_bytes(m, block_size, k_type, v_type);
    return hp->n_layers ? all / (size_t)hp->n_layers * (size_t)n : 0;
}

int model_kv_new(const model *m, int n_blocks, int block_size, tt_type k_type, tt_type v_type, model_kv **out,
                 tc_err *err) {
    return model_kv_new_swa(m, n_blocks, 0, block_size, k_type, v_type, out, err);
}

int model_kv_new_swa(const model *m, int n_blocks, int n_blocks_swa, int block_size, tt_type k_type, tt_type v_type,
                     model_kv **out, tc_err *err) {
    *out = NULL;
    if (n_blocks <= 0 || n_blocks_swa < 0 || block_size <= 0 || block_size > 64)
        return tc_err_set(err, TC_ERR_INVALID, "invalid KV geometry: %d (+%d local) blocks of %d tokens (block size "
                          "1..64)", n_blocks, n_blocks_swa, block_size);
    if (n_blocks_swa > 0 && m->hp.swa_window <= 0)
        return tc_err_set(err, TC_ERR_INVALID, "a separate sliding-window KV storage needs a sliding-window model");
    size_t kr = row_bytes(k_type, m->hp.head_dim), vr = row_bytes(v_type, m->hp.head_dim);
    if (!kr || !vr)
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "KV cache types %s/%s not supported for head dim %d (quantized "
                          "types need a multiple of 32)", tt_name(k_type), tt_name(v_type), m->hp.head_dim);
    model_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    kv->n_blocks = n_blocks;
    kv->n_blocks_swa = n_blocks_swa;
    kv->block_size = block_size;
    kv->n_layers = m->hp.n_layers;
    kv->n_kv_heads = m->hp.n_kv_heads;
    kv->head_dim = m->hp.head_dim;
    kv->k_type = k_type;
    kv->v_type = v_type;
    kv->k_row = kr;
    kv->v_row = vr;
    int n_local = n_blocks_swa > 0 ? count_swa_layers(&m->hp) : 0, n_global = kv->n_layers - n_local;
    size_t rows = (size_t)n_blocks * kv->n_kv_heads * block_size;
    size_t rows_swa = (size_t)n_blocks_swa * kv->n_kv_heads * block_size;
    // calloc: untouched pages cost nothing until a block is first written.
    kv->k = calloc(1, rows * kr * (size_t)n_global + 1);
    kv->v = calloc(1, rows * vr * (size_t)n_global + 1);
    if (n_local) {
        kv->k_swa = calloc(1, rows_swa * kr * (size_t)n_local);
        kv->v_swa = calloc(1, rows_swa * vr * (size_t)n_local);
    }
    kv->k_l = calloc((size_t)kv->n_layers, sizeof *kv->k_l);
    kv->v_l = calloc((size_t)kv->n_layers, sizeof *kv->v_l);
    kv->swa_l = calloc((size_t)kv->n_layers, 1);
    if (!kv->swa_l || !kv->k || !kv->v || (n_local && (!kv->k_swa || !kv->v_swa)) || !kv->k_l || !kv->v_l) {
        size_t mib = ((rows * (size_t)n_global + rows_swa * (size_t)n_local) * (kr + vr)) >> 20;
        model_kv_free(kv);
        return tc_err_set(err, TC_ERR_NOMEM, "cannot allocate KV cache of %zu MiB", mib);
    }
    for (int l = 0, ig = 0, il = 0; l < kv->n_layers; l++) {
        kv->swa_l[l] = (uint8_t)(n_local > 0 && model_layer_is_swa(&m->hp, l));
        if (kv->swa_l[l]) {
            kv->k_l[l] = kv->k_swa + (size_t)il * rows_swa * kr;
            kv->v_l[l] = kv->v_swa + (size_t)il++ * rows_swa * vr;
        } else {
            kv->k_l[l] = kv->k + (size_t)ig * rows * kr;
            kv->v_l[l] = kv->v + (size_t)ig++ * rows * vr;
        }
    }
    *out = kv;
    return 0;
}

void model_kv_free(model_kv *kv) {
    if (!kv) return;
    free(kv->k);
    free(kv->v);
    free(kv->k_swa);
    free(kv->v_swa);
    free(kv->k_l);
    free(kv->v_l);
    free(kv->swa_l);
    free(kv);
}

int model_kv_n_blocks(const model_kv *kv) { return kv->n_blocks; }
int model_kv_block_size(const model_kv *kv) { return kv->block_size; }

void model_kv_copy_block(model_kv *kv, int src, int dst) {
    size_t rows = (size_t)kv->n_kv_heads * kv->block_size;
    for (int l = 0; l < kv->n_layers; l++) {
        if (kv->swa_l[l]) continue; // the local storage has its own block ids
        memcpy(kv->k_l[l] + model_kv_offset(kv, kv->k_row, dst, 0, 0),
               kv->k_l[l] + model_kv_offset(kv, kv->k_row, src, 0, 0), rows * kv->k_row);
        memcpy(kv->v_l[l] + model_kv_offset(kv, kv->v_row, dst, 0, 0),
               kv->v_l[l] + model_kv_offset(kv, kv->v_row, src, 0, 0), rows * kv->v_row);
    }
}
