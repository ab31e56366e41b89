// GEMM tiles for the x86 levels. A tile computes NW weight rows x NR activation rows: each weight block is
// loaded and unpacked once and dotted against all NR activation rows while it sits in registers. Every
// (weight row, activation row) pair has its own accumulator and sees exactly the same sequence of
// operations whatever NW and NR are, so a row's result does not depend on the batch it came in (greedy
// output must not change with batching). NW, NR and T are compile-time constants after inlining.
// Template: included by quant_avx2.c / quant_avx512.c after defining X86_FN, X86_GEMM_NW, X86_GEMM_NR.
#ifndef TACHYON_CPU_X86_GEMM_H
#define TACHYON_CPU_X86_GEMM_H

#include "cpu/x86_common.h"
#include "cpu/x86_kquant256.h" // K-quants (x Q8_K): x86_tile_q45k, x86_tile_q6k
#include "cpu/x86_lowbit.h"    // Q2_K, Q3_K, IQ4_XS, IQ4_NL
#include "cpu/x86_mxfp4.h"     // MXFP4

// --- 32-element blocks: Q4_0, Q4_1, Q5_0, Q5_1 (x Q8_0 / Q8_1) and Q8_0 (x Q8_0)
XI size_t x86_bsize32(int T) {
    return T == TT_Q4_0 ? 18 : T == TT_Q4_1 ? 20 : T == TT_Q5_0 ? 22 : T == TT_Q5_1 ? 24 : 34;
}

// Weight block -> 32 unsigned bytes (signed for Q8_0 on AVX2; +128 biased for Q8_0 with VNNI).
XI __m256i x86_unpack32(const uint8_t *p, const int T, float *d, float *m) {
    if (T == TT_Q4_0) {
        const tt_block_q4_0 *b = (const void *)p;
        *d = x86_h2f(b->d);
        return x86_nibbles(b->qs);
    } else if (T == TT_Q4_1) {
        const tt_block_q4_1 *b = (const void *)p;
        *d = x86_h2f(b->d), *m = x86_h2f(b->m);
        return x86_nibbles(b->qs);
    } else if (T == TT_Q5_0 || T == TT_Q5_1) {
        const uint8_t *qh = T == TT_Q5_0 ? ((const tt_block_q5_0 *)(const void *)p)->qh
                                         : ((const tt_block_q5_1 *)(const void *)p)->qh;
        const uint8_t *qs = T == TT_Q5_0 ? ((const tt_block_q5_0 *)(const void *)p)->qs
                                         : ((const tt_block_q5_1 *)(const void *)p)->qs;
        if (T == TT_Q5_0) *d = x86_h2f(((const tt_block_q5_0 *)(const void *)p)->d);
        else {
            *d = x86_h2f(((const tt_block_q5_1 *)(const void *)p)->d);
            *m = x86_h2f(((const tt_block_q5_1 *)(const void *)p)->m);
        }
        uint32_t h;
        memcpy(&h, qh, 4);
        __m256i hb = _mm256_and_si256(x86_bits_to_bytes(h), _mm256_set1_epi8(0x10));
        return _mm256_or_si256(x86_nibbles(qs), hb);
    } else {
        const tt_block_q8_0 *b = (const void *)p;
        *d = x86_h2f(b->d);
        __m256i q = _mm256_loadu_si256((const __m256i *)b->qs);
        return X86_VNNI ? _mm256_xor_si256(q, _mm256_set1_epi8((char)0x80)) : q;
    }
}

