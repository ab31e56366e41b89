// AVX2 + F16C instance of the x86 attention kernel (attention_x86.h).
#include <immintrin.h>
#include <stdint.h>

static inline float attn_hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// 8 nibbles (low or high halves of bytes p[0..8)) → 8 floats 0..15.
static inline __m256 attn_q4x8(const uint8_t *p, int hi) {
    __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    b = hi ? _mm256_srli_epi32(b, 4) : _mm256_and_si256(b, _mm256_set1_epi32(0xF));
    return _mm256_cvtepi32_ps(b);
}

#include "cpu/x86_vec256.h"
#define ATTN_X86_FN attn_tile_avx2
#define ATTN_X86_MULTI_FN attn_multi_avx2
#define ATTN_X86_SPAN_FN attn_span_avx2
#define LOAD_H(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define LOAD_Q8(p) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p))))
#define LOAD_Q4(p, hi) attn_q4x8((const uint8_t *)(p), hi)
#define H2F(h) _cvtsh_ss(h)
#define REDUCE attn_hsum8
#include "cpu/attention_x86.h"
