// 256-bit GEMM tiles for the low-bit types of downloaded GGUFs: Q2_K, Q3_K, IQ4_XS (x Q8_K) and IQ4_NL
// (x Q8_0); MXFP4 has its own tile (x86_mxfp4.h). Included by x86_gemm.h, so both x86 levels get them (AVX-512 builds this template with VNNI:
// vpdpwssd for the scale products; same integers, so AVX2 and AVX-512 are bit-identical for these types).
//
// Q2_K / Q3_K: the 2-bit (+1 high bit) values are decoded as unsigned u (0..3, 0..7) per group of 32 and
// dotted with vpmaddubsw; Q3_K's "-4" and Q2_K's mins go through the activation bsums once per super-block
// (as Q6_K's -32 does in x86_kquant256.h). IQ4: the 16-entry codebook is one vpshufb; the signed codebook
// values are dotted as |w| x sign(a, w) (|pair| <= 2 * 127 * 127 fits int16).
// Every (weight row, activation row) pair sees the same operations whatever NW and NR: batch invariant.
#ifndef TACHYON_CPU_X86_LOWBIT_H
#define TACHYON_CPU_X86_LOWBIT_H

#include "cpu/x86_common.h"
#include "cpu/x86_kquant256.h"
#include "tensor/quant_ref.h"

// [sc[2g] x8 | sc[2g+1] x8] as int16 from 16 int8 scales.
XI __m256i x86_lb_scale_pair(__m128i sc8, const int g) {
    const __m128i pick = _mm_setr_epi8(2 * g, 2 * g, 2 * g, 2 * g, 2 * g, 2 * g, 2 * g, 2 * g, 2 * g + 1, 2 * g + 1,
                                       2 * g + 1, 2 * g + 1, 2 * g + 1, 2 * g + 1, 2 * g + 1, 2 * g + 1);
    return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, pick));
}

