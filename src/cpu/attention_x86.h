// The x86 attention kernel body (see attention.h), compiled once per ISA: attention_avx2.c and
// attention_avx512.c define the vector macros below and include this file. Per KV block (tile): scores for
// all n_rep heads, one online-softmax rescale per tile, then V accumulation; K/V rows (f16, q8_0 or q4_0) are
// converted in registers, one row at a time (the type switch is per row, the inner loops are per type).
//
// Required macros: ATTN_X86_FN (function name), W (floats per vector, 8 or 16: divides the 32-value quant
// block), V (vector type), LOAD_H(p) (W f16 → V), LOAD_Q8(p) (W int8 → V), LOAD_Q4(p, hi) (W unsigned
// nibbles → V: the low nibbles of bytes p[0..W) or, hi, their high nibbles), H2F(h) (one f16 → float),
// LOADF/STOREF, FMA(a, b, c) = a·b + c, MUL, SUB, SET1, ZERO(), REDUCE(v) (horizontal sum → float).
#include <math.h>
#include <string.h>

#include "cpu/attention.h"
#include "tensor/ttype.h"

// Row bytes of a cache type (attention.h: anything but q8_0/q4_0 is f16).
static inline size_t attn_row_bytes(int type, int hd) {
    if (type == TT_Q8_0) return (size_t)hd / QK8_0 * sizeof(tt_block_q8_0);
    if (type == TT_Q4_0) return (size_t)hd / QK4_0 * sizeof(tt_block_q4_0);
    return (size_t)hd * sizeof(uint16_t);
}

// dst[0..nv) = the row's hd = nv·W values as floats, dequantized in registers.
static inline void attn_load_row(V *dst, const void *row, int type, int nv) {
    if (type == TT_Q8_0) {
        const tt_block_q8_0 *b = row;
        for (int c = 0; c < nv; c++) {
            const tt_block_q8_0 *bc = b + c * W / QK8_0;
            dst[c] = MUL(SET1(H2F(bc->d)), LOAD_Q8(bc->qs + c * W % QK8_0));
        }
    } else if (type == TT_Q4_0) {
        const tt_block_q4_0 *b = row;
        const V eight = SET1(8.0f);
        for (int c = 0; c < nv; c++) {
            const tt_block_q4_0 *bc = b + c * W / QK4_0;
            int o = c * W % QK4_0; // values 0..15 are the low nibbles of qs[0..16), 16..31 the high ones
            V qv = o < QK4_0 / 2 ? LOAD_Q4(bc->qs + o, 0) : LOAD_Q4(bc->qs + o - QK4_0 / 2, 1);
            dst[c] = MUL(SET1(H2F(bc->d)), SUB(qv, eight));
        }
    } else {
        const uint16_t *h = row;
        for (int c = 0; c < nv; c++) dst[c] = LOAD_H(h + c * W);
    }
}

void ATTN_X86_FN(float *out, const float *q, const void *k_layer, const void *v_layer,
                 const int32_t *blocks, int n_pos, int kv_head, const attn_geom *geo) {
    const int hd = geo->head_dim, bs = geo->block_size, nr = geo->n_rep, nv = hd / W;
    const int kt = geo->k_type, vt = geo->v_type;
    const size_t k_row = attn_row_bytes(kt, hd), v_row = attn_row_bytes(vt, hd);
    float m[ATTN_MAX_REP], l[ATTN_MAX_REP];
    float s[ATTN_MAX_REP][64]; // scores then weights of one tile; block_size <= 64
    for (int r = 0; r < nr; r++) m[r] = -INFINITY, l[r] = 0.0f;
    memset(out, 0, sizeof(float) * (size_t)nr * hd);
    const int first = attn_first_pos(geo, n_pos);
    for (int p0 = first / bs * bs; p0 < n_pos; p0 += bs) {
        int cnt = n_pos - p0 < bs ? n_pos - p0 : bs;
        int j0 = first > p0 ? first - p0 : 0; // the window may start inside the first tile
        size_t row0 = ((size_t)blocks[p0 / bs] * geo->n_kv_heads + kv_head) * bs;
        const char *kb = (const char *)k_layer + row0 * k_row, *vb = (const char *)v_layer + row0 * v_row;
        for (int j = j0; j < cnt; j++) {
            V kv[ATTN_MAX_HEAD_DIM / W];
            attn_load_row(kv, kb + (size_t)j * k_row, kt, nv);
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
            attn_load_row(vv, vb + (size_t)j * v_row, vt, nv);
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
