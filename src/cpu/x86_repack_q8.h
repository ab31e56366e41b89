// GEMV/GEMM over repacked Q8_0 weights (cpu_q8_0_r16, see repack.c) x Q8_0 activations. Template: included
// by quant_avx2.c and quant_avx512.c (X86_FN names the instantiation); builds on x86_repack.h.
//
// A tile is one group of 16 weight rows x NR activation rows. Per block and 4-byte step c one load gives 4
// quants of each of the 16 rows, and the activation's 4 bytes are broadcast to all lanes, so every int32
// lane collects one row's block sum (no horizontal reduction); one vcvtph2ps gives the 16 rows' scales.
// Per (row, block) the float work is acc += float(isum) * (d_w * d_a), the same at both levels:
// - AVX-512 (VNNI): vpdpbusd wants an unsigned operand, so the weights are flipped to q + 128 and the
//   excess 128 * sum(activation block) is subtracted; those sums are computed once per activation row.
// - AVX2: vpmaddubsw(|w|, sign(a, w)) (|pair| <= 2 * 128 * 127 < 2^15: exact) + vpmaddwd, per 8-row half.
// Both give the exact integer block dot, so the levels agree bit for bit, and every (weight row,
// activation row) pair sees the same operations whatever NR is (batch invariance).
#ifndef TACHYON_CPU_X86_REPACK_Q8_H
#define TACHYON_CPU_X86_REPACK_Q8_H

#include "cpu/x86_repack.h"

#define X86_Q8R_PF 6 // GEMV: prefetch this many repacked blocks (544 bytes each) ahead

#if defined(__AVX512F__) && X86_VNNI
#define X86_Q8R_WIDE 1
#define X86_Q8R_NR 4 // activation rows per tile
#else
#define X86_Q8R_WIDE 0
#define X86_Q8R_NR 8 // activation rows per tile: NR sums + the step's weights and magnitudes in 16 registers
#endif

// off * sum of each Q8_0 activation block's quants of rows [r, r + nr) -> corr[rr][b]: the excess of weights read
// as unsigned (q + off) in the integer dots: Q8_0's 128 at AVX-512, Q4_0's 8, MXFP4's 12 (x86_repack_q4.h).
XI void x86_r16_corr(const cpu_gemm_job *j, int r, int nr, int off, int32_t (*corr)[CPU_REPACK_Q8_MAXB]) {
    const int nb = j->k / QK8_0;
    for (int rr = 0; rr < nr; rr++) {
        const tt_block_q8_0 *a = (const void *)x86_arow(j, r + rr);
        for (int b = 0; b < nb; b++) {
            // sum(q) = sum(q ^ 0x80 as unsigned) - 128 * 32, via vpsadbw against zero
            const __m256i u = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)a[b].qs),
                                               _mm256_set1_epi8((char)0x80));
            const __m256i s = _mm256_sad_epu8(u, _mm256_setzero_si256());
            const __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            const int sum = (int)(_mm_cvtsi128_si64(t) + _mm_extract_epi64(t, 1)) - 128 * 32;
            corr[rr][b] = off * sum;
        }
    }
}

XI int32_t x86_q8r_a4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}
XI __m256i x86_q8r_bcast4(const int8_t *p) { return _mm256_set1_epi32(x86_q8r_a4(p)); }

#if X86_Q8R_WIDE
// The lanes of rows [16g, 16g + 16) that lie in [i0, i1) (a fused range may start inside a group) -> row r.
XI void x86_r16_store(const cpu_gemm_job *j, int g, int r, __m512 v) {
    const int i = CPU_REPACK_Q8_ROWS * g;
    uint32_t m = 0xffff;
    if (i < j->i0) m &= 0xffffu << (j->i0 - i);
    if (i + 16 > j->i1) m &= 0xffffu >> (i + 16 - j->i1);
    _mm512_mask_storeu_ps(j->out + (size_t)r * j->ld_out + i, (__mmask16)m, v);
}
#endif

