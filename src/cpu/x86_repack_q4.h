// GEMV/GEMM over repacked Q4_0 / Q4_1 weights (cpu_q4_0_r16, cpu_q4_1_r16, see repack.c) x Q8_0 / Q8_1
// activations, and the driver of the MXFP4 tiles (x86_repack_mxfp4.h, the same layout). Template: included by
// quant_avx2.c and quant_avx512.c (X86_FN names the instantiation); builds on x86_repack_q8.h.
//
// A tile is one group of 16 weight rows x NR activation rows. Per block and 4-byte step c one load gives 4
// nibble bytes of each of the 16 rows: the low nibbles are elements 4c.., the high nibbles 16 + 4c... The
// activation's matching 4 bytes are broadcast to all lanes, so every int32 lane collects one row's block sum
// of q * a (q unsigned 0..15, no horizontal reduction). Per (row, block) the float work is
//   Q4_0: acc += float(sum(q * a) - 8 * sum(a)) * (d_w * d_a)       (x = (q - 8) * d)
//   Q4_1: acc += float(sum(q * a)) * (d_w * d_a);  acc += m_w * s_a   (x = q * d + m, s_a = d_a * sum(a))
// - AVX-512 (VNNI): vpdpbusd takes the unsigned nibbles and the signed activations as they are.
// - AVX2: vpmaddubsw per step (|pair| <= 2 * 15 * 128 = 3840), the 8 steps of a block summed in int16
//   (<= 30720 < 2^15: exact), then one vpmaddwd per 8-row half; a GEMM tile broadcasts each activation step
//   once for both halves.
// Both give the exact integer block dot, so the levels agree bit for bit, and every (weight row,
// activation row) pair sees the same operations whatever NR is (batch invariance).
#ifndef TACHYON_CPU_X86_REPACK_Q4_H
#define TACHYON_CPU_X86_REPACK_Q4_H

#include "cpu/x86_repack_mxfp4.h"
#include "cpu/x86_repack_q8.h"

#if X86_Q8R_WIDE
#define X86_Q4R_NR 8 // activation rows per tile: 8 accumulators + 8 unpacked weight registers of 32
#else
#define X86_Q4R_NR 4 // 2 x NR int16 block sums + 4 weight + 2 activation registers of 16
#endif
#define X86_Q4R_PF 8 // GEMV: prefetch this many repacked blocks (288/320 bytes) ahead
_Static_assert(X86_Q4R_NR == X86_MXR_NR, "the MXFP4 tiles share the Q4 driver's activation tiles");

enum { X86_R16_Q4_0, X86_R16_Q4_1, X86_R16_MXFP4 }; // the driver's KIND

XI size_t x86_q4r_bsize(const int KIND) {
    return KIND == X86_R16_Q4_1 ? sizeof(cpu_q4_1_r16) : KIND == X86_R16_MXFP4 ? sizeof(cpu_mxfp4_r16) : sizeof(cpu_q4_0_r16);
}

// The activation block b of row a: quants, scale, and (Q8_1) s.
XI const int8_t *x86_q4r_aq(const uint8_t *a, int b, const int Q41) {
    return Q41 ? ((const tt_block_q8_1 *)(const void *)a)[b].qs : ((const tt_block_q8_0 *)(const void *)a)[b].qs;
}
XI float x86_q4r_ad(const uint8_t *a, int b, const int Q41) {
    return Q41 ? ((const tt_block_q8_1 *)(const void *)a)[b].d : x86_h2f(((const tt_block_q8_0 *)(const void *)a)[b].d);
}

