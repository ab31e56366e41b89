// e^x on 4 float lanes for the ARM kernels (GLU activations, attention softmax). The same Cephes expf as
// x86_vexp.h, constant for constant: n = round(x·log2 e) (ties to even, FRINTN), r = x - n·ln 2 in two parts,
// a degree-6 polynomial, times 2^n; within 2 ulp of expf for -87 <= x <= 88; x below -87 gives ~1e-38, not 0.
// The caller keeps x <= 88 (2^n overflows the exponent bits above). NEON is baseline on ARM64, so this header
// compiles at every ARM level.
#ifndef TACHYON_CPU_ARM_VEXP_H
#define TACHYON_CPU_ARM_VEXP_H

#include <arm_neon.h>

static inline float32x4_t arm_vexp(float32x4_t x) {
    x = vmaxq_f32(x, vdupq_n_f32(-87.0f));
    const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504f)));
    float32x4_t r = vfmaq_f32(x, n, vdupq_n_f32(-0.693359375f));
    r = vfmaq_f32(r, n, vdupq_n_f32(2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
    p = vfmaq_f32(vfmaq_f32(vdupq_n_f32(1.0f), r, vdupq_n_f32(1.0f)), vmulq_f32(p, r), r);
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vmulq_f32(p, vreinterpretq_f32_s32(e));
}

#endif
