// Tensor element types: ggml-compatible ids, quant block structs (layout identical to GGUF files), and one
// traits row per type. A new format is a new row, not a new switch.
#ifndef TACHYON_TENSOR_TTYPE_H
#define TACHYON_TENSOR_TTYPE_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum {
    TT_F32 = 0,
    TT_F16 = 1,
    TT_Q4_0 = 2,
    TT_Q4_1 = 3,
    TT_Q5_0 = 6,
    TT_Q5_1 = 7,
    TT_Q8_0 = 8,
    TT_Q8_1 = 9,
    TT_Q2_K = 10,
    TT_Q3_K = 11,
    TT_Q4_K = 12,
    TT_Q5_K = 13,
    TT_Q6_K = 14,
    TT_Q8_K = 15,
    TT_IQ4_NL = 20,
    TT_IQ4_XS = 23,
    TT_BF16 = 30,
    TT_MXFP4 = 39,
    TT_COUNT = 40
} tt_type;

typedef uint16_t tt_f16;  // IEEE half, raw bits
typedef uint16_t tt_bf16; // bfloat16, raw bits

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK_K 256
#define K_SCALE_SIZE 12

typedef struct { tt_f16 d; uint8_t qs[QK4_0 / 2]; } tt_block_q4_0;             // x = (q - 8) * d
typedef struct { tt_f16 d, m; uint8_t qs[QK4_1 / 2]; } tt_block_q4_1;          // x = q * d + m
typedef struct { tt_f16 d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; } tt_block_q5_0; // x = (q - 16) * d
typedef struct { tt_f16 d, m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; } tt_block_q5_1;
typedef struct { tt_f16 d; int8_t qs[QK8_0]; } tt_block_q8_0;                  // x = q * d
typedef struct { float d, s; int8_t qs[QK8_1]; } tt_block_q8_1;                // s = d * sum(qs); activations only
typedef struct { tt_f16 d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; } tt_block_q4_K;
typedef struct { tt_f16 d, dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; } tt_block_q5_K;
typedef struct { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; tt_f16 d; } tt_block_q6_K;
typedef struct { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; } tt_block_q8_K; // activations only
// x = d * (sc & 15) * q - dmin * (sc >> 4), q 2 bits, one 4+4-bit sc per 16
typedef struct { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; tt_f16 d, dmin; } tt_block_q2_K;
// x = d * (sc - 32) * (q - (hmask bit ? 0 : 4)), q 2 low bits + 1 high bit, 6-bit sc per 16 packed in 12 bytes
typedef struct { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[K_SCALE_SIZE]; tt_f16 d; } tt_block_q3_K;
#define QK4_NL 32
// x = d * tt_iq4nl_values[q], q 4 bits: a fixed non-linear codebook
typedef struct { tt_f16 d; uint8_t qs[QK4_NL / 2]; } tt_block_iq4_nl;
// x = d * (ls - 32) * tt_iq4nl_values[q], ls 6 bits per 32 (low 4 bits in scales_l, high 2 in scales_h)
typedef struct { tt_f16 d; uint16_t scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; } tt_block_iq4_xs;

#define QK_MXFP4 32
// x = 2^(e - 127) * e2m1(q): OCP microscaling FP4, one E8M0 exponent byte per 32 values, 4-bit E2M1 codes
// (low nibbles are elements 0..15, high nibbles 16..31). The codes are stored doubled as integers
// (tt_mxfp4_values) and the scale halved (tt_e8m0_half), as ggml does, so the dot is an int8 dot.
typedef struct { uint8_t e; uint8_t qs[QK_MXFP4 / 2]; } tt_block_mxfp4;

static_assert(sizeof(tt_block_q4_0) == 18, "q4_0 size");
static_assert(sizeof(tt_block_q4_1) == 20, "q4_1 size");
static_assert(sizeof(tt_block_q5_0) == 22, "q5_0 size");
static_assert(sizeof(tt_block_q5_1) == 24, "q5_1 size");
static_assert(sizeof(tt_block_q8_0) == 34, "q8_0 size");
static_assert(sizeof(tt_block_q8_1) == 40, "q8_1 size");
static_assert(sizeof(tt_block_q4_K) == 144, "q4_K size");
static_assert(sizeof(tt_block_q5_K) == 176, "q5_K size");
static_assert(sizeof(tt_block_q6_K) == 210, "q6_K size");
static_assert(sizeof(tt_block_q8_K) == 292, "q8_K size");
static_assert(sizeof(tt_block_q2_K) == 84, "q2_K size");
static_assert(sizeof(tt_block_q3_K) == 110, "q3_K size");
static_assert(sizeof(tt_block_iq4_nl) == 18, "iq4_nl size");
static_assert(sizeof(tt_block_iq4_xs) == 136, "iq4_xs size");
static_assert(sizeof(tt_block_mxfp4) == 17, "mxfp4 size");

// The IQ4_NL / IQ4_XS codebook (ggml's kvalues_iq4nl).
extern const int8_t tt_iq4nl_values[16];
// The E2M1 values times two (ggml's kvalues_mxfp4): 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives.
extern const int8_t tt_mxfp4_values[16];

// n is always a multiple of the type's block size.
typedef void (*tt_to_float_fn)(const void *src, float *dst, int64_t n);
typedef void (*tt_from_float_fn)(const float *src, void *dst, int64_t n);
// Dot product of one weight row x (type T, n elements) with an activation row y already quantized to
// traits[T].vec_dot_type; returns the float result.
typedef float (*tt_vec_dot_fn)(int n, const void *x, const void *y);

typedef struct tt_traits {
    const char *name;
    int block_size;   // elements per block
    size_t type_size; // bytes per block
    int is_quantized;
    tt_to_float_fn to_float;     // scalar reference dequantization (every row, activation-only Q8_1/Q8_K too)
    tt_from_float_fn from_float; // scalar reference quantization
    tt_type vec_dot_type;        // what activations are quantized to for vec_dot
    tt_vec_dot_fn vec_dot;       // scalar reference dot product (NULL for activation-only Q8_1/Q8_K)
} tt_traits;

// Row for a type, or NULL if the id is unknown/unsupported.
const tt_traits *tt_get(uint32_t type);
const char *tt_name(uint32_t type); // "?" if unknown
// Bytes for n elements of a type (n a multiple of the block size), 0 if unknown.
size_t tt_row_size(uint32_t type, int64_t n);

float tt_f16_to_f32(tt_f16 h);
tt_f16 tt_f32_to_f16(float f); // round to nearest even

// A float's IEEE bits and back.
static inline uint32_t tt_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float tt_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float tt_bf16_to_f32(tt_bf16 h);

// Half the value of an E8M0 scale byte, 2^(e - 128) (exact; e = 0 and 1 give f32 subnormals), the factor of
// the doubled MXFP4 codes. ggml's GGML_E8M0_TO_FP32_HALF; e = 255 (E8M0's NaN) is 2^127 as there.
static inline float tt_e8m0_half(uint8_t e) {
    return tt_f32_from_bits(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}
tt_bf16 tt_f32_to_bf16(float f);

#endif
