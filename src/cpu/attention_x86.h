// The x86 attention kernel body (see attention.h), compiled once per ISA: attention_avx2.c and
// attention_avx512.c define the vector macros below and include this file. One call takes n_q queries of a
// sequence at consecutive positions (the one-query kernel is n_q = 1). Per tile of ATTN_TILE positions (whole
// KV blocks, at multiples of the tile size): scores for all n_q·n_rep heads, one online-softmax step per tile
// and head (the weights' exp W lanes at a time, x86_vexp, and a vector sum), then V accumulation.
// - K: f16 rows are converted in registers and dotted with f32 q, up to 6 heads × 2 rows of FMA chains side by
//   side (each q chunk loaded once for 2 rows, each K chunk converted once for 6 heads); a q8_0/q4_0 row is
//   dotted with the query rounded to 8 bits (attn_q8, attention.h) by 256-bit integer dot products (vpdpbusd
//   with AVX512-VNNI, maddubs + madd on AVX2; x86_common.h), one scale per 32 values.
// - V: per 2 W-float chunks of the head dim, up to 6 heads' outputs (or fewer heads over 2-4 chunks) stay in
//   registers over the whole tile (across its blocks) while each row's chunks are converted once (q4_0/q8_0
//   straight from the quantized bytes; no row buffer) and each weight is broadcast once.
// - Memory: the score loops prefetch the next tile's K rows and this tile's V rows (attn_prefetch_rows).
// Every head's arithmetic is in the same order whatever the grouping, so a query's output does not depend on
// n_q or on the other queries.
//
// Required macros: ATTN_X86_FN, ATTN_X86_MULTI_FN, ATTN_X86_SPAN_FN (function names), W (floats per vector, 8
// or 16: divides the 32-value quant block), V (vector type), LOAD_H(p) (W f16 → V), LOAD_Q8(p) (W int8 → V),
// LOAD_Q4(p, hi) (W unsigned nibbles → V: the low nibbles of bytes p[0..W) or, hi, their high nibbles), H2F(h)
// (one f16 → float), REDUCE(v) (horizontal sum → float), and the vector macros of x86_vec256.h /
// x86_vec512.h (W, V, LOADF, FMA, ..., x86_vexp).
#include <math.h>
#include <string.h>

#include "cpu/attention.h"
#include "cpu/x86_common.h"
#include "tensor/ttype.h"

// Row bytes of a cache type (attention.h: anything but q8_0/q4_0 is f16).
static inline size_t attn_row_bytes(int type, int hd) {
    if (type == TT_Q8_0) return (size_t)hd / QK8_0 * sizeof(tt_block_q8_0);
    if (type == TT_Q4_0) return (size_t)hd / QK4_0 * sizeof(tt_block_q4_0);
    return (size_t)hd * sizeof(uint16_t);
}

// Software prefetch of the cache lines of [p, p + n) (p NULL: none). The score loops prefetch, a few rows at a
// time, the K rows of the next tile and the V rows of this one: a KV head's blocks are not adjacent (blocks
// interleave the KV heads) and lie on other pages, where the hardware prefetchers do not follow, so without it
// the first rows of every block wait on memory. Spread over the rows, so the prefetches do not fill the miss
// buffers all at once.
static inline void attn_prefetch(const char *p, size_t n) {
    if (!p) return;
    for (uintptr_t a = (uintptr_t)p & ~(uintptr_t)63, e = (uintptr_t)p + n; a < e; a += 64)
        _mm_prefetch((const char *)a, _MM_HINT_T0);
}

// What a block's score loop prefetches: its row i (from the block's first row) means K row i of the same block
// index in the next tile (k; NULL in the last tile) and V row i of this block (v).
typedef struct attn_pf {
    const char *k, *v;
    size_t k_row, v_row; // bytes per row
} attn_pf;

static inline void attn_prefetch_rows(const attn_pf *pf, int i, int n) {
    if (pf->k) attn_prefetch(pf->k + (size_t)i * pf->k_row, (size_t)n * pf->k_row);
    attn_prefetch(pf->v + (size_t)i * pf->v_row, (size_t)n * pf->v_row);
}

