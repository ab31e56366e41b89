// Scalar reference attention and kernel selection.
#include "cpu/attention.h"

#include <math.h>
#include <string.h>

#include "tensor/quant_ref.h"
#include "tensor/ttype.h"

// The cache type a geometry's type field means (attention.h: anything but q8_0/q4_0 is f16).
static tt_type cache_type(int t) { return t == TT_Q8_0 || t == TT_Q4_0 ? (tt_type)t : TT_F16; }

void attn_tile_scalar(float *out, const float *q, const void *k_layer, const void *v_layer,
                      const int32_t *blocks, int n_pos, int kv_head, const attn_geom *geo) {
    const int hd = geo->head_dim, bs = geo->block_size, nr = geo->n_rep;
    const tt_traits *kt = tt_get(cache_type(geo->k_type)), *vt = tt_get(cache_type(geo->v_type));
    const size_t k_row = tt_row_size(cache_type(geo->k_type), hd), v_row = tt_row_size(cache_type(geo->v_type), hd);
    float m[ATTN_MAX_REP], l[ATTN_MAX_REP], s[ATTN_MAX_REP];
    float kf[ATTN_MAX_HEAD_DIM], vf[ATTN_MAX_HEAD_DIM]; // one dequantized row, never the whole context
    for (int r = 0; r < nr; r++) m[r] = -INFINITY, l[r] = 0.0f;
    memset(out, 0, sizeof(float) * (size_t)nr * hd);
    for (int p = attn_first_pos(geo, n_pos); p < n_pos; p++) {
        size_t row = ((size_t)blocks[p / bs] * geo->n_kv_heads + kv_head) * bs + p % bs;
        kt->to_float((const char *)k_layer + row * k_row, kf, hd);
        vt->to_float((const char *)v_layer + row * v_row, vf, hd);
        for (int r = 0; r < nr; r++) {
            float dot = 0.0f;
            for (int i = 0; i < hd; i++) dot += q[r * hd + i] * kf[i];
            s[r] = dot * geo->scale;
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
    for (int r = 0; r < nr; r++) {
        float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
        for (int i = 0; i < hd; i++) out[(size_t)r * hd + i] *= inv;
    }
}

attn_fn attn_select(cpu_isa isa, const attn_geom *geo) {
    if (geo->head_dim % 16 == 0) {
        if (isa >= CPU_ISA_AVX512) return attn_tile_avx512;
        if (isa >= CPU_ISA_AVX2) return attn_tile_avx2;
    }
    return attn_tile_scalar;
}
