// Sampler inner loops over the whole vocabulary (internal to src/sampling/; exposed for tests). Each has a
// scalar reference (_ref); the fast versions use SSE2 (baseline x86-64) when available and are bit-identical
// to the reference (same operation order, no FMA contraction in ISO C mode).
#ifndef TACHYON_SAMP_KERNELS_H
#define TACHYON_SAMP_KERNELS_H

#include <stdint.h>

typedef struct {
    float v; // logit, later the unnormalized weight exp((logit - max) / T) in [0, 1]
    int32_t id;
} samp_cand;

// exp(x) for x <= 0 (Cephes polynomial; ~2e-7 relative to expf); x < -87 and -inf give exactly 0.
float samp_exp(float x);

// c[i].v <- samp_exp((c[i].v - vmax) * inv_t) for i < n (c[i].v must not be NaN); returns the sum.
double samp_weights_ref(samp_cand *c, int n, float vmax, float inv_t);
double samp_weights(samp_cand *c, int n, float vmax, float inv_t);

// max of x[0..n) ignoring NaN (-inf if none); n > 0.
float samp_max_ref(const float *x, int n);
float samp_max(const float *x, int n);

// sum of samp_exp(x[i] - shift), NaN entries counting 0.
double samp_sumexp_ref(const float *x, int n, float shift);
double samp_sumexp(const float *x, int n, float shift);

#endif
