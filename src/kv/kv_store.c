// Paged KV storage (see kv_store.h).
#include "kv/kv_store.h"

#include "common/hugepage.h"

#include <stdlib.h>
#include <string.h>

int kv_type_parse(const char *s, tt_type *out, tc_err *err) {
    static const struct { const char *name; tt_type t; } types[] = {{"f16", TT_F16}, {"q8_0", TT_Q8_0}, {"q4_0", TT_Q4_0}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (s && !strcmp(s, types[i].name)) {
            *out = types[i].t;
            return 0;
        }
    return tc_err_set(err, TC_ERR_INVALID, "unknown KV cache type '%s' (f16, q8_0 or q4_0)", s ? s : "");
}

size_t kv_row_bytes(tt_type t, int head_dim) {
    if (t != TT_F16 && t != TT_Q8_0 && t != TT_Q4_0) return 0;
    if (head_dim % tt_get(t)->block_size) return 0;
    return tt_row_size(t, head_dim);
}

size_t kv_block_bytes(int n_layers, int n_kv_heads, int head_dim, int block_size, tt_type k_type, tt_type v_type) {
    size_t kr = kv_row_bytes(k_type, head_dim), vr = kv_row_bytes(v_type, head_dim);
    if (!kr || !vr) return 0;
    return (size_t)n_layers * n_kv_heads * (size_t)block_size * (kr + vr);
}

int kv_store_new(const kv_shape *s, int n_blocks, int n_blocks_swa, int block_size, tt_type k_type, tt_type v_type,
                 kv_store **out, tc_err *err) {
    *out = NULL;
    if (n_blocks <= 0 || n_blocks_swa < 0 || block_size <= 0 || block_size > 64)
        return tc_err_set(err, TC_ERR_INVALID, "invalid KV geometry: %d (+%d local) blocks of %d tokens (block size "
                          "1..64)", n_blocks, n_blocks_swa, block_size);
    size_t kr = kv_row_bytes(k_type, s->head_dim), vr = kv_row_bytes(v_type, s->head_dim);
    if (!kr || !vr)
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "KV cache types %s/%s not supported for head dim %d (quantized "
                          "types need a multiple of 32)", tt_name(k_type), tt_name(v_type), s->head_dim);
    kv_store *kv = calloc(1, sizeof *kv);
    if (!kv) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    kv->n_blocks = n_blocks;
    kv->n_blocks_swa = n_blocks_swa;
    kv->block_size = block_size;
    kv->n_layers = s->n_layers;
    kv->n_kv_heads = s->n_kv_heads;
    kv->head_dim = s->head_dim;
    kv->k_type = k_type;
    kv->v_type = v_type;
    kv->k_row = kr;
    kv->v_row = vr;
    int n_local = 0;
    for (int l = 0; n_blocks_swa > 0 && s->local && l < s->n_layers; l++) n_local += s->local[l] != 0;
    int n_global = kv->n_layers - n_local;
    size_t rows = (size_t)n_blocks * kv->n_kv_heads * block_size;
    size_t rows_swa = (size_t)n_blocks_swa * kv->n_kv_heads * block_size;
    // calloc: untouched pages cost nothing until a block is first written, then a whole huge page at a time
    // (common/hugepage.h): decode reads every row of the context once per token and layer, a block of each KV
    // head apart.
    kv->k = calloc(1, rows * kr * (size_t)n_global + 1);
    kv->v = calloc(1, rows * vr * (size_t)n_global + 1);
    tc_huge_advise(kv->k, rows * kr * (size_t)n_global);
    tc_huge_advise(kv->v, rows * vr * (size_t)n_global);
    if (n_local) {
        kv->k_swa = calloc(1, rows_swa * kr * (size_t)n_local);
        kv->v_swa = calloc(1, rows_swa * vr * (size_t)n_local);
        tc_huge_advise(kv->k_swa, rows_swa * kr * (size_t)n_local);
        tc_huge_advise(kv->v_swa, rows_swa * vr * (size_t)n_local);
    }
    kv->k_l = calloc((size_t)kv->n_layers, sizeof *kv->k_l);
    kv->v_l = calloc((size_t)kv->n_layers, sizeof *kv->v_l);
    kv->swa_l = calloc((size_t)kv->n_layers, 1);
    if (!kv->swa_l || !kv->k || !kv->v || (n_local && (!kv->k_swa || !kv->v_swa)) || !kv->k_l || !kv->v_l) {
        size_t mib = ((rows * (size_t)n_global + rows_swa * (size_t)n_local) * (kr + vr)) >> 20;
        kv_store_free(kv);
        return tc_err_set(err, TC_ERR_NOMEM, "cannot allocate KV cache of %zu MiB", mib);
    }
    for (int l = 0, ig = 0, il = 0; l < kv->n_layers; l++) {
        kv->swa_l[l] = (uint8_t)(n_local > 0 && s->local[l]);
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

void kv_store_free(kv_store *kv) {
    if (!kv) return;
    free(kv->k);
    free(kv->v);
    free(kv->k_swa);
    free(kv->v_swa);
    free(kv->k_l);
    free(kv->v_l);
    free(kv->swa_l);
    free(kv->rs);
    free(kv->rs_ckpt);
    free(kv->rs_blk);
    free(kv);
}

int kv_store_n_blocks(const kv_store *kv) { return kv->n_blocks; }
int kv_store_block_size(const kv_store *kv) { return kv->block_size; }

void kv_store_copy_block(kv_store *kv, int src, int dst) {
    size_t rows = (size_t)kv->n_kv_heads * kv->block_size;
    for (int l = 0; l < kv->n_layers; l++) {
        if (kv->swa_l[l]) continue; // the local storage has its own block ids
        memcpy(kv->k_l[l] + kv_store_offset(kv, kv->k_row, dst, 0, 0),
               kv->k_l[l] + kv_store_offset(kv, kv->k_row, src, 0, 0), rows * kv->k_row);
        memcpy(kv->v_l[l] + kv_store_offset(kv, kv->v_row, dst, 0, 0),
               kv->v_l[l] + kv_store_offset(kv, kv->v_row, src, 0, 0), rows * kv->v_row);
    }
}