XI void x86_tile32(const cpu_gemm_job *j, int i, int r, const int NW, const int NR, const int T) {
    const int nb = j->k / 32;
    const size_t wsz = x86_bsize32(T);
    const int act1 = T == TT_Q4_1 || T == TT_Q5_1; // activations Q8_1 (carry s = d * sum(q))
    const size_t asz = act1 ? sizeof(tt_block_q8_1) : sizeof(tt_block_q8_0);
    __m256 acc[X86_MAXW][X86_MAXR];
    float summ[X86_MAXW][X86_MAXR];
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            acc[w][rr] = _mm256_setzero_ps();
            summ[w][rr] = 0.0f;
        }
    for (int b = 0; b < nb; b++) {
        __m256i wq[X86_MAXW];
        float wd[X86_MAXW], wm[X86_MAXW];
        X86_UNROLL for (int w = 0; w < NW; w++) {
            const uint8_t *p = x86_wrow(j, i + w) + b * wsz;
            if (NR == 1) _mm_prefetch((const char *)p + X86_PF_TILES * NW * j->w_stride, _MM_HINT_T0);
            wq[w] = x86_unpack32(p, T, &wd[w], &wm[w]);
        }
        X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            const uint8_t *ab = x86_arow(j, r + rr) + b * asz;
            float ad, as = 0.0f;
            __m256i aq;
            if (act1) {
                const tt_block_q8_1 *a = (const void *)ab;
                ad = a->d, as = a->s;
                aq = _mm256_loadu_si256((const __m256i *)a->qs);
            } else {
                const tt_block_q8_0 *a = (const void *)ab;
                ad = x86_h2f(a->d);
                aq = _mm256_loadu_si256((const __m256i *)a->qs);
            }
            // offset correction, shared by all weight rows: sum((q - off) * a) = sum(q * a) - off * sum(a)
            __m256i corr = _mm256_setzero_si256();
            if (T == TT_Q4_0) corr = x86_dot_u8s8(corr, _mm256_set1_epi8(8), aq);
            if (T == TT_Q5_0) corr = x86_dot_u8s8(corr, _mm256_set1_epi8(16), aq);
            if (T == TT_Q8_0 && X86_VNNI) corr = x86_dot_u8s8(corr, _mm256_set1_epi8((char)0x80), aq);
            X86_UNROLL for (int w = 0; w < NW; w++) {
                __m256i isum;
                if (T == TT_Q8_0 && !X86_VNNI)
                    isum = x86_dot_u8s8(_mm256_setzero_si256(), _mm256_sign_epi8(wq[w], wq[w]),
                                        _mm256_sign_epi8(aq, wq[w]));
                else isum = _mm256_sub_epi32(x86_dot_u8s8(_mm256_setzero_si256(), wq[w], aq), corr);
                acc[w][rr] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(wd[w] * ad), acc[w][rr]);
                if (act1) summ[w][rr] += wm[w] * as;
            }
        }
    }
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++)
        j->out[(size_t)(r + rr) * j->ld_out + i + w] = x86_hsum8(acc[w][rr]) + summ[w][rr];
}

// --- float weights (F32, F16, BF16) x f32 activations
XI __m256 x86_loadw8(const uint8_t *p, int e, const int T) {
    if (T == TT_F32) return _mm256_loadu_ps((const float *)(const void *)p + e);
    if (T == TT_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 2 * (size_t)e)));
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 2 * (size_t)e)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

XI float x86_loadw1(const uint8_t *p, int e, const int T) {
    uint16_t h;
    if (T == TT_F32) return ((const float *)(const void *)p)[e];
    memcpy(&h, p + 2 * (size_t)e, 2);
    if (T == TT_F16) return x86_h2f(h);
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

XI void x86_tile_f(const cpu_gemm_job *j, int i, int r, const int NW, const int NR, const int T) {
    const int k = j->k, k8 = k & ~7;
    __m256 acc[X86_MAXW][X86_MAXR];
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++) acc[w][rr] =
        _mm256_setzero_ps();
    for (int e = 0; e < k8; e += 8) {
        __m256 wv[X86_MAXW];
        X86_UNROLL for (int w = 0; w < NW; w++) wv[w] = x86_loadw8(x86_wrow(j, i + w), e, T);
        X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            __m256 av = _mm256_loadu_ps((const float *)(const void *)x86_arow(j, r + rr) + e);
            X86_UNROLL for (int w = 0; w < NW; w++) acc[w][rr] = _mm256_fmadd_ps(wv[w], av, acc[w][rr]);
        }
    }
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            float s = x86_hsum8(acc[w][rr]);
            const float *a = (const float *)(const void *)x86_arow(j, r + rr);
            for (int e = k8; e < k; e++) s += x86_loadw1(x86_wrow(j, i + w), e, T) * a[e];
            j->out[(size_t)(r + rr) * j->ld_out + i + w] = s;
        }
}


