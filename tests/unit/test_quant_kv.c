// tt_q4_0_from_float_mse (src/tensor/quant_kv.h) against the reference quantizer tt_q4_0_from_float:
// the blocks decode with the standard q4_0 decoder, no block's squared error is ever larger than the
// reference's, and on typical rows (Gaussian, and Gaussian with one large outlier a block, as attention-sink
// K rows have) the total error is clearly smaller. Non-finite and zero inputs do not crash and stay sane.
#include "tensor/quant_kv.h"
#include "tensor/quant_ref.h"
#include "test_util.h"

enum { N = 256, ROWS = 400 };

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { // uniform in [0, 1)
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)(rng >> 40) / (float)(1u << 24);
}
static float gauss(void) {
    float u = frand() + 1e-7f, v = frand();
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

static double block_sq_err(const float *x, const float *y, int n) {
    double e = 0;
    for (int j = 0; j < n; j++) e += ((double)x[j] - y[j]) * ((double)x[j] - y[j]);
    return e;
}

// kind 0: Gaussian; 1: Gaussian with one outlier (x20) per block; 2: uniform; 3: a few huge values.
static void make_row(float *x, int kind) {
    for (int j = 0; j < N; j++) x[j] = kind == 2 ? 2.0f * frand() - 1.0f : gauss();
    if (kind == 1)
        for (int b = 0; b < N / QK4_0; b++) x[b * QK4_0 + (int)(frand() * QK4_0)] *= 20.0f;
    if (kind == 3) x[(int)(frand() * N)] = 300.0f, x[(int)(frand() * N)] = -250.0f;
}

static void test_never_worse(void) {
    static const char *names[] = {"gaussian", "outliers", "uniform", "huge"};
    float x[N], yr[N], ym[N];
    tt_block_q4_0 br[N / QK4_0], bm[N / QK4_0];
    for (int kind = 0; kind < 4; kind++) {
        double er = 0, em = 0;
        int worse = 0;
        for (int r = 0; r < ROWS; r++) {
            make_row(x, kind);
            tt_q4_0_from_float(x, br, N);
            tt_q4_0_from_float_mse(x, bm, N);
            tt_q4_0_to_float(br, yr, N);
            tt_q4_0_to_float(bm, ym, N);
            for (int b = 0; b < N / QK4_0; b++) {
                double a = block_sq_err(x + b * QK4_0, yr + b * QK4_0, QK4_0);
                double m = block_sq_err(x + b * QK4_0, ym + b * QK4_0, QK4_0);
                worse += m > a * (1 + 1e-6) + 1e-12;
                er += a, em += m;
            }
        }
        printf("q4_0 %s: squared error mse/ref = %.3f\n", names[kind], em / er);
        CHECK_MSG(worse == 0, "%s: %d blocks worse than the reference", names[kind], worse);
        // Measured 0.79-0.92, and 0.98 with one 20x outlier a block (the outlier's level fixes the scale
        // there; little is left to choose); the reference itself would give exactly 1.
        CHECK_MSG(em < (kind == 1 ? 0.99 : 0.95) * er, "%s: error %.4g not clearly below the reference's %.4g", names[kind], em, er);
    }
}

static void test_edge_inputs(void) {
    float x[QK4_0], y[QK4_0];
    tt_block_q4_0 b;
    memset(x, 0, sizeof x);
    tt_q4_0_from_float_mse(x, &b, QK4_0);
    tt_q4_0_to_float(&b, y, QK4_0);
    CHECK(block_sq_err(x, y, QK4_0) == 0);
    for (int j = 0; j < QK4_0; j++) x[j] = (float)(j % 16 - 8) * 0.5f; // on the q4_0 grid: stays exact
    tt_q4_0_from_float_mse(x, &b, QK4_0);
    tt_q4_0_to_float(&b, y, QK4_0);
    CHECK_MSG(block_sq_err(x, y, QK4_0) == 0, "grid row error %g", block_sq_err(x, y, QK4_0));
    x[3] = NAN, x[5] = INFINITY; // must not crash; the block keeps the reference's output
    tt_block_q4_0 r;
    tt_q4_0_from_float(x, &r, QK4_0);
    tt_q4_0_from_float_mse(x, &b, QK4_0);
    CHECK(memcmp(&r, &b, sizeof b) == 0);
}

int main(void) {
    test_never_worse();
    test_edge_inputs();
    TEST_MAIN_END();
}