#if X86_Q8R_WIDE
XI void x86_q4r_tile(const cpu_gemm_job *j, int g, int r, const int NR, const int Q41,
                     int32_t (*corr)[CPU_REPACK_Q8_MAXB]) {
    const int nb = j->k / QK4_0;
    const size_t bs = x86_q4r_bsize(Q41);
    const uint8_t *blk = j->w + (size_t)g * nb * bs;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512 acc[X86_Q4R_NR];
    const uint8_t *a[X86_Q4R_NR];
    X86_UNROLL for (int rr = 0; rr < NR; rr++) {
        acc[rr] = _mm512_setzero_ps();
        a[rr] = x86_arow(j, r + rr);
    }
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = blk + (size_t)b * bs;
        if (NR == 1) x86_prefetch_block(p + X86_Q4R_PF * bs, bs);
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
        const __m512 m = Q41 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p + 32)))
                             : _mm512_setzero_ps();
        const uint8_t *qs = p + (Q41 ? 64 : 32);
        __m512i wl[4], wh[4];
        X86_UNROLL for (int c = 0; c < 4; c++) {
            const __m512i v = _mm512_loadu_si512((const void *)(qs + 64 * c));
            wl[c] = _mm512_and_si512(v, m4);
            wh[c] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        }
        X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            const int8_t *aq = x86_q4r_aq(a[rr], b, Q41);
            __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512(); // two chains: latency
            X86_UNROLL for (int c = 0; c < 4; c++) {
                s0 = _mm512_dpbusd_epi32(s0, wl[c], _mm512_set1_epi32(x86_q8r_a4(aq + 4 * c)));
                s1 = _mm512_dpbusd_epi32(s1, wh[c], _mm512_set1_epi32(x86_q8r_a4(aq + 16 + 4 * c)));
            }
            __m512i s = _mm512_add_epi32(s0, s1);
            if (!Q41) s = _mm512_sub_epi32(s, _mm512_set1_epi32(corr[rr][b]));
            acc[rr] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, _mm512_set1_ps(x86_q4r_ad(a[rr], b, Q41))),
                                      acc[rr]);
            if (Q41) acc[rr] = _mm512_fmadd_ps(m, _mm512_set1_ps(((const tt_block_q8_1 *)(const void *)a[rr])[b].s), acc[rr]);
        }
    }
    X86_UNROLL for (int rr = 0; rr < NR; rr++) x86_r16_store(j, g, r + rr, acc[rr]);
}
#else
// GEMV (one activation row r): both 8-row halves of the group's 16 rows in one pass over the blocks (one
// stream over the weights), all 8 steps of a block unpacked first.
XI void x86_q4r_gemv(const cpu_gemm_job *j, int g, int r, const int Q41, int32_t (*corr)[CPU_REPACK_Q8_MAXB]) {
    const int nb = j->k / QK4_0;
    const size_t bs = x86_q4r_bsize(Q41);
    const uint8_t *blk = j->w + (size_t)g * nb * bs, *a = x86_arow(j, r);
    const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = blk + (size_t)b * bs;
        x86_prefetch_block(p + X86_Q4R_PF * bs, bs);
        const uint8_t *qs = p + (Q41 ? 64 : 32);
        const int8_t *aq = x86_q4r_aq(a, b, Q41);
        const __m256 ad = _mm256_set1_ps(x86_q4r_ad(a, b, Q41));
        X86_UNROLL for (int h = 0; h < 2; h++) {
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + 16 * h)));
            __m256i wl[4], wh[4];
            X86_UNROLL for (int c = 0; c < 4; c++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 64 * c + 32 * h));
                wl[c] = _mm256_and_si256(v, m4);
                wh[c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            }
            __m256i p16 = _mm256_maddubs_epi16(wl[0], _mm256_set1_epi32(x86_q8r_a4(aq)));
            X86_UNROLL for (int c = 1; c < 4; c++) p16 = _mm256_add_epi16(
                p16, _mm256_maddubs_epi16(wl[c], _mm256_set1_epi32(x86_q8r_a4(aq + 4 * c))));
            X86_UNROLL for (int c = 0; c < 4; c++) p16 = _mm256_add_epi16(
                p16, _mm256_maddubs_epi16(wh[c], _mm256_set1_epi32(x86_q8r_a4(aq + 16 + 4 * c))));
            __m256i s = _mm256_madd_epi16(p16, ones);
            if (!Q41) s = _mm256_sub_epi32(s, _mm256_set1_epi32(corr[0][b]));
            acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(d, ad), acc[h]);
            if (Q41) {
                const __m256 m = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + 32 + 16 * h)));
                acc[h] = _mm256_fmadd_ps(m, _mm256_set1_ps(((const tt_block_q8_1 *)(const void *)a)[b].s), acc[h]);
            }
        }
    }
    x86_r8_store(j, 2 * g, r, acc[0]);
    x86_r8_store(j, 2 * g + 1, r, acc[1]);
}

