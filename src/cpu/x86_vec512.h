// 512-bit float vector macros (AVX-512 F) for the per-ISA templates (attention_x86.h, ops_x86.h, x86_vexp.h).
// Included by *_avx512.c files only (they get the ISA flags).
#ifndef TACHYON_CPU_X86_VEC_H
#define TACHYON_CPU_X86_VEC_H
#include <immintrin.h>

#define W 16
#define V __m512
#define LOADF _mm512_loadu_ps
#define STOREF _mm512_storeu_ps
#define FMA _mm512_fmadd_ps
#define MUL _mm512_mul_ps
#define ADD _mm512_add_ps
#define SUB _mm512_sub_ps
#define DIV _mm512_div_ps
#define SET1 _mm512_set1_ps
#define ZERO _mm512_setzero_ps
#define MAXV _mm512_max_ps
#define MINV _mm512_min_ps
#define ROUNDV(x) _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define POW2N(n) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23))
#endif

#include "cpu/x86_vexp.h" // x86_vexp over the macros above
