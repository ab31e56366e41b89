// Shared helpers for the x86 kernel templates (x86_act.h, x86_gemm.h and the tiles it includes, x86_repack*.h,
// attention_x86.h), compiled once per ISA level with that level's flags: with AVX512-VNNI+VL the int8 dot
// products become vpdpbusd / vpdpwssd on 256-bit registers, otherwise vpmaddubsw + vpmaddwd. Both give exactly
// the same integers. Results are bit-identical across the levels only where the float work is the same too
// (e.g. the x86_lowbit.h tiles): the AVX-512 tiles for Q4_0/Q4_1/Q8_0 (x86_tile32w) and the K-quants
// (x86_kquant512.h) accumulate floats in 16 lanes where AVX2 uses 8, so those round differently per level.
// Every level is tested against the scalar reference (tensor/), not against the other level.
#ifndef TACHYON_CPU_X86_COMMON_H
#define TACHYON_CPU_X86_COMMON_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "cpu/cpu_internal.h"
#include "tensor/ttype.h"

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define X86_VNNI 1
#else
#define X86_VNNI 0
#endif

#define XI static inline __attribute__((always_inline))

// Pins v in a register as computed at this point. GCC reassociates integer sums: a running int16 sum of 8
// vpmaddubsw products per activation row becomes a tree that keeps the products live, and with 16 registers
// the tile spills; after X86_KEEP each add waits for the previous one, as written.
#define X86_KEEP(v) __asm__("" : "+v"(v))

XI float x86_h2f(tt_f16 h) { return _cvtsh_ss(h); } // exact, same as tt_f16_to_f32

XI float x86_hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#if defined(__AVX512F__)
XI float x86_hsum16(__m512 v) {
    return x86_hsum8(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}
#endif

XI int x86_hsum_i32x4(__m128i v) {
    v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2)));
    v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(v);
}

// acc += per 4-byte group sum of u8 * s8 (8 int32 lanes). Requires |u*s pair sums| < 2^15 on the
// non-VNNI path (true for every use here: u <= 63 with |s| <= 128, or u <= 128 with |s| <= 127).
XI __m256i x86_dot_u8s8(__m256i acc, __m256i u, __m256i s) {
#if X86_VNNI
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

// acc += pairwise i16 products summed to i32.
XI __m256i x86_dot_i16(__m256i acc, __m256i a, __m256i b) {
#if X86_VNNI
    return _mm256_dpwssd_epi32(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

// 32 bits -> 32 bytes, byte i = 0xFF where bit i is set.
XI __m256i x86_bits_to_bytes(uint32_t bits) {
    const __m256i shuf = _mm256_setr_epi64x(0x0000000000000000LL, 0x0101010101010101LL, 0x0202020202020202LL,
                                            0x0303030303030303LL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf);
    const __m256i bit = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfeLL); // all bits but the one for this byte
    v = _mm256_or_si256(v, bit);
    return _mm256_cmpeq_epi8(v, _mm256_set1_epi64x(-1));
}

// 16 bytes of packed nibbles -> 32 bytes: low nibbles in bytes 0..15, high nibbles in bytes 16..31.
XI __m256i x86_nibbles(const uint8_t *p) {
    __m128i t = _mm_loadu_si128((const __m128i *)p);
    __m256i v = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

// Prefetch the cache lines of n bytes at p. The GEMV paths (one activation row) prefetch each weight block
// X86_PF_TILES tiles of rows ahead: a core streaming a few interleaved rows does not keep enough misses in
// flight on its own (measured: cold Q4_K GEMV at one thread 5 -> 9.5 GB/s on the dev VM).
#define X86_PF_TILES 2
XI void x86_prefetch_block(const uint8_t *p, const size_t n) {
    for (size_t o = 0; o < n; o += 64) _mm_prefetch((const char *)p + o, _MM_HINT_T0);
}
// The same into L2 only: the K-quant row tiles' cold GEMV (Q5_K, one thread) 8-9 -> 12.7-17 GB/s, the 8-row
// Q4_K / Q6_K repacks' 12-20 -> 21-23; the 16-row Q4/Q8 repacks stream better with T0 (bench_matmul cold).
XI void x86_prefetch_block_l2(const uint8_t *p, const size_t n) {
    for (size_t o = 0; o < n; o += 64) _mm_prefetch((const char *)p + o, _MM_HINT_T1);
}

// --- GEMM tile basics (x86_gemm.h, x86_kquant256.h, x86_kquant512.h, x86_lowbit.h): a tile's accumulator
// arrays are sized for at most X86_MAXW weight rows x X86_MAXR activation rows.
#define X86_MAXW 4
#define X86_MAXR 8
#define X86_UNROLL _Pragma("GCC unroll 8")

XI const uint8_t *x86_wrow(const cpu_gemm_job *j, int i) { return j->w + (size_t)i * j->w_stride; }
XI const uint8_t *x86_arow(const cpu_gemm_job *j, int r) { return j->a + (size_t)r * j->a_stride; }

#endif
