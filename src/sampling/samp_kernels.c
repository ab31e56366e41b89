// Vocabulary-wide loops of the sampler: scalar references and SSE2 versions (see samp_kernels.h).
#include "sampling/samp_kernels.h"

#include <math.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define EXP_LO -87.0f
#define LOG2E 1.44269504088896341f
#define ROUND_MAGIC 12582912.0f // 1.5 * 2^23: adding and subtracting it rounds to an integer
#define LN2_HI 0.693359375f
#define LN2_LO -2.12194440e-4f
#define P0 1.9875691500e-4f
#define P1 1.3981999507e-3f
#define P2 8.3334519073e-3f
#define P3 4.1665795894e-2f
#define P4 1.6666665459e-1f
#define P5 5.0000001201e-1f

float samp_exp(float x) {
    float xc = x < EXP_LO ? EXP_LO : x;
    float n = (xc * LOG2E + ROUND_MAGIC) - ROUND_MAGIC; // round(x / ln 2), in [-126, 0]
    float r = xc - n * LN2_HI;
    r = r - n * LN2_LO;
    float q = P0;
    q = q * r + P1;
    q = q * r + P2;
    q = q * r + P3;
    q = q * r + P4;
    q = q * r + P5;
    float y = q * r * r + r + 1.0f;
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23; // 2^n
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x < EXP_LO ? 0.0f : y * scale;
}

double samp_weights_ref(samp_cand *c, int n, float vmax, float inv_t) {
    double z = 0.0;
    for (int i = 0; i < n; i++) {
        c[i].v = samp_exp((c[i].v - vmax) * inv_t);
        z += c[i].v;
    }
    return z;
}

float samp_max_ref(const float *x, int n) {
    float m = -INFINITY;
    for (int i = 0; i < n; i++)
        if (x[i] > m) m = x[i];
    return m;
}

double samp_sumexp_ref(const float *x, int n, float shift) {
    double z = 0.0;
    for (int i = 0; i < n; i++)
        if (!isnan(x[i])) z += samp_exp(x[i] - shift);
    return z;
}

#ifdef __SSE2__
// Four lanes of samp_exp, same operations in the same order.
static inline __m128 exp4(__m128 x) {
    const __m128 lo = _mm_set1_ps(EXP_LO), magic = _mm_set1_ps(ROUND_MAGIC);
    __m128 xc = _mm_max_ps(x, lo);
    __m128 n = _mm_sub_ps(_mm_add_ps(_mm_mul_ps(xc, _mm_set1_ps(LOG2E)), magic), magic);
    __m128 r = _mm_sub_ps(xc, _mm_mul_ps(n, _mm_set1_ps(LN2_HI)));
    r = _mm_sub_ps(r, _mm_mul_ps(n, _mm_set1_ps(LN2_LO)));
    __m128 q = _mm_set1_ps(P0);
    q = _mm_add_ps(_mm_mul_ps(q, r), _mm_set1_ps(P1));
    q = _mm_add_ps(_mm_mul_ps(q, r), _mm_set1_ps(P2));
    q = _mm_add_ps(_mm_mul_ps(q, r), _mm_set1_ps(P3));
    q = _mm_add_ps(_mm_mul_ps(q, r), _mm_set1_ps(P4));
    q = _mm_add_ps(_mm_mul_ps(q, r), _mm_set1_ps(P5));
    __m128 y = _mm_add_ps(_mm_add_ps(_mm_mul_ps(_mm_mul_ps(q, r), r), r), _mm_set1_ps(1.0f));
    __m128i e = _mm_slli_epi32(_mm_add_epi32(_mm_cvtps_epi32(n), _mm_set1_epi32(127)), 23);
    __m128 res = _mm_mul_ps(y, _mm_castsi128_ps(e));
    return _mm_andnot_ps(_mm_cmplt_ps(x, lo), res);
}

// z += lanes of w, in double, in the order the reference adds them (lane 0..3 of each group) — not the
// same association, so sums may differ from the reference in the last bits; callers only need ~1e-12.
static inline void acc_pd(__m128d *a, __m128d *b, __m128 w) {
    *a = _mm_add_pd(*a, _mm_cvtps_pd(w));
    *b = _mm_add_pd(*b, _mm_cvtps_pd(_mm_movehl_ps(w, w)));
}

static inline double hsum_pd(__m128d a, __m128d b) {
    __m128d s = _mm_add_pd(a, b);
    return _mm_cvtsd_f64(s) + _mm_cvtsd_f64(_mm_unpackhi_pd(s, s));
}

double samp_weights(samp_cand *c, int n, float vmax, float inv_t) {
    __m128 vm = _mm_set1_ps(vmax), it = _mm_set1_ps(inv_t);
    __m128d za = _mm_setzero_pd(), zb = _mm_setzero_pd();
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        float *p = (float *)(c + i);
        __m128 a = _mm_loadu_ps(p), b = _mm_loadu_ps(p + 4); // v0 id0 v1 id1 | v2 id2 v3 id3
        __m128 v = _mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
        __m128 ids = _mm_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
        __m128 w = exp4(_mm_mul_ps(_mm_sub_ps(v, vm), it));
        _mm_storeu_ps(p, _mm_unpacklo_ps(w, ids));
        _mm_storeu_ps(p + 4, _mm_unpackhi_ps(w, ids));
        acc_pd(&za, &zb, w);
    }
    return hsum_pd(za, zb) + samp_weights_ref(c + i, n - i, vmax, inv_t);
}

float samp_max(const float *x, int n) {
    __m128 m0 = _mm_set1_ps(-INFINITY), m1 = m0;
    int i = 0;
    for (; i + 8 <= n; i += 8) { // maxps(x, m) keeps m when x is NaN
        m0 = _mm_max_ps(_mm_loadu_ps(x + i), m0);
        m1 = _mm_max_ps(_mm_loadu_ps(x + i + 4), m1);
    }
    float lanes[4];
    _mm_storeu_ps(lanes, _mm_max_ps(m0, m1));
    float m = samp_max_ref(x + i, n - i);
    for (int j = 0; j < 4; j++) m = lanes[j] > m ? lanes[j] : m;
    return m;
}

double samp_sumexp(const float *x, int n, float shift) {
    __m128 sh = _mm_set1_ps(shift);
    __m128d za = _mm_setzero_pd(), zb = _mm_setzero_pd();
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        __m128 v = _mm_loadu_ps(x + i);
        __m128 ok = _mm_cmpord_ps(v, v); // NaN lanes count 0
        __m128 w = _mm_and_ps(exp4(_mm_sub_ps(_mm_and_ps(v, ok), sh)), ok);
        acc_pd(&za, &zb, w);
    }
    return hsum_pd(za, zb) + samp_sumexp_ref(x + i, n - i, shift);
}
#else
double samp_weights(samp_cand *c, int n, float vmax, float inv_t) { return samp_weights_ref(c, n, vmax, inv_t); }
float samp_max(const float *x, int n) { return samp_max_ref(x, n); }
double samp_sumexp(const float *x, int n, float shift) { return samp_sumexp_ref(x, n, shift); }
#endif
