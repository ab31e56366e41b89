// Elementwise and per-row operations of the transformer block. Scalar C (the compiler vectorizes these
// simple loops); they are O(n·dim) per step and small next to the matmuls.
#ifndef TACHYON_CPU_OPS_H
#define TACHYON_CPU_OPS_H

// out (n) = x / sqrt(mean(x²) + eps) * w; out may alias x. w may be NULL (no scale).
void ops_rmsnorm(float *out, const float *x, const float *w, int n, float eps);
// inv_freq (rope_dim/2): 1 / (base^(2i/rope_dim) · ff_i), where ff (rope_dim/2, may be NULL) are per-frequency
// divisors (Llama 3.1 rope scaling). Computed once per model.
void ops_rope_inv_freq(float *inv_freq, int rope_dim, float base, const float *ff);
// cos/sin (rope_dim/2) of the rotation angles pos·scale·inv_freq_i for one position.
void ops_rope_angles(float *cos_out, float *sin_out, int pos, int rope_dim, float scale, const float *inv_freq);
// Rotates the first rope_dim dims of each of n_heads heads of x (n_heads, head_dim) in place. neox: pairs
// (i, i + rope_dim/2); otherwise adjacent pairs (2i, 2i+1).
void ops_rope(float *x, int n_heads, int head_dim, int rope_dim, const float *cos_t, const float *sin_t, int neox);
// g (n) = silu(g) * u
void ops_swiglu(float *g, const float *u, int n);
// g (n) = gelu(g) * u, GELU in its tanh approximation (Gemma's GeGLU)
void ops_geglu(float *g, const float *u, int n);
// x (n) *= s
void ops_scale(float *x, float s, int n);
// x (n) += y
void ops_add(float *x, const float *y, int n);

#endif
