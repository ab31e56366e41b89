// Scalar reference attention and kernel selection.
#include "cpu/attention.h"

#include <math.h>
#include <string.h>

#include "tensor/quant_ref.h"
#if defined(__aarch64__)
#include "cpu/arm_kernels.h"
#endif
#include "tensor/ttype.h"

// The cache type a geometry's type field means (attention.h: anything but q8_0/q4_0 is f16).
static tt_type cache_type(int t) { return t == TT_Q8_0 || t == TT_Q4_0 ? (tt_type)t : TT_F16; }

void attn_quantize_q(attn_q8 *dst, const float *q, int nr, int hd) { attn_quantize_q_at(dst, 0, q, nr, hd); }

void attn_quantize_q_at(attn_q8 *dst, int row0, const float *q, int nr, int hd) {
    for (int r = 0; r < nr; r++)
        for (int b = 0; b < hd / 32; b++) {
            const float *x = q + (size_t)r * hd + b * 32;
            float amax = 0.0f;
            for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[i]));
            float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
            int32_t sum = 0;
            for (int i = 0; i < 32; i++) {
                int v = (int)lrintf(x[i] * id);
                v = v > 127 ? 127 : v < -127 ? -127 : v;
                dst->qs[row0 + r][b * 32 + i] = (int8_t)v, sum += v;
            }
            dst->d[row0 + r][b] = d, dst->sum[row0 + r][b] = sum;
        }
}

// q·k of query row r against one quantized K row (attention.h: integer sums per 32-value block).
static float qk_int(const attn_q8 *qq, int r, const void *krow, int k_type, int hd) {
    float dot = 0.0f;
    for (int b = 0; b < hd / 32; b++) {
        int32_t isum = 0;
        float dk;
        if (k_type == TT_Q8_0) {
            const tt_block_q8_0 *kb = (const tt_block_q8_0 *)krow + b;
            for (int i = 0; i < 32; i++) isum += qq->qs[r][b * 32 + i] * kb->qs[i];
            dk = tt_f16_to_f32(kb->d);
        } else {
            const tt_block_q4_0 *kb = (const tt_block_q4_0 *)krow + b;
            for (int i = 0; i < 16; i++)
                isum += qq->qs[r][b * 32 + i] * ((kb->qs[i] & 0xF) - 8) +
                        qq->qs[r][b * 32 + 16 + i] * ((kb->qs[i] >> 4) - 8);
            dk = tt_f16_to_f32(kb->d);
        }
        dot += dk * qq->d[r][b] * (float)isum;
    }
    return dot;
}

// One query's heads over the positions [lo, hi) of its own range, unnormalized (attn_span_fn's contract).
static void span_one_scalar(float *out, const float *q, const void *k_layer, const void *v_layer,
                            const int32_t *blocks, int n_pos, int kv_head, const attn_geom *geo, int lo, int hi,
                            float *ml) {
    const int hd = geo->head_dim, bs = geo->block_size, nr = geo->n_rep;
    const tt_traits *kt = tt_get(cache_type(geo->k_type)), *vt = tt_get(cache_type(geo->v_type));
    const size_t k_row = tt_row_size(cache_type(geo->k_type), hd), v_row = tt_row_size(cache_type(geo->v_type), hd);
    float m[ATTN_MAX_REP], l[ATTN_MAX_REP], s[ATTN_MAX_REP];
    float kf[ATTN_MAX_HEAD_DIM], vf[ATTN_MAX_HEAD_DIM]; // one dequantized row, never the whole context
    const int kq = attn_k_quantized(geo->k_type);
    attn_q8 qq;
    if (kq) attn_quantize_q(&qq, q, nr, hd);
    for (int r = 0; r < nr; r++) m[r] = -INFINITY, l[r] = 0.0f;
    memset(out, 0, sizeof(float) * (size_t)nr * hd);
    const int first = attn_first_pos(geo, n_pos), end = n_pos < hi ? n_pos : hi;
    for (int p = first > lo ? first : lo; p < end; p++) {
        size_t row = ((size_t)blocks[p / bs] * geo->n_kv_heads + kv_head) * bs + p % bs;
        const char *krow = (const char *)k_layer + row * k_row;
        if (!kq) kt->to_float(krow, kf, hd);
        vt->to_float((const char *)v_layer + row * v_row, vf, hd);
        for (int r = 0; r < nr; r++) {
            float dot = 0.0f;
            if (kq) dot = qk_int(&qq, r, krow, geo->k_type, hd);
            else
                for (int i = 0; i < hd; i++) dot += q[r * hd + i] * kf[i];
            s[r] = dot * geo->scale;
            if (geo->softcap > 0) s[r] = attn_softcap(s[r], geo->softcap);
        }
        for (int r = 0; r < nr; r++) {
            float m_new = s[r] > m[r] ? s[r] : m[r];
            float corr = expf(m[r] - m_new), w = expf(s[r] - m_new);
            l[r] = l[r] * corr + w;
            float *o = out + (size_t)r * hd;
            for (int i = 0; i < hd; i++) o[i] = o[i] * corr + w * vf[i];
            m[r] = m_new;
        }
    }
    for (int r = 0; r < nr; r++) ml[2 * r] = m[r], ml[2 * r + 1] = l[r];
}

void attn_span_scalar(float *out, size_t out_stride, const float *q, size_t q_stride, int n_q,
                      const void *k_layer, const void *v_layer, const int32_t *blocks, int n_pos, int kv_head,
                      const attn_geom *geo, int lo, int hi, float *ml) {
    for (int i = 0; i < n_q; i++)
        span_one_scalar(out + (size_t)i * out_stride, q + (size_t)i * q_stride, k_layer, v_layer, blocks, n_pos + i,
                        kv_head, geo, lo, hi, ml + 2 * i * geo->n_rep);
}

