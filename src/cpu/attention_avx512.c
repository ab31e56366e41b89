// AVX-512 instance of the x86 attention kernel (attention_x86.h).
#include <immintrin.h>

#define ATTN_X86_FN attn_tile_avx512
#define W 16
#define V __m512
#define LOAD_H(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define LOADF _mm512_loadu_ps
#define STOREF _mm512_storeu_ps
#define FMA _mm512_fmadd_ps
#define MUL _mm512_mul_ps
#define SET1 _mm512_set1_ps
#define ZERO _mm512_setzero_ps
#define REDUCE _mm512_reduce_add_ps
#include "cpu/attention_x86.h"
