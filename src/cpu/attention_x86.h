// The x86 attention kernel body (see attention.h), compiled once per ISA: attention_avx2.c and
// attention_avx512.c define the vector macros below and include this file. Per KV block (tile): scores for
// all n_rep heads, one online-softmax rescale per tile, then V accumulation; K/V rows are f16 converted in
// registers.
//
// Required macros: ATTN_X86_FN (function name), W (floats per vector), V (vector type), LOAD_H(p) (W f16 →
// V), LOADF/STOREF, FMA(a, b, c) = a·b + c, MUL, SET1, ZERO(), REDUCE(v) (horizontal sum → float).
#include <math.h>
#include <string.h>

#include "cpu/attention.h"

void ATTN_X86_FN(float *out, const float *q, const uint16_t *k_layer, const uint16_t *v_layer,
                 const int32_t *blocks, int n_pos, int kv_head, const attn_geom *geo) {
    const int hd = geo->head_dim, bs = geo->block_size, nr = geo->n_rep, nv = hd / W;
    float m[ATTN_MAX_REP], l[ATTN_MAX_REP];
    float s[ATTN_MAX_REP][64]; // scores then weights of one tile; block_size <= 64
    for (int r = 0; r < nr; r++) m[r] = -INFINITY, l[r] = 0.0f;
    memset(out, 0, sizeof(float) * (size_t)nr * hd);
    const int first = attn_first_pos(geo, n_pos);
    for (int p0 = first / bs * bs; p0 < n_pos; p0 += bs) {
        int cnt = n_pos - p0 < bs ? n_pos - p0 : bs;
        int j0 = first > p0 ? first - p0 : 0; // the window may start inside the first tile
        size_t off = ((size_t)blocks[p0 / bs] * geo->n_kv_heads + kv_head) * bs * hd;
        const uint16_t *kb = k_layer + off, *vb = v_layer + off;
        for (int j = j0; j < cnt; j++) {
            V kv[ATTN_MAX_HEAD_DIM / W];
            for (int c = 0; c < nv; c++) kv[c] = LOAD_H(kb + (size_t)j * hd + c * W);
            for (int r = 0; r < nr; r++) {
                const float *qr = q + (size_t)r * hd;
                V acc = ZERO();
                for (int c = 0; c < nv; c++) acc = FMA(LOADF(qr + c * W), kv[c], acc);
                s[r][j] = REDUCE(acc) * geo->scale;
            }
        }
        for (int r = 0; r < nr; r++) {
            float mt = m[r];
            for (int j = j0; j < cnt; j++) mt = s[r][j] > mt ? s[r][j] : mt;
            float corr = expf(m[r] - mt), sum = 0.0f;
            for (int j = j0; j < cnt; j++) sum += s[r][j] = expf(s[r][j] - mt);
            l[r] = l[r] * corr + sum;
            m[r] = mt;
            if (corr != 1.0f) {
                V cv = SET1(corr);
                float *o = out + (size_t)r * hd;
                for (int c = 0; c < nv; c++) STOREF(o + c * W, MUL(LOADF(o + c * W), cv));
            }
        }
        for (int j = j0; j < cnt; j++) {
            V vv[ATTN_MAX_HEAD_DIM / W];
            for (int c = 0; c < nv; c++) vv[c] = LOAD_H(vb + (size_t)j * hd + c * W);
            for (int r = 0; r < nr; r++) {
                float *o = out + (size_t)r * hd;
                V w = SET1(s[r][j]);
                for (int c = 0; c < nv; c++) STOREF(o + c * W, FMA(w, vv[c], LOADF(o + c * W)));
            }
        }
    }
    for (int r = 0; r < nr; r++) {
        V inv = SET1(l[r] > 0 ? 1.0f / l[r] : 0.0f);
        float *o = out + (size_t)r * hd;
        for (int c = 0; c < nv; c++) STOREF(o + c * W, MUL(LOADF(o + c * W), inv));
    }
}
