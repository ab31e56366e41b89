// AVX-512 (VNNI) tiles for the K-quants x Q8_K: 64 quants (two sub-blocks) per 512-bit register.
// Included by x86_gemm.h inside its AVX-512 section only; the AVX2 level keeps x86_tile_q45k / x86_tile_q6k.
//
// Per super-block of 256 and weight row, the block is decoded once (nibbles to bytes, 6-bit scales to
// per-lane int16 vectors) and then dotted against all NR activation rows: vpmaddubsw (unsigned quant x
// signed int8 activation -> int16 pairs, no saturation: |pair| <= 2 * 63 * 128) then vpdpwssd with the
// sub-block scales into 16 int32 lanes. The float work per (weight row, activation row, super-block) is
// one conversion and one vector FMA into a 16-lane float accumulator, reduced once at the end of the row
// (no horizontal sum per super-block). Every (weight row, activation row) pair sees exactly the same
// operations whatever NW and NR are, so results are batch invariant. The integer sums are those of the AVX2
// tile; the float summation order differs, so the levels are not bit-identical for these types.
#ifndef TACHYON_CPU_X86_KQUANT512_H
#define TACHYON_CPU_X86_KQUANT512_H

#include "cpu/x86_common.h"
#include "cpu/x86_kquant256.h"
#include "tensor/quant_ref.h"

// int16 lane index vector: lanes 16*h .. 16*h+15 pick element a + h (two sub-blocks of 32 per register).
XI __m512i x86_k512_idx2(int a) {
    const int lo = a | a << 16, hi = (a + 1) | (a + 1) << 16;
    return _mm512_setr_epi32(lo, lo, lo, lo, lo, lo, lo, lo, hi, hi, hi, hi, hi, hi, hi, hi);
}
// lanes 8*q .. 8*q+7 pick element a + q (four groups of 16 per register, Q6_K).
XI __m512i x86_k512_idx4(int a) {
    const int v0 = a | a << 16, v1 = (a + 1) | (a + 1) << 16, v2 = (a + 2) | (a + 2) << 16,
              v3 = (a + 3) | (a + 3) << 16;
    return _mm512_setr_epi32(v0, v0, v0, v0, v1, v1, v1, v1, v2, v2, v2, v2, v3, v3, v3, v3);
}

XI __m512 x86_k512_dd(tt_f16 d, tt_f16 dmin) {
    return _mm512_insertf32x8(_mm512_set1_ps(x86_h2f(d)), _mm256_set1_ps(-x86_h2f(dmin)), 1);
}

// Q4_K and Q5_K: x = d * sc * q - dmin * m per sub-block of 32. Register jj holds sub-blocks 2jj (low
// nibbles of qs[32jj..32jj+31]) and 2jj+1 (high nibbles): its activations are qs[64jj..64jj+63] as they lie.
XI void x86_tile_q45k_w(const cpu_gemm_job *j, int i, int r, const int NW, const int NR, const int T) {
    const int nb = j->k / QK_K;
    const size_t wsz = T == TT_Q4_K ? sizeof(tt_block_q4_K) : sizeof(tt_block_q5_K);
    __m512 acc[X86_MAXW][X86_MAXR];
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++) acc[w][rr] =
        _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0f), one = _mm512_set1_epi8(1);
    const __m512i nshift = _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4);
    for (int b = 0; b < nb; b++) {
        __m512i q[X86_MAXW][4], sc[X86_MAXW][4];
        __m256i mn[X86_MAXW];
        __m512 wdd[X86_MAXW]; // [d x8 | -dmin x8]
        X86_UNROLL for (int w = 0; w < NW; w++) {
            const uint8_t *p = x86_wrow(j, i + w) + b * wsz;
            if (NR == 1) x86_prefetch_block_l2(p + X86_PF_TILES * NW * j->w_stride, wsz);
            const uint8_t *qs, *qh = NULL;
            if (T == TT_Q4_K) {
                const tt_block_q4_K *x = (const void *)p;
                wdd[w] = x86_k512_dd(x->d, x->dmin);
                qs = x->qs;
            } else {
                const tt_block_q5_K *x = (const void *)p;
                wdd[w] = x86_k512_dd(x->d, x->dmin);
                qs = x->qs, qh = x->qh;
            }
            const __m128i s8 = x86_kq_scales(_mm_loadu_si128((const __m128i *)p)); // 8 scales, 8 mins
            const __m512i s16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(s8));
            mn[w] = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(s8, s8)); // m0 m0 m1 m1 .. (per 16 like bsums)
            __m512i h = _mm512_setzero_si512();
            if (T == TT_Q5_K) h = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qh));
            X86_UNROLL for (int jj = 0; jj < 4; jj++) {
                sc[w][jj] = _mm512_permutexvar_epi16(x86_k512_idx2(2 * jj), s16);
                __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * jj)));
                v = _mm512_and_si512(_mm512_srlv_epi64(v, nshift), m4);
                if (T == TT_Q5_K) {
                    const __m512i hs = _mm512_setr_epi64(2 * jj, 2 * jj, 2 * jj, 2 * jj, 2 * jj + 1, 2 * jj + 1,
                                                         2 * jj + 1, 2 * jj + 1);
                    __m512i hb = _mm512_and_si512(_mm512_srlv_epi64(h, hs), one);
                    v = _mm512_or_si512(v, _mm512_slli_epi16(hb, 4));
                }
                q[w][jj] = v;
            }
        }
        X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            const tt_block_q8_K *a = (const void *)(x86_arow(j, r + rr) + b * sizeof(tt_block_q8_K));
            const __m256i bs = _mm256_loadu_si256((const __m256i *)a->bsums);
            X86_UNROLL for (int w = 0; w < NW; w++) {
                __m512i s = _mm512_madd_epi16(_mm512_maddubs_epi16(q[w][0], _mm512_loadu_si512(a->qs)), sc[w][0]);
                X86_UNROLL for (int jj = 1; jj < 4; jj++) s = _mm512_dpwssd_epi32(
                    s, _mm512_maddubs_epi16(q[w][jj], _mm512_loadu_si512(a->qs + 64 * jj)), sc[w][jj]);
                // [sum of the two sub-block halves (8 lanes) | mins . bsums (8 lanes)] x [d x8 | -dmin x8] * a.d
                const __m256i t = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
                const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(t), _mm256_madd_epi16(mn[w], bs), 1);
                acc[w][rr] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(z), _mm512_mul_ps(wdd[w], _mm512_set1_ps(a->d)),
                                             acc[w][rr]);
            }
        }
    }
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++)
        j->out[(size_t)(r + rr) * j->ld_out + i + w] = x86_hsum16(acc[w][rr]);
}