// One W-float chunk c of a row as floats (the block scale applied), converted in registers.
static inline V attn_load_chunk(const char *row, int type, int c) {
    if (type == TT_Q8_0) {
        const tt_block_q8_0 *bc = (const tt_block_q8_0 *)row + c * W / QK8_0;
        return MUL(SET1(H2F(bc->d)), LOAD_Q8(bc->qs + c * W % QK8_0));
    }
    if (type == TT_Q4_0) {
        const tt_block_q4_0 *bc = (const tt_block_q4_0 *)row + c * W / QK4_0;
        int o = c * W % QK4_0; // values 0..15 are the low nibbles of qs[0..16), 16..31 the high ones
        V qv = o < QK4_0 / 2 ? LOAD_Q4(bc->qs + o, 0) : LOAD_Q4(bc->qs + o - QK4_0 / 2, 1);
        const float d = H2F(bc->d);
        return FMA(SET1(d), qv, SET1(-8.0f * d));
    }
    return LOAD_H((const uint16_t *)row + c * W);
}

// The 8 horizontal sums of a[0..8) as one vector (hadd tree: 10 shuffles/adds for 8 sums instead of 5 each).
static inline __m256 attn_hsum8x8(const __m256 *a) {
    __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
    __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
    __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// s[r][j] = scale · q_r·k_j for the rows j in [j0, cnt) of a quantized K tile (q8_0 or q4_0), 8 rows at a
// time: each K row is unpacked once for all query heads, and the 8 per-row sums are reduced together.
static inline __attribute__((always_inline)) void attn_scores_q_n(float (*s)[ATTN_TILE], const attn_q8 *qq,
                                                                  const char *kb, int jb, size_t k_row, int kt,
                                                                  int j0, int cnt, int nr, const int nb,
                                                                  float scale, const attn_pf *pf) {
    __m256 part[ATTN_MAX_REP][8]; // per query head, per row of the group: 8 lanes still to be summed
    for (int g0 = j0; g0 < cnt; g0 += 8) {
        const int gn = cnt - g0 < 8 ? cnt - g0 : 8;
        for (int jj = 0; jj < gn; jj++) {
            const char *row = kb + (size_t)(g0 + jj - jb) * k_row;
            attn_prefetch_rows(pf, g0 + jj - jb, 1);
            __m256i ku[ATTN_MAX_HEAD_DIM / 32], ks[ATTN_MAX_HEAD_DIM / 32]; // unsigned operand; signed k (q8, AVX2)
            float dk[ATTN_MAX_HEAD_DIM / 32];
            int off; // k = ku - off, except q8_0 without VNNI (sign trick, no offset)
            if (kt == TT_Q4_0) {
                const tt_block_q4_0 *b = (const tt_block_q4_0 *)row;
                for (int i = 0; i < nb; i++) ku[i] = x86_nibbles(b[i].qs), dk[i] = H2F(b[i].d);
                off = 8;
            } else {
                const tt_block_q8_0 *b = (const tt_block_q8_0 *)row;
                for (int i = 0; i < nb; i++) {
                    __m256i k = _mm256_loadu_si256((const __m256i *)b[i].qs);
                    dk[i] = H2F(b[i].d);
#if X86_VNNI
                    ku[i] = _mm256_xor_si256(k, _mm256_set1_epi8((char)0x80)); // k + 128 as u8
#else
                    ku[i] = _mm256_sign_epi8(k, k), ks[i] = k; // |k| as u8; q takes k's sign per head below
#endif
                }
                off = X86_VNNI ? 128 : 0;
            }
            (void)ks;
            for (int r = 0; r < nr; r++) {
                __m256 acc = _mm256_setzero_ps();
                for (int i = 0; i < nb; i++) {
                    __m256i qv = _mm256_load_si256((const __m256i *)&qq->qs[r][i * 32]);
                    __m256i isum;
#if !X86_VNNI
                    if (off == 0) isum = x86_dot_u8s8(_mm256_setzero_si256(), ku[i], _mm256_sign_epi8(qv, ks[i]));
                    else
#endif
                        // lane 0 starts at -off·Σq, so the 8 lanes add up to Σ q·(ku - off) = Σ q·k
                        isum = x86_dot_u8s8(_mm256_zextsi128_si256(_mm_cvtsi32_si128(-off * qq->sum[r][i])), ku[i], qv);
                    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(dk[i] * qq->d[r][i]), acc);
                }
                part[r][jj] = acc;
            }
        }
        for (int r = 0; r < nr; r++) {
            for (int jj = gn; jj < 8; jj++) part[r][jj] = _mm256_setzero_ps();
            __m256 sums = _mm256_mul_ps(attn_hsum8x8(part[r]), _mm256_set1_ps(scale));
            if (gn == 8) _mm256_storeu_ps(&s[r][g0], sums);
            else {
                float t[8];
                _mm256_storeu_ps(t, sums);
                memcpy(&s[r][g0], t, sizeof(float) * (size_t)gn);
            }
        }
    }
}