// GEMM tile: one 4-byte step at a time over both 8-row halves: the step's 4 unpacked weight registers (low
// and high nibbles of each half) and each activation row's two broadcasts serve 4 vpmaddubsw, so a broadcast
// is shared by 16 weight rows as at AVX-512; the NR x 2 int16 block sums stay in registers (X86_KEEP: added
// in order, no spilled tree; any order gives the same exact sum); the float accumulators are touched once per
// block and half. One half at a time with all 8 steps unpacked first (the GEMV's order) spilled, and paid
// each broadcast twice: 167-180 GFLOP/s against 204-238 (bench_matmul q4_0 / q4_1, 1 thread, AVX2).
XI void x86_q4r_steps(const cpu_gemm_job *j, int g, int r, const int NR, const int Q41,
                      int32_t (*corr)[CPU_REPACK_Q8_MAXB]) {
    const int nb = j->k / QK4_0;
    const size_t bs = x86_q4r_bsize(Q41);
    const uint8_t *blk = j->w + (size_t)g * nb * bs;
    const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    __m256 acc[X86_Q4R_NR][2];
    const uint8_t *a[X86_Q4R_NR];
    X86_UNROLL for (int rr = 0; rr < NR; rr++) {
        acc[rr][0] = acc[rr][1] = _mm256_setzero_ps();
        a[rr] = x86_arow(j, r + rr);
    }
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = blk + (size_t)b * bs;
        const uint8_t *qs = p + (Q41 ? 64 : 32);
        __m256i s[X86_Q4R_NR][2];
        X86_UNROLL for (int c = 0; c < 4; c++) {
            const __m256i v0 = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 64 * c));
            const __m256i v1 = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 64 * c + 32));
            const __m256i wl0 = _mm256_and_si256(v0, m4), wh0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), m4);
            const __m256i wl1 = _mm256_and_si256(v1, m4), wh1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), m4);
            X86_UNROLL for (int rr = 0; rr < NR; rr++) {
                const int8_t *aq = x86_q4r_aq(a[rr], b, Q41);
                const __m256i al = _mm256_set1_epi32(x86_q8r_a4(aq + 4 * c));
                const __m256i ah = _mm256_set1_epi32(x86_q8r_a4(aq + 16 + 4 * c));
                const __m256i t0 = _mm256_add_epi16(_mm256_maddubs_epi16(wl0, al), _mm256_maddubs_epi16(wh0, ah));
                const __m256i t1 = _mm256_add_epi16(_mm256_maddubs_epi16(wl1, al), _mm256_maddubs_epi16(wh1, ah));
                s[rr][0] = c ? _mm256_add_epi16(s[rr][0], t0) : t0;
                s[rr][1] = c ? _mm256_add_epi16(s[rr][1], t1) : t1;
                X86_KEEP(s[rr][0]);
                X86_KEEP(s[rr][1]);
            }
        }
        X86_UNROLL for (int h = 0; h < 2; h++) {
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + 16 * h)));
            X86_UNROLL for (int rr = 0; rr < NR; rr++) {
                __m256i si = _mm256_madd_epi16(s[rr][h], ones);
                if (!Q41) si = _mm256_sub_epi32(si, _mm256_set1_epi32(corr[rr][b]));
                acc[rr][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(si),
                                             _mm256_mul_ps(d, _mm256_set1_ps(x86_q4r_ad(a[rr], b, Q41))), acc[rr][h]);
            }
            if (Q41) {
                const __m256 m = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + 32 + 16 * h)));
                X86_UNROLL for (int rr = 0; rr < NR; rr++) acc[rr][h] =
                    _mm256_fmadd_ps(m, _mm256_set1_ps(((const tt_block_q8_1 *)(const void *)a[rr])[b].s), acc[rr][h]);
            }
        }
    }
    X86_UNROLL for (int rr = 0; rr < NR; rr++) {
        x86_r8_store(j, 2 * g, r + rr, acc[rr][0]);
        x86_r8_store(j, 2 * g + 1, r + rr, acc[rr][1]);
    }
}

