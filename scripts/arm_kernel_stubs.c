// Link stubs for scripts/arm_kernel_check.c: src/cpu/attention.c (compiled on its own here, before the
// ARM64 CMake build) names the x86 tiles in its dispatch; the ARM check never calls them.
#include "cpu/attention.h"

#include <stdlib.h>

void attn_tile_avx2(float *out, const float *q, const void *k_layer, const void *v_layer, const int32_t *blocks,
                    int n_pos, int kv_head, const attn_geom *geo) {
    (void)out, (void)q, (void)k_layer, (void)v_layer, (void)blocks, (void)n_pos, (void)kv_head, (void)geo;
    abort();
}
void attn_tile_avx512(float *out, const float *q, const void *k_layer, const void *v_layer, const int32_t *blocks,
                      int n_pos, int kv_head, const attn_geom *geo) {
    attn_tile_avx2(out, q, k_layer, v_layer, blocks, n_pos, kv_head, geo);
}
void attn_multi_avx2(float *out, size_t out_stride, const float *q, size_t q_stride, int n_q, const void *k_layer,
                     const void *v_layer, const int32_t *blocks, int n_pos, int kv_head, const attn_geom *geo) {
    (void)out_stride, (void)q_stride, (void)n_q;
    attn_tile_avx2(out, q, k_layer, v_layer, blocks, n_pos, kv_head, geo);
}
void attn_multi_avx512(float *out, size_t out_stride, const float *q, size_t q_stride, int n_q,
                       const void *k_layer, const void *v_layer, const int32_t *blocks, int n_pos, int kv_head,
                       const attn_geom *geo) {
    attn_multi_avx2(out, out_stride, q, q_stride, n_q, k_layer, v_layer, blocks, n_pos, kv_head, geo);
}