#if defined(__AVX512F__) && X86_VNNI
// --- AVX-512 variant for Q4_0, Q4_1, Q8_0: two blocks per 512-bit register, and the per-block scales of
// 8 blocks gathered and multiplied as one vector (the per-block scalar work dominates the 256-bit loop).
// Register lanes of a block pair (b0, b1): Q4: [lo(b0) lo(b1) hi(b0) hi(b1)] in 16-byte quarters (the
// activations are permuted to match); Q8_0: [b0 | b1].
XI __m512i x86_w2_unpack(const uint8_t *p0, const uint8_t *p1, const int T) {
    if (T == TT_Q8_0) {
        __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(p0 + 2))),
                                       _mm256_loadu_si256((const __m256i *)(p1 + 2)), 1);
        return _mm512_xor_si512(q, _mm512_set1_epi8((char)0x80));
    }
    const size_t off = T == TT_Q4_0 ? 2 : 4;
    __m256i t = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(p0 + off))),
                                        _mm_loadu_si128((const __m128i *)(p1 + off)), 1);
    __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(t), _mm256_srli_epi16(t, 4), 1);
    return _mm512_and_si512(v, _mm512_set1_epi8(0x0f));
}

XI __m512i x86_a2_load(const uint8_t *p0, const uint8_t *p1, const size_t qoff, const int T) {
    __m512i a = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(p0 + qoff))),
                                   _mm256_loadu_si256((const __m256i *)(p1 + qoff)), 1);
    if (T == TT_Q8_0) return a;
    return _mm512_shuffle_i64x2(a, a, _MM_SHUFFLE(3, 1, 2, 0)); // [a0L a1L a0H a1H]
}

// fp16 at p + i * stride for i < n (n <= 8), else 0 -> 8 floats. hi: the fp16 2 bytes further.
XI __m256i x86_gather32(const uint8_t *p, size_t stride, int n) {
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)stride));
    __mmask8 m = (__mmask8)((1u << n) - 1);
    return _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), m, idx, (const int *)(const void *)p, 1);
}
XI __m256 x86_f16lo(__m256i v) { return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(v)); }
XI __m256 x86_f16hi(__m256i v) { return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(v, 16))); }

