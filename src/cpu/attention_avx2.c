// AVX2 + F16C instance of the x86 attention kernel (attention_x86.h).
#include <immintrin.h>
#include <stdint.h>

static inline float attn_hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// The 8 sums of a[0..8) as one vector, each in attn_hsum8's order: (v0+v4 + v2+v6) + (v1+v5 + v3+v7).
static inline __m256 attn_hsum8x8_ordered(const __m256 *a) {
    __m256 b[4]; // b[i]: a[i] and a[i + 4], lane k of each half = v[k] + v[k + 4]
    for (int i = 0; i < 4; i++)
        b[i] = _mm256_add_ps(_mm256_permute2f128_ps(a[i], a[i + 4], 0x20), _mm256_permute2f128_ps(a[i], a[i + 4], 0x31));
    __m256 c[2]; // c[0]: a0, a1 | a4, a5 (c[1]: a2, a3 | a6, a7) as (s0 + s2, s1 + s3) pairs
    for (int i = 0; i < 2; i++) {
        const __m256d x = _mm256_castps_pd(b[2 * i]), y = _mm256_castps_pd(b[2 * i + 1]);
        c[i] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(x, y)), _mm256_castpd_ps(_mm256_unpackhi_pd(x, y)));
    }
    return _mm256_add_ps(_mm256_shuffle_ps(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm256_shuffle_ps(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// 8 nibbles (low or high halves of bytes p[0..8)) → 8 floats 0..15.
static inline __m256 attn_q4x8(const uint8_t *p, int hi) {
    __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    b = hi ? _mm256_srli_epi32(b, 4) : _mm256_and_si256(b, _mm256_set1_epi32(0xF));
    return _mm256_cvtepi32_ps(b);
}

#include "cpu/x86_expf.h"
#include "cpu/x86_vec256.h"
#define ATTN_X86_FN attn_tile_avx2
#define ATTN_X86_MULTI_FN attn_multi_avx2
#define ATTN_X86_EXPF_FN attn_expf_avx2
#define EXPF x86_expf_avx2
#define LOAD_H(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define LOAD_Q8(p) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p))))
#define LOAD_Q4(p, hi) attn_q4x8((const uint8_t *)(p), hi)
#define H2F(h) _cvtsh_ss(h)
#define REDUCE attn_hsum8
#define REDUCE8X8 attn_hsum8x8_ordered
#include "cpu/attention_x86.h"
