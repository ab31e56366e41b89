// The vector expf of the f16 KV cache's softmax (x86_expf.h, through attn_expf_avx2/avx512) against libm's
// scalar expf, bit for bit: every 499th float of [-110, 0] (both ends and the under/overflow thresholds with
// their neighbours included), every 61st of [-0.1, -0.001] (most floats are near 0), specials (-0, -inf,
// NaN, subnormals), and positive values up to and past the overflow threshold. `test_expf --all` checks
// every float of [-110, 0] (about 1.1e9; seconds, not part of `make test`). Meaningful only where libm's
// expf is glibc's (or musl's) algorithm, which the vector code reproduces; elsewhere it reports the
// mismatches and fails.
#include <stdint.h>

#include "cpu/attention.h"
#include "tensor/ttype.h"
#include "test_util.h"

enum { CHUNK = 4096 };

typedef void (*expf_fn)(float *y, const float *x, int n);

// Compares fn(x) with expf(x) over x[0..n); returns the mismatches (NaN = NaN whatever its bits).
static long check_chunk(expf_fn fn, const float *x, int n, const char *isa) {
    float y[CHUNK];
    long bad = 0;
    fn(y, x, n);
    for (int i = 0; i < n; i++) {
        float e = expf(x[i]);
        if (tt_f32_bits(y[i]) == tt_f32_bits(e) || (isnan(y[i]) && isnan(e))) continue;
        if (bad++ < 5) fprintf(stderr, "%s: expf(%a) = %a, vector %a\n", isa, (double)x[i], (double)e, (double)y[i]);
    }
    return bad;
}

// Bit patterns of negative floats from lo_bits (small magnitude) to hi_bits (large), every step-th.
static long check_range(expf_fn fn, uint32_t lo_bits, uint32_t hi_bits, uint32_t step, const char *isa) {
    float x[CHUNK];
    long bad = 0;
    int n = 0;
    for (uint64_t u = lo_bits; u <= hi_bits; u += step) {
        x[n++] = tt_f32_from_bits((uint32_t)u | 0x80000000u);
        if (n == CHUNK) bad += check_chunk(fn, x, n, isa), n = 0;
    }
    return bad + check_chunk(fn, x, n, isa);
}

int main(int argc, char **argv) {
    const int all = argc > 1 && !strcmp(argv[1], "--all");
    const uint32_t max_bits = tt_f32_bits(110.0f);
    cpu_isa best = cpu_best_isa();
    tu_isa_ran(CPU_ISA_SCALAR); // the reference is libm's scalar expf itself
    for (int isa = CPU_ISA_AVX2; isa <= (int)best; isa++) {
        expf_fn fn = isa == CPU_ISA_AVX2 ? attn_expf_avx2 : attn_expf_avx512;
        const char *name = cpu_isa_name((cpu_isa)isa);
        tu_isa_ran((cpu_isa)isa);
        long bad = check_range(fn, 0, max_bits, all ? 1 : 499, name);
        bad += check_range(fn, tt_f32_bits(1e-3f), tt_f32_bits(0.1f), all ? 1 : 61, name);
        float sp[] = {-0.0f, 0.0f, -INFINITY, INFINITY, NAN, -NAN, tt_f32_from_bits(0x80000001u),
                      tt_f32_from_bits(0x807fffffu), -0x1.9fe368p6f, -0x1.9d1d9ep6f, 0x1.62e42ep6f, 88.0f, 89.0f, 1e30f, -1e30f, 1.0f, 0.5f,
                      nextafterf(-0x1.9fe368p6f, 0.0f), nextafterf(-0x1.9fe368p6f, -200.0f),
                      nextafterf(-0x1.9d1d9ep6f, 0.0f), nextafterf(-0x1.9d1d9ep6f, -200.0f),
                      nextafterf(0x1.62e42ep6f, 0.0f), nextafterf(0x1.62e42ep6f, 200.0f), -87.0f, -88.0f, -103.5f};
        bad += check_chunk(fn, sp, (int)(sizeof sp / sizeof sp[0]), name);
        float pos[CHUNK]; // positive arguments: [0, 90] in even steps, and odd lengths for the scalar tail
        for (int i = 0; i < CHUNK; i++) pos[i] = 90.0f * (float)i / CHUNK;
        bad += check_chunk(fn, pos, CHUNK, name) + check_chunk(fn, pos + 1, 13, name);
        CHECK_MSG(bad == 0, "%s: %ld values differ from expf", name, bad);
    }
    tu_isa_report("test_expf");
    TEST_MAIN_END();
}
