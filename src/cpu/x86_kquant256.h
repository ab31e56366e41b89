// 256-bit GEMM tiles for the K-quants x Q8_K (the AVX2 level; the AVX-512 level has x86_kquant512.h).
// Included by x86_gemm.h.
//
// Per super-block of 256 and weight row, the block is decoded once (nibbles to bytes; the 6-bit scales
// unpacked in registers and broadcast per sub-block with one vpshufb each) and dotted against all NR
// activation rows: vpmaddubsw (unsigned quant x signed int8 activation -> int16 pairs, no saturation:
// |pair| <= 2 * 63 * 128) then vpmaddwd with the sub-block scale into 8 int32 lanes. The float work per
// (weight row, activation row, super-block) is one conversion and one FMA into an 8-lane float
// accumulator (no horizontal sum per super-block: such a scalar tail would cost as much as the dot
// itself); the lanes are reduced once per output. Every (weight row, activation row) pair sees exactly
// the same operations whatever NW and NR are, so results are batch invariant.
#ifndef TACHYON_CPU_X86_KQUANT256_H
#define TACHYON_CPU_X86_KQUANT256_H

#include "cpu/x86_common.h"
#include "tensor/quant_ref.h"

// The 12 packed scale bytes of a Q4_K/Q5_K block -> 8 scales then 8 mins, 6 bits each, in registers.
// head: the block's first 16 bytes [d dmin | u0 | u1 | u2] as 32-bit lanes (both types start so).
// -> [u0 & m1, (u2 & m2) | ((u0 >> 6) & 3) << 4, u1 & m1, ((u2 >> 4) & m2) | ((u1 >> 6) & 3) << 4] per
// byte: the scalar unpacking of tensor/, four lanes at once.
XI __m128i x86_kq_scales(__m128i head) {
    __m128i lo = _mm_srlv_epi32(_mm_shuffle_epi32(head, _MM_SHUFFLE(3, 2, 3, 1)), _mm_setr_epi32(0, 0, 0, 4));
    lo = _mm_and_si128(lo, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    __m128i hi = _mm_srli_epi32(_mm_shuffle_epi32(head, _MM_SHUFFLE(2, 2, 1, 1)), 2);
    hi = _mm_and_si128(hi, _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    return _mm_or_si128(lo, hi);
}

// The same head -> [d x4 | -dmin x4] (the fp16 pair converted once, then spread).
XI __m256 x86_kq_dd(__m128i head) {
    const __m256 f = _mm256_castps128_ps256(_mm_cvtph_ps(head));
    const __m256 dd = _mm256_permutevar8x32_ps(f, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
    return _mm256_xor_ps(dd, _mm256_setr_ps(0.0f, 0.0f, 0.0f, 0.0f, -0.0f, -0.0f, -0.0f, -0.0f));
}

// int16 element e of each 128-bit half of v, broadcast to all 16 lanes (v holds the same 8 values twice).
XI __m256i x86_k256_bcast16(__m256i v, const int e) {
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)((2 * e) | (2 * e + 1) << 8)));
}

// Shift each 16-bit lane left by n (right by -n when n < 0); n is a constant after unrolling.
XI __m256i x86_k256_shl16(__m256i v, const int n) {
    return n >= 0 ? _mm256_slli_epi16(v, n) : _mm256_srli_epi16(v, -n);
}

// acc += [lo(s) + hi(s) | m] (8 int32 -> float) * [d x4 | -dmin x4] * ad. s: the 8 int32 lanes of the
// scaled quant sums, m: the 4 int32 lanes of mins . bsums.
XI __m256 x86_k256_fma(__m256 acc, __m256i s, __m128i m, __m256 wdd, __m256 ad) {
    const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    const __m256i z = _mm256_inserti128_si256(_mm256_castsi128_si256(s4), m, 1);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(z), _mm256_mul_ps(wdd, ad), acc);
}

