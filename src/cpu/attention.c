// Scalar reference attention and kernel selection.
#include "cpu/attention.h"

#include <math.h>
#include <string.h>

#include "tensor/ttype.h"

void attn_tile_scalar(float *out, const float *q, const uint16_t *k_layer, const uint16_t *v_layer,
                      const int32_t *blocks, int n_pos, int kv_head, const attn_geom *geo) {
    const int hd = geo->head_dim, bs = geo->block_size, nr = geo->n_rep;
    float m[ATTN_MAX_REP], l[ATTN_MAX_REP], s[ATTN_MAX_REP];
    for (int r = 0; r < nr; r++) m[r] = -INFINITY, l[r] = 0.0f;
    memset(out, 0, sizeof(float) * (size_t)nr * hd);
    for (int p = attn_first_pos(geo, n_pos); p < n_pos; p++) {
        size_t off = (((size_t)blocks[p / bs] * geo->n_kv_heads + kv_head) * bs + p % bs) * hd;
        const uint16_t *kp = k_layer + off, *vp = v_layer + off;
        for (int r = 0; r < nr; r++) {
            float dot = 0.0f;
            for (int i = 0; i < hd; i++) dot += q[r * hd + i] * tt_f16_to_f32(kp[i]);
            s[r] = dot * geo->scale;
        }
        for (int r = 0; r < nr; r++) {
            float m_new = s[r] > m[r] ? s[r] : m[r];
            float corr = expf(m[r] - m_new), w = expf(s[r] - m_new);
            l[r] = l[r] * corr + w;
            float *o = out + (size_t)r * hd;
            for (int i = 0; i < hd; i++) o[i] = o[i] * corr + w * tt_f16_to_f32(vp[i]);
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
