// Attention over the paged KV cache (f16, q8_0 or q4_0 rows) for the ARM levels, NEON only (baseline on
// ARM64, so one version serves all three). Positions are walked in tiles of ATTN_TILE with an online softmax:
// per tile, the scores of all n_rep query heads (f16 K: f32 dot products on 4 lanes; q8_0/q4_0 K: the query
// rounded to int8 per 32 values as attention.h defines, SMULL/SADALP integer block sums), the running max and
// sum updated once per tile (the weights' exp 4 lanes at a time, arm_vexp.h), then each V row is dequantized
// once and accumulated into every head's output. Head dims that are not a multiple of 16 (32 with a
// quantized cache) take the scalar kernel.
// attn_multi_neon runs the one-query kernel per query, so each query's result is the one-query result bit for
// bit; it does not share the K/V tiles between the queries the way attention_x86.h does.
#include "cpu/arm_kernels.h"
#include "cpu/arm_vexp.h"

#include <math.h>
#include <string.h>

static int attn_cache_type(int t) { return t == TT_Q8_0 || t == TT_Q4_0 ? t : TT_F16; }

// q·k of query row r against one q8_0 / q4_0 K row: exact int32 sums per 32-value block, then as the scalar
// reference: dot += d_k · d_q · isum.
static float attn_qk_int(const attn_q8 *qq, int r, const uint8_t *krow, int k_type, int hd) {
    float dot = 0.0f;
    for (int b = 0; b < hd / 32; b++) {
        int8x16_t kl, kh;
        tt_f16 dh;
        if (k_type == TT_Q8_0) {
            const tt_block_q8_0 *kb = (const tt_block_q8_0 *)(const void *)krow + b;
            kl = vld1q_s8(kb->qs), kh = vld1q_s8(kb->qs + 16), dh = kb->d;
        } else {
            const tt_block_q4_0 *kb = (const tt_block_q4_0 *)(const void *)krow + b;
            uint8x16_t v = vld1q_u8(kb->qs);
            kl = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0f))), vdupq_n_s8(8));
            kh = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), vdupq_n_s8(8));
            dh = kb->d;
        }
        const int8x16_t ql = vld1q_s8(&qq->qs[r][b * 32]), qh = vld1q_s8(&qq->qs[r][b * 32 + 16]);
        int16x8_t p0 = vmull_s8(vget_low_s8(ql), vget_low_s8(kl)), p1 = vmull_high_s8(ql, kl);
        int16x8_t p2 = vmull_s8(vget_low_s8(qh), vget_low_s8(kh)), p3 = vmull_high_s8(qh, kh);
        int32x4_t acc = vpaddlq_s16(p0);
        acc = vpadalq_s16(acc, p1), acc = vpadalq_s16(acc, p2), acc = vpadalq_s16(acc, p3);
        const float dk = vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(dh))), 0);
        dot += dk * qq->d[r][b] * (float)vaddvq_s32(acc);
    }
    return dot;
}

// One cache row of hd values (f16, q8_0 or q4_0) -> f32, the same values as the type's to_float.
static void attn_row_f32(float *dst, const uint8_t *row, int type, int hd) {
    if (type == TT_F16) {
        for (int i = 0; i < hd; i += 4)
            vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)row + i))));
        return;
    }
    for (int b = 0; b < hd / 32; b++) {
        int8x16_t lo, hi;
        tt_f16 dh;
        if (type == TT_Q8_0) {
            const tt_block_q8_0 *kb = (const tt_block_q8_0 *)(const void *)row + b;
            lo = vld1q_s8(kb->qs), hi = vld1q_s8(kb->qs + 16), dh = kb->d;
        } else {
            const tt_block_q4_0 *kb = (const tt_block_q4_0 *)(const void *)row + b;
            uint8x16_t v = vld1q_u8(kb->qs);
            lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0f))), vdupq_n_s8(8));
            hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), vdupq_n_s8(8));
            dh = kb->d;
        }
        const float d = vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(dh))), 0);
        const int16x8_t h[4] = {vmovl_s8(vget_low_s8(lo)), vmovl_high_s8(lo), vmovl_s8(vget_low_s8(hi)),
                                vmovl_high_s8(hi)};
        for (int t = 0; t < 4; t++) {
            vst1q_f32(dst + b * 32 + 8 * t, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(h[t]))), d));
            vst1q_f32(dst + b * 32 + 8 * t + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(h[t])), d));
        }
    }
}

