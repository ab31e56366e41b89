// expf per lane, bit for bit the scalar expf of glibc (2.28 and later; the algorithm of ARM's optimized
// routines, which glibc, musl and bionic share): x·32/ln 2 = k + r in double, 2^(k/32) from a 32-entry table
// of 2^(i/32) with k's integer part added to the exponent bits, a cubic in r, one product, rounded to float.
// glibc's x86-64 build dispatches to __expf_fma on FMA hosts, whose compiled sequence fuses the reduction
// (k + shift = fma(x, 32/ln 2, shift); r = fma(x, 32/ln 2, -k)) and the polynomial; these functions use the
// same fused operations in the same order, lane by lane in double, so every lane equals expf(x) for finite x
// <= 88.72 and for -inf (tests/unit/test_expf.c checks every float in [-110, 0] and samples above).
// The softmax of an f16 KV cache uses it so that its weights stay those of the scalar expf that tests/ref's
// bounds were set against, at the cost of a vector exp instead of one libm call per weight.
#ifndef TACHYON_CPU_X86_EXPF_H
#define TACHYON_CPU_X86_EXPF_H

#include <immintrin.h>
#include <stdint.h>

// 2^(i/32) as double bits, less i << 47 (so that adding k << 47 for an integer k = 32·e + i gives 2^(k/32)).
static const uint64_t x86_expf_tab[32] __attribute__((aligned(64))) = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};

#define X86_EXPF_INVLN2N 0x1.71547652b82fep+5 // 32 / ln 2
#define X86_EXPF_SHIFT 0x1.8p+52              // adding it rounds to an integer in the low mantissa bits
#define X86_EXPF_C0 0x1.c6af84b912394p-20     // the cubic's coefficients, scaled by 32^-3, 32^-2, 32^-1
#define X86_EXPF_C1 0x1.ebfce50fac4f3p-13
#define X86_EXPF_C2 0x1.62e42ff0c52d6p-6
#define X86_EXPF_OFLOW 0x1.62e42ep6f   // above: +inf
#define X86_EXPF_UFLOW -0x1.9fe368p6f  // below: 0 (-inf included)
#define X86_EXPF_MAYUF -0x1.9d1d9ep6f  // [UFLOW, MAYUF): glibc's __math_may_uflowf, the least subnormal

#if defined(__AVX2__) && defined(__FMA__)
// 4 lanes in double: the table entry from the low 5 bits of k, then the polynomial (glibc's order).
static inline __m128 x86_expf_pd4(__m256d xd) {
    const __m256d kds = _mm256_fmadd_pd(_mm256_set1_pd(X86_EXPF_INVLN2N), xd, _mm256_set1_pd(X86_EXPF_SHIFT));
    const __m256i ki = _mm256_castpd_si256(kds);
    const __m256d kd = _mm256_sub_pd(kds, _mm256_set1_pd(X86_EXPF_SHIFT));
    const __m256d r = _mm256_fmsub_pd(_mm256_set1_pd(X86_EXPF_INVLN2N), xd, kd);
    __m256i t = _mm256_i64gather_epi64((const long long *)x86_expf_tab,
                                       _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
    t = _mm256_add_epi64(t, _mm256_slli_epi64(ki, 47));
    const __m256d z = _mm256_fmadd_pd(r, _mm256_set1_pd(X86_EXPF_C0), _mm256_set1_pd(X86_EXPF_C1));
    const __m256d r2 = _mm256_mul_pd(r, r);
    __m256d y = _mm256_fmadd_pd(r, _mm256_set1_pd(X86_EXPF_C2), _mm256_set1_pd(1.0));
    y = _mm256_fmadd_pd(z, r2, y);
    return _mm256_cvtpd_ps(_mm256_mul_pd(y, _mm256_castsi256_pd(t)));
}

// Out-of-range lanes (the table trick needs |k| < 150·32): clamped before, set after.
static inline __m256 x86_expf_avx2(__m256 x) {
    // NaN lanes stay NaN (maxps returns its second operand when either is NaN)
    const __m256 xc = _mm256_max_ps(_mm256_set1_ps(X86_EXPF_UFLOW), x);
    __m256 y = _mm256_set_m128(x86_expf_pd4(_mm256_cvtps_pd(_mm256_extractf128_ps(xc, 1))),
                               x86_expf_pd4(_mm256_cvtps_pd(_mm256_castps256_ps128(xc))));
    const __m256 mayuf = _mm256_cmp_ps(x, _mm256_set1_ps(X86_EXPF_MAYUF), _CMP_LT_OQ);
    const __m256 uflow = _mm256_cmp_ps(x, _mm256_set1_ps(X86_EXPF_UFLOW), _CMP_LT_OQ);
    const __m256 oflow = _mm256_cmp_ps(x, _mm256_set1_ps(X86_EXPF_OFLOW), _CMP_GT_OQ);
    y = _mm256_blendv_ps(y, _mm256_set1_ps(0x1p-149f), mayuf);
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(), uflow);
    return _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), oflow);
}
#endif

