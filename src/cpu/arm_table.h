// The kernel table of one ARM level (template, see arm_gemm.h): every kernel the level's templates define.
// No repacked layouts (gemm_packed stays NULL): the tiles read the original GGUF rows.
#ifndef TACHYON_CPU_ARM_TABLE_H
#define TACHYON_CPU_ARM_TABLE_H

#include "cpu/arm_act.h"
#include "cpu/arm_gemm.h"
#include "cpu/cpu_internal.h"

#define ARM_TABLE ARM_FN(table)

static const cpu_kernels ARM_TABLE = {
    .gemm =
        {
            [TT_Q4_0] = ARM_FN(gemm_q4_0),
            [TT_Q4_1] = ARM_FN(gemm_q4_1),
            [TT_Q5_0] = ARM_FN(gemm_q5_0),
            [TT_Q5_1] = ARM_FN(gemm_q5_1),
            [TT_Q8_0] = ARM_FN(gemm_q8_0),
            [TT_Q4_K] = ARM_FN(gemm_q4_k),
            [TT_Q5_K] = ARM_FN(gemm_q5_k),
            [TT_Q6_K] = ARM_FN(gemm_q6_k),
            [TT_Q2_K] = ARM_FN(gemm_q2_k),
            [TT_Q3_K] = ARM_FN(gemm_q3_k),
            [TT_IQ4_NL] = ARM_FN(gemm_iq4_nl),
            [TT_IQ4_XS] = ARM_FN(gemm_iq4_xs),
            [TT_MXFP4] = ARM_FN(gemm_mxfp4),
            [TT_F32] = ARM_FN(gemm_f32),
            [TT_F16] = ARM_FN(gemm_f16),
            [TT_BF16] = ARM_FN(gemm_bf16),
        },
    .act_type = CPU_ACT_TYPES,
    .quant =
        {
            [TT_Q8_0] = ARM_FN(quant_q8_0),
            [TT_Q8_1] = ARM_FN(quant_q8_1),
            [TT_Q8_K] = ARM_FN(quant_q8_k),
        },
};

#endif
