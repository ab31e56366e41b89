// ops_hadamard (the KV-cache rotation): against the explicit Sylvester matrix H[i][j] = (-1)^popcount(i&j)/sqrt(n)
// in double precision, H·H·x = x, norms and dot products kept (orthonormal), the block size chosen per head
// dim, and the point of it all: an outlier row quantized to q4_0 after rotation comes back closer.
// The GLU activations (SwiGLU, tanh-GeGLU) at every ISA level against the libm reference (the scalar level):
// error <= 4e-6 relative + 2e-7·|x·u| (the reference's own cancellation for x < 0) over x in [-90, 90], no NaN/inf, the same value at
// any position and length (the tail goes through the vector code), and the SIMD levels agree bit for bit
// (AVX2 == AVX-512; NEON == dotprod == i8mm). gpt-oss's clamped SwiGLU against its definition.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/ops.h"
#include "tensor/ttype.h"
#include "test_util.h"

static float frand(void) { return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f; }

static void test_matches_matrix(int n) {
    float x[512], y[512];
    for (int i = 0; i < n; i++) x[i] = y[i] = frand();
    ops_hadamard(y, n);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < n; j++) s += (__builtin_popcount((unsigned)(i & j)) & 1 ? -1.0 : 1.0) * x[j];
        s /= sqrt((double)n);
        if (fabs(s - y[i]) > worst) worst = fabs(s - y[i]);
    }
    CHECK_MSG(worst < 1e-5, "n=%d: max |H·x - explicit| = %g", n, worst);
}

static void test_involution_and_orthonormal(int n) {
    float x[512], y[512], a[512], b[512];
    double nx = 0, ny = 0, dab = 0, dhab = 0;
    for (int i = 0; i < n; i++) x[i] = y[i] = frand() * (i == 3 ? 40.0f : 1.0f), a[i] = frand(), b[i] = frand();
    for (int i = 0; i < n; i++) dab += (double)a[i] * b[i];
    ops_hadamard(y, n);
    for (int i = 0; i < n; i++) nx += (double)x[i] * x[i], ny += (double)y[i] * y[i];
    CHECK_MSG(fabs(nx - ny) <= 1e-5 * nx, "n=%d: |x|² %g, |Hx|² %g", n, nx, ny);
    ops_hadamard(a, n), ops_hadamard(b, n);
    for (int i = 0; i < n; i++) dhab += (double)a[i] * b[i];
    CHECK_MSG(fabs(dab - dhab) <= 1e-4 * (1 + fabs(dab)), "n=%d: a·b %g, Ha·Hb %g", n, dab, dhab);
    ops_hadamard(y, n);
    double worst = 0;
    for (int i = 0; i < n; i++)
        if (fabs((double)y[i] - x[i]) > worst) worst = fabs((double)y[i] - x[i]);
    CHECK_MSG(worst < 1e-4, "n=%d: max |H·H·x - x| = %g", n, worst);
}

static void test_block_size(void) {
    CHECK_EQ_INT(ops_hadamard_block(64), 64);
    CHECK_EQ_INT(ops_hadamard_block(128), 128);
    CHECK_EQ_INT(ops_hadamard_block(256), 256);
    CHECK_EQ_INT(ops_hadamard_block(96), 32);  // 3 blocks of 32
    CHECK_EQ_INT(ops_hadamard_block(80), 0);   // 16 | 80: under a quant block, left off
    CHECK_EQ_INT(ops_hadamard_block(0), 0);
    // heads of 96 = 3 blocks of 32: each block rotated alone, so H·H restores and the blocks do not mix
    float x[192], y[192];
    for (int i = 0; i < 192; i++) x[i] = y[i] = i < 32 ? frand() : 0.0f;
    ops_hadamard_heads(y, 2, 96, 32);
    int mixed = 0;
    for (int i = 32; i < 192; i++) mixed |= y[i] != 0.0f;
    CHECK_MSG(!mixed, "a 32-block rotation leaked into the next block");
    ops_hadamard_heads(y, 2, 96, 32);
    for (int i = 0; i < 192; i++) CHECK_NEAR(y[i], x[i], 1e-5);
}

// q4_0 round trip of a row with one large channel (the outliers K rows have), with and without rotation.
static void test_reduces_q4_error(void) {
    enum { N = 64 };
    const tt_traits *q4 = tt_get(TT_Q4_0);
    float x[N], r[N], back[N];
    unsigned char blk[N];
    for (int i = 0; i < N; i++) x[i] = r[i] = frand() + (i == 5 ? 25.0f : 0.0f);
    q4->from_float(x, blk, N);
    q4->to_float(blk, back, N);
    double e_plain = 0, e_rot = 0;
    for (int i = 0; i < N; i++) e_plain += (back[i] - x[i]) * (double)(back[i] - x[i]);
    ops_hadamard(r, N);
    q4->from_float(r, blk, N);
    q4->to_float(blk, back, N);
    ops_hadamard(back, N);
    for (int i = 0; i < N; i++) e_rot += (back[i] - x[i]) * (double)(back[i] - x[i]);
    CHECK_MSG(e_rot < 0.5 * e_plain, "q4_0 squared error rotated %g, plain %g", e_rot, e_plain);
}

