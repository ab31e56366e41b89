// 256-bit GEMM tile for MXFP4 weights x Q8_0 activations (gpt-oss's experts), two 32-element blocks per step.
// Included by x86_gemm.h, so both x86 levels get it (AVX-512 builds it with VNNI: vpdpbusd for the int8 dots;
// same integers and the same float operations, so the two levels are bit-identical for MXFP4).
//
// A block is an E8M0 scale byte e and 16 bytes of E2M1 nibbles (element l in the low nibble of byte l, element
// 16 + l in the high one); its value is 2^(e - 128) * tt_mxfp4_values[code] (the codes doubled, the scale
// halved, as the scalar reference). Per block pair (b, b + 1) and weight row:
//   - one 16-byte load per block gives [qs(b) | qs(b + 1)]; the low nibbles are the elements 0..15 of both
//     blocks, the high nibbles the elements 16..31, each looked up (vpshufb) in the codebook plus 12, so the
//     codes are unsigned (0..24) and dot straight with the signed activations (vpmaddubsw, no sign tricks);
//   - the activations' halves are swapped into the same order once per pair and activation row (vperm2i128),
//     which also computes 12 * sum(a) per 4-lane group: the offset's correction, shared by the NW rows;
//   - lanes 0..3 of the int32 sums belong to block b, lanes 4..7 to block b + 1: one conversion and one
//     multiply-add per pair, with the scales [2^(e_b - 128) x4 | 2^(e_b+1 - 128) x4] from a 256-entry table.
// An odd last block is paired with itself and its second copy weighted 0. Every (weight row, activation row)
// pair sees the same operations whatever NW and NR (batch invariance); the integers are exact (|u * a| pair
// sums of two vpmaddubsw <= 2 * 2 * 24 * 128 = 12288 < 2^15), only the float sums' order differs from the
// reference, which dots a whole block in integers first.
#ifndef TACHYON_CPU_X86_MXFP4_H
#define TACHYON_CPU_X86_MXFP4_H

#include "cpu/x86_common.h"

#define X86_MX_OFF 12 // added to every doubled E2M1 code: -12..12 -> 0..24

// tt_mxfp4_values + 12, in vpshufb order (code 0..15).
static const int8_t x86_mx_ucodes[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};

// tt_e8m0_half(e) for every byte e, as f32 bits: 2^(e - 128), subnormal for e < 2, and 2^127 for e = 255.
#define X86_MX_H(e) ((e) < 2 ? 0x00200000u << ((e) & 1) : (uint32_t)((e) - 1) << 23) // & 1: no shift of 32+ in the branch not taken (clang warns)
#define X86_MX_H4(e) X86_MX_H(e), X86_MX_H((e) + 1), X86_MX_H((e) + 2), X86_MX_H((e) + 3)
#define X86_MX_H16(e) X86_MX_H4(e), X86_MX_H4((e) + 4), X86_MX_H4((e) + 8), X86_MX_H4((e) + 12)
#define X86_MX_H64(e) X86_MX_H16(e), X86_MX_H16((e) + 16), X86_MX_H16((e) + 32), X86_MX_H16((e) + 48)
static const union {
    uint32_t u[257];
    float f[257]; // f[256] = 0: the weight of an odd tail's second copy
} x86_mx_scale = {.u = {X86_MX_H64(0), X86_MX_H64(64), X86_MX_H64(128), X86_MX_H64(192), 0}};

// sum over 4-byte groups of u0 * s0 + u1 * s1 (u unsigned, s signed), added to acc. AVX2 adds the two
// vpmaddubsw results in int16: the caller keeps |u0 * s0 + u1 * s1| pair sums below 2^15.
XI __m256i x86_mx_dot2(__m256i acc, __m256i u0, __m256i s0, __m256i u1, __m256i s1) {
#if X86_VNNI
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(acc, u0, s0), u1, s1);
#else
    const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(u0, s0), _mm256_maddubs_epi16(u1, s1));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
#endif
}

// The activation side of one block pair: low and high halves of both blocks, -12 * sum(a) per 4-lane group,
// and the scales [d_b x4 | d_b+1 x4].
typedef struct x86_mx_act {
    __m256i lo, hi, ncorr;
    __m256 d;
} x86_mx_act;

