// Scalar reference for the low-bit weight types read from downloaded GGUFs: Q2_K, Q3_K (k-quants, x Q8_K),
// IQ4_NL (32-element blocks, x Q8_0) and IQ4_XS (256-element super-blocks, x Q8_K). Decode only: tachyon
// runs these files, it does not produce them (no from_float; ggml's quantizers for them need a search or an
// importance matrix to be worth using). Bit layouts follow ggml's dequantize_row_* exactly.
//
// Element e of a super-block (0..255):
//   Q2_K/Q3_K: half n = e / 128, quarter j = (e % 128) / 32, l = e % 32: low 2 bits are bits 2j..2j+1 of
//              qs[32 n + l]; scale index e / 16. Q3_K's third bit is bit 4n + j of hmask[l], and a clear
//              bit means "minus 4".
//   IQ4_XS:    sub-block s = e / 32, l = e % 32: nibble l / 16 of qs[16 s + l % 16].
//   IQ4_NL:    the same within one 32-element block.
#include "tensor/quant_ref.h"

const int8_t tt_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static inline float f16(tt_f16 h) {
    return tt_f16_to_f32(h);
}

// --- unpacking: one super-block to its integer values and per-16 (or per-32) scales

static void q2k_unpack(const tt_block_q2_K *b, uint8_t q[QK_K]) {
    for (int e = 0; e < QK_K; e++) q[e] = (b->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

// q - 4 * (high bit clear): -4..3
static void q3k_unpack(const tt_block_q3_K *b, int8_t q[QK_K]) {
    for (int e = 0; e < QK_K; e++) {
        int n = e / 128, j = (e % 128) / 32, l = e % 32;
        int lo = (b->qs[32 * n + l] >> (2 * j)) & 3;
        q[e] = (int8_t)(lo - ((b->hmask[l] >> (4 * n + j)) & 1 ? 0 : 4));
    }
}

void tt_q3k_scales(const uint8_t *s, int8_t sc[16]) {
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? (s[j] & 0x0f) : (s[j - 8] >> 4);
        int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        sc[j] = (int8_t)((lo | hi << 4) - 32);
    }
}

int tt_iq4xs_scale(const tt_block_iq4_xs *b, int s) {
    return (((b->scales_l[s / 2] >> (4 * (s % 2))) & 0x0f) | ((b->scales_h >> (2 * s)) & 3) << 4) - 32;
}

// 16 packed bytes -> 32 codebook values (low nibbles first).
static void iq4_unpack32(const uint8_t *qs, int8_t v[32]) {
    for (int l = 0; l < 16; l++) {
        v[l] = tt_iq4nl_values[qs[l] & 0x0f];
        v[l + 16] = tt_iq4nl_values[qs[l] >> 4];
    }
}

// --- Q2_K

void tt_q2_K_to_float(const void *src, float *dst, int64_t n) {
    const tt_block_q2_K *b = src;
    uint8_t q[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        const float d = f16(b[i].d), dmin = f16(b[i].dmin);
        q2k_unpack(&b[i], q);
        for (int e = 0; e < QK_K; e++) {
            const uint8_t sc = b[i].scales[e / 16];
            const float dl = d * (sc & 0x0f), ml = dmin * (sc >> 4);
            dst[e] = dl * q[e] - ml;
        }
    }
}

float tt_q2_K_vec_dot(int n, const void *vx, const void *vy) {
    const tt_block_q2_K *x = vx;
    const tt_block_q8_K *y = vy;
    uint8_t q[QK_K];
    float sum = 0.0f;
    for (int i = 0; i < n / QK_K; i++) {
        q2k_unpack(&x[i], q);
        int32_t sumi = 0, summ = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            int32_t isum = 0;
            for (int l = 0; l < 16; l++) isum += q[16 * j + l] * y[i].qs[16 * j + l];
            sumi += (x[i].scales[j] & 0x0f) * isum;
            summ += (x[i].scales[j] >> 4) * y[i].bsums[j];
        }
        sum += y[i].d * (f16(x[i].d) * (float)sumi - f16(x[i].dmin) * (float)summ);
    }
    return sum;
}

// --- Q3_K

void tt_q3_K_to_float(const void *src, float *dst, int64_t n) {
    const tt_block_q3_K *b = src;
    int8_t q[QK_K], sc[16];
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        const float d = f16(b[i].d);
        q3k_unpack(&b[i], q);
        tt_q3k_scales(b[i].scales, sc);
        for (int e = 0; e < QK_K; e++) dst[e] = d * sc[e / 16] * q[e];
    }
}

float tt_q3_K_vec_dot(int n, const void *vx, const void *vy) {
    const tt_block_q3_K *x = vx;
    const tt_block_q8_K *y = vy;
    int8_t q[QK_K], sc[16];
    float sum = 0.0f;
    for (int i = 0; i < n / QK_K; i++) {
        q3k_unpack(&x[i], q);
        tt_q3k_scales(x[i].scales, sc);
        int32_t sumi = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            int32_t isum = 0;
            for (int l = 0; l < 16; l++) isum += q[16 * j + l] * y[i].qs[16 * j + l];
            sumi += sc[j] * isum;
        }
        sum += f16(x[i].d) * y[i].d * (float)sumi;
    }
    return sum;
}

// --- IQ4_NL (x Q8_0)

void tt_iq4_nl_to_float(const void *src, float *dst, int64_t n) {
    const tt_block_iq4_nl *b = src;
    int8_t v[32];
    for (int64_t i = 0; i < n / QK4_NL; i++, dst += QK4_NL) {
        const float d = f16(b[i].d);
        iq4_unpack32(b[i].qs, v);
        for (int l = 0; l < 32; l++) dst[l] = d * v[l];
    }
}

float tt_iq4_nl_vec_dot(int n, const void *vx, const void *vy) {
    const tt_block_iq4_nl *x = vx;
    const tt_block_q8_0 *y = vy;
    int8_t v[32];
    float sum = 0.0f;
    for (int i = 0; i < n / QK4_NL; i++) {
        iq4_unpack32(x[i].qs, v);
        int32_t isum = 0;
        for (int l = 0; l < 32; l++) isum += v[l] * y[i].qs[l];
        sum += f16(x[i].d) * f16(y[i].d) * (float)isum;
    }
    return sum;
}

// --- IQ4_XS (x Q8_K)

void tt_iq4_xs_to_float(const void *src, float *dst, int64_t n) {
    const tt_block_iq4_xs *b = src;
    int8_t v[32];
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = f16(b[i].d);
        for (int s = 0; s < QK_K / 32; s++, dst += 32) {
            const float dl = d * (float)tt_iq4xs_scale(&b[i], s);
            iq4_unpack32(b[i].qs + 16 * s, v);
            for (int l = 0; l < 32; l++) dst[l] = dl * v[l];
        }
    }
}

float tt_iq4_xs_vec_dot(int n, const void *vx, const void *vy) {
    const tt_block_iq4_xs *x = vx;
    const tt_block_q8_K *y = vy;
    int8_t v[32];
    float sum = 0.0f;
    for (int i = 0; i < n / QK_K; i++) {
        int32_t sumi = 0;
        for (int s = 0; s < QK_K / 32; s++) {
            iq4_unpack32(x[i].qs + 16 * s, v);
            int32_t isum = 0;
            for (int l = 0; l < 32; l++) isum += v[l] * y[i].qs[32 * s + l];
            sumi += tt_iq4xs_scale(&x[i], s) * isum;
        }
        sum += f16(x[i].d) * y[i].d * (float)sumi;
    }
    return sum;
}
