// GEMV/GEMM tiles over repacked MXFP4 weights (cpu_mxfp4_r16, see repack.c) x Q8_0 activations: gpt-oss's
// experts. Template: included by x86_repack_q4.h, whose driver walks the groups (x86_q4r_gemm).
//
// The Q4_0 tile with two changes: each nibble is looked up in the doubled E2M1 codebook plus 12 (vpshufb on
// x86_mx_ucodes: unsigned codes 0..24; the offset's 12 * sum(a) per activation block is subtracted as Q4_0's
// 8 * sum(a)), and the 16 rows' E8M0 bytes are widened to the floats 2^(e - 128) by integer arithmetic
// (x86_mxr_scale*: the bits (e - 1) << 23, subnormal 0x200000 << e for e < 2, as x86_mx_scale's table).
// - AVX-512 (VNNI): a block's 32 products per row summed by vpdpbusd in int32, 16 rows per register.
// - AVX2: vpmaddubsw's int16 pairs reach 2 * 24 * 128 = 6144, so a block (8 steps) does not fit int16 as
//   Q4_0's does: every step is widened at once (x86_mx_dot2), per 8-row half.
// Both give the exact integer block sum and then the same float work per (row, block),
// acc += float(sum - 12 * sum(a)) * (d_w * d_a): the levels agree bit for bit, and every (weight row,
// activation row) pair sees the same operations whatever NR is (batch invariance).
#ifndef TACHYON_CPU_X86_REPACK_MXFP4_H
#define TACHYON_CPU_X86_REPACK_MXFP4_H

#include "cpu/x86_mxfp4.h"
#include "cpu/x86_repack_q8.h"

#define X86_MXR_PF 8 // GEMV: prefetch this many repacked blocks (272 bytes) ahead
#if X86_Q8R_WIDE
#define X86_MXR_NR 8 // activation rows per tile: NR accumulators + 8 code registers of 32
#else
#define X86_MXR_NR 4 // NR sums + NR accumulators + codes, table and activations in the 16 registers
#endif

#if X86_Q8R_WIDE
// The 16 rows' scales of a block.
XI __m512 x86_mxr_scale16(const uint8_t *e) {
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)e));
    const __m512i n = _mm512_slli_epi32(_mm512_sub_epi32(v, _mm512_set1_epi32(1)), 23);
    const __mmask16 sub = _mm512_cmplt_epu32_mask(v, _mm512_set1_epi32(2));
    return _mm512_castsi512_ps(_mm512_mask_sllv_epi32(n, sub, _mm512_set1_epi32(0x00200000), v));
}

XI void x86_mxr_tile(const cpu_gemm_job *j, int g, int r, const int NR, int32_t (*corr)[CPU_REPACK_Q8_MAXB]) {
    const int nb = j->k / QK_MXFP4;
    const cpu_mxfp4_r16 *blk = (const cpu_mxfp4_r16 *)(const void *)j->w + (size_t)g * nb;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i tbl = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)x86_mx_ucodes));
    __m512 acc[X86_MXR_NR];
    const tt_block_q8_0 *a[X86_MXR_NR];
    X86_UNROLL for (int rr = 0; rr < NR; rr++) {
        acc[rr] = _mm512_setzero_ps();
        a[rr] = (const void *)x86_arow(j, r + rr);
    }
    for (int b = 0; b < nb; b++) {
        const cpu_mxfp4_r16 *p = blk + b;
        if (NR == 1) x86_prefetch_block((const uint8_t *)(p + X86_MXR_PF), sizeof *p);
        const __m512 d = x86_mxr_scale16(p->e);
        __m512i wl[4], wh[4];
        X86_UNROLL for (int c = 0; c < 4; c++) {
            const __m512i v = _mm512_loadu_si512((const void *)p->qs[c]);
            wl[c] = _mm512_shuffle_epi8(tbl, _mm512_and_si512(v, m4));
            wh[c] = _mm512_shuffle_epi8(tbl, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
        }
        X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            const int8_t *aq = a[rr][b].qs;
            __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512(); // two chains: latency
            X86_UNROLL for (int c = 0; c < 4; c++) {
                s0 = _mm512_dpbusd_epi32(s0, wl[c], _mm512_set1_epi32(x86_q8r_a4(aq + 4 * c)));
                s1 = _mm512_dpbusd_epi32(s1, wh[c], _mm512_set1_epi32(x86_q8r_a4(aq + 16 + 4 * c)));
            }
            const __m512i s = _mm512_sub_epi32(_mm512_add_epi32(s0, s1), _mm512_set1_epi32(corr[rr][b]));
            acc[rr] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, _mm512_set1_ps(x86_h2f(a[rr][b].d))),
                                      acc[rr]);
        }
    }
    X86_UNROLL for (int rr = 0; rr < NR; rr++) x86_r16_store(j, g, r + rr, acc[rr]);
}
#else
// The scales of rows 8h .. 8h + 7 of a block.
XI __m256 x86_mxr_scale8(const uint8_t *e) {
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)e));
    const __m256i n = _mm256_slli_epi32(_mm256_sub_epi32(v, _mm256_set1_epi32(1)), 23);
    const __m256i s = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), v); // 0 for e >= 32: not chosen
    return _mm256_castsi256_ps(_mm256_blendv_epi8(n, s, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), v)));
}

