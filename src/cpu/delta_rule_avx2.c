// The gated delta rule of one head at the AVX2 level (delta_rule_impl.h): blocks of 64 value dims, eight vectors.
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "cpu/delta_rule.h"

#define DR_FN dr_avx2
#define DR_VW 8
#define DR_NV 8
#include "cpu/delta_rule_impl.h"

void cpu_delta_rule_avx2(float *S, const float *q, const float *k, const float *v, float g, float beta, float *d,
                         float *o, int n) {
    dr_avx2(S, q, k, v, g, beta, d, o, n);
}
