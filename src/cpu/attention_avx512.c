// AVX-512 instance of the x86 attention kernel (attention_x86.h).
#include <immintrin.h>
#include <stdint.h>

// 16 nibbles (low or high halves of bytes p[0..16)) → 16 floats 0..15.
static inline __m512 attn_q4x16(const uint8_t *p, int hi) {
    __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
    b = hi ? _mm512_srli_epi32(b, 4) : _mm512_and_si512(b, _mm512_set1_epi32(0xF));
    return _mm512_cvtepi32_ps(b);
}

#include "cpu/x86_vec512.h"
#define ATTN_X86_FN attn_tile_avx512
#define ATTN_X86_MULTI_FN attn_multi_avx512
#define ATTN_X86_SPAN_FN attn_span_avx512
#define LOAD_H(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define LOAD_Q8(p) _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p))))
#define LOAD_Q4(p, hi) attn_q4x16((const uint8_t *)(p), hi)
#define H2F(h) _cvtsh_ss(h)
#define REDUCE _mm512_reduce_add_ps
#include "cpu/attention_x86.h"