// The same with nb a constant for head dim 64 (as attn_scores_f8).
static void attn_scores_q(float (*s)[ATTN_TILE], const attn_q8 *qq, const char *kb, int jb, size_t k_row, int kt,
                          int j0, int cnt, int nr, int nb, float scale, const attn_pf *pf) {
    if (nb == 2) attn_scores_q_n(s, qq, kb, jb, k_row, kt, j0, cnt, nr, 2, scale, pf);
    else attn_scores_q_n(s, qq, kb, jb, k_row, kt, j0, cnt, nr, nb, scale, pf);
}

// part[hs + i][jj + k] = the FMA chain of head hs + i against the f16 K row jj + k (row0: row jj), unreduced,
// for i < RN and k < RK: RN·RK chains side by side, each q chunk loaded once for RK rows and each K chunk
// converted once for RN heads (fewer loads per FMA than one row against one head at a time). A chain is the same
// lane-wise sum over the chunks in order whatever RN and RK are; attn_sum8_rows later sums 8 rows' chains of a
// head at once.
static inline __attribute__((always_inline)) void attn_parts_f(V (*part)[8], const float *const *qh, int hs,
                                                               const char *row0, size_t k_row, int jj, int nv,
                                                               const int RN, const int RK) {
    V acc[6][2];
    for (int i = 0; i < RN; i++)
        for (int k = 0; k < RK; k++) acc[i][k] = ZERO();
    for (int c = 0; c < nv; c++) {
        V kv[2];
        for (int k = 0; k < RK; k++) kv[k] = LOAD_H((const uint16_t *)(row0 + (size_t)k * k_row) + c * W);
        for (int i = 0; i < RN; i++) {
            const V qv = LOADF(qh[hs + i] + c * W);
            for (int k = 0; k < RK; k++) acc[i][k] = FMA(qv, kv[k], acc[i][k]);
        }
    }
    for (int i = 0; i < RN; i++)
        for (int k = 0; k < RK; k++) part[hs + i][jj + k] = acc[i][k];
}

// Every head r < nh against RK f16 K rows from row0 (rows jj..): 6 heads at a time (12 accumulators, 2 K chunks
// and a q chunk in registers: 16 with AVX2), then the rest.
static inline __attribute__((always_inline)) void attn_parts_rows(V (*part)[8], const float *const *qh,
                                                                  const char *row0, size_t k_row, int jj, int nh,
                                                                  int nv, const int RK) {
    int h = 0;
    for (; h + 6 <= nh; h += 6) attn_parts_f(part, qh, h, row0, k_row, jj, nv, 6, RK);
    switch (nh - h) {
    case 5: attn_parts_f(part, qh, h, row0, k_row, jj, nv, 5, RK); break;
    case 4: attn_parts_f(part, qh, h, row0, k_row, jj, nv, 4, RK); break;
    case 3: attn_parts_f(part, qh, h, row0, k_row, jj, nv, 3, RK); break;
    case 2: attn_parts_f(part, qh, h, row0, k_row, jj, nv, 2, RK); break;
    case 1: attn_parts_f(part, qh, h, row0, k_row, jj, nv, 1, RK); break;
    default: break;
    }
}

