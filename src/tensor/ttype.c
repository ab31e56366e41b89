// The type-traits table (one row per tensor type) and the f16/bf16 scalar conversions.
#include "tensor/ttype.h"

#include <stdint.h>
#include <string.h>

#include "tensor/quant_ref.h"

// vec_dot_type choices (the SIMD kernels follow this table):
//   Q4_0, Q5_0, Q8_0 -> Q8_0;  Q4_1, Q5_1 -> Q8_1;  Q4_K, Q5_K, Q6_K -> Q8_K   (as ggml)
//   F32, F16, BF16   -> F32    (ggml uses F16/BF16 activations for F16/BF16 weights; we keep activations in
//                              f32 and widen the weights instead: simpler, and more accurate)
// Q8_1 and Q8_K are activation-only formats: they have to_float/from_float but no vec_dot.
//   Q2_K, Q3_K, IQ4_XS -> Q8_K;  IQ4_NL, MXFP4 -> Q8_0                          (as ggml)
// Q2_K, Q3_K, IQ4_NL, IQ4_XS are decode-only (no from_float): tachyon runs such files, it does not make them.
static const tt_traits tt_table[TT_COUNT] = {
    [TT_F32] = {"f32", 1, sizeof(float), 0, tt_f32_to_float, tt_f32_from_float, TT_F32, tt_f32_vec_dot},
    [TT_F16] = {"f16", 1, sizeof(tt_f16), 0, tt_f16_to_float, tt_f16_from_float, TT_F32, tt_f16_vec_dot},
    [TT_BF16] = {"bf16", 1, sizeof(tt_bf16), 0, tt_bf16_to_float, tt_bf16_from_float, TT_F32,
                 tt_bf16_vec_dot},
    [TT_Q4_0] = {"q4_0", QK4_0, sizeof(tt_block_q4_0), 1, tt_q4_0_to_float, tt_q4_0_from_float, TT_Q8_0,
                 tt_q4_0_vec_dot},
    [TT_Q4_1] = {"q4_1", QK4_1, sizeof(tt_block_q4_1), 1, tt_q4_1_to_float, tt_q4_1_from_float, TT_Q8_1,
                 tt_q4_1_vec_dot},
    [TT_Q5_0] = {"q5_0", QK5_0, sizeof(tt_block_q5_0), 1, tt_q5_0_to_float, tt_q5_0_from_float, TT_Q8_0,
                 tt_q5_0_vec_dot},
    [TT_Q5_1] = {"q5_1", QK5_1, sizeof(tt_block_q5_1), 1, tt_q5_1_to_float, tt_q5_1_from_float, TT_Q8_1,
                 tt_q5_1_vec_dot},
    [TT_Q8_0] = {"q8_0", QK8_0, sizeof(tt_block_q8_0), 1, tt_q8_0_to_float, tt_q8_0_from_float, TT_Q8_0,
                 tt_q8_0_vec_dot},
    [TT_Q8_1] = {"q8_1", QK8_1, sizeof(tt_block_q8_1), 1, tt_q8_1_to_float, tt_q8_1_from_float, TT_Q8_1,
                 NULL},
    [TT_Q4_K] = {"q4_K", QK_K, sizeof(tt_block_q4_K), 1, tt_q4_K_to_float, tt_q4_K_from_float, TT_Q8_K,
                 tt_q4_K_vec_dot},
    [TT_Q5_K] = {"q5_K", QK_K, sizeof(tt_block_q5_K), 1, tt_q5_K_to_float, tt_q5_K_from_float, TT_Q8_K,
                 tt_q5_K_vec_dot},
    [TT_Q6_K] = {"q6_K", QK_K, sizeof(tt_block_q6_K), 1, tt_q6_K_to_float, tt_q6_K_from_float, TT_Q8_K,
                 tt_q6_K_vec_dot},
    [TT_Q2_K] = {"q2_K", QK_K, sizeof(tt_block_q2_K), 1, tt_q2_K_to_float, NULL, TT_Q8_K, tt_q2_K_vec_dot},
    [TT_Q3_K] = {"q3_K", QK_K, sizeof(tt_block_q3_K), 1, tt_q3_K_to_float, NULL, TT_Q8_K, tt_q3_K_vec_dot},
    [TT_IQ4_NL] = {"iq4_nl", QK4_NL, sizeof(tt_block_iq4_nl), 1, tt_iq4_nl_to_float, NULL, TT_Q8_0,
                   tt_iq4_nl_vec_dot},
    [TT_IQ4_XS] = {"iq4_xs", QK_K, sizeof(tt_block_iq4_xs), 1, tt_iq4_xs_to_float, NULL, TT_Q8_K,
                   tt_iq4_xs_vec_dot},
    [TT_MXFP4] = {"mxfp4", QK_MXFP4, sizeof(tt_block_mxfp4), 1, tt_mxfp4_to_float, tt_mxfp4_from_float, TT_Q8_0,
                   tt_mxfp4_vec_dot},
    [TT_Q8_K] = {"q8_K", QK_K, sizeof(tt_block_q8_K), 1, tt_q8_K_to_float, tt_q8_K_from_float, TT_Q8_K, NULL},
};