// The unsigned codes of step c's low and high nibbles, rows 8h .. 8h + 7.
XI void x86_mxr_codes(const cpu_mxfp4_r16 *p, int c, int h, __m256i tbl, __m256i *lo, __m256i *hi) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)p->qs[c][8 * h]);
    *lo = _mm256_shuffle_epi8(tbl, _mm256_and_si256(v, m4));
    *hi = _mm256_shuffle_epi8(tbl, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
}

// GEMV (one activation row): both 8-row halves per block, one stream over the weights.
XI void x86_mxr_gemv(const cpu_gemm_job *j, int g, int r, int32_t (*corr)[CPU_REPACK_Q8_MAXB]) {
    const int nb = j->k / QK_MXFP4;
    const cpu_mxfp4_r16 *blk = (const cpu_mxfp4_r16 *)(const void *)j->w + (size_t)g * nb;
    const tt_block_q8_0 *a = (const void *)x86_arow(j, r);
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)x86_mx_ucodes));
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int b = 0; b < nb; b++) {
        const cpu_mxfp4_r16 *p = blk + b;
        x86_prefetch_block((const uint8_t *)(p + X86_MXR_PF), sizeof *p);
        const __m256 ad = _mm256_set1_ps(x86_h2f(a[b].d));
        X86_UNROLL for (int h = 0; h < 2; h++) {
            __m256i s = _mm256_setzero_si256();
            X86_UNROLL for (int c = 0; c < 4; c++) {
                __m256i lo, hi;
                x86_mxr_codes(p, c, h, tbl, &lo, &hi);
                s = x86_mx_dot2(s, lo, x86_q8r_bcast4(a[b].qs + 4 * c), hi, x86_q8r_bcast4(a[b].qs + 16 + 4 * c));
            }
            s = _mm256_sub_epi32(s, _mm256_set1_epi32(corr[0][b]));
            acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(x86_mxr_scale8(p->e + 8 * h), ad), acc[h]);
        }
    }
    x86_r8_store(j, 2 * g, r, acc[0]);
    x86_r8_store(j, 2 * g + 1, r, acc[1]);
}

// GEMM tile: one 8-row half at a time over all blocks (NR sums, NR accumulators, the step's two code
// registers and the table in the 16 registers); each step's codes serve the NR activation rows.
XI void x86_mxr_steps(const cpu_gemm_job *j, int g, int r, const int NR, int32_t (*corr)[CPU_REPACK_Q8_MAXB]) {
    const int nb = j->k / QK_MXFP4;
    const cpu_mxfp4_r16 *blk = (const cpu_mxfp4_r16 *)(const void *)j->w + (size_t)g * nb;
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)x86_mx_ucodes));
    const tt_block_q8_0 *a[X86_MXR_NR];
    X86_UNROLL for (int rr = 0; rr < NR; rr++) a[rr] = (const void *)x86_arow(j, r + rr);
    for (int h = 0; h < 2; h++) {
        __m256 acc[X86_MXR_NR];
        X86_UNROLL for (int rr = 0; rr < NR; rr++) acc[rr] = _mm256_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const cpu_mxfp4_r16 *p = blk + b;
            __m256i s[X86_MXR_NR];
            X86_UNROLL for (int rr = 0; rr < NR; rr++) s[rr] = _mm256_setzero_si256();
            X86_UNROLL for (int c = 0; c < 4; c++) {
                __m256i lo, hi;
                x86_mxr_codes(p, c, h, tbl, &lo, &hi);
                X86_UNROLL for (int rr = 0; rr < NR; rr++) s[rr] =
                    x86_mx_dot2(s[rr], lo, x86_q8r_bcast4(a[rr][b].qs + 4 * c), hi,
                                x86_q8r_bcast4(a[rr][b].qs + 16 + 4 * c));
            }
            const __m256 d = x86_mxr_scale8(p->e + 8 * h);
            X86_UNROLL for (int rr = 0; rr < NR; rr++) {
                const __m256i si = _mm256_sub_epi32(s[rr], _mm256_set1_epi32(corr[rr][b]));
                acc[rr] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(si), _mm256_mul_ps(d, _mm256_set1_ps(x86_h2f(a[rr][b].d))),
                                          acc[rr]);
            }
        }
        X86_UNROLL for (int rr = 0; rr < NR; rr++) x86_r8_store(j, 2 * g + h, r + rr, acc[rr]);
    }
}

XI void x86_mxr_tile(const cpu_gemm_job *j, int g, int r, const int NR, int32_t (*corr)[CPU_REPACK_Q8_MAXB]) {
    if (NR == 1) x86_mxr_gemv(j, g, r, corr);
    else x86_mxr_steps(j, g, r, NR, corr);
}
#endif

#endif