XI x86_mx_act x86_mx_act_pair(const uint8_t *arow, int b, int b1) {
    const tt_block_q8_0 *a0 = (const void *)(arow + (size_t)b * sizeof(tt_block_q8_0));
    const tt_block_q8_0 *a1 = (const void *)(arow + (size_t)b1 * sizeof(tt_block_q8_0));
    const __m256i q0 = _mm256_loadu_si256((const __m256i *)(const void *)a0->qs);
    const __m256i q1 = _mm256_loadu_si256((const __m256i *)(const void *)a1->qs);
    x86_mx_act r;
    r.lo = _mm256_permute2x128_si256(q0, q1, 0x20);
    r.hi = _mm256_permute2x128_si256(q0, q1, 0x31);
    const __m256i off = _mm256_set1_epi8(X86_MX_OFF);
    r.ncorr = _mm256_sub_epi32(_mm256_setzero_si256(), x86_mx_dot2(_mm256_setzero_si256(), off, r.lo, off, r.hi));
    r.d = _mm256_set_m128(_mm_set1_ps(x86_h2f(a1->d)), _mm_set1_ps(x86_h2f(a0->d)));
    return r;
}

// The weight side of one block pair of row p: unsigned codes of the low and high halves, and the scales.
typedef struct x86_mx_w {
    __m256i lo, hi;
    __m256 d;
} x86_mx_w;

XI x86_mx_w x86_mx_w_pair(const uint8_t *p, int b, int tail, __m256i tbl) {
    const uint8_t *x0 = p + (size_t)b * sizeof(tt_block_mxfp4), *x1 = tail ? x0 : x0 + sizeof(tt_block_mxfp4);
    const __m256i q = _mm256_loadu2_m128i((const __m128i *)(const void *)(x1 + 1), (const __m128i *)(const void *)(x0 + 1));
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    x86_mx_w w;
    w.lo = _mm256_shuffle_epi8(tbl, _mm256_and_si256(q, m4));
    w.hi = _mm256_shuffle_epi8(tbl, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
    w.d = _mm256_set_m128(_mm_broadcast_ss(&x86_mx_scale.f[tail ? 256 : x1[0]]), _mm_broadcast_ss(&x86_mx_scale.f[x0[0]]));
    return w;
}

// acc += (sum(u * a) - 12 * sum(a)) * (d_w * d_a) for one weight row and one activation row of a pair. The
// scales are multiplied first, as the reference does: 2^(e - 128) times a sum overflows for large e.
XI __m256 x86_mx_fma(__m256 acc, const x86_mx_w *w, const x86_mx_act *a) {
    const __m256i s = x86_mx_dot2(a->ncorr, w->lo, a->lo, w->hi, a->hi);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(w->d, a->d), acc);
}

// One block pair (b, b + 1), or with tail the last block alone, into the tile's accumulators.
XI void x86_mx_step(const cpu_gemm_job *j, int i, int r, const int NW, const int NR, int b, const int tail,
                    __m256i tbl, __m256 (*acc)[X86_MAXR]) {
    const int b1 = tail ? b : b + 1;
    if (NR == 1) { // GEMV: one activation pair; each weight row unpacked and used at once (fewer registers)
        const x86_mx_act a = x86_mx_act_pair(x86_arow(j, r), b, b1);
        X86_UNROLL for (int w = 0; w < NW; w++) {
            const uint8_t *p = x86_wrow(j, i + w);
            _mm_prefetch((const char *)p + (size_t)b * sizeof(tt_block_mxfp4) + X86_PF_TILES * NW * j->w_stride,
                         _MM_HINT_T0);
            const x86_mx_w wp = x86_mx_w_pair(p, b, tail, tbl);
            acc[w][0] = x86_mx_fma(acc[w][0], &wp, &a);
        }
        return;
    }
    x86_mx_w wp[X86_MAXW];
    X86_UNROLL for (int w = 0; w < NW; w++) wp[w] = x86_mx_w_pair(x86_wrow(j, i + w), b, tail, tbl);
    X86_UNROLL for (int rr = 0; rr < NR; rr++) {
        const x86_mx_act a = x86_mx_act_pair(x86_arow(j, r + rr), b, b1);
        X86_UNROLL for (int w = 0; w < NW; w++) acc[w][rr] = x86_mx_fma(acc[w][rr], &wp[w], &a);
    }
}

XI void x86_tile_mxfp4(const cpu_gemm_job *j, int i, int r, const int NW, const int NR) {
    const int nb = j->k / QK_MXFP4;
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)x86_mx_ucodes));
    __m256 acc[X86_MAXW][X86_MAXR];
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++) acc[w][rr] =
        _mm256_setzero_ps();
    for (int b = 0; b + 1 < nb; b += 2) x86_mx_step(j, i, r, NW, NR, b, 0, tbl, acc);
    if (nb & 1) x86_mx_step(j, i, r, NW, NR, nb - 1, 1, tbl, acc);
    X86_UNROLL for (int w = 0; w < NW; w++) X86_UNROLL for (int rr = 0; rr < NR; rr++)
        j->out[(size_t)(r + rr) * j->ld_out + i + w] = x86_hsum8(acc[w][rr]);
}

#endif