XI void x86_tile32w(const cpu_gemm_job *j, int i, int r, const int NW, const int NR, const int T) {
    const int nb = j->k / 32;
    const size_t wsz = x86_bsize32(T);
    const int act1 = T == TT_Q4_1;
    const size_t asz = act1 ? sizeof(tt_block_q8_1) : sizeof(tt_block_q8_0), aqoff = act1 ? 8 : 2;
    __m512 acc[X86_MAXW][X86_MAXR];
    __m256 summ[X86_MAXW][X86_MAXR];
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            acc[w][rr] = _mm512_setzero_ps();
            summ[w][rr] = _mm256_setzero_ps();
        }
    for (int b0 = 0; b0 < nb; b0 += 8) {
        const int n = nb - b0 < 8 ? nb - b0 : 8;
        __m256 wd[X86_MAXW], wm[X86_MAXW], ad[X86_MAXR], as[X86_MAXR];
        X86_UNROLL for (int w = 0; w < NW; w++) {
            __m256i g = x86_gather32(x86_wrow(j, i + w) + b0 * wsz, wsz, n);
            wd[w] = x86_f16lo(g);
            if (act1) wm[w] = x86_f16hi(g);
        }
        X86_UNROLL for (int rr = 0; rr < NR; rr++) {
            const uint8_t *ab = x86_arow(j, r + rr) + b0 * asz;
            __m256i g = x86_gather32(ab, asz, n);
            if (act1) {
                ad[rr] = _mm256_castsi256_ps(g);
                as[rr] = _mm256_castsi256_ps(x86_gather32(ab + 4, asz, n));
            } else ad[rr] = x86_f16lo(g);
        }
        if (act1)
            X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++) summ[w][rr] =
                _mm256_fmadd_ps(wm[w], as[rr], summ[w][rr]);
        for (int p = 0; p < n; p += 2) {
            const int b = b0 + p, b1 = p + 1 < n ? b + 1 : b; // odd tail: pair with itself, scale lane 0
            const __m512i pidx = T == TT_Q8_0
                ? _mm512_setr_epi32(p, p, p, p, p, p, p, p, p + 1, p + 1, p + 1, p + 1, p + 1, p + 1, p + 1, p + 1)
                : _mm512_setr_epi32(p, p, p, p, p + 1, p + 1, p + 1, p + 1, p, p, p, p, p + 1, p + 1, p + 1, p + 1);
            __m512i wq[X86_MAXW];
            __m512 wds[X86_MAXW];
            X86_UNROLL for (int w = 0; w < NW; w++) {
                const uint8_t *row = x86_wrow(j, i + w);
                if (NR == 1) {
                    const size_t ahead = X86_PF_TILES * NW * j->w_stride;
                    _mm_prefetch((const char *)row + b * wsz + ahead, _MM_HINT_T0);
                    _mm_prefetch((const char *)row + b1 * wsz + ahead, _MM_HINT_T0);
                }
                wq[w] = x86_w2_unpack(row + b * wsz, row + b1 * wsz, T);
                wds[w] = _mm512_permutexvar_ps(pidx, _mm512_castps256_ps512(wd[w]));
            }
            X86_UNROLL for (int rr = 0; rr < NR; rr++) {
                const uint8_t *arow = x86_arow(j, r + rr);
                __m512i aq = x86_a2_load(arow + b * asz, arow + b1 * asz, aqoff, T);
                __m512 ads = _mm512_permutexvar_ps(pidx, _mm512_castps256_ps512(ad[rr]));
                __m512i corr = _mm512_setzero_si512();
                if (T == TT_Q4_0) corr = _mm512_dpbusd_epi32(corr, _mm512_set1_epi8(8), aq);
                if (T == TT_Q8_0) corr = _mm512_dpbusd_epi32(corr, _mm512_set1_epi8((char)0x80), aq);
                X86_UNROLL for (int w = 0; w < NW; w++) {
                    __m512i isum = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), wq[w], aq), corr);
                    acc[w][rr] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(wds[w], ads), acc[w][rr]);
                }
            }
        }
    }
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++)
        j->out[(size_t)(r + rr) * j->ld_out + i + w] = x86_hsum16(acc[w][rr]) + x86_hsum8(summ[w][rr]);
}
#define X86_WIDE32(T) ((T) == TT_Q4_0 || (T) == TT_Q4_1 || (T) == TT_Q8_0)
#include "cpu/x86_kquant512.h"
#define X86_K45 x86_tile_q45k_w
#define X86_K6 x86_tile_q6k_w
#define X86_KNR 8 // rows per K-quant tile (2 x 8 measured faster than 2 x 4 and 1 x 8, though it spills)
#else
#define X86_WIDE32(T) 0
#define x86_tile32w x86_tile32
#define X86_K45 x86_tile_q45k
#define X86_K6 x86_tile_q6k
#define X86_KNR X86_GEMM_NR
#endif

// --- driver: panels of weight rows sized for L2, activation tiles of X86_GEMM_NR rows inside
XI void x86_tile(const cpu_gemm_job *j, int i, int r, const int NW, const int NR, const int T) {
    if (T == TT_Q4_K || T == TT_Q5_K) X86_K45(j, i, r, NW, NR, T);
    else if (T == TT_Q6_K) X86_K6(j, i, r, NW, NR);
    else if (T == TT_Q2_K || T == TT_Q3_K) x86_tile_q23k(j, i, r, NW, NR, T);
    else if (T == TT_IQ4_XS) x86_tile_iq4xs(j, i, r, NW, NR);
    else if (T == TT_IQ4_NL) x86_tile_nl4(j, i, r, NW, NR);
    else if (T == TT_MXFP4) x86_tile_mxfp4(j, i, r, NW, NR);
    else if (T == TT_F32 || T == TT_F16 || T == TT_BF16) x86_tile_f(j, i, r, NW, NR, T);
    else if (X86_WIDE32(T)) x86_tile32w(j, i, r, NW, NR, T);
    else x86_tile32(j, i, r, NW, NR, T);
}

