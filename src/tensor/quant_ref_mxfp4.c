// Scalar reference for MXFP4 (OCP microscaling FP4, ggml's GGML_TYPE_MXFP4: gpt-oss expert weights):
// dequantization, the dot with Q8_0 activations, and ggml's reference quantizer.
//
// A block is 32 values: one E8M0 byte e (a pure power of two, 2^(e - 127)) and 16 bytes of 4-bit E2M1 codes,
// element l in the low nibble of qs[l] and element l + 16 in the high nibble. Like ggml, the codes are kept
// as integers twice their value (tt_mxfp4_values: E2M1 has halves) and the scale is halved to match
// (tt_e8m0_half), so a block dot is an exact int8 dot times one float.
#include <math.h>

#include "tensor/quant_ref.h"

const int8_t tt_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

void tt_mxfp4_to_float(const void *src, float *dst, int64_t n) {
    const tt_block_mxfp4 *b = src;
    for (int64_t i = 0; i < n / QK_MXFP4; i++, dst += QK_MXFP4) {
        const float d = tt_e8m0_half(b[i].e);
        for (int l = 0; l < QK_MXFP4 / 2; l++) {
            dst[l] = d * tt_mxfp4_values[b[i].qs[l] & 0x0f];
            dst[l + QK_MXFP4 / 2] = d * tt_mxfp4_values[b[i].qs[l] >> 4];
        }
    }
}

float tt_mxfp4_vec_dot(int n, const void *vx, const void *vy) {
    const tt_block_mxfp4 *x = vx;
    const tt_block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int i = 0; i < n / QK_MXFP4; i++) {
        int32_t isum = 0;
        for (int l = 0; l < QK_MXFP4 / 2; l++) {
            isum += y[i].qs[l] * tt_mxfp4_values[x[i].qs[l] & 0x0f];
            isum += y[i].qs[l + QK_MXFP4 / 2] * tt_mxfp4_values[x[i].qs[l] >> 4];
        }
        sum += tt_f16_to_f32(y[i].d) * tt_e8m0_half(x[i].e) * (float)isum;
    }
    return sum;
}

// The code whose value times d is nearest to v; the first one on a tie (so +0 over -0, and the smaller
// magnitude between two neighbours), as ggml's best_index_mxfp4.
static uint8_t mxfp4_nearest(float v, float d) {
    uint8_t best = 0;
    float best_err = fabsf((float)tt_mxfp4_values[0] * d - v);
    for (uint8_t q = 1; q < 16; q++) {
        const float err = fabsf((float)tt_mxfp4_values[q] * d - v);
        if (err < best_err) best = q, best_err = err;
    }
    return best;
}

// ggml's quantize_row_mxfp4_ref: e = floor(log2(amax)) - 2 + 127, so amax lands in [4, 8) times 2^(e - 127),
// the top binade of E2M1 (whose largest value, 6, takes the values from 5 up). ggml converts a negative
// exponent (amax < 2^-125: f32-subnormal data) to uint8_t, undefined behaviour in C; here it is 0, the
// smallest scale. An all-zero block has e = 0 and zero codes.
void tt_mxfp4_from_float(const float *src, void *dst, int64_t n) {
    tt_block_mxfp4 *b = dst;
    for (int64_t i = 0; i < n / QK_MXFP4; i++, src += QK_MXFP4) {
        float amax = 0.0f;
        for (int l = 0; l < QK_MXFP4; l++)
            if (amax < fabsf(src[l])) amax = fabsf(src[l]);
        float ef = amax > 0.0f ? floorf(log2f(amax)) - 2 + 127 : 0.0f;
        ef = ef < 0.0f ? 0.0f : ef > 254.0f ? 254.0f : ef;
        b[i].e = (uint8_t)ef;
        const float d = tt_e8m0_half(b[i].e);
        for (int l = 0; l < QK_MXFP4 / 2; l++)
            b[i].qs[l] = (uint8_t)(mxfp4_nearest(src[l], d) | mxfp4_nearest(src[l + QK_MXFP4 / 2], d) << 4);
    }
}
