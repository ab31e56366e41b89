#include "cpu/convert.h"

#include "tensor/ttype.h"

void cvt_f32_f16_scalar(uint16_t *dst, const float *src, int n) {
    for (int i = 0; i < n; i++) dst[i] = tt_f32_to_f16(src[i]);
}

cvt_f32_f16_fn cvt_select_f32_f16(cpu_isa isa) {
#if defined(__x86_64__)
    if (isa >= CPU_ISA_AVX2 && cpu_get_features()->f16c) return cvt_f32_f16_avx2;
#elif defined(__aarch64__)
    if (isa >= CPU_ISA_NEON) return cvt_f32_f16_neon;
#endif
    (void)isa;
    return cvt_f32_f16_scalar;
}
