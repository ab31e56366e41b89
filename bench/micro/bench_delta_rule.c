// The gated delta rule of one DeltaNet head (cpu/delta_rule.h), one thread, Qwen3.5's head (128 × 128 state, 64
// KiB): each ISA level's blocked kernel against the plain two-pass loop (S decayed and stored in pass 1, updated
// and stored in pass 2, each pass one loop over the value dims left to the compiler's vectorizer at the baseline
// level), over `heads` heads × 64 rows as gdn.c runs them (each head's rows in order, its state in the caches).
// Built by CMake with the other benches: build/bench_delta_rule [heads] [rounds].
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/timeutil.h"
#include "cpu/cpu.h"
#include "cpu/delta_rule.h"

enum { N = 128, ROWS = 64 };

static void plain_two_pass(float *S, const float *q, const float *k, const float *v, float g, float beta, float *d,
                           float *o, int n) {
    const float decay = expf(g), scale = 1.0f / sqrtf((float)n);
    for (int j = 0; j < n; j++) d[j] = 0.0f;
    for (int i = 0; i < n; i++) {
        float *row = S + (size_t)i * n;
        for (int j = 0; j < n; j++) row[j] *= decay, d[j] += row[j] * k[i];
    }
    for (int j = 0; j < n; j++) d[j] = (v[j] - d[j]) * beta, o[j] = 0.0f;
    for (int i = 0; i < n; i++) {
        float *row = S + (size_t)i * n;
        for (int j = 0; j < n; j++) row[j] += k[i] * d[j], o[j] += row[j] * q[i];
    }
    for (int j = 0; j < n; j++) o[j] *= scale;
}

int main(int argc, char **argv) {
    const int heads = argc > 1 ? atoi(argv[1]) : 16, rounds = argc > 2 ? atoi(argv[2]) : 3;
    if (heads < 1 || rounds < 1) return 2;
    float *S = calloc((size_t)heads * N * N, sizeof(float)), q[N], k[N], v[N], d[N], o[N];
    if (!S) return 1;
    for (int i = 0; i < N; i++) q[i] = sinf((float)i), k[i] = cosf((float)i) / 11.3f, v[i] = sinf(0.3f * i);
    printf("delta rule, head %d, %d heads x %d rows, 1 thread (ns per head-row; best of %d)\n", N, heads, ROWS,
           rounds);
    const int n_var = 1 + (int)cpu_hw_isa() + 1;
    double best[8];
    for (int var = 0; var < n_var; var++) best[var] = 1e30;
    for (int r = 0; r < rounds; r++)
        for (int var = 0; var < n_var; var++) { // interleaved: a change in the machine's speed hits every variant
            const double t0 = tc_now();
            for (int h = 0; h < heads; h++)
                for (int row = 0; row < ROWS; row++) {
                    float *Sh = S + (size_t)h * N * N;
                    if (var == 0) plain_two_pass(Sh, q, k, v, -0.1f, 0.5f, d, o, N);
                    else cpu_delta_rule_isa(Sh, q, k, v, -0.1f, 0.5f, d, o, N, (cpu_isa)(var - 1));
                }
            const double t = (tc_now() - t0) * 1e9 / ((double)heads * ROWS);
            if (t < best[var]) best[var] = t;
        }
    for (int var = 0; var < n_var; var++) {
        const char *name = var == 0   ? "plain two-pass"
                           : var == 1 ? "blocked, baseline"
                                      : cpu_isa_name((cpu_isa)(var - 1));
        printf("  %-22s %8.1f ns  %.2fx\n", name, best[var], best[0] / best[var]);
    }
    free(S);
    return 0;
}
