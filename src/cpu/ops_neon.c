// GLU activation for the ARM levels (NEON is baseline on ARM64, so one version serves all three).
#include "cpu/arm_kernels.h"

#include <math.h>

void ops_glu_neon(float *g, const float *u, int n, int gelu) {
    for (int i = 0; i < n; i++) {
        float x = g[i], z = gelu ? 1.5957691216057308f * (x + 0.044715f * x * x * x) : x;
        g[i] = x * u[i] / (1.0f + expf(-z));
    }
}
