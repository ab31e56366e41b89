// 256-bit float vector macros (AVX2 + FMA + F16C) for the per-ISA templates (attention_x86.h, ops_x86.h,
// x86_vexp.h). Included by *_avx2.c files only (they get the ISA flags).
#ifndef TACHYON_CPU_X86_VEC_H
#define TACHYON_CPU_X86_VEC_H
#include <immintrin.h>

#define W 8
#define V __m256
#define LOADF _mm256_loadu_ps
#define STOREF _mm256_storeu_ps
#define FMA _mm256_fmadd_ps
#define MUL _mm256_mul_ps
#define ADD _mm256_add_ps
#define SUB _mm256_sub_ps
#define DIV _mm256_div_ps
#define SET1 _mm256_set1_ps
#define ZERO _mm256_setzero_ps
#define MAXV _mm256_max_ps
#define MINV _mm256_min_ps
#define ROUNDV(x) _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define POW2N(n) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23))
#endif

#include "cpu/x86_vexp.h" // x86_vexp over the macros above
