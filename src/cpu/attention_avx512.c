// avx512 attention kernel (see attention.h). Per KV block (tile): scores for all n_rep heads, one online-
// softmax rescale per tile, then V accumulation; K/V rows are f16 converted in registers.
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/attention.h"

#define W 16
#define LOAD_H(X) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(X)))


void attn_tile_avx512(float *out, const float *q, const uint16_t *k_layer, const uint16_t *v_layer,
                    const int32_t *blocks, int n_pos, int kv_head, const attn_geom *geo) {
    const int hd = geo->head_dim, bs = geo->block_size, nr = geo->n_rep, nv = hd / W;
    float m[ATTN_MAX_REP], l[ATTN_MAX_REP];
    float s[ATTN_MAX_REP][64]; // scores then weights of one tile; block_size <= 64
    for (int r = 0; r < nr; r++) m[r] = -INFINITY, l[r] = 0.0f;
    memset(out, 0, sizeof(float) * (size_t)nr * hd);
    for (int p0 = 0; p0 < n_pos; p0 += bs) {
        int cnt = n_pos - p0 < bs ? n_pos - p0 : bs;
        size_t off = ((size_t)blocks[p0 / bs] * geo->n_kv_heads + kv_head) * bs * hd;
        const uint16_t *kb = k_layer + off, *vb = v_layer + off;
        for (int j = 0; j < cnt; j++) {
            __m512 kv[ATTN_MAX_HEAD_DIM / W];
            for (int c = 0; c < nv; c++) kv[c] = LOAD_H(kb + (size_t)j * hd + c * W);
            for (int r = 0; r < nr; r++) {
                const float *qr = q + (size_t)r * hd;
                __m512 acc = _mm512_setzero_ps();
                for (int c = 0; c < nv; c++) acc = _mm512_fmadd_ps(_mm512_loadu_ps(qr + c * W), kv[c], acc);
                s[r][j] = _mm512_reduce_add_ps(acc) * geo->scale;
            }
        }
        for (int r = 0; r < nr; r++) {
            float mt = m[r];
            for (int j = 0; j < cnt; j++) mt = s[r][j] > mt ? s[r][j] : mt;
            float corr = expf(m[r] - mt), sum = 0.0f;
            for (int j = 0; j < cnt; j++) sum += s[r][j] = expf(s[r][j] - mt);
            l[r] = l[r] * corr + sum;
            m[r] = mt;
            if (corr != 1.0f) {
                __m512 cv = _mm512_set1_ps(corr);
                float *o = out + (size_t)r * hd;
                for (int c = 0; c < nv; c++) _mm512_storeu_ps(o + c * W, _mm512_mul_ps(_mm512_loadu_ps(o + c * W), cv));
            }
        }
        for (int j = 0; j < cnt; j++) {
            __m512 vv[ATTN_MAX_HEAD_DIM / W];
            for (int c = 0; c < nv; c++) vv[c] = LOAD_H(vb + (size_t)j * hd + c * W);
            for (int r = 0; r < nr; r++) {
                float *o = out + (size_t)r * hd;
                __m512 w = _mm512_set1_ps(s[r][j]);
                for (int c = 0; c < nv; c++) _mm512_storeu_ps(o + c * W, _mm512_fmadd_ps(w, vv[c], _mm512_loadu_ps(o + c * W)));
            }
        }
    }
    for (int r = 0; r < nr; r++) {
        __m512 inv = _mm512_set1_ps(l[r] > 0 ? 1.0f / l[r] : 0.0f);
        float *o = out + (size_t)r * hd;
        for (int c = 0; c < nv; c++) _mm512_storeu_ps(o + c * W, _mm512_mul_ps(_mm512_loadu_ps(o + c * W), inv));
    }
}
