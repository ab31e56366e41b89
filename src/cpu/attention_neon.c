// Attention tiles for the ARM levels.
#include "cpu/arm_kernels.h"

void attn_tile_neon(float *out, const float *q, const void *k_layer, const void *v_layer, const int32_t *blocks,
                    int n_pos, int kv_head, const attn_geom *geo) {
    attn_tile_scalar(out, q, k_layer, v_layer, blocks, n_pos, kv_head, geo);
}

void attn_multi_neon(float *out, size_t out_stride, const float *q, size_t q_stride, int n_q, const void *k_layer,
                     const void *v_layer, const int32_t *blocks, int n_pos, int kv_head, const attn_geom *geo) {
    attn_multi_scalar(out, out_stride, q, q_stride, n_q, k_layer, v_layer, blocks, n_pos, kv_head, geo);
}
