// GEMM tiles for the ARM levels. A tile computes NW weight rows x NR activation rows: each weight sub-block
// is unpacked once (arm_unpack.h) and dotted against all NR activation rows while it sits in registers.
// Per super-block every (weight row, activation row) pair gets its exact int32 sum (SDOT / SMULL+SADALP per
// pair, or SMMLA per 2 x 2 pairs at the i8mm level), and then the same float operations (fmaf with the
// pair's scale), so the result of a pair is the same whatever the tile shape and level.
// Template: included by quant_neon.c / quant_dotprod.c / quant_i8mm.c after defining ARM_FN and ARM_LEVEL.
#ifndef TACHYON_CPU_ARM_GEMM_H
#define TACHYON_CPU_ARM_GEMM_H

#include <math.h>

#include "cpu/arm_common.h"
#include "cpu/arm_unpack.h"

// Pairs (w, r) of a tile whose integer sums come from SMMLA: weight rows in pairs, activation rows in pairs.
#define ARM_MM(NW, NR) (ARM_LEVEL >= 2 && (NW) % 2 == 0 && (NR) >= 2)

#if ARM_LEVEL >= 2
// 64-bit halves of two rows interleaved: [x lo 8 | y lo 8] and [x hi 8 | y hi 8] (SMMLA's 2 x 8 operands).
AI int8x16_t arm_zip1(int8x16_t x, int8x16_t y) {
    return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(x), vreinterpretq_s64_s8(y)));
}
AI int8x16_t arm_zip2(int8x16_t x, int8x16_t y) {
    return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(x), vreinterpretq_s64_s8(y)));
}
#endif

// Integer sum of one sub-block for one pair, scaled by its integer scale(s), into acc.
AI int32x4_t arm_sub_dot(int32x4_t acc, int8x16_t wl, int8x16_t wh, int8x16_t al, int8x16_t ah,
                         const arm_wblk *wb, int s, const int T) {
    const int32x4_t z = vdupq_n_s32(0);
    if (arm_gran(T) == 0) return arm_dot16(arm_dot16(acc, wl, al), wh, ah);
    if (arm_gran(T) == 1) return vmlaq_n_s32(acc, arm_dot16(arm_dot16(z, wl, al), wh, ah), wb->sc[s]);
    acc = vmlaq_n_s32(acc, arm_dot16(z, wl, al), wb->sc[2 * s]);
    return vmlaq_n_s32(acc, arm_dot16(z, wh, ah), wb->sc[2 * s + 1]);
}

// Integer sum of the mins: sum over scale groups of mn * (activation sum of the group).
AI int32_t arm_msum(const arm_wblk *wb, const uint8_t *ab, const int T) {
    const tt_block_q8_K *a = (const void *)ab;
    int32_t m = 0;
    if (T == TT_Q2_K)
        for (int g = 0; g < 16; g++) m += wb->mn[g] * a->bsums[g];
    else
        for (int g = 0; g < 8; g++) m += wb->mn[g] * (a->bsums[2 * g] + a->bsums[2 * g + 1]);
    return m;
}

// The float work of one pair for one super-block; the same at every level and tile shape.
AI void arm_fstage(float *acc, float *summ, int32_t isum, const arm_wblk *wb, const uint8_t *ab, const int T) {
    float ad;
    if (arm_qk(T) == QK_K) ad = ((const tt_block_q8_K *)(const void *)ab)->d;
    else if (arm_act1(T)) ad = ((const tt_block_q8_1 *)(const void *)ab)->d;
    else ad = arm_h2f_at(ab);
    *acc = fmaf((float)isum, wb->d * ad, *acc);
    if (arm_asym(T)) *acc = fmaf((float)arm_msum(wb, ab, T), -(wb->m * ad), *acc);
    if (arm_act1(T)) *summ = fmaf(wb->m, ((const tt_block_q8_1 *)(const void *)ab)->s, *summ);
}

