// Scalar reference for the float types F32, F16, BF16. Dot products take f32 activations and accumulate in
// double (one final rounding), so they are the most accurate answer a fast kernel can be compared with.
#include <string.h>

#include "tensor/quant_ref.h"

void tt_f32_to_float(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void tt_f32_from_float(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

float tt_f32_vec_dot(int n, const void *vx, const void *vy) {
    const float *x = vx, *y = vy;
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)x[i] * (double)y[i];
    return (float)sum;
}

void tt_f16_to_float(const void *src, float *dst, int64_t n) {
    const tt_f16 *x = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = tt_f16_to_f32(x[i]);
}

void tt_f16_from_float(const float *src, void *dst, int64_t n) {
    tt_f16 *y = dst;
    for (int64_t i = 0; i < n; i++)
        y[i] = tt_f32_to_f16(src[i]);
}

float tt_f16_vec_dot(int n, const void *vx, const void *vy) {
    const tt_f16 *x = vx;
    const float *y = vy;
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)tt_f16_to_f32(x[i]) * (double)y[i];
    return (float)sum;
}

void tt_bf16_to_float(const void *src, float *dst, int64_t n) {
    const tt_bf16 *x = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = tt_bf16_to_f32(x[i]);
}

void tt_bf16_from_float(const float *src, void *dst, int64_t n) {
    tt_bf16 *y = dst;
    for (int64_t i = 0; i < n; i++)
        y[i] = tt_f32_to_bf16(src[i]);
}

float tt_bf16_vec_dot(int n, const void *vx, const void *vy) {
    const tt_bf16 *x = vx;
    const float *y = vy;
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)tt_bf16_to_f32(x[i]) * (double)y[i];
    return (float)sum;
}
