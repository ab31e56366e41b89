// The gated delta rule of one DeltaNet head (cpu/delta_rule.h): the blocked form equals the reference bit for bit
// at every ISA level the CPU has, over several rows (the state carried from row to row), at the sizes of the real
// models and odd ones (blocks and a remainder), and the recurrence does what its equations say on a case worked
// by hand.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/delta_rule.h"
#include "test_util.h"

static float frand(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void test_equals_reference(int n, int rows, cpu_isa isa) {
    unsigned seed = 7u + (unsigned)n;
    float *S1 = calloc((size_t)n * n, sizeof(float)), *S2 = calloc((size_t)n * n, sizeof(float));
    float *q = malloc(n * sizeof(float)), *k = malloc(n * sizeof(float)), *v = malloc(n * sizeof(float));
    float *d = malloc(n * sizeof(float)), *o1 = malloc(n * sizeof(float)), *o2 = malloc(n * sizeof(float));
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < n; i++) q[i] = frand(&seed), k[i] = frand(&seed) / sqrtf((float)n), v[i] = frand(&seed);
        const float g = -0.5f * (frand(&seed) + 1.0f), beta = 0.5f * (frand(&seed) + 1.0f);
        cpu_delta_rule_isa(S1, q, k, v, g, beta, d, o1, n, isa);
        cpu_delta_rule_ref(S2, q, k, v, g, beta, d, o2, n);
        CHECK(memcmp(o1, o2, n * sizeof(float)) == 0);
    }
    CHECK(memcmp(S1, S2, (size_t)n * n * sizeof(float)) == 0);
    free(S1), free(S2), free(q), free(k), free(v), free(d), free(o1), free(o2);
}

// n = 2, from zero state: S = k dᵀ with d = beta·v (Sᵀk = 0), o = Sᵀq / sqrt(2) = (k·q)·d / sqrt(2); a second
// row decays it first.
static void test_by_hand(void) {
    float S[4] = {0}, q[2] = {1.0f, 2.0f}, k[2] = {0.5f, 0.25f}, v[2] = {2.0f, -4.0f}, d[2], o[2];
    cpu_delta_rule(S, q, k, v, 0.0f, 0.5f, d, o, 2);
    CHECK(fabsf(S[0] - 0.5f) < 1e-6f && fabsf(S[1] + 1.0f) < 1e-6f); // row i=0: k0·d = 0.5·(1, -2)
    CHECK(fabsf(S[2] - 0.25f) < 1e-6f && fabsf(S[3] + 0.5f) < 1e-6f);
    CHECK(fabsf(o[0] - 1.0f / sqrtf(2.0f)) < 1e-6f && fabsf(o[1] + 2.0f / sqrtf(2.0f)) < 1e-6f); // k·q = 1
    // decay exp(log 0.5): S halves; Sᵀk = 0.5·(k·k)·(1, -2) = (0.15625, -0.3125); d = 1·(v − that)
    cpu_delta_rule(S, q, k, v, logf(0.5f), 1.0f, d, o, 2);
    CHECK(fabsf(d[0] - (2.0f - 0.15625f)) < 1e-5f && fabsf(d[1] - (-4.0f + 0.3125f)) < 1e-5f);
}

int main(void) {
    test_by_hand();
    for (int isa = CPU_ISA_SCALAR; isa <= (int)cpu_hw_isa(); isa++) {
        test_equals_reference(128, 5, (cpu_isa)isa); // Qwen3.5's heads
        test_equals_reference(32, 9, (cpu_isa)isa);  // qwen35-tiny's
        test_equals_reference(13, 4, (cpu_isa)isa);  // smaller than every block: the remainder path only
        test_equals_reference(80, 3, (cpu_isa)isa);  // blocks and a remainder at every level
    }
    TEST_MAIN_END();
}