#if X86_Q8R_WIDE
XI void x86_q8r_tile(const cpu_gemm_job *j, int g, int r, const int NR, int32_t (*corr)[CPU_REPACK_Q8_MAXB]) {
    const int nb = j->k / QK8_0;
    const cpu_q8_0_r16 *blk = (const cpu_q8_0_r16 *)(const void *)j->w + (size_t)g * nb;
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512 acc[X86_Q8R_NR];
    const tt_block_q8_0 *a[X86_Q8R_NR];
    X86_UNROLL for (int rr = 0; rr < NR; rr++) {
        acc[rr] = _mm512_setzero_ps();
        a[rr] = (const void *)x86_arow(j, r + rr);
    }
    for (int b = 0; b < nb; b++) {
        const cpu_q8_0_r16 *p = blk + b;
        if (NR == 1) x86_prefetch_block((const uint8_t *)(p + X86_Q8R_PF), sizeof *p);
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p->d));
        __m512i wv[8];
        X86_UNROLL for (int c = 0; c < 8; c++) wv[c] =
            _mm512_xor_si512(_mm512_loadu_si512((const void *)p->qs[c]), flip);
        X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            const int8_t *aq = a[rr][b].qs;
            __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512(); // two chains: latency
            X86_UNROLL for (int c = 0; c < 8; c += 2) {
                s0 = _mm512_dpbusd_epi32(s0, wv[c], _mm512_set1_epi32(x86_q8r_a4(aq + 4 * c)));
                s1 = _mm512_dpbusd_epi32(s1, wv[c + 1], _mm512_set1_epi32(x86_q8r_a4(aq + 4 * c + 4)));
            }
            const __m512i s = _mm512_sub_epi32(_mm512_add_epi32(s0, s1), _mm512_set1_epi32(corr[rr][b]));
            const __m512 ad = _mm512_set1_ps(x86_h2f(a[rr][b].d));
            acc[rr] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, ad), acc[rr]);
        }
    }
    X86_UNROLL for (int rr = 0; rr < NR; rr++) x86_r16_store(j, g, r + rr, acc[rr]);
}
#else
// One 8-row half at a time, one 4-byte step at a time: the step's weights and their magnitudes (2 registers)
// serve all NR activation rows, whose block sums stay in registers (X86_KEEP: in order, no spilled tree);
// the accumulators are touched once per block and half.
XI void x86_q8r_tile(const cpu_gemm_job *j, int g, int r, const int NR, int32_t (*corr)[CPU_REPACK_Q8_MAXB]) {
    (void)corr;
    const int nb = j->k / QK8_0;
    const cpu_q8_0_r16 *blk = (const cpu_q8_0_r16 *)(const void *)j->w + (size_t)g * nb;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[X86_Q8R_NR][2];
    const tt_block_q8_0 *a[X86_Q8R_NR];
    X86_UNROLL for (int rr = 0; rr < NR; rr++) {
        acc[rr][0] = acc[rr][1] = _mm256_setzero_ps();
        a[rr] = (const void *)x86_arow(j, r + rr);
    }
    for (int b = 0; b < nb; b++) {
        const cpu_q8_0_r16 *p = blk + b;
        if (NR == 1) x86_prefetch_block((const uint8_t *)(p + X86_Q8R_PF), sizeof *p);
        X86_UNROLL for (int h = 0; h < 2; h++) {
            __m256i s[X86_Q8R_NR];
            X86_UNROLL for (int rr = 0; rr < NR; rr++) s[rr] = _mm256_setzero_si256();
            X86_UNROLL for (int c = 0; c < 8; c++) {
                const __m256i wv = _mm256_loadu_si256((const __m256i *)(const void *)p->qs[c][8 * h]);
                const __m256i wa = _mm256_sign_epi8(wv, wv); // |w| (-128 -> 128 read as unsigned)
                X86_UNROLL for (int rr = 0; rr < NR; rr++) {
                    const __m256i av = x86_q8r_bcast4(a[rr][b].qs + 4 * c);
                    const __m256i p16 = _mm256_maddubs_epi16(wa, _mm256_sign_epi8(av, wv));
                    s[rr] = _mm256_add_epi32(s[rr], _mm256_madd_epi16(p16, ones));
                    X86_KEEP(s[rr]);
                }
            }
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p->d + 8 * h)));
            X86_UNROLL for (int rr = 0; rr < NR; rr++) {
                const __m256 ad = _mm256_set1_ps(x86_h2f(a[rr][b].d));
                acc[rr][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[rr]), _mm256_mul_ps(d, ad), acc[rr][h]);
            }
        }
    }
    X86_UNROLL for (int rr = 0; rr < NR; rr++) {
        x86_r8_store(j, 2 * g, r + rr, acc[rr][0]);
        x86_r8_store(j, 2 * g + 1, r + rr, acc[rr][1]);
    }
}
#endif

// j->w is the repacked weight (groups of 16 rows); rows [i0, i1) of the original are computed. Panels of
// groups sized for L2, activation tiles of X86_Q8R_NR rows inside (as x86_r8_gemm).
XI void x86_q8r_gemm(const cpu_gemm_job *j) {
    const int g0 = j->i0 / CPU_REPACK_Q8_ROWS, g1 = (j->i1 + CPU_REPACK_Q8_ROWS - 1) / CPU_REPACK_Q8_ROWS;
    if (j->k / QK8_0 > CPU_REPACK_Q8_MAXB) return; // cpu_repack_size never makes such a layout
    const size_t gbytes = (size_t)(j->k / QK8_0) * sizeof(cpu_q8_0_r16);
    int panel = (int)((256 * 1024) / gbytes);
    panel = panel < 1 ? 1 : panel;
    int32_t corr[X86_Q8R_NR][CPU_REPACK_Q8_MAXB];
    for (int p0 = g0; p0 < g1; p0 += panel) {
        const int p1 = p0 + panel < g1 ? p0 + panel : g1;
        for (int r = 0; r < j->n_rows;) {
            const int nr = j->n_rows - r < X86_Q8R_NR ? j->n_rows - r : X86_Q8R_NR;
            if (X86_Q8R_WIDE) x86_r16_corr(j, r, nr, 128, corr);
            for (int g = p0; g < p1; g++) {
                switch (nr) {
                case 1: x86_q8r_tile(j, g, r, 1, corr); break;
                case 2: x86_q8r_tile(j, g, r, 2, corr); break;
                case 3: x86_q8r_tile(j, g, r, 3, corr); break;
#if X86_Q8R_NR > 4
                case 4: x86_q8r_tile(j, g, r, 4, corr); break;
                case 5: x86_q8r_tile(j, g, r, 5, corr); break;
                case 6: x86_q8r_tile(j, g, r, 6, corr); break;
                case 7: x86_q8r_tile(j, g, r, 7, corr); break;
#endif
                default: x86_q8r_tile(j, g, r, X86_Q8R_NR, corr); break;
                }
            }
            r += nr;
        }
    }
}

__attribute__((unused)) static void X86_FN(gemm_q8_0_r16)(const cpu_gemm_job *j) { x86_q8r_gemm(j); }

#endif
