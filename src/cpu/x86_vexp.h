// e^x per lane, compiled once per ISA from the vector macros of x86_vec256.h / x86_vec512.h (V, SET1, MAXV,
// ROUNDV, FMA, MUL, POW2N). Cephes expf: n = round(x·log2 e), r = x - n·ln 2 in two parts, a degree-6
// polynomial, times 2^n; within 2 ulp of expf for -87 <= x <= 88; x below -87 gives ~1e-38, not 0. The caller
// keeps x <= 88 (2^n overflows the exponent bits above). Used by the attention softmax and the GLU activations.
#ifndef TACHYON_CPU_X86_VEXP_H
#define TACHYON_CPU_X86_VEXP_H

static inline V x86_vexp(V x) {
    x = MAXV(x, SET1(-87.0f));
    V n = ROUNDV(MUL(x, SET1(1.44269504f)));
    V r = FMA(n, SET1(-0.693359375f), x);
    r = FMA(n, SET1(2.12194440e-4f), r);
    V p = SET1(1.9875691500e-4f);
    p = FMA(p, r, SET1(1.3981999507e-3f));
    p = FMA(p, r, SET1(8.3334519073e-3f));
    p = FMA(p, r, SET1(4.1665795894e-2f));
    p = FMA(p, r, SET1(1.6666665459e-1f));
    p = FMA(p, r, SET1(5.0000001201e-1f));
    p = FMA(MUL(p, r), r, FMA(r, SET1(1.0f), SET1(1.0f)));
    return MUL(p, POW2N(n));
}

#endif
