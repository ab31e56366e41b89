// Private to src/cpu/: the kernel table each ISA file exports, and the GEMM work description.
#ifndef TACHYON_CPU_INTERNAL_H
#define TACHYON_CPU_INTERNAL_H

#include "cpu/cpu.h"
#include "tensor/ttype.h"

#include <stddef.h>
#include <stdint.h>

// One GEMM work item: out[r, i] = dot(W row i, activation row r) for i in [i0, i1), r in [0, n_rows).
// Activations are already in the kernel's activation type (Q8_0/Q8_1/Q8_K rows, or f32 for float weights).
typedef struct cpu_gemm_job {
    const uint8_t *w; // weight row 0
    size_t w_stride;  // bytes per weight row
    const uint8_t *a; // activation row 0
    size_t a_stride;  // bytes per activation row
    float *out;       // (n_rows, ld_out)
    int ld_out;
    int k;      // elements per row
    int n_rows; // activation rows
    int i0, i1; // weight-row range
} cpu_gemm_job;

typedef void (*cpu_gemm_fn)(const cpu_gemm_job *job);
typedef void (*cpu_quant_fn)(const float *x, void *y, int64_t k); // one row of k floats

// Kernels of one ISA level, indexed by weight tt_type. act_type[t] is the activation type the kernel
// expects (must equal the traits' vec_dot_type for quantized weights, TT_F32 for float weights); a NULL
// gemm means "no kernel at this level" and the dispatcher falls back to the scalar path.
// The activation type of each weight type's kernel (the traits' vec_dot_type; TT_F32 for float weights),
// the same at every level of every architecture: cpu_kernels.act_type's initializer.
// clang-format off
#define CPU_ACT_TYPES                                                                                          \
    {                                                                                                          \
        [TT_Q4_0] = TT_Q8_0, [TT_Q4_1] = TT_Q8_1, [TT_Q5_0] = TT_Q8_0, [TT_Q5_1] = TT_Q8_1,                    \
        [TT_Q8_0] = TT_Q8_0, [TT_Q4_K] = TT_Q8_K, [TT_Q5_K] = TT_Q8_K, [TT_Q6_K] = TT_Q8_K,                    \
        [TT_Q2_K] = TT_Q8_K, [TT_Q3_K] = TT_Q8_K, [TT_IQ4_NL] = TT_Q8_0, [TT_IQ4_XS] = TT_Q8_K,                \
        [TT_MXFP4] = TT_Q8_0, [TT_F32] = TT_F32, [TT_F16] = TT_F32, [TT_BF16] = TT_F32,                        \
    }
// clang-format on

typedef struct cpu_kernels {
    cpu_gemm_fn gemm[TT_COUNT];
    uint32_t act_type[TT_COUNT];
    cpu_quant_fn quant[TT_COUNT]; // indexed by activation type (TT_Q8_0, TT_Q8_1, TT_Q8_K)
    // (optional) kernels over the cpu_repack layout of a weight type (job.w is the repacked weight; same
    // activation type as gemm[t]); NULL: this level uses the original rows
    cpu_gemm_fn gemm_packed[TT_COUNT];
} cpu_kernels;

// The table of a level (NULL for the scalar level, which is the reference path of matmul.c), clamped to what
// the hardware runs (cpu_hw_isa). The per-level tables are cpu_kernels_avx2/_avx512 below on x86-64 and
// cpu_kernels_neon/_dotprod/_i8mm (arm_kernels.h) on aarch64.
const cpu_kernels *cpu_kernels_at(cpu_isa isa);

#if defined(__x86_64__)
const cpu_kernels *cpu_kernels_avx2(void);
const cpu_kernels *cpu_kernels_avx512(void);
#endif

#endif
