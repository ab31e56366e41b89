// Shared helpers for the ARM64 kernel templates (arm_act.h, arm_gemm.h and the headers it includes),
// compiled once per ARM level with that level's flags. ARM_LEVEL picks the int8 dot product:
//   0  NEON (ARMv8.0): SMULL + SMLAL2 + SADALP, 3 instructions per 16 byte pairs
//   1  dotprod (ARMv8.2 +dotprod): one SDOT per 16 byte pairs
//   2  i8mm (ARMv8.6 +i8mm): SDOT for single rows, SMMLA on 2 weight x 2 activation row tiles
// Every level computes the same exact int32 block sums and then the same float operations per
// (weight row, activation row) pair, so the levels agree bit for bit and a row's result does not depend on
// the batch it came in.
#ifndef TACHYON_CPU_ARM_COMMON_H
#define TACHYON_CPU_ARM_COMMON_H

#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu/cpu_internal.h"
#include "tensor/ttype.h"

#ifndef ARM_LEVEL
#error "define ARM_LEVEL (0 neon, 1 dotprod, 2 i8mm) before including the ARM templates"
#endif

#define AI static inline __attribute__((always_inline))
#define ARM_UNROLL _Pragma("GCC unroll 8")
#define ARM_MAXW 4 // weight rows per tile
#define ARM_MAXR 4 // activation rows per tile

// fp16 -> f32 (exact, as tt_f16_to_f32).
AI float arm_h2f(tt_f16 h) { return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0); }

// acc += per 4-byte group sums of a * b. On plain NEON a pair of products is summed in int16 before the
// widening add: |a| <= 128 and |b| <= 127 (activations are clamped to +-127) keep it under 2^15.
AI int32x4_t arm_dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if ARM_LEVEL >= 1
    return vdotq_s32(acc, a, b);
#else
    int16x8_t p = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    p = vmlal_high_s8(p, a, b);
    return vpadalq_s16(acc, p);
#endif
}

AI const uint8_t *arm_wrow(const cpu_gemm_job *j, int i) { return j->w + (size_t)i * j->w_stride; }
AI const uint8_t *arm_arow(const cpu_gemm_job *j, int r) { return j->a + (size_t)r * j->a_stride; }

#endif
