// The gated delta rule of one head (delta_rule.h).
#include "cpu/delta_rule.h"

#include <math.h>
#include <stddef.h>

void cpu_delta_rule(float *S, const float *q, const float *k, const float *v, float g, float beta, float *d,
                    float *o, int n) {
    const float decay = expf(g), scale = 1.0f / sqrtf((float)n);
    // pass 1: decay, and Sᵀk accumulated row by row of S (d holds the sums)
    for (int j = 0; j < n; j++) d[j] = 0.0f;
    for (int i = 0; i < n; i++) {
        float *row = S + (size_t)i * n;
        const float ki = k[i];
        for (int j = 0; j < n; j++) {
            row[j] *= decay;
            d[j] += row[j] * ki;
        }
    }
    for (int j = 0; j < n; j++) d[j] = (v[j] - d[j]) * beta;
    // pass 2: the rank-1 update, and Sᵀq of the updated state
    for (int j = 0; j < n; j++) o[j] = 0.0f;
    for (int i = 0; i < n; i++) {
        float *row = S + (size_t)i * n;
        const float ki = k[i], qi = q[i];
        for (int j = 0; j < n; j++) {
            row[j] += ki * d[j];
            o[j] += row[j] * qi;
        }
    }
    for (int j = 0; j < n; j++) o[j] *= scale;
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
