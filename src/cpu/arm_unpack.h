// Weight blocks for the ARM GEMM tiles (arm_gemm.h): each quantized type seen as super-blocks of 32-element
// sub-blocks, unpacked to signed int8 values whose dot with the activation's int8 values is exact, plus the
// integer scales (per 16 or 32 elements) and the float scale / min of the super-block.
//   legacy (32 per block): Q4_0 q-8, Q4_1 q, Q5_0 q-16, Q5_1 q, Q8_0 q, IQ4_NL codebook value,
//                          MXFP4 doubled E2M1 value (float scale 2^(e - 128) from the E8M0 byte)
//   K-quants (256):        Q4_K / Q5_K q with 6-bit sc and min per 32; Q6_K q-32 with int8 sc per 16;
//                          Q2_K q with 4-bit sc and min per 16; Q3_K q-4*(hmask clear) with sc-32 per 16;
//                          IQ4_XS codebook value with ls-32 per 32
// The bit layouts are those of the scalar reference (tensor/quant_ref_k.c, quant_ref_lowbit.c).
#ifndef TACHYON_CPU_ARM_UNPACK_H
#define TACHYON_CPU_ARM_UNPACK_H

#include "cpu/arm_common.h"

AI int arm_qk(const int T) {
    return T == TT_Q4_K || T == TT_Q5_K || T == TT_Q6_K || T == TT_Q2_K || T == TT_Q3_K || T == TT_IQ4_XS ? QK_K : 32;
}

AI size_t arm_wsize(const int T) {
    switch (T) {
    case TT_Q4_0: return sizeof(tt_block_q4_0);
    case TT_Q4_1: return sizeof(tt_block_q4_1);
    case TT_Q5_0: return sizeof(tt_block_q5_0);
    case TT_Q5_1: return sizeof(tt_block_q5_1);
    case TT_Q8_0: return sizeof(tt_block_q8_0);
    case TT_IQ4_NL: return sizeof(tt_block_iq4_nl);
    case TT_MXFP4: return sizeof(tt_block_mxfp4);
    case TT_Q4_K: return sizeof(tt_block_q4_K);
    case TT_Q5_K: return sizeof(tt_block_q5_K);
    case TT_Q6_K: return sizeof(tt_block_q6_K);
    case TT_Q2_K: return sizeof(tt_block_q2_K);
    case TT_Q3_K: return sizeof(tt_block_q3_K);
    default: return sizeof(tt_block_iq4_xs);
    }
}

AI int arm_act1(const int T) { return T == TT_Q4_1 || T == TT_Q5_1; } // activations Q8_1 (s = d * sum q)
AI int arm_asym(const int T) { return T == TT_Q4_K || T == TT_Q5_K || T == TT_Q2_K; } // mins x bsums
// Integer scales: 0 none (legacy), 1 one per 32 elements, 2 one per 16.
AI int arm_gran(const int T) {
    return T == TT_Q4_K || T == TT_Q5_K || T == TT_IQ4_XS ? 1 : T == TT_Q6_K || T == TT_Q2_K || T == TT_Q3_K ? 2 : 0;
}
AI size_t arm_asize(const int T) {
    return arm_qk(T) == QK_K ? sizeof(tt_block_q8_K) : arm_act1(T) ? sizeof(tt_block_q8_1) : sizeof(tt_block_q8_0);
}
// The 32 int8 activations of sub-block s of an activation block.
AI const int8_t *arm_aq(const uint8_t *ab, int s, const int T) {
    const size_t off = arm_qk(T) == QK_K ? offsetof(tt_block_q8_K, qs) + 32 * (size_t)s
                       : arm_act1(T)     ? offsetof(tt_block_q8_1, qs)
                                         : offsetof(tt_block_q8_0, qs);
    return (const int8_t *)(ab + off);
}

AI float arm_h2f_at(const uint8_t *p) {
    tt_f16 h;
    memcpy(&h, p, 2);
    return arm_h2f(h);
}

// A super-block's scales: d (and m, the min's scale, or Q4_1/Q5_1's offset), sc / mn per 16 or 32.
typedef struct arm_wblk {
    float d, m;
    int32_t sc[16];
    int16_t mn[16];
} arm_wblk;