#if defined(__AVX512F__) && defined(__AVX512DQ__)
// 8 lanes in double; the 32-entry table as four registers read by two two-source permutes.
static inline __m256 x86_expf_pd8(__m512d xd) {
    const __m512d kds = _mm512_fmadd_pd(_mm512_set1_pd(X86_EXPF_INVLN2N), xd, _mm512_set1_pd(X86_EXPF_SHIFT));
    const __m512i ki = _mm512_castpd_si512(kds);
    const __m512d kd = _mm512_sub_pd(kds, _mm512_set1_pd(X86_EXPF_SHIFT));
    const __m512d r = _mm512_fmsub_pd(_mm512_set1_pd(X86_EXPF_INVLN2N), xd, kd);
    const __m512i *tb = (const __m512i *)x86_expf_tab;
    const __m512i lo = _mm512_permutex2var_epi64(_mm512_load_si512(tb), ki, _mm512_load_si512(tb + 1));
    const __m512i hi = _mm512_permutex2var_epi64(_mm512_load_si512(tb + 2), ki, _mm512_load_si512(tb + 3));
    const __mmask8 upper = _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16)); // entries 16..31
    __m512i t = _mm512_mask_blend_epi64(upper, lo, hi);
    t = _mm512_add_epi64(t, _mm512_slli_epi64(ki, 47));
    const __m512d z = _mm512_fmadd_pd(r, _mm512_set1_pd(X86_EXPF_C0), _mm512_set1_pd(X86_EXPF_C1));
    const __m512d r2 = _mm512_mul_pd(r, r);
    __m512d y = _mm512_fmadd_pd(r, _mm512_set1_pd(X86_EXPF_C2), _mm512_set1_pd(1.0));
    y = _mm512_fmadd_pd(z, r2, y);
    return _mm512_cvtpd_ps(_mm512_mul_pd(y, _mm512_castsi512_pd(t)));
}

static inline __m512 x86_expf_avx512(__m512 x) {
    const __m512 xc = _mm512_max_ps(_mm512_set1_ps(X86_EXPF_UFLOW), x);
    const __m256 lo = x86_expf_pd8(_mm512_cvtps_pd(_mm512_castps512_ps256(xc)));
    const __m256 hi = x86_expf_pd8(_mm512_cvtps_pd(_mm512_extractf32x8_ps(xc, 1)));
    __m512 y = _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
    const __mmask16 mayuf = _mm512_cmp_ps_mask(x, _mm512_set1_ps(X86_EXPF_MAYUF), _CMP_LT_OQ);
    const __mmask16 uflow = _mm512_cmp_ps_mask(x, _mm512_set1_ps(X86_EXPF_UFLOW), _CMP_LT_OQ);
    const __mmask16 oflow = _mm512_cmp_ps_mask(x, _mm512_set1_ps(X86_EXPF_OFLOW), _CMP_GT_OQ);
    y = _mm512_mask_mov_ps(y, mayuf, _mm512_set1_ps(0x1p-149f));
    y = _mm512_mask_mov_ps(y, uflow, _mm512_setzero_ps());
    return _mm512_mask_mov_ps(y, oflow, _mm512_set1_ps(__builtin_inff()));
}
#endif

#endif
