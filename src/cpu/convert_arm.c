// f32 → f16 rows with Advanced SIMD (FCVTN rounds to nearest even, as the scalar tt_f32_to_f16). Compiled on
// aarch64 only (CMakeLists.txt: *_arm.c); the base ARMv8.0 flags suffice.
#include <arm_neon.h>

#include "cpu/convert.h"

void cvt_f32_f16_neon(uint16_t *dst, const float *src, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(dst + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
    if (i < n) cvt_f32_f16_scalar(dst + i, src + i, n - i);
}
