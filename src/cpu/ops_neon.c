// GLU activations for the ARM levels (NEON is baseline on ARM64, so one version serves all three), the
// same computation as ops_x86.h on 4 lanes: act(g) * u with act(x) = x * sigmoid(z), SiLU z = x, tanh-GELU
// z = 2·sqrt(2/pi)·(x + 0.044715 x³) (0.5·(1 + tanh(y)) = sigmoid(2y)); z clamped to [-80, 80] so no inf or
// NaN reaches the division. A tail shorter than 4 goes through the same vector code from a padded copy, so a
// value's result never depends on n or its position.
#include "cpu/arm_kernels.h"
#include "cpu/arm_vexp.h"

static inline float32x4_t ops_glu_v(float32x4_t x, float32x4_t u, int gelu) {
    float32x4_t z = x;
    if (gelu)
        z = vmulq_f32(vmulq_f32(vdupq_n_f32(2.0f * 0.7978845608028654f), x),
                      vfmaq_f32(vdupq_n_f32(1.0f), vmulq_f32(vdupq_n_f32(0.044715f), x), x));
    z = vminq_f32(vmaxq_f32(z, vdupq_n_f32(-80.0f)), vdupq_n_f32(80.0f));
    return vdivq_f32(vmulq_f32(x, u), vaddq_f32(vdupq_n_f32(1.0f), arm_vexp(vnegq_f32(z))));
}

void ops_glu_neon(float *g, const float *u, int n, int gelu) {
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(g + i, ops_glu_v(vld1q_f32(g + i), vld1q_f32(u + i), gelu));
    if (i < n) {
        float tg[4] = {0}, tu[4] = {0};
        for (int e = 0; i + e < n; e++) tg[e] = g[i + e], tu[e] = u[i + e];
        vst1q_f32(tg, ops_glu_v(vld1q_f32(tg), vld1q_f32(tu), gelu));
        for (int e = 0; i + e < n; e++) g[i + e] = tg[e];
    }
}