AI void arm_wdecode(const uint8_t *p, const int T, arm_wblk *wb) {
    if (T == TT_Q4_K || T == TT_Q5_K) {
        const uint8_t *s = p + 4;
        wb->d = arm_h2f_at(p), wb->m = arm_h2f_at(p + 2);
        for (int j = 0; j < 4; j++) {
            wb->sc[j] = s[j] & 63, wb->mn[j] = s[j + 4] & 63;
            wb->sc[j + 4] = (s[j + 8] & 0x0f) | (s[j] >> 6) << 4;
            wb->mn[j + 4] = (int16_t)((s[j + 8] >> 4) | (s[j + 4] >> 6) << 4);
        }
    } else if (T == TT_Q6_K) {
        const tt_block_q6_K *b = (const void *)p;
        wb->d = arm_h2f_at(p + offsetof(tt_block_q6_K, d));
        for (int j = 0; j < 16; j++) wb->sc[j] = b->scales[j];
    } else if (T == TT_Q2_K) {
        wb->d = arm_h2f_at(p + offsetof(tt_block_q2_K, d)), wb->m = arm_h2f_at(p + offsetof(tt_block_q2_K, dmin));
        for (int j = 0; j < 16; j++) wb->sc[j] = p[j] & 0x0f, wb->mn[j] = p[j] >> 4;
    } else if (T == TT_Q3_K) {
        const uint8_t *s = p + offsetof(tt_block_q3_K, scales);
        wb->d = arm_h2f_at(p + offsetof(tt_block_q3_K, d));
        for (int j = 0; j < 16; j++) {
            int lo = j < 8 ? (s[j] & 0x0f) : (s[j - 8] >> 4);
            wb->sc[j] = (lo | ((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
        }
    } else if (T == TT_IQ4_XS) {
        const tt_block_iq4_xs *b = (const void *)p;
        wb->d = arm_h2f_at(p);
        for (int s = 0; s < 8; s++)
            wb->sc[s] = (((b->scales_l[s / 2] >> (4 * (s % 2))) & 0x0f) | ((b->scales_h >> (2 * s)) & 3) << 4) - 32;
    } else if (T == TT_MXFP4) {
        wb->d = tt_e8m0_half(p[0]);
    } else {
        wb->d = arm_h2f_at(p);
        if (arm_act1(T)) wb->m = arm_h2f_at(p + 2);
    }
}

// 32 bits -> 2 x 16 bytes, 0x10 where bit l is set (Q5_0 / Q5_1 fifth bit).
AI void arm_bit4(const uint8_t *qh, uint8x16_t *lo, uint8x16_t *hi) {
    const uint8x16_t bit = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    *lo = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1])), bit), vdupq_n_u8(0x10));
    *hi = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[2]), vdup_n_u8(qh[3])), bit), vdupq_n_u8(0x10));
}

#define ARM_S8(v) vreinterpretq_s8_u8(v)

