// Tests for the CUDA kernels on a GPU (src/cuda/, through the tcu_test_* hooks): the quantized matmul of every
// weight type against the scalar reference (dequantize, dot in double), and the paged f16 attention against the
// CPU's scalar kernel (attn_tile_scalar) over a permuted block table. Without a CUDA build or device it exits
// 77, which CTest reports as Skipped (SKIP_RETURN_CODE), with the reason on stdout.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#ifndef TACHYON_HAVE_CUDA

int main(void) {
    printf("test_cuda_kernels: SKIPPED: built without CUDA (no nvcc at build time, or -DTACHYON_CUDA=OFF)\n");
    return 77;
}

#else

#include "cpu/attention.h"
#include "cuda/tcu.h"
#include "tensor/ttype.h"

static uint64_t rng_state = 0x853c49e6748fea9bull;

static uint64_t rng_u64(void) { // splitmix64
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float rng_sym(void) { return (float)((double)(rng_u64() >> 11) * 0x1p-53 * 2.0 - 1.0); } // [-1, 1)

// out (n, rows) on the GPU vs the reference: each row dequantized by tt's to_float, dotted in double.
static void check_matmul(tt_type type, int rows, int cols, int n) {
    const tt_traits *tr = tt_get(type);
    size_t rb = tt_row_size(type, cols);
    uint8_t *w = malloc(rb * (size_t)rows);
    float *wf = malloc(sizeof(float) * (size_t)cols), *x = malloc(sizeof(float) * (size_t)n * cols);
    float *out = malloc(sizeof(float) * (size_t)n * rows);
    CHECK(w && wf && x && out);
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < cols; i++) wf[i] = rng_sym();
        tr->from_float(wf, w + (size_t)r * rb, cols);
    }
    for (size_t i = 0; i < (size_t)n * cols; i++) x[i] = rng_sym();
    char msg[512];
    int rc = tcu_test_matmul((int)type, w, rows, cols, rb, x, n, out, msg, sizeof msg);
    CHECK_MSG(rc == 0, "%s: %s", tt_name(type), msg);
    double worst = 0;
    for (int r = 0; rc == 0 && r < rows; r++) {
        tr->to_float(w + (size_t)r * rb, wf, cols);
        for (int t = 0; t < n; t++) {
            double ref = 0, mag = 0;
            for (int i = 0; i < cols; i++) ref += (double)wf[i] * x[(size_t)t * cols + i], mag += fabs((double)wf[i] * x[(size_t)t * cols + i]);
            double err = fabs(out[(size_t)t * rows + r] - ref) / (mag + 1e-30);
            if (err > worst) worst = err;
        }
    }
    // f32 sums of `cols` products in another order: relative to Σ|w·x|, a few ulps of float times log2(cols)
    CHECK_MSG(worst < 1e-5, "%s %dx%d n=%d: worst error %.3g of Σ|w·x|", tt_name(type), rows, cols, n, worst);
    printf("matmul %-5s %4d x %4d, n %2d: worst error %.2g of sum |w*x|\n", tt_name(type), rows, cols, n, worst);
    free(w), free(wf), free(x), free(out);
}

// n_rows query rows at positions n_pos - n_rows .. n_pos - 1 (tiles of 8 on the device), each against the CPU's
// scalar kernel at its own position.
static void check_attention(int n_heads, int n_kv, int hd, int bs, int n_rows, int n_pos, int window) {
    const int n_blocks = (n_pos + bs - 1) / bs + 3;
    size_t cache = (size_t)n_blocks * n_kv * bs * hd, qn = (size_t)n_rows * n_heads * hd;
    uint16_t *k = malloc(cache * 2), *v = malloc(cache * 2);
    float *q = malloc(sizeof(float) * qn), *out = malloc(sizeof(float) * qn), *ref = malloc(sizeof(float) * qn);
    int32_t *blocks = malloc(sizeof(int32_t) * (size_t)n_blocks);
    CHECK(k && v && q && out && ref && blocks);
    for (size_t i = 0; i < cache; i++) k[i] = tt_f32_to_f16(rng_sym()), v[i] = tt_f32_to_f16(rng_sym());
    for (size_t i = 0; i < qn; i++) q[i] = 2.0f * rng_sym();
    for (int i = 0; i < n_blocks; i++) blocks[i] = n_blocks - 1 - i; // permuted: exercises the table
    float scale = 1.0f / sqrtf((float)hd);
    char msg[512];
    int rc = tcu_test_attention(q, k, v, n_blocks, blocks, n_rows, n_pos, n_heads, n_kv, hd, bs, scale, window, out,
                                msg, sizeof msg);
    CHECK_MSG(rc == 0, "attention: %s", msg);
    attn_geom geo = {.n_kv_heads = n_kv, .head_dim = hd, .block_size = bs, .n_rep = n_heads / n_kv, .scale = scale,
                     .window = window, .k_type = TT_F16, .v_type = TT_F16};
    for (int r = 0; r < n_rows; r++)
        for (int h = 0; h < n_kv; h++) {
            size_t off = ((size_t)r * n_heads + (size_t)h * geo.n_rep) * hd;
            attn_tile_scalar(ref + off, q + off, k, v, blocks, n_pos - n_rows + r + 1, h, &geo);
        }
    double worst = 0;
    for (size_t i = 0; rc == 0 && i < qn; i++) worst = fmax(worst, fabs(out[i] - ref[i]));
    CHECK_MSG(worst < 1e-5, "attention %d/%d heads, hd %d, %d rows to %d: max diff %.3g", n_heads, n_kv, hd, n_rows,
              n_pos, worst);
    printf("attention %2d/%d heads, hd %3d, bs %2d, %3d rows to position %4d, window %d: max diff %.2g\n", n_heads,
           n_kv, hd, bs, n_rows, n_pos, window, worst);
    free(k), free(v), free(q), free(out), free(ref), free(blocks);
}

int main(void) {
    char msg[512];
    if (tcu_device_check(msg, sizeof msg)) {
        printf("test_cuda_kernels: SKIPPED: %s\n", msg);
        return 77;
    }
    const tt_type types[] = {TT_Q4_0, TT_Q4_1, TT_Q8_0, TT_Q4_K, TT_Q6_K, TT_F16, TT_BF16, TT_F32};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        check_matmul(types[i], 67, 512, 1);  // decode GEMV, rows not a multiple of the warps per block
        check_matmul(types[i], 64, 768, 13); // prefill: a partial tile of 8 tokens
    }
    check_matmul(TT_F32, 33, 172, 5); // a plain row whose length is not a multiple of 32 (stories260K's ffn)
    check_attention(8, 4, 8, 16, 1, 37, 0);     // stories260K's geometry (head dim below a warp), decode
    check_attention(8, 4, 8, 16, 37, 37, 0);    // its prefill from position 0: tiles of 8 and a partial one
    check_attention(9, 3, 64, 16, 1, 300, 0);   // SmolLM2's, decode
    check_attention(9, 3, 64, 16, 13, 300, 0);  // a chunk at a depth
    check_attention(16, 8, 128, 16, 1, 1000, 0);
    check_attention(8, 1, 256, 32, 20, 77, 0);  // gemma's head dim
    check_attention(8, 2, 64, 16, 11, 300, 64); // a sliding window
    TEST_MAIN_END();
}

#endif