// Q4_K and Q5_K: x = d * sc * q - dmin * m per sub-block of 32. Step jj covers sub-blocks 2jj (low nibbles
// of qs[32jj..32jj+31]) and 2jj+1 (high nibbles), whose activations are qs[64jj..64jj+63].
XI void x86_tile_q45k(const cpu_gemm_job *j, int i, int r, const int NW, const int NR, const int T) {
    const int nb = j->k / QK_K;
    const size_t wsz = T == TT_Q4_K ? sizeof(tt_block_q4_K) : sizeof(tt_block_q5_K);
    __m256 acc[X86_MAXW][X86_MAXR];
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++) acc[w][rr] =
        _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0f), b4 = _mm256_set1_epi8(0x10);
    for (int b = 0; b < nb; b++) {
        const uint8_t *qs[X86_MAXW], *qh[X86_MAXW];
        __m256i sc[X86_MAXW]; // 8 int16 scales, in both halves
        __m128i mn[X86_MAXW]; // 8 int16 mins
        __m256 wdd[X86_MAXW]; // [d x4 | -dmin x4]
        X86_UNROLL for (int w = 0; w < NW; w++) {
            const uint8_t *p = x86_wrow(j, i + w) + b * wsz;
            if (T == TT_Q4_K) qs[w] = ((const tt_block_q4_K *)(const void *)p)->qs, qh[w] = NULL;
            else {
                const tt_block_q5_K *x = (const void *)p;
                qs[w] = x->qs, qh[w] = x->qh;
            }
            const __m128i head = _mm_loadu_si128((const __m128i *)p);
            wdd[w] = x86_kq_dd(head);
            const __m128i s8 = x86_kq_scales(head);
            sc[w] = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(s8));
            mn[w] = _mm_cvtepu8_epi16(_mm_srli_si128(s8, 8));
        }
        __m256i sumi[X86_MAXW][X86_MAXR];
        X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++) sumi[w][rr] =
            _mm256_setzero_si256();
        if (NR == 1) { // GEMV: one weight row at a time keeps the working set in 16 registers
            const tt_block_q8_K *a = (const void *)(x86_arow(j, r) + b * sizeof(tt_block_q8_K));
            X86_UNROLL for (int w = 0; w < NW; w++)
                x86_prefetch_block_l2(x86_wrow(j, i + w) + b * wsz + X86_PF_TILES * NW * j->w_stride, wsz);
            X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int jj = 0; jj < 4; jj++) {
                const __m256i q = _mm256_loadu_si256((const __m256i *)(qs[w] + 32 * jj));
                __m256i qlo = _mm256_and_si256(q, m4), qhi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                if (T == TT_Q5_K) {
                    const __m256i h = _mm256_loadu_si256((const __m256i *)qh[w]);
                    qlo = _mm256_or_si256(qlo, _mm256_and_si256(x86_k256_shl16(h, 4 - 2 * jj), b4));
                    qhi = _mm256_or_si256(qhi, _mm256_and_si256(x86_k256_shl16(h, 3 - 2 * jj), b4));
                }
                const __m256i a0 = _mm256_loadu_si256((const __m256i *)(a->qs + 64 * jj));
                const __m256i a1 = _mm256_loadu_si256((const __m256i *)(a->qs + 64 * jj + 32));
                sumi[w][0] =
                    x86_dot_i16(sumi[w][0], _mm256_maddubs_epi16(qlo, a0), x86_k256_bcast16(sc[w], 2 * jj));
                sumi[w][0] =
                    x86_dot_i16(sumi[w][0], _mm256_maddubs_epi16(qhi, a1), x86_k256_bcast16(sc[w], 2 * jj + 1));
            }
        } else X86_UNROLL for (int jj = 0; jj < 4; jj++) {
            __m256i qlo[X86_MAXW], qhi[X86_MAXW];
            X86_UNROLL for (int w = 0; w < NW; w++) {
                const __m256i q = _mm256_loadu_si256((const __m256i *)(qs[w] + 32 * jj));
                qlo[w] = _mm256_and_si256(q, m4);
                qhi[w] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                if (T == TT_Q5_K) { // bit 2jj of qh -> bit 4 of the low quants, bit 2jj+1 -> of the high ones
                    const __m256i h = _mm256_loadu_si256((const __m256i *)qh[w]);
                    qlo[w] = _mm256_or_si256(qlo[w], _mm256_and_si256(x86_k256_shl16(h, 4 - 2 * jj), b4));
                    qhi[w] = _mm256_or_si256(qhi[w], _mm256_and_si256(x86_k256_shl16(h, 3 - 2 * jj), b4));
                }
            }
            X86_UNROLL for (int rr = 0; rr < NR; rr++) {
                const tt_block_q8_K *a = (const void *)(x86_arow(j, r + rr) + b * sizeof(tt_block_q8_K));
                const __m256i a0 = _mm256_loadu_si256((const __m256i *)(a->qs + 64 * jj));
                const __m256i a1 = _mm256_loadu_si256((const __m256i *)(a->qs + 64 * jj + 32));
                X86_UNROLL for (int w = 0; w < NW; w++) {
                    sumi[w][rr] = x86_dot_i16(sumi[w][rr], _mm256_maddubs_epi16(qlo[w], a0),
                                              x86_k256_bcast16(sc[w], 2 * jj));
                    sumi[w][rr] = x86_dot_i16(sumi[w][rr], _mm256_maddubs_epi16(qhi[w], a1),
                                              x86_k256_bcast16(sc[w], 2 * jj + 1));
                }
            }
        }
        X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            const tt_block_q8_K *a = (const void *)(x86_arow(j, r + rr) + b * sizeof(tt_block_q8_K));
            const __m256i bs = _mm256_loadu_si256((const __m256i *)a->bsums);
            const __m128i q8s = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
            const __m256 ad = _mm256_set1_ps(a->d);
            X86_UNROLL for (int w = 0; w < NW; w++) acc[w][rr] =
                x86_k256_fma(acc[w][rr], sumi[w][rr], _mm_madd_epi16(mn[w], q8s), wdd[w], ad);
        }
    }
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++)
        j->out[(size_t)(r + rr) * j->ld_out + i + w] = x86_hsum8(acc[w][rr]);
}

