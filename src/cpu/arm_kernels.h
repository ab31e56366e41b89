// The ARM64 kernels each ARM ISA level exports (compiled only for aarch64): NEON (ARMv8.0 Advanced SIMD),
// dotprod (+ SDOT/UDOT) and i8mm (+ SMMLA/UMMLA). Same contracts as their x86 counterparts: cpu_kernels
// (cpu_internal.h), the GLU activations (ops.h) and the attention tiles (attention.h).
#ifndef TACHYON_CPU_ARM_KERNELS_H
#define TACHYON_CPU_ARM_KERNELS_H

#include "cpu/attention.h"
#include "cpu/cpu_internal.h"

const cpu_kernels *cpu_kernels_neon(void);
const cpu_kernels *cpu_kernels_dotprod(void);
const cpu_kernels *cpu_kernels_i8mm(void);

void ops_glu_neon(float *g, const float *u, int n, int gelu);

void attn_tile_neon(float *out, const float *q, const void *k_layer, const void *v_layer, const int32_t *blocks,
                    int n_pos, int kv_head, const attn_geom *geo);
void attn_multi_neon(float *out, size_t out_stride, const float *q, size_t q_stride, int n_q, const void *k_layer,
                     const void *v_layer, const int32_t *blocks, int n_pos, int kv_head, const attn_geom *geo);

#endif
