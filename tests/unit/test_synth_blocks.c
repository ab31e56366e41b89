// synth_random_blocks (the full-size synth shapes' weights): every supported type decodes with the scalar
// reference to finite values of the order of the synthetic weights (not all zero, none above 1), the same seed
// gives the same bytes and another seed others; a type it cannot write is refused.
#include <stdint.h>
#include <string.h>

#include "cli/synth_blocks.h"
#include "common/err.h"
#include "tensor/ttype.h"
#include "test_util.h"

#define NE0 512
#define ROWS 8

static void test_type(uint32_t type) {
    size_t bytes = tt_row_size(type, NE0) * ROWS;
    uint8_t *a = malloc(bytes), *b = malloc(bytes);
    float *x = malloc(sizeof *x * NE0 * ROWS); // (ROWS, NE0)
    CHECK(a && b && x);
    if (!a || !b || !x) goto done;
    CHECK(synth_random_blocks(type, a, NE0, ROWS, 7) == 0);
    CHECK(synth_random_blocks(type, b, NE0, ROWS, 7) == 0);
    CHECK_MSG(!memcmp(a, b, bytes), "%s: same seed, different bytes", tt_name(type));
    CHECK(synth_random_blocks(type, b, NE0, ROWS, 8) == 0);
    CHECK_MSG(memcmp(a, b, bytes), "%s: another seed, same bytes", tt_name(type));
    tt_get(type)->to_float(a, x, (int64_t)NE0 * ROWS);
    double max = 0, sum2 = 0;
    int finite = 1;
    for (int i = 0; i < NE0 * ROWS; i++) {
        if (!isfinite(x[i])) finite = 0;
        if (fabsf(x[i]) > max) max = fabsf(x[i]);
        sum2 += (double)x[i] * x[i];
    }
    double rms = sqrt(sum2 / (NE0 * ROWS));
    CHECK_MSG(finite && max <= 1.0 && rms > 1e-3, "%s: max %g, rms %g, finite %d", tt_name(type), max, rms, finite);
done:
    free(a), free(b), free(x);
}

int main(void) {
    const uint32_t types[] = {TT_Q4_0, TT_Q5_0, TT_Q8_0, TT_Q4_K, TT_Q6_K, TT_MXFP4};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        CHECK(synth_blocks_supported(types[i]));
        test_type(types[i]);
    }
    uint8_t buf[64];
    CHECK(!synth_blocks_supported(TT_F32));
    CHECK(synth_random_blocks(TT_F32, buf, 16, 1, 1) == TC_ERR_INVALID);
    TEST_MAIN_END();
}