// Q2_K (T == TT_Q2_K) and Q3_K: group g of 32 (half n = g / 4, quarter jq = g % 4) takes bits 2jq..2jq+1 of
// qs[32n..32n+31] (and for Q3_K bit 4n + jq of hmask[0..31] as +4); scales sc[2g], sc[2g + 1].
XI void x86_tile_q23k(const cpu_gemm_job *j, int i, int r, const int NW, const int NR, const int T) {
    const int nb = j->k / QK_K;
    const size_t wsz = T == TT_Q2_K ? sizeof(tt_block_q2_K) : sizeof(tt_block_q3_K);
    __m256 acc[X86_MAXW][X86_MAXR];
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++) acc[w][rr] =
        _mm256_setzero_ps();
    const __m256i m3 = _mm256_set1_epi8(3), b4 = _mm256_set1_epi8(4);
    for (int b = 0; b < nb; b++) {
        const uint8_t *qs[X86_MAXW], *hm[X86_MAXW];
        __m128i sc8[X86_MAXW];  // 16 int8 scales (Q2_K: sc & 15; Q3_K: sc - 32)
        __m256i corr[X86_MAXW]; // int16 factors for the bsums: Q2_K mins (sc >> 4), Q3_K -4 * sc
        __m256 wd[X86_MAXW], wm[X86_MAXW];
        X86_UNROLL for (int w = 0; w < NW; w++) {
            const uint8_t *p = x86_wrow(j, i + w) + b * wsz;
            if (NR == 1) x86_prefetch_block_l2(p + X86_PF_TILES * NW * j->w_stride, wsz);
            if (T == TT_Q2_K) {
                const tt_block_q2_K *x = (const void *)p;
                const __m128i s = _mm_loadu_si128((const __m128i *)x->scales);
                sc8[w] = _mm_and_si128(s, _mm_set1_epi8(0x0f));
                corr[w] = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(0x0f)));
                qs[w] = x->qs, hm[w] = NULL;
                wd[w] = _mm256_set1_ps(x86_h2f(x->d));
                wm[w] = _mm256_set1_ps(x86_h2f(x->dmin));
            } else {
                const tt_block_q3_K *x = (const void *)p;
                int8_t sc[16];
                tt_q3k_scales(x->scales, sc);
                sc8[w] = _mm_loadu_si128((const __m128i *)sc);
                corr[w] = _mm256_slli_epi16(_mm256_sub_epi16(_mm256_setzero_si256(), _mm256_cvtepi8_epi16(sc8[w])), 2);
                qs[w] = x->qs, hm[w] = x->hmask;
                wd[w] = _mm256_set1_ps(x86_h2f(x->d));
                wm[w] = _mm256_setzero_ps();
            }
        }
        __m256i sumi[X86_MAXW][X86_MAXR];
        X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++) sumi[w][rr] =
            _mm256_setzero_si256();
        X86_UNROLL for (int g = 0; g < 8; g++) {
            const int n = g >> 2, jq = g & 3;
            __m256i u[X86_MAXW], sc[X86_MAXW];
            X86_UNROLL for (int w = 0; w < NW; w++) {
                const __m256i q = _mm256_loadu_si256((const __m256i *)(qs[w] + 32 * n));
                u[w] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * jq), m3);
                if (T == TT_Q3_K) {
                    const __m256i h = _mm256_loadu_si256((const __m256i *)hm[w]);
                    u[w] = _mm256_or_si256(u[w], _mm256_and_si256(x86_k256_shl16(h, 2 - (4 * n + jq)), b4));
                }
                sc[w] = x86_lb_scale_pair(sc8[w], g);
            }
            X86_UNROLL for (int rr = 0; rr < NR; rr++) {
                const tt_block_q8_K *a = (const void *)(x86_arow(j, r + rr) + b * sizeof(tt_block_q8_K));
                const __m256i av = _mm256_loadu_si256((const __m256i *)(a->qs + 32 * g));
                X86_UNROLL for (int w = 0; w < NW; w++) sumi[w][rr] =
                    x86_dot_i16(sumi[w][rr], _mm256_maddubs_epi16(u[w], av), sc[w]);
            }
        }
        X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            const tt_block_q8_K *a = (const void *)(x86_arow(j, r + rr) + b * sizeof(tt_block_q8_K));
            const __m256i bs = _mm256_loadu_si256((const __m256i *)a->bsums);
            const __m256 ad = _mm256_set1_ps(a->d);
            X86_UNROLL for (int w = 0; w < NW; w++) {
                if (T == TT_Q2_K) {
                    const __m256i mins = x86_dot_i16(_mm256_setzero_si256(), corr[w], bs);
                    acc[w][rr] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[w][rr]), _mm256_mul_ps(wd[w], ad), acc[w][rr]);
                    acc[w][rr] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(wm[w], ad), acc[w][rr]);
                } else {
                    const __m256i s = x86_dot_i16(sumi[w][rr], corr[w], bs);
                    acc[w][rr] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(wd[w], ad), acc[w][rr]);
                }
            }
        }
    }
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++)
        j->out[(size_t)(r + rr) * j->ld_out + i + w] = x86_hsum8(acc[w][rr]);
}

// 16 packed bytes -> 32 signed codebook values (low nibbles first, as x86_nibbles).
XI __m256i x86_iq4_values(const uint8_t *p) {
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)tt_iq4nl_values));
    return _mm256_shuffle_epi8(tbl, x86_nibbles(p));
}

// 16 int16 pair sums of w * a for signed w (|w| <= 127) and signed a.
XI __m256i x86_ss_pairs(__m256i w, __m256i a) {
    return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
}