enum { GN = 4099 }; // not a multiple of 8 or 16: every level has a tail

static void test_glu(int gelu) {
    static float x[GN], u[GN], ref[GN], got[GN], first[GN], one[1];
    for (int i = 0; i < GN; i++) {
        x[i] = i < 40 ? (float)(i - 20) * 4.5f : ((float)rand() / RAND_MAX * 2.0f - 1.0f) * (i % 3 ? 6.0f : 90.0f);
        u[i] = (float)rand() / RAND_MAX * 4.0f - 2.0f;
    }
    memcpy(ref, x, sizeof ref);
    ops_glu_isa(ref, u, GN, gelu, CPU_ISA_SCALAR);
    tu_isa_ran(CPU_ISA_SCALAR);
    for (int isa = TU_ISA_FIRST_SIMD; isa <= (int)cpu_hw_isa(); isa++) {
        tu_isa_ran((cpu_isa)isa);
        memcpy(got, x, sizeof got);
        ops_glu_isa(got, u, GN, gelu, (cpu_isa)isa);
        int bad = 0;
        for (int i = 0; i < GN; i++) {
            // relative to the result, plus a few ulp of x·u: the libm GELU 0.5·x·(1 + tanh) itself cancels for x < 0
            const float tol = 4e-6f * fabsf(ref[i]) + 2e-7f * fabsf(x[i] * u[i]) + 1e-30f;
            if (!(isfinite(got[i]) && fabsf(got[i] - ref[i]) <= tol) && bad++ < 3)
                fprintf(stderr, "glu gelu=%d %s x=%g u=%g: %.9g vs libm %.9g\n", gelu, cpu_isa_name((cpu_isa)isa),
                        x[i], u[i], got[i], ref[i]);
        }
        CHECK_MSG(bad == 0, "glu gelu=%d %s: %d values off the reference", gelu, cpu_isa_name((cpu_isa)isa), bad);
        int moved = 0; // each value alone (a tail of 1) equals its value in the long call
        for (int i = 0; i < GN; i += 37) {
            one[0] = x[i];
            ops_glu_isa(one, u + i, 1, gelu, (cpu_isa)isa);
            moved += memcmp(one, got + i, sizeof one) != 0;
        }
        CHECK_MSG(moved == 0, "glu gelu=%d %s: %d values change with the call's length", gelu,
                  cpu_isa_name((cpu_isa)isa), moved);
        if (isa == TU_ISA_FIRST_SIMD) memcpy(first, got, sizeof first);
        else CHECK_MSG(memcmp(first, got, sizeof got) == 0, "glu gelu=%d: %s differs from %s", gelu,
                       cpu_isa_name((cpu_isa)isa), cpu_isa_name(TU_ISA_FIRST_SIMD));
    }
}

// gpt-oss's clamped SwiGLU from its definition in double: x = min(g, limit), y = clamp(u, ±limit),
// x·σ(alpha·x)·(y + 1), over values well inside and well beyond the clamp on both sides.
static void test_swiglu_clamped(void) {
    enum { N = 64 };
    float g[N], u[N];
    double want[N];
    for (int i = 0; i < N; i++) {
        g[i] = 12.0f * frand(), u[i] = 12.0f * frand();
        double x = g[i] < 7.0 ? g[i] : 7.0, y = u[i] < -7.0 ? -7.0 : u[i] > 7.0 ? 7.0 : u[i];
        want[i] = x / (1.0 + exp(-1.702 * x)) * (y + 1.0);
    }
    ops_swiglu_clamped(g, u, N, 1.702f, 7.0f);
    for (int i = 0; i < N; i++)
        CHECK_MSG(fabs(g[i] - want[i]) <= 1e-5 * (1.0 + fabs(want[i])), "clamped swiglu %d: %g vs %g", i, g[i], want[i]);
    float big[2] = {50.0f, -3.0f}, ub[2] = {-20.0f, 30.0f}; // gate and up both beyond the limits
    ops_swiglu_clamped(big, ub, 2, 1.702f, 7.0f);
    CHECK_MSG(fabs(big[0] - 7.0 / (1.0 + exp(-1.702 * 7.0)) * -6.0) < 1e-4, "clamped above: %g", big[0]);
    CHECK_MSG(fabs(big[1] - -3.0 / (1.0 + exp(1.702 * 3.0)) * 8.0) < 1e-5, "up clamped: %g", big[1]);
}

int main(void) {
    srand(12);
    test_glu(0);
    test_glu(1);
    test_swiglu_clamped();
    for (int n = 1; n <= 512; n *= 2) test_matches_matrix(n), test_involution_and_orthonormal(n);
    test_block_size();
    test_reduces_q4_error();
    tu_isa_report("test_ops");
    TEST_MAIN_END();
}