const tt_traits *tt_get(uint32_t type) {
    if (type >= TT_COUNT || !tt_table[type].name) return NULL;
    return &tt_table[type];
}

const char *tt_name(uint32_t type) {
    const tt_traits *t = tt_get(type);
    return t ? t->name : "?";
}

// 0 for an unknown type, a negative n, an n that is not a whole number of blocks, or a size that does not
// fit in size_t (n may come from an untrusted file).
size_t tt_row_size(uint32_t type, int64_t n) {
    const tt_traits *t = tt_get(type);
    if (!t || n < 0 || n % t->block_size != 0) return 0;
    uint64_t blocks = (uint64_t)(n / t->block_size);
    if (blocks > SIZE_MAX / t->type_size) return 0;
    return (size_t)blocks * t->type_size;
}

// --- f16 / bf16 <-> f32 (bit manipulation, no FPU mode dependence)

float tt_f16_to_f32(tt_f16 h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0) { // zero or subnormal: mant * 2^-24, exact in f32
        float v = (float)mant * 0x1p-24f;
        return tt_f32_from_bits(sign | tt_f32_bits(v));
    }
    if (exp == 31) return tt_f32_from_bits(sign | 0x7f800000u | (mant << 13)); // inf / nan (payload kept)
    return tt_f32_from_bits(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

// Round to nearest, ties to even. Overflow (|f| >= 65520) gives inf; NaN stays NaN with the quiet bit set
// and the top payload bits kept (what F16C's vcvtps2ph does).
tt_f16 tt_f32_to_f16(float f) {
    uint32_t x = tt_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (tt_f16)(sign | 0x7e00 | ((ax >> 13) & 0x3ff));
    if (ax >= 0x477ff000u) return (tt_f16)(sign | 0x7c00); // 65520 = midpoint between 65504 and 2^16
    if (ax >= 0x38800000u) { // normal f16 (>= 2^-14): rebias, then drop 13 mantissa bits with RNE
        uint32_t r = ax - ((uint32_t)(127 - 15) << 23);
        r = (r + 0x0fffu + ((r >> 13) & 1)) >> 13; // a carry into the exponent is the right answer
        return (tt_f16)(sign | r);
    }
    if (ax <= 0x33000000u) return sign; // <= 2^-25: rounds to zero (2^-25 itself is a tie -> even 0)
    // subnormal f16: result = round(value / 2^-24); value = m * 2^(e - 150), so shift m right by 126 - e
    uint32_t e = ax >> 23;                     // 102 ..= 112
    uint32_t m = (ax & 0x7fffffu) | 0x800000u; // 24-bit significand
    uint32_t shift = 126 - e;                  // 14 ..= 24
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++; // q == 0x400 is the smallest normal: still correct
    return (tt_f16)(sign | q);
}

float tt_bf16_to_f32(tt_bf16 h) {
    return tt_f32_from_bits((uint32_t)h << 16);
}

// As ggml: NaN -> quiet NaN (payload truncated), everything else round to nearest even (overflow -> inf,
// subnormals kept).
tt_bf16 tt_f32_to_bf16(float f) {
    uint32_t x = tt_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (tt_bf16)((x >> 16) | 0x40);
    return (tt_bf16)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}