// The 8 sums of a[0..8) as one vector, each as (v0+v4 + v2+v6) + (v1+v5 + v3+v7) over its 8 lanes.
static inline __m256 attn_hsum8x8_ordered(const __m256 *a) {
    __m256 b[4]; // b[i]: a[i] and a[i + 4], lane k of each half = v[k] + v[k + 4]
    for (int i = 0; i < 4; i++)
        b[i] = _mm256_add_ps(_mm256_permute2f128_ps(a[i], a[i + 4], 0x20),
                             _mm256_permute2f128_ps(a[i], a[i + 4], 0x31));
    __m256 c[2]; // c[0]: a0, a1 | a4, a5 (c[1]: a2, a3 | a6, a7) as (s0 + s2, s1 + s3) pairs
    for (int i = 0; i < 2; i++) {
        const __m256d x = _mm256_castps_pd(b[2 * i]), y = _mm256_castps_pd(b[2 * i + 1]);
        c[i] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(x, y)),
                             _mm256_castpd_ps(_mm256_unpackhi_pd(x, y)));
    }
    return _mm256_add_ps(_mm256_shuffle_ps(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm256_shuffle_ps(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// The horizontal sums of 8 vectors a[0..8) as one 8-lane vector (a 16-lane vector's halves are added first).
static inline __m256 attn_sum8_rows(const V *a) {
#if W == 16
    __m256 h[8];
    for (int i = 0; i < 8; i++)
        h[i] = _mm256_add_ps(_mm512_castps512_ps256(a[i]),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a[i]), 1)));
    return attn_hsum8x8_ordered(h);
#else
    return attn_hsum8x8_ordered(a);
#endif
}

// s[r][j] = scale · q_r·k_j for every head r < nh and the f16 K rows j in [lo, hi), 8 rows at a time: the
// chains of 8 rows are reduced together (attn_sum8_rows: ~21 shuffles and adds for 8 sums instead of 6 each).
static inline __attribute__((always_inline)) void attn_scores_f8_n(float (*s)[ATTN_TILE], const float *const *qh,
                                                                   const char *kb, int jb, size_t k_row, int lo,
                                                                   int hi, int nh, const int nv, float scale,
                                                                   const attn_pf *pf) {
    V part[ATTN_MAX_REP][8];
    for (int g0 = lo; g0 < hi; g0 += 8) {
        const int gn = hi - g0 < 8 ? hi - g0 : 8;
        int jj = 0;
        for (; jj + 2 <= gn; jj += 2) {
            attn_prefetch_rows(pf, g0 + jj - jb, 2);
            attn_parts_rows(part, qh, kb + (size_t)(g0 + jj - jb) * k_row, k_row, jj, nh, nv, 2);
        }
        if (jj < gn) {
            attn_prefetch_rows(pf, g0 + jj - jb, 1);
            attn_parts_rows(part, qh, kb + (size_t)(g0 + jj - jb) * k_row, k_row, jj, nh, nv, 1);
        }
        for (int r = 0; r < nh; r++) {
            for (int jj = gn; jj < 8; jj++) part[r][jj] = ZERO();
            const __m256 sums = _mm256_mul_ps(attn_sum8_rows(part[r]), _mm256_set1_ps(scale));
            if (gn == 8) _mm256_storeu_ps(&s[r][g0], sums);
            else {
                float t[8];
                _mm256_storeu_ps(t, sums);
                memcpy(&s[r][g0], t, sizeof(float) * (size_t)gn);
            }
        }
    }
}

// The same with the head dim a constant for 64 (SmolLM2, TinyLlama): the chunk loops unroll (bench_attention:
// 10-15% faster).
static void attn_scores_f8(float (*s)[ATTN_TILE], const float *const *qh, const char *kb, int jb, size_t k_row,
                           int lo, int hi, int nh, int nv, float scale, const attn_pf *pf) {
    if (nv == 64 / W) attn_scores_f8_n(s, qh, kb, jb, k_row, lo, hi, nh, 64 / W, scale, pf);
    else attn_scores_f8_n(s, qh, kb, jb, k_row, lo, hi, nh, nv, scale, pf);
}

