// Activation quantization (f32 row -> Q8_0 / Q8_1 / Q8_K) for the x86 levels. Bit-exact with the scalar
// reference (tensor/quant_ref*.c): same scale arithmetic, roundf (half away from zero) for Q8_0/Q8_1,
// round-half-even for Q8_K, fp16 stored with round-to-nearest-even. Template: included by quant_avx2.c and
// quant_avx512.c; X86_FN names the instantiation.
#ifndef TACHYON_CPU_X86_ACT_H
#define TACHYON_CPU_X86_ACT_H

#include "cpu/x86_common.h"

XI __m256 x86_abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

XI float x86_hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

// roundf semantics: nearest, ties away from zero. t = trunc(v); v - t is exact.
XI __m256i x86_roundf_epi32(__m256 v) {
    __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256 frac = x86_abs_ps(_mm256_sub_ps(v, t));
    __m256 up = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
    return _mm256_cvttps_epi32(_mm256_add_ps(t, _mm256_and_ps(up, one)));
}

// Four vectors of 8 int32 (elements 0..31 in order) -> 32 int8 in order.
XI __m256i x86_pack_i32x32(__m256i a, __m256i b, __m256i c, __m256i d) {
    __m256i ab = _mm256_packs_epi32(a, b); // a0-3 b0-3 | a4-7 b4-7
    __m256i cd = _mm256_packs_epi32(c, d);
    __m256i v = _mm256_packs_epi16(ab, cd); // a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7
    return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// One block of 32: q = roundf(x / d) with d = amax / 127. Returns the packed int8 and d.
XI __m256i x86_q8_block32(const float *x, float *d_out) {
    __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8), v2 = _mm256_loadu_ps(x + 16),
           v3 = _mm256_loadu_ps(x + 24);
    __m256 m = _mm256_max_ps(_mm256_max_ps(x86_abs_ps(v0), x86_abs_ps(v1)),
                             _mm256_max_ps(x86_abs_ps(v2), x86_abs_ps(v3)));
    float amax = x86_hmax8(m);
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    __m256 vid = _mm256_set1_ps(id);
    *d_out = d;
    return x86_pack_i32x32(x86_roundf_epi32(_mm256_mul_ps(v0, vid)), x86_roundf_epi32(_mm256_mul_ps(v1, vid)),
                           x86_roundf_epi32(_mm256_mul_ps(v2, vid)), x86_roundf_epi32(_mm256_mul_ps(v3, vid)));
}

static void X86_FN(quant_q8_0)(const float *x, void *vy, int64_t k) {
    tt_block_q8_0 *y = vy;
    for (int64_t b = 0; b < k / QK8_0; b++) {
        float d;
        __m256i q = x86_q8_block32(x + b * QK8_0, &d);
        y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_si256((__m256i *)y[b].qs, q);
    }
}

static void X86_FN(quant_q8_1)(const float *x, void *vy, int64_t k) {
    tt_block_q8_1 *y = vy;
    for (int64_t b = 0; b < k / QK8_1; b++) {
        float d;
        __m256i q = x86_q8_block32(x + b * QK8_1, &d);
        _mm256_storeu_si256((__m256i *)y[b].qs, q);
        __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);
        __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
        int sum = x86_hsum_i32x4(_mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1)));
        y[b].d = d;
        y[b].s = (float)sum * d;
    }
}

// Q8_K: scale by -127/max where max is the element of largest magnitude (first one on ties), round half
// to even, clamp to 127; d = 1/iscale; bsums = sums of 16.
static void X86_FN(quant_q8_k)(const float *x, void *vy, int64_t k) {
    tt_block_q8_K *y = vy;
    for (int64_t b = 0; b < k / QK_K; b++, x += QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < QK_K; j += 8) m = _mm256_max_ps(m, x86_abs_ps(_mm256_loadu_ps(x + j)));
        float amax = x86_hmax8(m);
        if (amax == 0.0f) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        float max = 0.0f;
        for (int j = 0; j < QK_K; j++) {
            if (x[j] == amax || x[j] == -amax) {
                max = x[j];
                break;
            }
        }
        float iscale = -127.0f / max;
        __m256 vs = _mm256_set1_ps(iscale);
        for (int j = 0; j < QK_K; j += 32) {
            __m256i q[4];
            for (int t = 0; t < 4; t++) {
                __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * t), vs);
                q[t] = _mm256_cvtps_epi32(v); // MXCSR default: round half to even
                q[t] = _mm256_min_epi32(q[t], _mm256_set1_epi32(127));
            }
            __m256i p = x86_pack_i32x32(q[0], q[1], q[2], q[3]);
            _mm256_storeu_si256((__m256i *)(y[b].qs + j), p);
            // two sums of 16: maddubs(1, q) gives pair sums, madd gives quads, then add within halves
            __m256i s32 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), p), _mm256_set1_epi16(1));
            __m128i lo = _mm256_castsi256_si128(s32), hi = _mm256_extracti128_si256(s32, 1);
            y[b].bsums[j / 16] = (int16_t)x86_hsum_i32x4(lo);
            y[b].bsums[j / 16 + 1] = (int16_t)x86_hsum_i32x4(hi);
        }
        y[b].d = 1.0f / iscale;
    }
}

#endif