// Sub-block s (elements 32 s .. 32 s + 31) of the weight block at p -> lo (first 16), hi (last 16).
AI void arm_unpack(const uint8_t *p, int s, const int T, int8x16_t *lo, int8x16_t *hi) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    const int8x16_t book = vld1q_s8(tt_iq4nl_values);
    if (T == TT_MXFP4) {
        const int8x16_t fp4 = vld1q_s8(tt_mxfp4_values);
        uint8x16_t v = vld1q_u8(p + 1);
        *lo = vqtbl1q_s8(fp4, vandq_u8(v, m4)), *hi = vqtbl1q_s8(fp4, vshrq_n_u8(v, 4));
    } else if (T == TT_Q4_0 || T == TT_Q4_1 || T == TT_IQ4_NL || T == TT_IQ4_XS) {
        const size_t off = T == TT_Q4_1 ? 4 : T == TT_IQ4_XS ? offsetof(tt_block_iq4_xs, qs) + 16 * (size_t)s : 2;
        uint8x16_t v = vld1q_u8(p + off), l = vandq_u8(v, m4), h = vshrq_n_u8(v, 4);
        if (T == TT_IQ4_NL || T == TT_IQ4_XS) *lo = vqtbl1q_s8(book, l), *hi = vqtbl1q_s8(book, h);
        else if (T == TT_Q4_0) *lo = vsubq_s8(ARM_S8(l), vdupq_n_s8(8)), *hi = vsubq_s8(ARM_S8(h), vdupq_n_s8(8));
        else *lo = ARM_S8(l), *hi = ARM_S8(h);
    } else if (T == TT_Q5_0 || T == TT_Q5_1) {
        const size_t off = T == TT_Q5_0 ? 2 : 4;
        uint8x16_t v = vld1q_u8(p + off + 4), bl, bh;
        arm_bit4(p + off, &bl, &bh);
        uint8x16_t l = vorrq_u8(vandq_u8(v, m4), bl), h = vorrq_u8(vshrq_n_u8(v, 4), bh);
        if (T == TT_Q5_0) *lo = vsubq_s8(ARM_S8(l), vdupq_n_s8(16)), *hi = vsubq_s8(ARM_S8(h), vdupq_n_s8(16));
        else *lo = ARM_S8(l), *hi = ARM_S8(h);
    } else if (T == TT_Q8_0) {
        *lo = vld1q_s8((const int8_t *)(p + 2)), *hi = vld1q_s8((const int8_t *)(p + 18));
    } else if (T == TT_Q4_K || T == TT_Q5_K) {
        const uint8_t *qs = p + (T == TT_Q4_K ? offsetof(tt_block_q4_K, qs) : offsetof(tt_block_q5_K, qs)) + 32 * (s / 2);
        uint8x16_t a = vld1q_u8(qs), b = vld1q_u8(qs + 16);
        if (s & 1) a = vshrq_n_u8(a, 4), b = vshrq_n_u8(b, 4);
        else a = vandq_u8(a, m4), b = vandq_u8(b, m4);
        if (T == TT_Q5_K) {
            const uint8_t *qh = p + offsetof(tt_block_q5_K, qh);
            const int8x16_t sh = vdupq_n_s8((int8_t)(4 - s)); // bit s of qh -> bit 4
            a = vorrq_u8(a, vandq_u8(vshlq_u8(vld1q_u8(qh), sh), vdupq_n_u8(0x10)));
            b = vorrq_u8(b, vandq_u8(vshlq_u8(vld1q_u8(qh + 16), sh), vdupq_n_u8(0x10)));
        }
        *lo = ARM_S8(a), *hi = ARM_S8(b);
    } else if (T == TT_Q6_K) {
        const int h = s / 4, k = s % 4;
        const uint8_t *ql = p + 64 * h + 32 * (k & 1), *qh = p + offsetof(tt_block_q6_K, qh) + 32 * h;
        uint8x16_t a = vld1q_u8(ql), b = vld1q_u8(ql + 16);
        if (k >> 1) a = vshrq_n_u8(a, 4), b = vshrq_n_u8(b, 4);
        else a = vandq_u8(a, m4), b = vandq_u8(b, m4);
        const int8x16_t sh = vdupq_n_s8((int8_t)(4 - 2 * k)); // bits 2k, 2k+1 of qh -> bits 4, 5
        a = vorrq_u8(a, vandq_u8(vshlq_u8(vld1q_u8(qh), sh), vdupq_n_u8(0x30)));
        b = vorrq_u8(b, vandq_u8(vshlq_u8(vld1q_u8(qh + 16), sh), vdupq_n_u8(0x30)));
        *lo = vsubq_s8(ARM_S8(a), vdupq_n_s8(32)), *hi = vsubq_s8(ARM_S8(b), vdupq_n_s8(32));
    } else { // Q2_K, Q3_K: bits 2j..2j+1 of qs[32 n + l], sub-block s = 4 n + j
        const size_t qoff = T == TT_Q2_K ? offsetof(tt_block_q2_K, qs) : offsetof(tt_block_q3_K, qs);
        const uint8_t *qs = p + qoff + 32 * (s / 4);
        const int8x16_t sh = vdupq_n_s8((int8_t)(-2 * (s % 4)));
        uint8x16_t a = vandq_u8(vshlq_u8(vld1q_u8(qs), sh), vdupq_n_u8(3));
        uint8x16_t b = vandq_u8(vshlq_u8(vld1q_u8(qs + 16), sh), vdupq_n_u8(3));
        if (T == TT_Q3_K) { // minus 4 where bit s of hmask[l] is clear
            const uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << s)), four = vdupq_n_u8(4);
            a = vsubq_u8(vaddq_u8(a, vandq_u8(vtstq_u8(vld1q_u8(p), bit), four)), four);
            b = vsubq_u8(vaddq_u8(b, vandq_u8(vtstq_u8(vld1q_u8(p + 16), bit), four)), four);
        }
        *lo = ARM_S8(a), *hi = ARM_S8(b);
    }
}

#endif