void attn_tile_scalar(float *out, const float *q, const void *k_layer, const void *v_layer,
                      const int32_t *blocks, int n_pos, int kv_head, const attn_geom *geo) {
    attn_span_run(attn_span_scalar, out, 0, q, 0, 1, k_layer, v_layer, blocks, n_pos, kv_head, geo);
}

void attn_multi_scalar(float *out, size_t out_stride, const float *q, size_t q_stride, int n_q,
                       const void *k_layer, const void *v_layer, const int32_t *blocks, int n_pos, int kv_head,
                       const attn_geom *geo) {
    attn_span_run(attn_span_scalar, out, out_stride, q, q_stride, n_q, k_layer, v_layer, blocks, n_pos, kv_head,
                  geo);
}

// --- spans

void attn_span_range(const attn_geom *geo, int n_pos, int n_q, int *first, int *last) {
    const int len = attn_span_len(geo);
    *first = attn_first_pos(geo, n_pos) / len; // later queries' windows start later
    *last = (n_pos + n_q - 2) / len;           // the last query's last position
}

void attn_span_merge(float *acc, size_t acc_stride, float *acc_ml, const float *part, size_t part_stride,
                     const float *part_ml, int n_q, int n_rep, int hd) {
    for (int r = 0; r < n_q * n_rep; r++) {
        const float mp = part_ml[2 * r], ma = acc_ml[2 * r];
        if (part_ml[2 * r + 1] == 0.0f) continue; // the head saw no position of this span
        const float mx = mp > ma ? mp : ma, ca = expf(ma - mx), cp = expf(mp - mx); // ca = 0 while acc is empty
        float *a = acc + (size_t)(r / n_rep) * acc_stride + (size_t)(r % n_rep) * hd;
        const float *p = part + (size_t)(r / n_rep) * part_stride + (size_t)(r % n_rep) * hd;
        for (int i = 0; i < hd; i++) a[i] = a[i] * ca + p[i] * cp;
        acc_ml[2 * r] = mx, acc_ml[2 * r + 1] = acc_ml[2 * r + 1] * ca + part_ml[2 * r + 1] * cp;
    }
}

void attn_span_finish(float *out, size_t out_stride, const float *ml, int n_q, int kv_head, const attn_geom *geo) {
    const int nr = geo->n_rep, hd = geo->head_dim;
    for (int r = 0; r < n_q * nr; r++) {
        const float inv = attn_out_scale(ml[2 * r], ml[2 * r + 1], geo->sinks, kv_head * nr + r % nr);
        float *o = out + (size_t)(r / nr) * out_stride + (size_t)(r % nr) * hd;
        for (int i = 0; i < hd; i++) o[i] *= inv;
    }
}

void attn_span_run(attn_span_fn span, float *out, size_t out_stride, const float *q, size_t q_stride, int n_q,
                   const void *k_layer, const void *v_layer, const int32_t *blocks, int n_pos, int kv_head,
                   const attn_geom *geo) {
    const int len = attn_span_len(geo), nr = geo->n_rep, hd = geo->head_dim;
    float ml[2 * ATTN_MAX_REP], pml[2 * ATTN_MAX_REP];
    int s0, s1;
    attn_span_range(geo, n_pos, n_q, &s0, &s1);
    span(out, out_stride, q, q_stride, n_q, k_layer, v_layer, blocks, n_pos, kv_head, geo, s0 * len,
         (s0 + 1) * len, ml);
    if (s1 > s0) {
        float part[ATTN_MAX_REP * ATTN_MAX_HEAD_DIM]; // (n_q · n_rep, hd)
        for (int k = s0 + 1; k <= s1; k++) {
            span(part, (size_t)nr * hd, q, q_stride, n_q, k_layer, v_layer, blocks, n_pos, kv_head, geo, k * len,
                 (k + 1) * len, pml);
            attn_span_merge(out, out_stride, ml, part, (size_t)nr * hd, pml, n_q, nr, hd);
        }
    }
    attn_span_finish(out, out_stride, ml, n_q, kv_head, geo);
}

// The SIMD tiles take head dims that are a multiple of 16; every ARM level shares the NEON tile.
attn_multi_fn attn_select_multi(cpu_isa isa, const attn_geom *geo) {
    if (geo->head_dim % 16 == 0) {
#if defined(__x86_64__)
        if (isa >= CPU_ISA_AVX512) return attn_multi_avx512;
        if (isa >= CPU_ISA_AVX2) return attn_multi_avx2;
#elif defined(__aarch64__)
        if (isa >= CPU_ISA_NEON) return attn_multi_neon;
#endif
    }
    (void)isa;
    return attn_multi_scalar;
}

attn_span_fn attn_select_span(cpu_isa isa, const attn_geom *geo) {
    if (geo->head_dim % 16 == 0) {
#if defined(__x86_64__)
        if (isa >= CPU_ISA_AVX512) return attn_span_avx512;
        if (isa >= CPU_ISA_AVX2) return attn_span_avx2;
#elif defined(__aarch64__)
        if (isa >= CPU_ISA_NEON) return NULL;
#endif
    }
    (void)isa;
    return attn_span_scalar;
}

attn_fn attn_select(cpu_isa isa, const attn_geom *geo) {
    if (geo->head_dim % 16 == 0) {
#if defined(__x86_64__)
        if (isa >= CPU_ISA_AVX512) return attn_tile_avx512;
        if (isa >= CPU_ISA_AVX2) return attn_tile_avx2;
#elif defined(__aarch64__)
        if (isa >= CPU_ISA_NEON) return attn_tile_neon;
#endif
    }
    (void)isa;
    return attn_tile_scalar;
}