// Q6_K: x = d * sc * (q - 32), q 6 bits, int8 sc per 16. Register p holds groups 2p, 2p+1 of 32 (four
// scales); the -32 offset is applied once per super-block through the bsums: -32 * sum(sc * bsum).
XI void x86_tile_q6k_w(const cpu_gemm_job *j, int i, int r, const int NW, const int NR) {
    const int nb = j->k / QK_K;
    __m512 acc[X86_MAXW][X86_MAXR];
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++) acc[w][rr] =
        _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0f), m3 = _mm512_set1_epi8(3);
    const __m512i hs0 = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2), hs1 = _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6);
    for (int b = 0; b < nb; b++) {
        __m512i q[X86_MAXW][4], sc[X86_MAXW][4];
        __m256i s16n[X86_MAXW]; // -32 * scales, for the offset through the bsums
        __m512 wd[X86_MAXW]; // d broadcast
        X86_UNROLL for (int w = 0; w < NW; w++) {
            const tt_block_q6_K *x = (const void *)(x86_wrow(j, i + w) + b * sizeof(tt_block_q6_K));
            if (NR == 1) x86_prefetch_block_l2((const uint8_t *)x + X86_PF_TILES * NW * j->w_stride, sizeof *x);
            wd[w] = _mm512_set1_ps(x86_h2f(x->d));
            const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
            s16n[w] = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(s16, 5)); // -32 sc: |.| <= 4096
            X86_UNROLL for (int p = 0; p < 4; p++) sc[w][p] =
                _mm512_permutexvar_epi16(x86_k512_idx4(4 * p), _mm512_castsi256_si512(s16));
            X86_UNROLL for (int n = 0; n < 2; n++) {
                const __m512i ql = _mm512_loadu_si512(x->ql + 64 * n);
                const __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x->qh + 32 * n)));
                __m512i h0 = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(h, hs0), m3), 4);
                __m512i h1 = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi64(h, hs1), m3), 4);
                q[w][2 * n] = _mm512_or_si512(_mm512_and_si512(ql, m4), h0);
                q[w][2 * n + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), h1);
            }
        }
        X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            const tt_block_q8_K *a = (const void *)(x86_arow(j, r + rr) + b * sizeof(tt_block_q8_K));
            const __m256i bs = _mm256_loadu_si256((const __m256i *)a->bsums);
            X86_UNROLL for (int w = 0; w < NW; w++) {
                __m512i s = _mm512_madd_epi16(_mm512_maddubs_epi16(q[w][0], _mm512_loadu_si512(a->qs)), sc[w][0]);
                X86_UNROLL for (int p = 1; p < 4; p++) s = _mm512_dpwssd_epi32(
                    s, _mm512_maddubs_epi16(q[w][p], _mm512_loadu_si512(a->qs + 64 * p)), sc[w][p]);
                s = _mm512_dpwssd_epi32(s, _mm512_zextsi256_si512(s16n[w]), _mm512_zextsi256_si512(bs));
                acc[w][rr] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(wd[w], _mm512_set1_ps(a->d)),
                                             acc[w][rr]);
            }
        }
    }
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++)
        j->out[(size_t)(r + rr) * j->ld_out + i + w] = x86_hsum16(acc[w][rr]);
}

#endif