// Heads oh[r0..r0 + RN), chunks [c, c + CC) of the head dim += Σ_j s[r][j] · v_j over the tile rows j in
// [j0, cnt) (its blocks' rows: vbs[b], bs rows each), the outputs held in registers over the whole tile.
static inline __attribute__((always_inline)) void attn_accum_chunks(float *const *oh, float (*s)[ATTN_TILE],
                                                                    const char *const *vbs, int bs, size_t v_row,
                                                                    const int VT, int j0, int cnt, int r0,
                                                                    const int RN, const int CC, int c) {
    V a[12]; // a[i·CC + k]: head r0 + i, chunk c + k
    for (int i = 0; i < RN; i++)
        for (int k = 0; k < CC; k++) a[i * CC + k] = LOADF(oh[r0 + i] + (c + k) * W);
    for (int b = j0 / bs; b * bs < cnt; b++) {
        const int jb = b * bs, js = j0 > jb ? j0 : jb, e = cnt < jb + bs ? cnt : jb + bs;
        const char *row = vbs[b] + (size_t)(js - jb) * v_row;
        for (int j = js; j < e; j++, row += v_row) {
            V vv[4]; // the row's CC chunks, converted once for the RN heads; each weight broadcast once for CC
            for (int k = 0; k < CC; k++) vv[k] = attn_load_chunk(row, VT, c + k);
            for (int i = 0; i < RN; i++) {
                const V w = SET1(s[r0 + i][j]);
                for (int k = 0; k < CC; k++) a[i * CC + k] = FMA(w, vv[k], a[i * CC + k]);
            }
        }
    }
    for (int i = 0; i < RN; i++)
        for (int k = 0; k < CC; k++) STOREF(oh[r0 + i] + (c + k) * W, a[i * CC + k]);
}

// Heads oh[r0..r0 + RN) += Σ_j s[r][j] · v_j over the tile rows j in [j0, cnt), CC chunks of the head dim at a
// time. RN, CC and VT (the cache type) are constants at each call site (always_inline), so a[] lives in
// registers: RN·CC independent FMA chains side by side (fewer are FMA latency bound), and no row tests the
// type. Each output element's sum runs over j in order whatever RN and CC are (the multi-query kernel groups
// heads of several queries), so the result does not depend on the grouping.
static inline __attribute__((always_inline)) void attn_accum_v(float *const *oh, float (*s)[ATTN_TILE],
                                                               const char *const *vbs, int bs, size_t v_row,
                                                               const int VT, int j0, int cnt, int r0, const int RN,
                                                               const int CC, int hd) {
    int c = 0;
    for (; c + CC <= hd / W; c += CC) attn_accum_chunks(oh, s, vbs, bs, v_row, VT, j0, cnt, r0, RN, CC, c);
    for (; c < hd / W; c++) attn_accum_chunks(oh, s, vbs, bs, v_row, VT, j0, cnt, r0, RN, 1, c); // the rest
}

// Heads [r0, r1) over the same tile rows [j0, cnt): 6 at a time over 2 chunks (12 accumulators, 2 V chunks and
// a weight in registers: 8 loads per 12 FMAs), the rest with 2-4 chunks each.
static inline __attribute__((always_inline)) void attn_accum_heads_t(float *const *oh, float (*s)[ATTN_TILE],
                                                                     const char *const *vbs, int bs, size_t v_row,
                                                                     const int VT, int j0, int cnt, int r0, int r1,
                                                                     int hd) {
    for (; r0 + 6 <= r1; r0 += 6) attn_accum_v(oh, s, vbs, bs, v_row, VT, j0, cnt, r0, 6, 2, hd);
    switch (r1 - r0) {
    case 5: attn_accum_v(oh, s, vbs, bs, v_row, VT, j0, cnt, r0, 5, 2, hd); break;
    case 4: attn_accum_v(oh, s, vbs, bs, v_row, VT, j0, cnt, r0, 4, 2, hd); break;
    case 3: attn_accum_v(oh, s, vbs, bs, v_row, VT, j0, cnt, r0, 3, 2, hd); break;
    case 2: attn_accum_v(oh, s, vbs, bs, v_row, VT, j0, cnt, r0, 2, 4, hd); break;
    case 1: attn_accum_v(oh, s, vbs, bs, v_row, VT, j0, cnt, r0, 1, 4, hd); break;
    default: break;
    }
}