// Q6_K: x = d * sc * (q - 32), q 6 bits, int8 sc per 16. Group g of 32 (half n = g / 4, gg = g % 4) takes
// ql[64n + 32(gg & 1)..] (low nibbles for gg < 2, high for gg >= 2) and bits 2gg, 2gg+1 of qh[32n..]; its
// two scales are sc[2g], sc[2g + 1]. The -32 offset is applied once per super-block through the bsums:
// -32 * sum(sc * bsum) (|-32 sc| <= 4096 fits int16).
XI void x86_tile_q6k(const cpu_gemm_job *j, int i, int r, const int NW, const int NR) {
    const int nb = j->k / QK_K;
    __m256 acc[X86_MAXW][X86_MAXR];
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++) acc[w][rr] =
        _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    for (int b = 0; b < nb; b++) {
        const tt_block_q6_K *x[X86_MAXW];
        __m128i sc8[X86_MAXW]; // 16 int8 scales
        __m256i s16n[X86_MAXW]; // -32 * scales as int16
        __m256 wd[X86_MAXW];
        X86_UNROLL for (int w = 0; w < NW; w++) {
            x[w] = (const void *)(x86_wrow(j, i + w) + b * sizeof(tt_block_q6_K));
            if (NR == 1)
                x86_prefetch_block_l2((const uint8_t *)x[w] + X86_PF_TILES * NW * j->w_stride, sizeof(tt_block_q6_K));
            wd[w] = _mm256_set1_ps(x86_h2f(x[w]->d));
            sc8[w] = _mm_loadu_si128((const __m128i *)x[w]->scales);
            s16n[w] = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(_mm256_cvtepi8_epi16(sc8[w]), 5));
        }
        __m256i sumi[X86_MAXW][X86_MAXR];
        X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++) sumi[w][rr] =
            _mm256_setzero_si256();
        X86_UNROLL for (int g = 0; g < 8; g++) {
            const int n = g >> 2, gg = g & 3;
            __m256i q[X86_MAXW], sc[X86_MAXW];
            X86_UNROLL for (int w = 0; w < NW; w++) {
                const __m256i ql = _mm256_loadu_si256((const __m256i *)(x[w]->ql + 64 * n + 32 * (gg & 1)));
                const __m256i h = _mm256_loadu_si256((const __m256i *)(x[w]->qh + 32 * n));
                const __m256i lo = _mm256_and_si256(gg & 2 ? _mm256_srli_epi16(ql, 4) : ql, m4);
                const __m256i hi = _mm256_and_si256(x86_k256_shl16(h, 4 - 2 * gg), m30); // bits 2gg.. -> 4..5
                q[w] = _mm256_or_si256(lo, hi);
                const __m128i pick = _mm_setr_epi8(2 * g, 2 * g, 2 * g, 2 * g, 2 * g, 2 * g, 2 * g, 2 * g, 2 * g + 1,
                                                   2 * g + 1, 2 * g + 1, 2 * g + 1, 2 * g + 1, 2 * g + 1, 2 * g + 1,
                                                   2 * g + 1);
                sc[w] = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8[w], pick)); // [sc[2g] x8 | sc[2g+1] x8]
            }
            X86_UNROLL for (int rr = 0; rr < NR; rr++) {
                const tt_block_q8_K *a = (const void *)(x86_arow(j, r + rr) + b * sizeof(tt_block_q8_K));
                const __m256i av = _mm256_loadu_si256((const __m256i *)(a->qs + 32 * g));
                X86_UNROLL for (int w = 0; w < NW; w++) sumi[w][rr] =
                    x86_dot_i16(sumi[w][rr], _mm256_maddubs_epi16(q[w], av), sc[w]);
            }
        }
        X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            const tt_block_q8_K *a = (const void *)(x86_arow(j, r + rr) + b * sizeof(tt_block_q8_K));
            const __m256i bs = _mm256_loadu_si256((const __m256i *)a->bsums);
            const __m256 ad = _mm256_set1_ps(a->d);
            X86_UNROLL for (int w = 0; w < NW; w++) {
                const __m256i s = x86_dot_i16(sumi[w][rr], s16n[w], bs);
                acc[w][rr] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(wd[w], ad), acc[w][rr]);
            }
        }
    }
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++)
        j->out[(size_t)(r + rr) * j->ld_out + i + w] = x86_hsum8(acc[w][rr]);
}

#endif