// --- quantized weights x int8 activations
AI void arm_tileq(const cpu_gemm_job *j, int i, int r, const int NW, const int NR, const int T) {
    const int nsb = j->k / arm_qk(T), nsub = arm_qk(T) / 32;
    const size_t wsz = arm_wsize(T), asz = arm_asize(T);
    const int MM = ARM_MM(NW, NR), NRP = MM ? NR & ~1 : 0; // rows [0, NRP) in SMMLA pairs
    float acc[ARM_MAXW][ARM_MAXR], summ[ARM_MAXW][ARM_MAXR];
    ARM_UNROLL for (int w = 0; w < NW; w++) ARM_UNROLL for (int rr = 0; rr < NR; rr++) acc[w][rr] = summ[w][rr] = 0.0f;
    for (int b = 0; b < nsb; b++) {
        arm_wblk wb[ARM_MAXW];
        int32x4_t isum[ARM_MAXW][ARM_MAXR];
        ARM_UNROLL for (int w = 0; w < NW; w++) {
            arm_wdecode(arm_wrow(j, i + w) + b * wsz, T, &wb[w]);
            ARM_UNROLL for (int rr = 0; rr < NR; rr++) isum[w][rr] = vdupq_n_s32(0);
        }
        for (int s = 0; s < nsub; s++) {
            int8x16_t wl[ARM_MAXW], wh[ARM_MAXW];
            ARM_UNROLL for (int w = 0; w < NW; w++) arm_unpack(arm_wrow(j, i + w) + b * wsz, s, T, &wl[w], &wh[w]);
            ARM_UNROLL for (int rr = 0; rr < NR; rr++) {
                if (rr < NRP) continue;
                const int8_t *aq = arm_aq(arm_arow(j, r + rr) + b * asz, s, T);
                const int8x16_t al = vld1q_s8(aq), ah = vld1q_s8(aq + 16);
                ARM_UNROLL for (int w = 0; w < NW; w++) isum[w][rr] =
                    arm_sub_dot(isum[w][rr], wl[w], wh[w], al, ah, &wb[w], s, T);
            }
#if ARM_LEVEL >= 2
            // SMMLA: isum[w][rr] holds the 2 x 2 pairs (w, w+1) x (rr, rr+1) as [w rr, w rr+1, w+1 rr, w+1 rr+1]
            ARM_UNROLL for (int rr = 0; rr < NRP; rr += 2) {
                const int8_t *a0 = arm_aq(arm_arow(j, r + rr) + b * asz, s, T);
                const int8_t *a1 = arm_aq(arm_arow(j, r + rr + 1) + b * asz, s, T);
                const int8x16_t a0l = vld1q_s8(a0), a0h = vld1q_s8(a0 + 16), a1l = vld1q_s8(a1), a1h = vld1q_s8(a1 + 16);
                const int8x16_t A0 = arm_zip1(a0l, a1l), A1 = arm_zip2(a0l, a1l), A2 = arm_zip1(a0h, a1h),
                                A3 = arm_zip2(a0h, a1h);
                ARM_UNROLL for (int w = 0; w < NW; w += 2) {
                    const int8x16_t W0 = arm_zip1(wl[w], wl[w + 1]), W1 = arm_zip2(wl[w], wl[w + 1]),
                                    W2 = arm_zip1(wh[w], wh[w + 1]), W3 = arm_zip2(wh[w], wh[w + 1]);
                    const int32x4_t z = vdupq_n_s32(0);
                    int32x4_t *q = &isum[w][rr];
                    if (arm_gran(T) == 0) {
                        *q = vmmlaq_s32(vmmlaq_s32(vmmlaq_s32(vmmlaq_s32(*q, W0, A0), W1, A1), W2, A2), W3, A3);
                    } else if (arm_gran(T) == 1) {
                        int32x4_t t = vmmlaq_s32(vmmlaq_s32(vmmlaq_s32(vmmlaq_s32(z, W0, A0), W1, A1), W2, A2), W3, A3);
                        *q = vmlaq_s32(*q, t, vcombine_s32(vdup_n_s32(wb[w].sc[s]), vdup_n_s32(wb[w + 1].sc[s])));
                    } else {
                        int32x4_t t0 = vmmlaq_s32(vmmlaq_s32(z, W0, A0), W1, A1);
                        int32x4_t t1 = vmmlaq_s32(vmmlaq_s32(z, W2, A2), W3, A3);
                        *q = vmlaq_s32(*q, t0, vcombine_s32(vdup_n_s32(wb[w].sc[2 * s]), vdup_n_s32(wb[w + 1].sc[2 * s])));
                        *q = vmlaq_s32(*q, t1,
                                       vcombine_s32(vdup_n_s32(wb[w].sc[2 * s + 1]), vdup_n_s32(wb[w + 1].sc[2 * s + 1])));
                    }
                }
            }
#endif
        }
        ARM_UNROLL for (int w = 0; w < NW; w++) ARM_UNROLL for (int rr = 0; rr < NR; rr++) {
                int32_t is;
                if (rr < NRP) {
                    int32_t lanes[4];
                    vst1q_s32(lanes, isum[w & ~1][rr & ~1]);
                    is = lanes[(w & 1) * 2 + (rr & 1)];
                } else is = vaddvq_s32(isum[w][rr]);
                arm_fstage(&acc[w][rr], &summ[w][rr], is, &wb[w], arm_arow(j, r + rr) + b * asz, T);
            }
    }
    ARM_UNROLL for (int w = 0; w < NW; w++) ARM_UNROLL for (int rr = 0; rr < NR; rr++)
        j->out[(size_t)(r + rr) * j->ld_out + i + w] = acc[w][rr] + summ[w][rr];
}

// --- float weights (F32, F16, BF16) x f32 activations
AI float32x4_t arm_loadw4(const uint8_t *p, int e, const int T) {
    if (T == TT_F32) return vld1q_f32((const float *)(const void *)p + e);
    uint16x4_t h = vld1_u16((const uint16_t *)(const void *)p + e);
    if (T == TT_F16) return vcvt_f32_f16(vreinterpret_f16_u16(h));
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}