static void attn_accum_heads(float *const *oh, float (*s)[ATTN_TILE], const char *const *vbs, int bs,
                             size_t v_row, int vt, int j0, int cnt, int r0, int r1, int hd) {
    if (vt == TT_Q8_0) attn_accum_heads_t(oh, s, vbs, bs, v_row, TT_Q8_0, j0, cnt, r0, r1, hd);
    else if (vt == TT_Q4_0) attn_accum_heads_t(oh, s, vbs, bs, v_row, TT_Q4_0, j0, cnt, r0, r1, hd);
    else attn_accum_heads_t(oh, s, vbs, bs, v_row, TT_F16, j0, cnt, r0, r1, hd);
}

// The largest of mt and s[j0..cnt), W lanes at a time (a max is exact in any order).
static inline float attn_tile_max(const float *s, int j0, int cnt, float mt) {
    int j = j0;
    if (cnt - j0 >= W) {
        V vmx = SET1(mt);
        for (; j + W <= cnt; j += W) vmx = MAXV(vmx, LOADF(s + j));
        float t[W];
        STOREF(t, vmx);
        for (int i = 0; i < W; i++) mt = t[i] > mt ? t[i] : mt;
    }
    for (; j < cnt; j++) mt = s[j] > mt ? s[j] : mt;
    return mt;
}

