// Bit-exactness check of our scalar reference against ggml's own C reference quantizers/dequantizers.
// Built and run by tests/ref/test_ggml_bitexact.py when TACHYON_GGML_SRC points at a ggml tree (the
// directory holding src/ggml-quants.c, e.g. llama.cpp/ggml from the llama-cpp-python sdist); ggml's
// code is compiled only there, never committed. Prints one line per type and exits non-zero on any
// difference. Q8_1 is left out: ggml's block is 36 bytes (f16 d, s), ours 40 (f32).
#include "tensor/ttype.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
// ggml side (opaque block pointers; the layouts are the same, checked by the byte comparison)
void quantize_row_q4_0_ref(const float *x, void *y, int64_t k);
void quantize_row_q4_1_ref(const float *x, void *y, int64_t k);
void quantize_row_q5_0_ref(const float *x, void *y, int64_t k);
void quantize_row_q5_1_ref(const float *x, void *y, int64_t k);
void quantize_row_q8_0_ref(const float *x, void *y, int64_t k);
void quantize_row_q4_K_ref(const float *x, void *y, int64_t k);
void quantize_row_q5_K_ref(const float *x, void *y, int64_t k);
void quantize_row_q6_K_ref(const float *x, void *y, int64_t k);
void quantize_row_q8_K_ref(const float *x, void *y, int64_t k);
void dequantize_row_q4_0(const void *x, float *y, int64_t k);
void dequantize_row_q4_1(const void *x, float *y, int64_t k);
void dequantize_row_q5_0(const void *x, float *y, int64_t k);
void dequantize_row_q5_1(const void *x, float *y, int64_t k);
void dequantize_row_q8_0(const void *x, float *y, int64_t k);
void dequantize_row_q4_K(const void *x, float *y, int64_t k);
void dequantize_row_q5_K(const void *x, float *y, int64_t k);
void dequantize_row_q6_K(const void *x, float *y, int64_t k);
void dequantize_row_q8_K(const void *x, float *y, int64_t k);
void ggml_abort(const char *f, int l, const char *fmt, ...) {
    fprintf(stderr, "abort %s:%d %s\n", f, l, fmt);
    abort();
}
size_t ggml_row_size(int t, int64_t n) {
    (void)t;
    (void)n;
    abort();
}
const char *ggml_type_name(int t) {
    (void)t;
    return "?";
}
size_t ggml_type_size(int t) {
    (void)t;
    abort();
}
typedef void (*qf)(const float *, void *, int64_t);
typedef void (*df)(const void *, float *, int64_t);
static uint64_t s = 88172645463325252ull;
static double un(void) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return (s >> 11) * 0x1p-53;
}
static float nrm(void) {
    return (float)(sqrt(-2 * log(un() + 1e-300)) * cos(6.283185307 * un()));
}
int main(void) {
    struct {
        tt_type t;
        qf q;
        df d;
    } c[] = {{TT_Q4_0, quantize_row_q4_0_ref, dequantize_row_q4_0},
             {TT_Q4_1, quantize_row_q4_1_ref, dequantize_row_q4_1},
             {TT_Q5_0, quantize_row_q5_0_ref, dequantize_row_q5_0},
             {TT_Q5_1, quantize_row_q5_1_ref, dequantize_row_q5_1},
             {TT_Q8_0, quantize_row_q8_0_ref, dequantize_row_q8_0},
             {TT_Q4_K, quantize_row_q4_K_ref, dequantize_row_q4_K},
             {TT_Q5_K, quantize_row_q5_K_ref, dequantize_row_q5_K},
             {TT_Q6_K, quantize_row_q6_K_ref, dequantize_row_q6_K},
             {TT_Q8_K, quantize_row_q8_K_ref, dequantize_row_q8_K}};
    enum { N = 256 * 64 };
    static float x[N], y1[N], y2[N];
    static uint8_t a[N * 2], b[N * 2];
    int fails = 0;
    for (unsigned k = 0; k < sizeof c / sizeof c[0]; k++) {
        const tt_traits *t = tt_get(c[k].t);
        size_t rs = tt_row_size(c[k].t, N);
        long diffb = 0, diffd = 0, blocks = 0;
        for (int it = 0; it < 60; it++) {
            int dist = it % 6;
            for (int i = 0; i < N; i++) {
                float v = nrm();
                if (dist == 1) v *= powf((float)un() * 3, 3);
                if (dist == 2) v = 1 + 0.5f * (float)un();
                if (dist == 3) v = (float)((int)(un() * 17) - 8) * 0.25f;         // lattice values: ties
                if (dist == 4) v = un() < 0.9 ? 0.0f : nrm();                     // sparse
                if (dist == 5) v = nrm() * powf(10, (float)(int)(un() * 12) - 8); // wide range
                x[i] = v;
            }
            if (it == 0) memset(x, 0, 256 * sizeof(float));
            memset(a, 0, sizeof a);
            memset(b, 0, sizeof b);
            c[k].q(x, a, N);
            t->from_float(x, b, N);
            if (c[k].t ==
                TT_Q8_K) { // ggml leaves bsums of all-zero blocks unset; compare d, qs only where set
                for (int bl = 0; bl < N / 256; bl++) {
                    float d;
                    memcpy(&d, a + bl * 292, 4);
                    if (d == 0) memset(a + bl * 292, 0, 292);
                }
            }
            for (size_t bl = 0; bl < rs / t->type_size; bl++) {
                blocks++;
                if (memcmp(a + bl * t->type_size, b + bl * t->type_size, t->type_size)) {
                    if (diffb++ < 3) fprintf(stderr, "%s dist %d block %zu differs\n", t->name, dist, bl);
                }
            }
            c[k].d(a, y1, N);
            t->to_float(a, y2, N);
            for (int i = 0; i < N; i++)
                diffd += memcmp(&y1[i], &y2[i], 4) != 0;
        }
        printf("%s: %ld / %ld blocks differ in quantization, %ld dequantized values differ\n", t->name, diffb,
               blocks, diffd);
        fails += diffb + diffd;
    }
    return fails != 0;
}