AI float arm_loadw1(const uint8_t *p, int e, const int T) {
    uint16_t h;
    if (T == TT_F32) return ((const float *)(const void *)p)[e];
    memcpy(&h, p + 2 * (size_t)e, 2);
    if (T == TT_F16) return arm_h2f(h);
    return tt_f32_from_bits((uint32_t)h << 16);
}

AI void arm_tile_f(const cpu_gemm_job *j, int i, int r, const int NW, const int NR, const int T) {
    const int k = j->k, k4 = k & ~3;
    float32x4_t acc[ARM_MAXW][ARM_MAXR];
    ARM_UNROLL for (int w = 0; w < NW; w++) ARM_UNROLL for (int rr = 0; rr < NR; rr++) acc[w][rr] = vdupq_n_f32(0.0f);
    for (int e = 0; e < k4; e += 4) {
        float32x4_t wv[ARM_MAXW];
        ARM_UNROLL for (int w = 0; w < NW; w++) wv[w] = arm_loadw4(arm_wrow(j, i + w), e, T);
        ARM_UNROLL for (int rr = 0; rr < NR; rr++) {
            float32x4_t av = vld1q_f32((const float *)(const void *)arm_arow(j, r + rr) + e);
            ARM_UNROLL for (int w = 0; w < NW; w++) acc[w][rr] = vfmaq_f32(acc[w][rr], wv[w], av);
        }
    }
    ARM_UNROLL for (int w = 0; w < NW; w++) ARM_UNROLL for (int rr = 0; rr < NR; rr++) {
            float s = vaddvq_f32(acc[w][rr]);
            const float *a = (const float *)(const void *)arm_arow(j, r + rr);
            for (int e = k4; e < k; e++) s = fmaf(arm_loadw1(arm_wrow(j, i + w), e, T), a[e], s);
            j->out[(size_t)(r + rr) * j->ld_out + i + w] = s;
        }
}

// --- driver: panels of weight rows sized for L2, tiles of up to ARM_MAXR activation rows inside
AI void arm_tile(const cpu_gemm_job *j, int i, int r, const int NW, const int NR, const int T) {
    if (T == TT_F32 || T == TT_F16 || T == TT_BF16) arm_tile_f(j, i, r, NW, NR, T);
    else arm_tileq(j, i, r, NW, NR, T);
}

AI void arm_gemm(const cpu_gemm_job *j, const int T) {
    int panel = (int)((256 * 1024) / (j->w_stride ? j->w_stride : 1));
    panel = panel < 16 ? 16 : panel & ~15;
    for (int p0 = j->i0; p0 < j->i1; p0 += panel) {
        const int p1 = p0 + panel < j->i1 ? p0 + panel : j->i1;
        for (int r = 0; r < j->n_rows;) {
            const int nr = j->n_rows - r < ARM_MAXR ? j->n_rows - r : ARM_MAXR;
            int i = p0;
            if (nr == 1) {
                for (; i + 4 <= p1; i += 4) arm_tile(j, i, r, 4, 1, T);
                for (; i < p1; i++) arm_tile(j, i, r, 1, 1, T);
            } else {
                for (; i + 2 <= p1; i += 2) {
                    if (nr == 2) arm_tile(j, i, r, 2, 2, T);
                    else if (nr == 3) arm_tile(j, i, r, 2, 3, T);
                    else arm_tile(j, i, r, 2, 4, T);
                }
                for (; i < p1; i++) {
                    if (nr == 2) arm_tile(j, i, r, 1, 2, T);
                    else if (nr == 3) arm_tile(j, i, r, 1, 3, T);
                    else arm_tile(j, i, r, 1, 4, T);
                }
            }
            r += nr;
        }
    }
}

#define ARM_DEFINE_GEMM(name, T)                                                                             \
    static void ARM_FN(gemm_##name)(const cpu_gemm_job *j) { arm_gemm(j, T); }

ARM_DEFINE_GEMM(q4_0, TT_Q4_0)
ARM_DEFINE_GEMM(q4_1, TT_Q4_1)
ARM_DEFINE_GEMM(q5_0, TT_Q5_0)
ARM_DEFINE_GEMM(q5_1, TT_Q5_1)
ARM_DEFINE_GEMM(q8_0, TT_Q8_0)
ARM_DEFINE_GEMM(iq4_nl, TT_IQ4_NL)
ARM_DEFINE_GEMM(q4_k, TT_Q4_K)
ARM_DEFINE_GEMM(q5_k, TT_Q5_K)
ARM_DEFINE_GEMM(q6_k, TT_Q6_K)
ARM_DEFINE_GEMM(q2_k, TT_Q2_K)
ARM_DEFINE_GEMM(q3_k, TT_Q3_K)
ARM_DEFINE_GEMM(iq4_xs, TT_IQ4_XS)
ARM_DEFINE_GEMM(mxfp4, TT_MXFP4)
ARM_DEFINE_GEMM(f32, TT_F32)
ARM_DEFINE_GEMM(f16, TT_F16)
ARM_DEFINE_GEMM(bf16, TT_BF16)

#endif