// The span kernel (attention.h, attn_span_fn): n_q queries at consecutive positions, head r being query
// r / n_rep's head r % n_rep, over the positions [lo, hi) of one span (whole tiles). Per tile, each query's rows
// [j0, cnt) are exactly those the one-query kernel reads for it, and every head's arithmetic (score, max, exp,
// sum, rescale, V order) is the one-query kernel's; only the K row conversion, the V chunk conversion and the
// loop over heads are shared.
void ATTN_X86_SPAN_FN(float *out, size_t out_stride, const float *q, size_t q_stride, int n_q,
                      const void *k_layer, const void *v_layer, const int32_t *blocks, int n_pos, int kv_head,
                      const attn_geom *geo, int lo_pos, int hi_pos, float *ml) {
    const int hd = geo->head_dim, bs = geo->block_size, nr = geo->n_rep, nv = hd / W, nh = n_q * nr;
    const int kt = geo->k_type, vt = geo->v_type, kq = attn_k_quantized(kt);
    const size_t k_row = attn_row_bytes(kt, hd), v_row = attn_row_bytes(vt, hd);
    float m[ATTN_MAX_REP], l[ATTN_MAX_REP];
    float s[ATTN_MAX_REP][ATTN_TILE]; // scores then weights of one tile
    float *oh[ATTN_MAX_REP];
    const float *qh[ATTN_MAX_REP];
    int qj0[ATTN_MAX_REP], qcnt[ATTN_MAX_REP]; // per query: its rows of the current tile
    attn_q8 qq;
    for (int r = 0; r < nh; r++) {
        oh[r] = out + (size_t)(r / nr) * out_stride + (size_t)(r % nr) * hd;
        qh[r] = q + (size_t)(r / nr) * q_stride + (size_t)(r % nr) * hd;
        m[r] = -INFINITY, l[r] = 0.0f;
        memset(oh[r], 0, sizeof(float) * (size_t)hd);
    }
    if (kq)
        for (int i = 0; i < n_q; i++) attn_quantize_q_at(&qq, i * nr, q + (size_t)i * q_stride, nr, hd);
    // the last query sees `end` positions; the span's own end bounds them
    const int first = attn_first_pos(geo, n_pos), end = n_pos + n_q - 1 < hi_pos ? n_pos + n_q - 1 : hi_pos;
    // Tiles of whole blocks, at multiples of ts: where a tile starts does not depend on the query (a sliding
    // window's start does), so each query's softmax sees the same tiles in the multi- and one-query calls.
    const int ts = attn_tile_len(geo);
    const char *kbs[ATTN_TILE], *vbs[ATTN_TILE]; // per block of the tile: its first K and V rows
    for (int p0 = (first > lo_pos ? first : lo_pos) / ts * ts; p0 < end; p0 += ts) {
        int lo = ts, hi = 0;
        for (int i = 0; i < n_q; i++) {
            const int np = n_pos + i < hi_pos ? n_pos + i : hi_pos, f = attn_first_pos(geo, n_pos + i);
            qj0[i] = f > p0 ? f - p0 : 0; // the window may start inside the tile
            qcnt[i] = np - p0 < ts ? np - p0 : ts;
            if (qcnt[i] <= qj0[i]) continue; // the tile is outside this query's positions
            lo = qj0[i] < lo ? qj0[i] : lo, hi = qcnt[i] > hi ? qcnt[i] : hi;
        }
        if (hi <= lo) continue;
        // every head over [lo, hi), a block at a time: a score depends on its own row only, the extra ones go
        // unread (so do blocks wholly before the window)
        for (int b = lo / bs; b * bs < hi; b++) {
            size_t row0 = ((size_t)blocks[p0 / bs + b] * geo->n_kv_heads + kv_head) * bs;
            kbs[b] = (const char *)k_layer + row0 * k_row, vbs[b] = (const char *)v_layer + row0 * v_row;
            const int jb = b * bs, sl = lo > jb ? lo : jb, sh = hi < jb + bs ? hi : jb + bs;
            attn_pf pf = {.k = NULL, .v = vbs[b], .k_row = k_row, .v_row = v_row};
            if (p0 + ts + jb < end) // the next tile's block b
                pf.k = (const char *)k_layer +
                       ((size_t)blocks[(p0 + ts) / bs + b] * geo->n_kv_heads + kv_head) * bs * k_row;
            if (kq) attn_scores_q(s, &qq, kbs[b], jb, k_row, kt, sl, sh, nh, hd / 32, geo->scale, &pf);
            else attn_scores_f8(s, qh, kbs[b], jb, k_row, sl, sh, nh, nv, geo->scale, &pf);
        }
        if (geo->softcap > 0) // the scalar kernel's function of each score (attention.h)
            for (int r = 0; r < nh; r++)
                for (int j = lo; j < hi; j++) s[r][j] = attn_softcap(s[r][j], geo->softcap);
        for (int r = 0; r < nh; r++) {
            const int j0 = qj0[r / nr], cnt = qcnt[r / nr];
            if (cnt <= j0) continue;
            const float mt = attn_tile_max(s[r], j0, cnt, m[r]);
            float corr = expf(m[r] - mt), sum = 0.0f;
            int j = j0;
            V vm = SET1(mt), vsum = ZERO();
            for (; j + W <= cnt; j += W) {
                V e = x86_vexp(SUB(LOADF(&s[r][j]), vm));
                STOREF(&s[r][j], e), vsum = ADD(e, vsum);
            }
            for (; j < cnt; j++) sum += s[r][j] = expf(s[r][j] - mt);
            sum += REDUCE(vsum);
            l[r] = l[r] * corr + sum;
            m[r] = mt;
            if (corr != 1.0f) {
                V cv = SET1(corr);
                for (int c = 0; c < nv; c++) STOREF(oh[r] + c * W, MUL(LOADF(oh[r] + c * W), cv));
            }
        }
        for (int i = 0; i < n_q;) { // runs of queries with the same rows share each converted V chunk
            int e = i + 1;
            while (e < n_q && qj0[e] == qj0[i] && qcnt[e] == qcnt[i]) e++;
            if (qcnt[i] > qj0[i])
                attn_accum_heads(oh, s, vbs, bs, v_row, vt, qj0[i], qcnt[i], i * nr, e * nr, hd);
            i = e;
        }
    }
    for (int r = 0; r < nh; r++) ml[2 * r] = m[r], ml[2 * r + 1] = l[r];
}

void ATTN_X86_MULTI_FN(float *out, size_t out_stride, const float *q, size_t q_stride, int n_q,
                       const void *k_layer, const void *v_layer, const int32_t *blocks, int n_pos, int kv_head,
                       const attn_geom *geo) {
    attn_span_run(ATTN_X86_SPAN_FN, out, out_stride, q, q_stride, n_q, k_layer, v_layer, blocks, n_pos, kv_head,
                  geo);
}

void ATTN_X86_FN(float *out, const float *q, const void *k_layer, const void *v_layer,
                 const int32_t *blocks, int n_pos, int kv_head, const attn_geom *geo) {
    ATTN_X86_MULTI_FN(out, 0, q, 0, 1, k_layer, v_layer, blocks, n_pos, kv_head, geo);
}
