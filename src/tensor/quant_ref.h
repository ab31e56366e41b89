// Scalar reference kernels behind the traits table (src/tensor/ttype.h): one to_float / from_float /
// vec_dot per type. They are plain, readable loops that follow ggml's reference quantizers bit for bit
// (same block layout, same rounding), and they are what every SIMD kernel in src/cpu/ is tested against.
// Callers normally go through tt_get(type)->to_float etc.; the names are public so tests can call them.
//
// Conventions: n is a multiple of the type's block size; src/dst are arrays of n elements (float side) or
// n / block_size blocks (quantized side); vec_dot's y is already quantized to the type's vec_dot_type.
#ifndef TACHYON_TENSOR_QUANT_REF_H
#define TACHYON_TENSOR_QUANT_REF_H

#include <stdint.h>
#include <string.h>

#include "tensor/ttype.h"

// --- float types (vec_dot_type = F32 for all three: activations stay f32, weights are widened)
void tt_f32_to_float(const void *src, float *dst, int64_t n);
void tt_f32_from_float(const float *src, void *dst, int64_t n);
float tt_f32_vec_dot(int n, const void *x, const void *y); // sum x*y in double, rounded once
void tt_f16_to_float(const void *src, float *dst, int64_t n);
void tt_f16_from_float(const float *src, void *dst, int64_t n);
float tt_f16_vec_dot(int n, const void *x, const void *y); // x f16, y f32
void tt_bf16_to_float(const void *src, float *dst, int64_t n);
void tt_bf16_from_float(const float *src, void *dst, int64_t n);
float tt_bf16_vec_dot(int n, const void *x, const void *y); // x bf16, y f32

// --- legacy 32-element blocks (quant_ref_legacy.c)
void tt_q4_0_to_float(const void *src, float *dst, int64_t n);
void tt_q4_0_from_float(const float *src, void *dst, int64_t n);
float tt_q4_0_vec_dot(int n, const void *x, const void *y); // y: Q8_0
void tt_q4_1_to_float(const void *src, float *dst, int64_t n);
void tt_q4_1_from_float(const float *src, void *dst, int64_t n);
float tt_q4_1_vec_dot(int n, const void *x, const void *y); // y: Q8_1
void tt_q5_0_to_float(const void *src, float *dst, int64_t n);
void tt_q5_0_from_float(const float *src, void *dst, int64_t n);
float tt_q5_0_vec_dot(int n, const void *x, const void *y); // y: Q8_0
void tt_q5_1_to_float(const void *src, float *dst, int64_t n);
void tt_q5_1_from_float(const float *src, void *dst, int64_t n);
float tt_q5_1_vec_dot(int n, const void *x, const void *y); // y: Q8_1
void tt_q8_0_to_float(const void *src, float *dst, int64_t n);
void tt_q8_0_from_float(const float *src, void *dst, int64_t n);
float tt_q8_0_vec_dot(int n, const void *x, const void *y); // y: Q8_0
void tt_q8_1_to_float(const void *src, float *dst, int64_t n);
void tt_q8_1_from_float(const float *src, void *dst, int64_t n);

// --- k-quants, 256-element super-blocks (quant_ref_k.c); all dot against Q8_K
void tt_q4_K_to_float(const void *src, float *dst, int64_t n);
void tt_q4_K_from_float(const float *src, void *dst, int64_t n);
float tt_q4_K_vec_dot(int n, const void *x, const void *y);
void tt_q5_K_to_float(const void *src, float *dst, int64_t n);
void tt_q5_K_from_float(const float *src, void *dst, int64_t n);
float tt_q5_K_vec_dot(int n, const void *x, const void *y);
void tt_q6_K_to_float(const void *src, float *dst, int64_t n);
void tt_q6_K_from_float(const float *src, void *dst, int64_t n);
float tt_q6_K_vec_dot(int n, const void *x, const void *y);
void tt_q8_K_to_float(const void *src, float *dst, int64_t n);
void tt_q8_K_from_float(const float *src, void *dst, int64_t n);

// --- low-bit types from downloaded GGUFs (quant_ref_lowbit.c): decode and dot only, no quantizer
void tt_q2_K_to_float(const void *src, float *dst, int64_t n);
float tt_q2_K_vec_dot(int n, const void *x, const void *y); // y: Q8_K
void tt_q3_K_to_float(const void *src, float *dst, int64_t n);
float tt_q3_K_vec_dot(int n, const void *x, const void *y); // y: Q8_K
void tt_iq4_nl_to_float(const void *src, float *dst, int64_t n);
float tt_iq4_nl_vec_dot(int n, const void *x, const void *y); // y: Q8_0
void tt_iq4_xs_to_float(const void *src, float *dst, int64_t n);
float tt_iq4_xs_vec_dot(int n, const void *x, const void *y); // y: Q8_K
// --- MXFP4 (quant_ref_mxfp4.c): gpt-oss expert weights, x Q8_0; quantizer as ggml's reference
void tt_mxfp4_to_float(const void *src, float *dst, int64_t n);
void tt_mxfp4_from_float(const float *src, void *dst, int64_t n);
float tt_mxfp4_vec_dot(int n, const void *x, const void *y); // y: Q8_0
// Q3_K's 12 packed scale bytes -> the 16 signed scales (sc - 32).
void tt_q3k_scales(const uint8_t *scales, int8_t sc[16]);
// IQ4_XS sub-block s (0..7) scale, ls - 32.
int tt_iq4xs_scale(const tt_block_iq4_xs *b, int s);

// Unpacks the 6-bit (scale, min) pair of sub-block j (0..7) of a Q4_K/Q5_K block's 12 scale bytes.
void tt_k4_scale_min(int j, const uint8_t *scales, uint8_t *sc, uint8_t *m);

// Round to nearest, ties to even, as ggml's nearest_int (valid for |f| <= 4194303; any input is defined
// behaviour, out-of-range ones just give a meaningless value).
static inline int tt_nearest_int(float f) {
    // f is rounded to float before the addition: a compiler that contracts (GCC's default, and every aarch64
    // target has FMA) would fuse a caller's product x * s into this addition, one rounding instead of two,
    // which moves values within an ulp of a tie to the other integer
#if defined(__aarch64__)
    __asm__("" : "+w"(f));
#elif defined(__x86_64__)
    __asm__("" : "+x"(f));
#endif
    float v = f + 12582912.0f; // 1.5 * 2^23: the addition rounds f to an integer in the low mantissa bits
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

#endif
