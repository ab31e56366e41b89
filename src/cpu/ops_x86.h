// The GLU activations (ops_swiglu / ops_geglu, ops.h) per ISA: ops_avx2.c / ops_avx512.c include the vector
// macros (x86_vec256.h / x86_vec512.h), define OPS_GLU_FN and include this file.
// Both are act(g) * u with act(x) = x * sigmoid(z): SiLU z = x; tanh-GELU z = 2·sqrt(2/pi)·(x + 0.044715 x³),
// since 0.5·(1 + tanh(y)) = sigmoid(2y). z is clamped to [-80, 80] (e^80 and e^-80 are finite normal floats; the
// sigmoid is 1 or 0 to float precision well before): then no inf or NaN reaches the division. The scalar
// reference (tanhf / expf, ops.c) differs by a few ulp (tests/unit/test_ops.c bounds it). A tail shorter than W
// goes through the same vector code from a padded copy, so a value's result never depends on n or its position.

void OPS_GLU_FN(float *g, const float *u, int n, int gelu);

static inline V ops_glu_v(V x, V uv, int gelu) {
    V z = x;
    if (gelu) z = MUL(MUL(SET1(2.0f * 0.7978845608028654f), x), FMA(MUL(SET1(0.044715f), x), x, SET1(1.0f)));
    z = MINV(MAXV(z, SET1(-80.0f)), SET1(80.0f));
    return DIV(MUL(x, uv), ADD(SET1(1.0f), x86_vexp(SUB(ZERO(), z))));
}

void OPS_GLU_FN(float *g, const float *u, int n, int gelu) {
    int i = 0;
    for (; i + W <= n; i += W) STOREF(g + i, ops_glu_v(LOADF(g + i), LOADF(u + i), gelu));
    if (i < n) {
        float tg[W] = {0}, tu[W] = {0};
        for (int e = 0; i + e < n; e++) tg[e] = g[i + e], tu[e] = u[i + e];
        STOREF(tg, ops_glu_v(LOADF(tg), LOADF(tu), gelu));
        for (int e = 0; i + e < n; e++) g[i + e] = tg[e];
    }
}
