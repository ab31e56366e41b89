// NEON (ARMv8.0 Advanced SIMD) kernels: no weight type has one yet, so every GEMM takes the scalar path.
#include "cpu/arm_kernels.h"

#include <math.h>

static cpu_kernels g_neon;

const cpu_kernels *cpu_kernels_neon(void) { return &g_neon; }
const cpu_kernels *cpu_kernels_dotprod(void) { return &g_neon; }
const cpu_kernels *cpu_kernels_i8mm(void) { return &g_neon; }

void ops_glu_neon(float *g, const float *u, int n, int gelu) {
    for (int i = 0; i < n; i++) {
        float x = g[i], z = gelu ? 1.5957691216057308f * (x + 0.044715f * x * x * x) : x;
        g[i] = x * u[i] / (1.0f + expf(-z));
    }
}

void attn_tile_neon(float *out, const float *q, const void *k_layer, const void *v_layer, const int32_t *blocks,
                    int n_pos, int kv_head, const attn_geom *geo) {
    attn_tile_scalar(out, q, k_layer, v_layer, blocks, n_pos, kv_head, geo);
}

void attn_multi_neon(float *out, size_t out_stride, const float *q, size_t q_stride, int n_q, const void *k_layer,
                     const void *v_layer, const int32_t *blocks, int n_pos, int kv_head, const attn_geom *geo) {
    attn_multi_scalar(out, out_stride, q, q_stride, n_q, k_layer, v_layer, blocks, n_pos, kv_head, geo);
}
