// avx2 attention kernel (see attention.h). Per KV block (tile): scores for all n_rep heads, one online-
// softmax rescale per tile, then V accumulation; K/V rows are f16 converted in registers.
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/attention.h"

#define W 8
#define LOAD_H(X) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(X)))
static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void attn_tile_avx2(float *out, const float *q, const uint16_t *k_layer, const uint16_t *v_layer,
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
            __m256 kv[ATTN_MAX_HEAD_DIM / W];
            for (int c = 0; c < nv; c++) kv[c] = LOAD_H(kb + (size_t)j * hd + c * W);
            for (int r = 0; r < nr; r++) {
                const float *qr = q + (size_t)r * hd;
                __m256 acc = _mm256_setzero_ps();
                for (int c = 0; c < nv; c++) acc = _mm256_fmadd_ps(_mm256_loadu_ps(qr + c * W), kv[c], acc);
                s[r][j] = hsum8(acc) * geo->scale;
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
                __m256 cv = _mm256_set1_ps(corr);
                float *o = out + (size_t)r * hd;
                for (int c = 0; c < nv; c++) _mm256_storeu_ps(o + c * W, _mm256_mul_ps(_mm256_loadu_ps(o + c * W), cv));
            }
        }
        for (int j = 0; j < cnt; j++) {
            __m256 vv[ATTN_MAX_HEAD_DIM / W];
            for (int c = 0; c < nv; c++) vv[c] = LOAD_H(vb + (size_t)j * hd + c * W);
            for (int r = 0; r < nr; r++) {
                float *o = out + (size_t)r * hd;
                __m256 w = _mm256_set1_ps(s[r][j]);
                for (int c = 0; c < nv; c++) _mm256_storeu_ps(o + c * W, _mm256_fmadd_ps(w, vv[c], _mm256_loadu_ps(o + c * W)));
            }
        }
    }
    for (int r = 0; r < nr; r++) {
        __m256 inv = _mm256_set1_ps(l[r] > 0 ? 1.0f / l[r] : 0.0f);
        float *o = out + (size_t)r * hd;
        for (int c = 0; c < nv; c++) _mm256_storeu_ps(o + c * W, _mm256_mul_ps(_mm256_loadu_ps(o + c * W), inv));
    }
}
