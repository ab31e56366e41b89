// The kernel table of one x86 level (template, see x86_gemm.h): every kernel the level's templates define.
#ifndef TACHYON_CPU_X86_TABLE_H
#define TACHYON_CPU_X86_TABLE_H

#include "cpu/cpu_internal.h"
#include "cpu/x86_act.h"
#include "cpu/x86_gemm.h"
#include "cpu/x86_repack_q4.h"

#define X86_TABLE X86_FN(table)

static const cpu_kernels X86_TABLE = {
    .gemm =
        {
            [TT_Q4_0] = X86_FN(gemm_q4_0),
            [TT_Q4_1] = X86_FN(gemm_q4_1),
            [TT_Q5_0] = X86_FN(gemm_q5_0),
            [TT_Q5_1] = X86_FN(gemm_q5_1),
            [TT_Q8_0] = X86_FN(gemm_q8_0),
            [TT_Q4_K] = X86_FN(gemm_q4_k),
            [TT_Q5_K] = X86_FN(gemm_q5_k),
            [TT_Q6_K] = X86_FN(gemm_q6_k),
            [TT_Q2_K] = X86_FN(gemm_q2_k),
            [TT_Q3_K] = X86_FN(gemm_q3_k),
            [TT_IQ4_NL] = X86_FN(gemm_iq4_nl),
            [TT_IQ4_XS] = X86_FN(gemm_iq4_xs),
            [TT_MXFP4] = X86_FN(gemm_mxfp4),
            [TT_F32] = X86_FN(gemm_f32),
            [TT_F16] = X86_FN(gemm_f16),
            [TT_BF16] = X86_FN(gemm_bf16),
        },
    .act_type = CPU_ACT_TYPES,
    .quant =
        {
            [TT_Q8_0] = X86_FN(quant_q8_0),
            [TT_Q8_1] = X86_FN(quant_q8_1),
            [TT_Q8_K] = X86_FN(quant_q8_k),
        },
    // Q6_K repacked at both levels: at AVX-512 its GEMM is faster than the 512-bit row tile's (bench_matmul,
    // CPU time, 128 / 512 rows: 164-173 / 181-182 vs 145-149 / 147-148 GFLOP/s) and its GEMV from DRAM the same
    // (22-23 GB/s per thread, both prefetching into L2); the row tile is faster on a matrix that stays in
    // cache (28.9 vs 25.8 GB/s "hot")
    .gemm_packed = {[TT_Q4_K] = X86_FN(gemm_q4_k_r8), [TT_Q6_K] = X86_FN(gemm_q6_k_r8),
                    [TT_Q8_0] = X86_FN(gemm_q8_0_r16),
                    [TT_Q5_0] = X86_FN(gemm_q8_0_r16), // Q5_0 repacks to the Q8_0 layout
                    [TT_Q4_0] = X86_FN(gemm_q4_0_r16), [TT_Q4_1] = X86_FN(gemm_q4_1_r16),
                    [TT_MXFP4] = X86_FN(gemm_mxfp4_r16)},
};

#endif
