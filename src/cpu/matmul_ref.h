// Private to src/cpu/: the scalar reference GEMM and the activation type of each weight type (matmul.c), for the
// matmul drivers beside cpu_matmul (matmul_grouped.c).
#ifndef TACHYON_CPU_MATMUL_REF_H
#define TACHYON_CPU_MATMUL_REF_H

#include <stdint.h>

#include "cpu/cpu_internal.h"

// The scalar level's GEMM (the reference): the traits' vec_dot per output (f32 dots for float weights), over
// activations of cpu_act_type(w_type).
void cpu_gemm_ref(uint32_t w_type, const cpu_gemm_job *j);
// The activation type of weight type w_type: the traits' vec_dot_type, TT_F32 for float weights; TT_COUNT for
// an unknown type.
uint32_t cpu_act_type(uint32_t w_type);

#endif