XI void x86_q4r_tile(const cpu_gemm_job *j, int g, int r, const int NR, const int Q41,
                     int32_t (*corr)[CPU_REPACK_Q8_MAXB]) {
    if (NR == 1) x86_q4r_gemv(j, g, r, Q41, corr);
    else x86_q4r_steps(j, g, r, NR, Q41, corr);
}
#endif

// One tile of the kind's kernel.
XI void x86_r16_tile(const cpu_gemm_job *j, int g, int r, const int NR, const int KIND,
                     int32_t (*corr)[CPU_REPACK_Q8_MAXB]) {
    if (KIND == X86_R16_MXFP4) x86_mxr_tile(j, g, r, NR, corr);
    else x86_q4r_tile(j, g, r, NR, KIND == X86_R16_Q4_1, corr);
}

// j->w is the repacked weight (groups of 16 rows); rows [i0, i1) of the original are computed. Panels of
// groups sized for L2, activation tiles of X86_Q4R_NR rows inside (as x86_q8r_gemm).
XI void x86_q4r_gemm(const cpu_gemm_job *j, const int KIND) {
    const int g0 = j->i0 / CPU_REPACK_Q8_ROWS, g1 = (j->i1 + CPU_REPACK_Q8_ROWS - 1) / CPU_REPACK_Q8_ROWS;
    if (j->k / QK4_0 > CPU_REPACK_Q8_MAXB) return; // cpu_repack_size never makes such a layout
    const size_t gbytes = (size_t)(j->k / QK4_0) * x86_q4r_bsize(KIND);
    int panel = (int)((256 * 1024) / gbytes);
    panel = panel < 1 ? 1 : panel;
    int32_t corr[X86_Q4R_NR][CPU_REPACK_Q8_MAXB];
    for (int p0 = g0; p0 < g1; p0 += panel) {
        const int p1 = p0 + panel < g1 ? p0 + panel : g1;
        for (int r = 0; r < j->n_rows;) {
            const int nr = j->n_rows - r < X86_Q4R_NR ? j->n_rows - r : X86_Q4R_NR;
            if (KIND != X86_R16_Q4_1) x86_r16_corr(j, r, nr, KIND == X86_R16_MXFP4 ? X86_MX_OFF : 8, corr);
            for (int g = p0; g < p1; g++) {
                switch (nr) {
                case 1: x86_r16_tile(j, g, r, 1, KIND, corr); break;
                case 2: x86_r16_tile(j, g, r, 2, KIND, corr); break;
                case 3: x86_r16_tile(j, g, r, 3, KIND, corr); break;
#if X86_Q4R_NR > 4
                case 4: x86_r16_tile(j, g, r, 4, KIND, corr); break;
                case 5: x86_r16_tile(j, g, r, 5, KIND, corr); break;
                case 6: x86_r16_tile(j, g, r, 6, KIND, corr); break;
                case 7: x86_r16_tile(j, g, r, 7, KIND, corr); break;
#endif
                default: x86_r16_tile(j, g, r, X86_Q4R_NR, KIND, corr); break;
                }
            }
            r += nr;
        }
    }
}

__attribute__((unused)) static void X86_FN(gemm_q4_0_r16)(const cpu_gemm_job *j) { x86_q4r_gemm(j, X86_R16_Q4_0); }
__attribute__((unused)) static void X86_FN(gemm_q4_1_r16)(const cpu_gemm_job *j) { x86_q4r_gemm(j, X86_R16_Q4_1); }
__attribute__((unused)) static void X86_FN(gemm_mxfp4_r16)(const cpu_gemm_job *j) { x86_q4r_gemm(j, X86_R16_MXFP4); }

#endif