// IQ4_XS x Q8_K: sub-block s of 32 with int16 scale ls - 32.
XI void x86_tile_iq4xs(const cpu_gemm_job *j, int i, int r, const int NW, const int NR) {
    const int nb = j->k / QK_K;
    __m256 acc[X86_MAXW][X86_MAXR];
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++) acc[w][rr] =
        _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const tt_block_iq4_xs *x[X86_MAXW];
        __m256 wd[X86_MAXW];
        X86_UNROLL for (int w = 0; w < NW; w++) {
            x[w] = (const void *)(x86_wrow(j, i + w) + b * sizeof(tt_block_iq4_xs));
            if (NR == 1)
                x86_prefetch_block_l2((const uint8_t *)x[w] + X86_PF_TILES * NW * j->w_stride, sizeof(tt_block_iq4_xs));
            wd[w] = _mm256_set1_ps(x86_h2f(x[w]->d));
        }
        __m256i sumi[X86_MAXW][X86_MAXR];
        X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++) sumi[w][rr] =
            _mm256_setzero_si256();
        X86_UNROLL for (int s = 0; s < 8; s++) {
            __m256i v[X86_MAXW], sc[X86_MAXW];
            X86_UNROLL for (int w = 0; w < NW; w++) {
                v[w] = x86_iq4_values(x[w]->qs + 16 * s);
                sc[w] = _mm256_set1_epi16((short)tt_iq4xs_scale(x[w], s));
            }
            X86_UNROLL for (int rr = 0; rr < NR; rr++) {
                const tt_block_q8_K *a = (const void *)(x86_arow(j, r + rr) + b * sizeof(tt_block_q8_K));
                const __m256i av = _mm256_loadu_si256((const __m256i *)(a->qs + 32 * s));
                X86_UNROLL for (int w = 0; w < NW; w++) sumi[w][rr] =
                    x86_dot_i16(sumi[w][rr], x86_ss_pairs(v[w], av), sc[w]);
            }
        }
        X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            const tt_block_q8_K *a = (const void *)(x86_arow(j, r + rr) + b * sizeof(tt_block_q8_K));
            const __m256 ad = _mm256_set1_ps(a->d);
            X86_UNROLL for (int w = 0; w < NW; w++) acc[w][rr] =
                _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[w][rr]), _mm256_mul_ps(wd[w], ad), acc[w][rr]);
        }
    }
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++)
        j->out[(size_t)(r + rr) * j->ld_out + i + w] = x86_hsum8(acc[w][rr]);
}

// IQ4_NL x Q8_0: one 32-element block per step, its integer dot in 8 int32 lanes scaled by d_w * d_a.
XI void x86_tile_nl4(const cpu_gemm_job *j, int i, int r, const int NW, const int NR) {
    const int nb = j->k / 32;
    const size_t wsz = sizeof(tt_block_iq4_nl);
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)tt_iq4nl_values));
    __m256 acc[X86_MAXW][X86_MAXR];
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++) acc[w][rr] =
        _mm256_setzero_ps();
    const __m256i one = _mm256_set1_epi16(1);
    for (int b = 0; b < nb; b++) {
        __m256i v[X86_MAXW];
        float wd[X86_MAXW];
        X86_UNROLL for (int w = 0; w < NW; w++) {
            const uint8_t *x = x86_wrow(j, i + w) + b * wsz;
            if (NR == 1) _mm_prefetch((const char *)x + X86_PF_TILES * NW * j->w_stride, _MM_HINT_T0);
            wd[w] = x86_h2f(((const tt_block_iq4_nl *)(const void *)x)->d);
            v[w] = _mm256_shuffle_epi8(tbl, x86_nibbles(x + 2));
        }
        X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            const tt_block_q8_0 *a = (const void *)(x86_arow(j, r + rr) + b * sizeof(tt_block_q8_0));
            const __m256i av = _mm256_loadu_si256((const __m256i *)a->qs);
            const float ad = x86_h2f(a->d);
            X86_UNROLL for (int w = 0; w < NW; w++) {
                const __m256i s = _mm256_madd_epi16(x86_ss_pairs(v[w], av), one);
                acc[w][rr] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(wd[w] * ad), acc[w][rr]);
            }
        }
    }
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++)
        j->out[(size_t)(r + rr) * j->ld_out + i + w] = x86_hsum8(acc[w][rr]);
}

#endif