static float attn_dot_f32(const float *a, const float *b, int n) { // n % 16 == 0
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
    for (int i = 0; i < n; i += 16) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
        s2 = vfmaq_f32(s2, vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
        s3 = vfmaq_f32(s3, vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
    }
    return vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
}

// s (cnt) <- exp(s - m); returns their sum (in position order).
static float attn_exp_tile(float *s, int cnt, float m) {
    float sum = 0.0f;
    int j = 0;
    for (; j + 4 <= cnt; j += 4) vst1q_f32(s + j, arm_vexp(vsubq_f32(vld1q_f32(s + j), vdupq_n_f32(m))));
    if (j < cnt) {
        float t[4] = {0};
        for (int e = 0; j + e < cnt; e++) t[e] = s[j + e];
        vst1q_f32(t, arm_vexp(vsubq_f32(vld1q_f32(t), vdupq_n_f32(m))));
        for (int e = 0; j + e < cnt; e++) s[j + e] = t[e];
    }
    for (j = 0; j < cnt; j++) sum += s[j];
    return sum;
}

void attn_tile_neon(float *out, const float *q, const void *k_layer, const void *v_layer, const int32_t *blocks,
                    int n_pos, int kv_head, const attn_geom *geo) {
    const int hd = geo->head_dim, bs = geo->block_size, nr = geo->n_rep;
    const int kt = attn_cache_type(geo->k_type), vt = attn_cache_type(geo->v_type), kq = attn_k_quantized(kt);
    if (hd % 16 || ((kt != TT_F16 || vt != TT_F16) && hd % 32)) {
        attn_tile_scalar(out, q, k_layer, v_layer, blocks, n_pos, kv_head, geo);
        return;
    }
    const size_t k_row = tt_row_size((uint32_t)kt, hd), v_row = tt_row_size((uint32_t)vt, hd);
    float m[ATTN_MAX_REP], l[ATTN_MAX_REP], s[ATTN_MAX_REP][ATTN_TILE];
    float kf[ATTN_MAX_HEAD_DIM] __attribute__((aligned(16))), vf[ATTN_MAX_HEAD_DIM] __attribute__((aligned(16)));
    attn_q8 qq;
    if (kq) attn_quantize_q(&qq, q, nr, hd);
    for (int r = 0; r < nr; r++) m[r] = -INFINITY, l[r] = 0.0f;
    memset(out, 0, sizeof(float) * (size_t)nr * hd);
    for (int p0 = attn_first_pos(geo, n_pos); p0 < n_pos; p0 += ATTN_TILE) {
        const int cnt = n_pos - p0 < ATTN_TILE ? n_pos - p0 : ATTN_TILE;
        for (int j = 0; j < cnt; j++) {
            const int p = p0 + j;
            const size_t row = ((size_t)blocks[p / bs] * geo->n_kv_heads + kv_head) * bs + p % bs;
            const uint8_t *krow = (const uint8_t *)k_layer + row * k_row;
            if (!kq) attn_row_f32(kf, krow, kt, hd);
            for (int r = 0; r < nr; r++)
                s[r][j] = (kq ? attn_qk_int(&qq, r, krow, kt, hd) : attn_dot_f32(q + (size_t)r * hd, kf, hd)) * geo->scale;
        }
        if (geo->softcap > 0) // the scalar kernel's function of each score (attention.h)
            for (int r = 0; r < nr; r++)
                for (int j = 0; j < cnt; j++) s[r][j] = attn_softcap(s[r][j], geo->softcap);
        for (int r = 0; r < nr; r++) {
            float mt = m[r];
            for (int j = 0; j < cnt; j++) mt = s[r][j] > mt ? s[r][j] : mt;
            const float corr = expf(m[r] - mt);
            l[r] = l[r] * corr + attn_exp_tile(s[r], cnt, mt);
            m[r] = mt;
            float *o = out + (size_t)r * hd;
            for (int i = 0; i < hd; i += 4) vst1q_f32(o + i, vmulq_n_f32(vld1q_f32(o + i), corr));
        }
        for (int j = 0; j < cnt; j++) {
            const int p = p0 + j;
            const size_t row = ((size_t)blocks[p / bs] * geo->n_kv_heads + kv_head) * bs + p % bs;
            attn_row_f32(vf, (const uint8_t *)v_layer + row * v_row, vt, hd);
            for (int r = 0; r < nr; r++) {
                float *o = out + (size_t)r * hd;
                const float w = s[r][j];
                for (int i = 0; i < hd; i += 4) vst1q_f32(o + i, vfmaq_n_f32(vld1q_f32(o + i), vld1q_f32(vf + i), w));
            }
        }
    }
    for (int r = 0; r < nr; r++) {
        const float inv = attn_out_scale(m[r], l[r], geo->sinks, kv_head * nr + r);
        float *o = out + (size_t)r * hd;
        for (int i = 0; i < hd; i += 4) vst1q_f32(o + i, vmulq_n_f32(vld1q_f32(o + i), inv));
    }
}

void attn_multi_neon(float *out, size_t out_stride, const float *q, size_t q_stride, int n_q, const void *k_layer,
                     const void *v_layer, const int32_t *blocks, int n_pos, int kv_head, const attn_geom *geo) {
    for (int i = 0; i < n_q; i++)
        attn_tile_neon(out + (size_t)i * out_stride, q + (size_t)i * q_stride, k_layer, v_layer, blocks, n_pos + i,
                       kv_head, geo);
}
