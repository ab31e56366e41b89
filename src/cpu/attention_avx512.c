// AVX-512 instance of the x86 attention kernel (attention_x86.h).
#include <immintrin.h>
#include <stdint.h>

// 16 nibbles (low or high halves of bytes p[0..16)) → 16 floats 0..15.
static inline __m512 attn_q4x16(const uint8_t *p, int hi) {
    __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
    b = hi ? _mm512_srli_epi32(b, 4) : _mm512_and_si512(b, _mm512_set1_epi32(0xF));
    return _mm512_cvtepi32_ps(b);
}

#define ATTN_X86_FN attn_tile_avx512
#define W 16
#define V __m512
#define LOAD_H(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define LOAD_Q8(p) _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p))))
#define LOAD_Q4(p, hi) attn_q4x16((const uint8_t *)(p), hi)
#define H2F(h) _cvtsh_ss(h)
#define LOADF _mm512_loadu_ps
#define STOREF _mm512_storeu_ps
#define FMA _mm512_fmadd_ps
#define MUL _mm512_mul_ps
#define SUB _mm512_sub_ps
#define SET1 _mm512_set1_ps
#define ZERO _mm512_setzero_ps
#define REDUCE _mm512_reduce_add_ps
#define MAXV _mm512_max_ps
#define ROUNDV(x) _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define POW2N(n) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23))
#include "cpu/attention_x86.h"
