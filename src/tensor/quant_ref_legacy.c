// Scalar reference for the legacy 32-element block formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the
// activation format Q8_1. Quantizers reproduce ggml's quantize_row_*_ref bit for bit (same float
// expressions in the same order, same truncation/rounding); float->int conversions are clamped in float
// first so that no input (inf, NaN) is undefined behaviour.
//
// Element order inside a 4/5-bit block: byte j holds element j in its low nibble and element j + 16 in its
// high nibble; for Q5 the 5th bits are the 32-bit little-endian word qh, bit i belonging to element i.
#include <float.h>
#include <math.h>

#include "tensor/quant_ref.h"

static inline float f16(tt_f16 h) {
    return tt_f16_to_f32(h);
}

// C's (int)(v) for v in [lo, hi], and lo/hi outside (NaN -> lo).
static inline int trunc_clamp(float v, float lo, float hi) {
    return (int)fminf(fmaxf(v, lo), hi);
}

static inline uint32_t load_qh(const uint8_t qh[4]) {
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

static inline void store_qh(uint8_t qh[4], uint32_t v) {
    for (int i = 0; i < 4; i++)
        qh[i] = (uint8_t)(v >> (8 * i));
}

// Signed value with the largest magnitude (the first one on ties), as ggml's symmetric quantizers use.
static float signed_absmax(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static void min_max(const float *x, int n, float *mn, float *mx) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

// --- Q4_0: x = (q - 8) * d, d = max / -8 where max is the signed absmax

void tt_q4_0_to_float(const void *src, float *dst, int64_t n) {
    const tt_block_q4_0 *b = src;
    for (int64_t i = 0; i < n / QK4_0; i++, dst += QK4_0) {
        float d = f16(b[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            dst[j] = (float)((b[i].qs[j] & 0x0f) - 8) * d;
            dst[j + QK4_0 / 2] = (float)((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void tt_q4_0_from_float(const float *x, void *dst, int64_t n) {
    tt_block_q4_0 *b = dst;
    for (int64_t i = 0; i < n / QK4_0; i++, x += QK4_0) {
        float d = signed_absmax(x, QK4_0) / -8;
        float id = d ? 1.0f / d : 0.0f;
        b[i].d = tt_f32_to_f16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            int q0 = trunc_clamp(x[j] * id + 8.5f, 0.0f, 15.0f);
            int q1 = trunc_clamp(x[j + QK4_0 / 2] * id + 8.5f, 0.0f, 15.0f);
            b[i].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

float tt_q4_0_vec_dot(int n, const void *vx, const void *vy) {
    const tt_block_q4_0 *x = vx;
    const tt_block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int i = 0; i < n / QK4_0; i++) {
        int sumi = 0;
        for (int j = 0; j < QK4_0 / 2; j++) {
            sumi += ((x[i].qs[j] & 0x0f) - 8) * y[i].qs[j];
            sumi += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + QK4_0 / 2];
        }
        sum += (float)sumi * f16(x[i].d) * f16(y[i].d);
    }
    return sum;
}

// --- Q4_1: x = q * d + m, m = block min, d = (max - min) / 15

void tt_q4_1_to_float(const void *src, float *dst, int64_t n) {
    const tt_block_q4_1 *b = src;
    for (int64_t i = 0; i < n / QK4_1; i++, dst += QK4_1) {
        float d = f16(b[i].d), m = f16(b[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            dst[j] = (float)(b[i].qs[j] & 0x0f) * d + m;
            dst[j + QK4_1 / 2] = (float)(b[i].qs[j] >> 4) * d + m;
        }
    }
}

void tt_q4_1_from_float(const float *x, void *dst, int64_t n) {
    tt_block_q4_1 *b = dst;
    for (int64_t i = 0; i < n / QK4_1; i++, x += QK4_1) {
        float mn, mx;
        min_max(x, QK4_1, &mn, &mx);
        float d = (mx - mn) / 15;
        float id = d ? 1.0f / d : 0.0f;
        b[i].d = tt_f32_to_f16(d);
        b[i].m = tt_f32_to_f16(mn);
        for (int j = 0; j < QK4_1 / 2; j++) {
            int q0 = trunc_clamp((x[j] - mn) * id + 0.5f, 0.0f, 15.0f);
            int q1 = trunc_clamp((x[j + QK4_1 / 2] - mn) * id + 0.5f, 0.0f, 15.0f);
            b[i].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

// sum_j (q_j d_x + m_x) (y_j d_y) = d_x d_y sum(q_j y_j) + m_x * s_y, with s_y = d_y * sum(y_j)
float tt_q4_1_vec_dot(int n, const void *vx, const void *vy) {
    const tt_block_q4_1 *x = vx;
    const tt_block_q8_1 *y = vy;
    float sum = 0.0f;
    for (int i = 0; i < n / QK4_1; i++) {
        int sumi = 0;
        for (int j = 0; j < QK4_1 / 2; j++) {
            sumi += (x[i].qs[j] & 0x0f) * y[i].qs[j];
            sumi += (x[i].qs[j] >> 4) * y[i].qs[j + QK4_1 / 2];
        }
        sum += (f16(x[i].d) * y[i].d) * (float)sumi + f16(x[i].m) * y[i].s;
    }
    return sum;
}

// --- Q5_0: x = (q - 16) * d, d = max / -16

static inline int q5_get(const uint8_t *qs, uint32_t qh, int j) { // 5-bit value of element j (0..31)
    int lo = j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
    return lo | (int)((qh >> j) & 1) << 4;
}

void tt_q5_0_to_float(const void *src, float *dst, int64_t n) {
    const tt_block_q5_0 *b = src;
    for (int64_t i = 0; i < n / QK5_0; i++, dst += QK5_0) {
        float d = f16(b[i].d);
        uint32_t qh = load_qh(b[i].qh);
        for (int j = 0; j < QK5_0; j++)
            dst[j] = (float)(q5_get(b[i].qs, qh, j) - 16) * d;
    }
}

void tt_q5_0_from_float(const float *x, void *dst, int64_t n) {
    tt_block_q5_0 *b = dst;
    for (int64_t i = 0; i < n / QK5_0; i++, x += QK5_0) {
        float d = signed_absmax(x, QK5_0) / -16;
        float id = d ? 1.0f / d : 0.0f;
        b[i].d = tt_f32_to_f16(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            int q0 = trunc_clamp(x[j] * id + 16.5f, 0.0f, 31.0f);
            int q1 = trunc_clamp(x[j + QK5_0 / 2] * id + 16.5f, 0.0f, 31.0f);
            b[i].qs[j] = (uint8_t)((q0 & 0x0f) | (q1 & 0x0f) << 4);
            qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + QK5_0 / 2);
        }
        store_qh(b[i].qh, qh);
    }
}

float tt_q5_0_vec_dot(int n, const void *vx, const void *vy) {
    const tt_block_q5_0 *x = vx;
    const tt_block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int i = 0; i < n / QK5_0; i++) {
        uint32_t qh = load_qh(x[i].qh);
        int sumi = 0;
        for (int j = 0; j < QK5_0; j++)
            sumi += (q5_get(x[i].qs, qh, j) - 16) * y[i].qs[j];
        sum += (float)sumi * f16(x[i].d) * f16(y[i].d);
    }
    return sum;
}

// --- Q5_1: x = q * d + m, d = (max - min) / 31

void tt_q5_1_to_float(const void *src, float *dst, int64_t n) {
    const tt_block_q5_1 *b = src;
    for (int64_t i = 0; i < n / QK5_1; i++, dst += QK5_1) {
        float d = f16(b[i].d), m = f16(b[i].m);
        uint32_t qh = load_qh(b[i].qh);
        for (int j = 0; j < QK5_1; j++)
            dst[j] = (float)q5_get(b[i].qs, qh, j) * d + m;
    }
}

void tt_q5_1_from_float(const float *x, void *dst, int64_t n) {
    tt_block_q5_1 *b = dst;
    for (int64_t i = 0; i < n / QK5_1; i++, x += QK5_1) {
        float mn, mx;
        min_max(x, QK5_1, &mn, &mx);
        float d = (mx - mn) / 31;
        float id = d ? 1.0f / d : 0.0f;
        b[i].d = tt_f32_to_f16(d);
        b[i].m = tt_f32_to_f16(mn);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            int q0 = trunc_clamp((x[j] - mn) * id + 0.5f, 0.0f, 31.0f);
            int q1 = trunc_clamp((x[j + QK5_1 / 2] - mn) * id + 0.5f, 0.0f, 31.0f);
            b[i].qs[j] = (uint8_t)((q0 & 0x0f) | (q1 & 0x0f) << 4);
            qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + QK5_1 / 2);
        }
        store_qh(b[i].qh, qh);
    }
}

float tt_q5_1_vec_dot(int n, const void *vx, const void *vy) {
    const tt_block_q5_1 *x = vx;
    const tt_block_q8_1 *y = vy;
    float sum = 0.0f;
    for (int i = 0; i < n / QK5_1; i++) {
        uint32_t qh = load_qh(x[i].qh);
        int sumi = 0;
        for (int j = 0; j < QK5_1; j++)
            sumi += q5_get(x[i].qs, qh, j) * y[i].qs[j];
        sum += (f16(x[i].d) * y[i].d) * (float)sumi + f16(x[i].m) * y[i].s;
    }
    return sum;
}

// --- Q8_0: x = q * d, d = absmax / 127 (stored as f16), q = roundf(x / d) (ties away from zero)

void tt_q8_0_to_float(const void *src, float *dst, int64_t n) {
    const tt_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / QK8_0; i++, dst += QK8_0) {
        float d = f16(b[i].d);
        for (int j = 0; j < QK8_0; j++)
            dst[j] = (float)b[i].qs[j] * d;
    }
}

static float absmax(const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    return amax;
}

static inline int8_t round_q8(float v) {
    return (int8_t)fminf(fmaxf(roundf(v), -127.0f), 127.0f);
}

void tt_q8_0_from_float(const float *x, void *dst, int64_t n) {
    tt_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        float d = absmax(x, QK8_0) / 127;
        float id = d ? 1.0f / d : 0.0f;
        b[i].d = tt_f32_to_f16(d);
        for (int j = 0; j < QK8_0; j++)
            b[i].qs[j] = round_q8(x[j] * id);
    }
}

float tt_q8_0_vec_dot(int n, const void *vx, const void *vy) {
    const tt_block_q8_0 *x = vx, *y = vy;
    float sum = 0.0f;
    for (int i = 0; i < n / QK8_0; i++) {
        int sumi = 0;
        for (int j = 0; j < QK8_0; j++)
            sumi += x[i].qs[j] * y[i].qs[j];
        sum += (float)sumi * f16(x[i].d) * f16(y[i].d);
    }
    return sum;
}

// --- Q8_1 (activations for Q4_1/Q5_1): as Q8_0 but d and s = d * sum(q) are kept as f32. ggml stores
// them as f16 (36-byte block); our block is 40 bytes, so Q8_1 tensors in GGUF files are not readable.

void tt_q8_1_to_float(const void *src, float *dst, int64_t n) {
    const tt_block_q8_1 *b = src;
    for (int64_t i = 0; i < n / QK8_1; i++, dst += QK8_1)
        for (int j = 0; j < QK8_1; j++)
            dst[j] = (float)b[i].qs[j] * b[i].d;
}

void tt_q8_1_from_float(const float *x, void *dst, int64_t n) {
    tt_block_q8_1 *b = dst;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        float d = absmax(x, QK8_1) / 127;
        float id = d ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) {
            b[i].qs[j] = round_q8(x[j] * id);
            sum += b[i].qs[j];
        }
        b[i].d = d;
        b[i].s = (float)sum * d;
    }
}