#define X86_TILE_NR(j, i, r, NW, nr, T, NRMAX)                                                                       \
    do {                                                                                                     \
        switch (nr) {                                                                                        \
        case 2: x86_tile(j, i, r, NW, (NRMAX >= 2 ? 2 : 1), T); break;                                 \
        case 3: x86_tile(j, i, r, NW, (NRMAX >= 3 ? 3 : 1), T); break;                                 \
        case 4: x86_tile(j, i, r, NW, (NRMAX >= 4 ? 4 : 1), T); break;                                 \
        case 5: x86_tile(j, i, r, NW, (NRMAX >= 5 ? 5 : 1), T); break;                                 \
        case 6: x86_tile(j, i, r, NW, (NRMAX >= 6 ? 6 : 1), T); break;                                 \
        case 7: x86_tile(j, i, r, NW, (NRMAX >= 7 ? 7 : 1), T); break;                                 \
        default: x86_tile(j, i, r, NW, (NRMAX >= 8 ? 8 : 1), T); break;                                \
        }                                                                                                    \
    } while (0)

XI void x86_gemm(const cpu_gemm_job *j, const int T) {
    const int NRMAX = X86_WIDE32(T) ? 4 // the wide tiles need more registers per pair
                      : (T == TT_Q4_K || T == TT_Q5_K || T == TT_Q6_K) ? X86_KNR : X86_GEMM_NR;
    int panel = (int)((256 * 1024) / (j->w_stride ? j->w_stride : 1));
    panel = panel < 16 ? 16 : panel & ~15;
    for (int p0 = j->i0; p0 < j->i1; p0 += panel) {
        const int p1 = p0 + panel < j->i1 ? p0 + panel : j->i1;
        for (int r = 0; r < j->n_rows;) {
            const int nr = j->n_rows - r < NRMAX ? j->n_rows - r : NRMAX;
            int i = p0;
            if (nr == 1) {
                for (; i + 4 <= p1; i += 4) x86_tile(j, i, r, 4, 1, T);
                for (; i < p1; i++) x86_tile(j, i, r, 1, 1, T);
            } else {
                for (; i + X86_GEMM_NW <= p1; i += X86_GEMM_NW) X86_TILE_NR(j, i, r, X86_GEMM_NW, nr, T, NRMAX);
                for (; i < p1; i++) X86_TILE_NR(j, i, r, 1, nr, T, NRMAX);
            }
            r += nr;
        }
    }
}

#define X86_DEFINE_GEMM(name, T)                                                                             \
    static void X86_FN(gemm_##name)(const cpu_gemm_job *j) { x86_gemm(j, T); }

X86_DEFINE_GEMM(q4_0, TT_Q4_0)
X86_DEFINE_GEMM(q4_1, TT_Q4_1)
X86_DEFINE_GEMM(q5_0, TT_Q5_0)
X86_DEFINE_GEMM(q5_1, TT_Q5_1)
X86_DEFINE_GEMM(q8_0, TT_Q8_0)
X86_DEFINE_GEMM(q4_k, TT_Q4_K)
X86_DEFINE_GEMM(q5_k, TT_Q5_K)
X86_DEFINE_GEMM(q6_k, TT_Q6_K)
X86_DEFINE_GEMM(q2_k, TT_Q2_K)
X86_DEFINE_GEMM(q3_k, TT_Q3_K)
X86_DEFINE_GEMM(iq4_nl, TT_IQ4_NL)
X86_DEFINE_GEMM(iq4_xs, TT_IQ4_XS)
X86_DEFINE_GEMM(mxfp4, TT_MXFP4)
X86_DEFINE_GEMM(f32, TT_F32)
X86_DEFINE_GEMM(f16, TT_F16)
X86_DEFINE_GEMM(bf16, TT_BF16)

#endif
