// Activation quantization (f32 row -> Q8_0 / Q8_1 / Q8_K) for the ARM levels. Bit-exact with the scalar
// reference (tensor/quant_ref*.c): same scale arithmetic, FCVTAS (nearest, ties away from zero: roundf) for
// Q8_0/Q8_1, FCVTNS (ties to even: tt_nearest_int) for Q8_K, fp16 scales through tt_f32_to_f16.
// Template: included by the quant_*.c file of each ARM level; ARM_FN names the instantiation.
#ifndef TACHYON_CPU_ARM_ACT_H
#define TACHYON_CPU_ARM_ACT_H

#include "cpu/arm_common.h"

// One block of 32: q = clamp(roundf(x * id), -127, 127) with d = amax / 127, id = 1 / d (0 when d == 0).
AI int8x16x2_t arm_q8_block32(const float *x, float *d_out) {
    float32x4_t v[8];
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int t = 0; t < 8; t++) {
        v[t] = vld1q_f32(x + 4 * t);
        m = vmaxq_f32(m, vabsq_f32(v[t]));
    }
    const float d = vmaxvq_f32(m) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    int16x8_t h[4];
    for (int t = 0; t < 4; t++) {
        int32x4_t a = vcvtaq_s32_f32(vmulq_n_f32(v[2 * t], id)), b = vcvtaq_s32_f32(vmulq_n_f32(v[2 * t + 1], id));
        h[t] = vcombine_s16(vqmovn_s32(a), vqmovn_s32(b));
        h[t] = vmaxq_s16(vminq_s16(h[t], vdupq_n_s16(127)), vdupq_n_s16(-127));
    }
    *d_out = d;
    int8x16x2_t q = {{vcombine_s8(vmovn_s16(h[0]), vmovn_s16(h[1])), vcombine_s8(vmovn_s16(h[2]), vmovn_s16(h[3]))}};
    return q;
}

static void ARM_FN(quant_q8_0)(const float *x, void *vy, int64_t k) {
    tt_block_q8_0 *y = vy;
    for (int64_t b = 0; b < k / QK8_0; b++) {
        float d;
        int8x16x2_t q = arm_q8_block32(x + b * QK8_0, &d);
        y[b].d = tt_f32_to_f16(d);
        vst1q_s8(y[b].qs, q.val[0]);
        vst1q_s8(y[b].qs + 16, q.val[1]);
    }
}

static void ARM_FN(quant_q8_1)(const float *x, void *vy, int64_t k) {
    tt_block_q8_1 *y = vy;
    for (int64_t b = 0; b < k / QK8_1; b++) {
        float d;
        int8x16x2_t q = arm_q8_block32(x + b * QK8_1, &d);
        vst1q_s8(y[b].qs, q.val[0]);
        vst1q_s8(y[b].qs + 16, q.val[1]);
        int sum = vaddlvq_s8(q.val[0]) + vaddlvq_s8(q.val[1]);
        y[b].d = d;
        y[b].s = (float)sum * d;
    }
}

// Q8_K: scale by -127/max where max is the element of largest magnitude (first one on ties), round half
// to even, clamp to [-128, 127]; d = 1/iscale; bsums = sums of 16.
static void ARM_FN(quant_q8_k)(const float *x, void *vy, int64_t k) {
    tt_block_q8_K *y = vy;
    for (int64_t b = 0; b < k / QK_K; b++, x += QK_K) {
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int j = 0; j < QK_K; j += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + j)));
        const float amax = vmaxvq_f32(m);
        memset(&y[b], 0, sizeof y[b]);
        if (amax == 0.0f) continue;
        float max = 0.0f;
        for (int j = 0; j < QK_K; j++) {
            if (x[j] == amax || x[j] == -amax) {
                max = x[j];
                break;
            }
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; j += 16) {
            int16x8_t h[2];
            for (int t = 0; t < 2; t++) {
                int32x4_t a = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 8 * t), iscale));
                int32x4_t c = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 8 * t + 4), iscale));
                h[t] = vcombine_s16(vqmovn_s32(a), vqmovn_s32(c));
                h[t] = vmaxq_s16(vminq_s16(h[t], vdupq_n_s16(127)), vdupq_n_s16(-128));
            }
            int8x16_t q = vcombine_s8(vmovn_s16(h[0]), vmovn_s16(h[1]));
            vst1q_s8(y[b].qs + j, q);
            y[b].bsums[j / 16] = (int16_t)vaddlvq_s8(q);
        }
        y[b].d = 1.0f / iscale;
    }
}

#endif
