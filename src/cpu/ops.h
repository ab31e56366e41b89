// Elementwise and per-row operations of the transformer block. Scalar C (the compiler vectorizes these
// simple loops); they are O(n·dim) per step and small next to the matmuls. The GLU activations call expf /
// tanhf per value, which the compiler cannot vectorize: they have AVX2 / AVX-512 kernels (ops_x86.h).
#ifndef TACHYON_CPU_OPS_H
#define TACHYON_CPU_OPS_H

#include "cpu/cpu.h"

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
// g (n) = silu(g) * u, at the current ISA level (vector exp: ops_x86.h, or the NEON kernel of arm_kernels.h;
// libm under TACHYON_PRECISE)
void ops_swiglu(float *g, const float *u, int n);
// g (n) = gelu(g) * u, GELU in its tanh approximation (Gemma's GeGLU); same dispatch
void ops_geglu(float *g, const float *u, int n);
// g (n) = the clamped SwiGLU of gpt-oss's experts: with x = min(g, limit) and y = clamp(u, -limit, limit),
// x·σ(alpha·x)·(y + 1). Scalar (libm expf) at every level.
void ops_swiglu_clamped(float *g, const float *u, int n, float alpha, float limit);
// Either (gelu 0/1) at a fixed level (scalar: the libm reference), for tests.
void ops_glu_isa(float *g, const float *u, int n, int gelu, cpu_isa isa);
#if defined(__x86_64__)
void ops_glu_avx2(float *g, const float *u, int n, int gelu);
void ops_glu_avx512(float *g, const float *u, int n, int gelu);
#endif
// x (n) *= s
void ops_scale(float *x, float s, int n);
// x (n) += y
void ops_add(float *x, const float *y, int n);

// --- Hadamard rotation of the quantized KV cache (llama.cpp's "rotate activations", PR 21038)
// Rotating Q and K (or V and the attention output) by the same orthonormal H leaves dot products unchanged,
// but spreads outlier channels across a quant block, so a q4_0/q8_0 cache loses less.

// Smallest rotation worth doing: a q4_0/q8_0 block is 32 values; a shorter rotation mixes inside a block only
// partly and leaves the scale set by the same outliers.
#define OPS_HADAMARD_MIN 32
// x (n) = H_n · x in place, H_n the Sylvester Hadamard matrix scaled by 1/sqrt(n): orthonormal, symmetric,
// H·H = I. n must be a power of two (O(n log n) butterflies).
void ops_hadamard(float *x, int n);
// The rotation size for a head dim: the largest power of two dividing it (the whole head for 64/128/256;
// block-diagonal H, still orthonormal, for e.g. 96 → 32), or 0 (no rotation) when that is under
// OPS_HADAMARD_MIN.
int ops_hadamard_block(int head_dim);
// Rotates each block-sized slice of x (n_heads, head_dim) in place; block from ops_hadamard_block (> 0).
void ops_hadamard_heads(float *x, int n_heads, int head_dim, int block);

#endif
