// The gated delta rule of one head (delta_rule.h): the baseline instance of delta_rule_impl.h, the dispatch by
// ISA level, and the reference.
#include "cpu/delta_rule.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "cpu/cpu.h"

#define DR_FN cpu_delta_rule_base
#define DR_VW 4
#define DR_NV 4
#include "cpu/delta_rule_impl.h"

void cpu_delta_rule_isa(float *S, const float *q, const float *k, const float *v, float g, float beta, float *d,
                        float *o, int n, cpu_isa isa) {
    if (isa > cpu_hw_isa()) isa = cpu_hw_isa(); // never run what the CPU lacks
#if defined(__x86_64__)
    if (isa >= CPU_ISA_AVX512) cpu_delta_rule_avx512(S, q, k, v, g, beta, d, o, n);
    else if (isa >= CPU_ISA_AVX2) cpu_delta_rule_avx2(S, q, k, v, g, beta, d, o, n);
    else
#endif
        cpu_delta_rule_base(S, q, k, v, g, beta, d, o, n);
}

void cpu_delta_rule(float *S, const float *q, const float *k, const float *v, float g, float beta, float *d,
                    float *o, int n) {
    cpu_delta_rule_isa(S, q, k, v, g, beta, d, o, n, cpu_best_isa());
}

void cpu_delta_rule_ref(float *S, const float *q, const float *k, const float *v, float g, float beta, float *d,
                        float *o, int n) {
    const float decay = expf(g), scale = 1.0f / sqrtf((float)n);
    for (int i = 0; i < n * n; i++) S[i] *= decay;
    for (int j = 0; j < n; j++) {
        float sum = 0.0f;
        for (int i = 0; i < n; i++) sum += S[(size_t)i * n + j] * k[i];
        d[j] = (v[j] - sum) * beta;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) S[(size_t)i * n + j] += k[i] * d[j];
    for (int j = 0; j < n; j++) {
        float sum = 0.0f;
        for (int i = 0; i < n; i++) sum += S[(size_t)i * n + j] * q[i];
        o[j] = sum * scale;
    }
}
