#include "cpu/ops.h"

#include "cpu/cpu.h"
#if defined(__aarch64__)
#include "cpu/arm_kernels.h"
#endif

#include <math.h>
#include <stddef.h>

void ops_rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    double ss = 0.0; // double: the sum of 2k squares is where float loses the last bits
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / n + eps));
    if (w)
        for (int i = 0; i < n; i++) out[i] = x[i] * scale * w[i];
    else
        for (int i = 0; i < n; i++) out[i] = x[i] * scale;
}

void ops_rope_inv_freq(float *inv_freq, int rope_dim, float base, const float *ff) {
    for (int i = 0; i < rope_dim / 2; i++)
        inv_freq[i] = (float)(pow((double)base, -2.0 * i / rope_dim) / (ff ? ff[i] : 1.0));
}

void ops_rope_angles(float *cos_out, float *sin_out, int pos, int rope_dim, float scale, const float *inv_freq) {
    for (int i = 0; i < rope_dim / 2; i++) {
        double theta = (double)pos * scale * inv_freq[i];
        cos_out[i] = (float)cos(theta);
        sin_out[i] = (float)sin(theta);
    }
}

void ops_rope(float *x, int n_heads, int head_dim, int rope_dim, const float *cos_t, const float *sin_t, int neox) {
    int half = rope_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        if (neox) {
            for (int i = 0; i < half; i++) {
                float a = v[i], b = v[i + half];
                v[i] = a * cos_t[i] - b * sin_t[i];
                v[i + half] = a * sin_t[i] + b * cos_t[i];
            }
        } else {
            for (int i = 0; i < half; i++) {
                float a = v[2 * i], b = v[2 * i + 1];
                v[2 * i] = a * cos_t[i] - b * sin_t[i];
                v[2 * i + 1] = a * sin_t[i] + b * cos_t[i];
            }
        }
    }
}

// Scalar references of the GLU activations (libm expf / tanhf); the default path is the ISA kernel below.
static void ops_swiglu_ref(float *g, const float *u, int n) {
    for (int i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void ops_geglu_ref(float *g, const float *u, int n) {
    const float c = 0.7978845608028654f; // sqrt(2/pi)
    for (int i = 0; i < n; i++) {
        float x = g[i];
        g[i] = 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x))) * u[i];
    }
}

void ops_glu_isa(float *g, const float *u, int n, int gelu, cpu_isa isa) {
    if (isa > cpu_hw_isa()) isa = cpu_hw_isa(); // never run what the CPU lacks
#if defined(__x86_64__)
    if (isa >= CPU_ISA_AVX512) ops_glu_avx512(g, u, n, gelu);
    else if (isa >= CPU_ISA_AVX2) ops_glu_avx2(g, u, n, gelu);
    else
#elif defined(__aarch64__)
    if (isa >= CPU_ISA_NEON) ops_glu_neon(g, u, n, gelu);
    else
#endif
    if (gelu) ops_geglu_ref(g, u, n);
    else ops_swiglu_ref(g, u, n);
}

// TACHYON_PRECISE=1 keeps libm's functions (the reference-precision mode compares against float64 references).
static cpu_isa ops_isa(void) { return cpu_precise() ? CPU_ISA_SCALAR : cpu_best_isa(); }

void ops_swiglu(float *g, const float *u, int n) { ops_glu_isa(g, u, n, 0, ops_isa()); }

void ops_geglu(float *g, const float *u, int n) { ops_glu_isa(g, u, n, 1, ops_isa()); }

void ops_swiglu_clamped(float *g, const float *u, int n, float alpha, float limit) {
    for (int i = 0; i < n; i++) {
        const float x = fminf(g[i], limit), y = fminf(fmaxf(u[i], -limit), limit);
        g[i] = x / (1.0f + expf(-alpha * x)) * (y + 1.0f);
    }
}

void ops_scale(float *x, float s, int n) {
    for (int i = 0; i < n; i++) x[i] *= s;
}

void ops_add(float *x, const float *y, int n) {
    for (int i = 0; i < n; i++) x[i] += y[i];
}

// --- Hadamard rotation (quantized KV cache)

void ops_hadamard(float *x, int n) {
    // Fast Walsh–Hadamard transform: log2(n) butterfly passes, then 1/sqrt(n) so that H is orthonormal
    // (and, being symmetric, its own inverse).
    for (int len = 1; len < n; len <<= 1)
        for (int i = 0; i < n; i += 2 * len)
            for (int j = i; j < i + len; j++) {
                float a = x[j], b = x[j + len];
                x[j] = a + b;
                x[j + len] = a - b;
            }
    ops_scale(x, (float)(1.0 / sqrt((double)n)), n);
}

int ops_hadamard_block(int head_dim) {
    if (head_dim <= 0) return 0;
    int b = head_dim & -head_dim; // largest power of two dividing head_dim
    return b >= OPS_HADAMARD_MIN ? b : 0;
}

void ops_hadamard_heads(float *x, int n_heads, int head_dim, int block) {
    for (int i = 0; i + block <= n_heads * head_dim; i += block) ops_hadamard(x + i, block);
}
