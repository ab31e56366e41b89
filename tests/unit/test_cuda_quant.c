// Tests for src/cuda/tcu_quant.h, the per-chunk dequantization the CUDA kernels use, compiled here by the host
// C compiler: every chunk of random rows of each weight type the CUDA backend reads must equal the scalar
// reference (tt_get(type)->to_float) bit for bit. Random bytes include non-finite f16 scales; NaN matches NaN.
// The CUDA kernels that call these functions need a GPU and are not run here (docs/CUDA.md).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/tcu_quant.h"
#include "tensor/ttype.h"
#include "test_util.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rng_u64(void) { // splitmix64
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int same_value(float a, float b) {
    uint32_t ua, ub;
    memcpy(&ua, &a, 4), memcpy(&ub, &b, 4);
    return ua == ub || (a != a && b != b);
}

// A row of random bytes of n values; with sane = 1 the f16 scales are replaced by small finite values (the
// realistic case), with sane = 0 they stay random bit patterns (subnormals, inf, NaN).
static void fill_row(int type, uint8_t *row, size_t bytes, int n, int sane) {
    for (size_t i = 0; i < bytes; i++) row[i] = (uint8_t)rng_u64();
    if (!sane) return;
    int bb = tcu_block_bytes(type), nb = n / tcu_block_values(type);
    for (int b = 0; b < nb && tcu_block_values(type) > 1; b++) {
        uint8_t *p = row + (size_t)b * bb;
        tt_f16 d = tt_f32_to_f16((float)(rng_u64() % 1000) / 1e5f), m = tt_f32_to_f16(-(float)(rng_u64() % 1000) / 1e4f);
        int off_d = type == TCU_Q6_K ? 208 : 0;
        memcpy(p + off_d, &d, 2);
        if (type == TCU_Q4_1 || type == TCU_Q4_K) memcpy(p + 2, &m, 2);
    }
    if (type == TCU_F16 || type == TCU_BF16) // finite plain values
        for (int i = 0; i < n; i++) {
            float v = (float)((int64_t)(rng_u64() % 20001) - 10000) / 1000.0f;
            tt_f16 h = type == TCU_F16 ? tt_f32_to_f16(v) : tt_f32_to_bf16(v);
            memcpy(row + 2 * i, &h, 2);
        }
}

static void check_type(int type, int n, int sane) {
    size_t bytes = tt_row_size((uint32_t)type, n);
    uint8_t *row = malloc(bytes);
    float *ref = malloc(sizeof(float) * (size_t)n), chunk[TCU_CHUNK];
    CHECK(row && ref);
    if (!row || !ref) return;
    CHECK_EQ_INT(tcu_block_bytes(type), (int)tt_get((uint32_t)type)->type_size);
    CHECK_EQ_INT(tcu_block_values(type), tt_get((uint32_t)type)->block_size);
    CHECK(tcu_type_ok(type, n));
    int bad = 0;
    for (int rep = 0; rep < 50; rep++) {
        fill_row(type, row, bytes, n, sane);
        tt_get((uint32_t)type)->to_float(row, ref, n);
        for (int c = 0; c < (n + TCU_CHUNK - 1) / TCU_CHUNK; c++) {
            if (tcu_deq_chunk(type, row, c, n, chunk)) bad++;
            for (int l = 0; l < TCU_CHUNK && 32 * c + l < n; l++)
                if (!same_value(chunk[l], ref[32 * c + l])) {
                    if (bad++ < 5)
                        fprintf(stderr, "%s (sane %d): value %d: %.9g, reference %.9g\n", tt_name((uint32_t)type), sane,
                                32 * c + l, chunk[l], ref[32 * c + l]);
                }
        }
    }
    CHECK_MSG(bad == 0, "%s: %d values differ from the reference", tt_name((uint32_t)type), bad);
    free(row), free(ref);
}

static void test_types(void) {
    // the ids the kernels switch on are tt_type's
    CHECK_EQ_INT(TCU_F32, TT_F32);
    CHECK_EQ_INT(TCU_F16, TT_F16);
    CHECK_EQ_INT(TCU_Q4_0, TT_Q4_0);
    CHECK_EQ_INT(TCU_Q4_1, TT_Q4_1);
    CHECK_EQ_INT(TCU_Q8_0, TT_Q8_0);
    CHECK_EQ_INT(TCU_Q4_K, TT_Q4_K);
    CHECK_EQ_INT(TCU_Q6_K, TT_Q6_K);
    CHECK_EQ_INT(TCU_BF16, TT_BF16);
    CHECK(!tcu_type_ok(TT_Q5_K, 256) && !tcu_type_ok(TCU_Q4_K, 128) && !tcu_type_ok(TCU_Q8_0, 48));
    float out[TCU_CHUNK];
    CHECK(tcu_deq_chunk(TT_Q3_K, NULL, 0, 256, out) == -1);
}

static void test_chunks(void) {
    const int types[] = {TCU_Q4_0, TCU_Q4_1, TCU_Q8_0, TCU_Q4_K, TCU_Q6_K, TCU_F16, TCU_BF16, TCU_F32};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        int block = tcu_block_values(types[i]);
        int n = block == 1 ? 172 : 2 * 256; // plain rows whose length is not a multiple of 32 (stories260K's ffn)
        check_type(types[i], n, 1);
        check_type(types[i], n, 0);
    }
}

static void test_f16_exhaustive(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++)
        if (!same_value(tcu_f16_to_f32((uint16_t)h), tt_f16_to_f32((tt_f16)h))) bad++;
    CHECK_MSG(bad == 0, "%d f16 values differ", bad);
}

int main(void) {
    test_types();
    test_f16_exhaustive();
    test_chunks();
    printf("test_cuda_quant: the CUDA kernels themselves need a GPU (not run here)\n");
    TEST_MAIN_END();
}
