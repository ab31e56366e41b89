// Per-chunk dequantization of the GGUF weight formats the CUDA backend reads, written once for both sides:
// nvcc compiles it into the kernels (__host__ __device__), and the host C compiler compiles it into
// tests/unit/test_cuda_quant.c, which checks it against the scalar reference (src/tensor/) on random blocks —
// so this part of the CUDA code runs, and is tested, on machines without a GPU.
//
// A chunk is 32 consecutive values of a row: element range [32c, 32c + 32). For Q4_0/Q4_1/Q8_0 a chunk is one
// block; for Q4_K/Q6_K one eighth of a 256-value super-block; for F32/F16/BF16 32 plain values (the last
// chunk of a row whose length is not a multiple of 32 is partial: n_valid values). The math is the
// reference's, in the reference's order (src/tensor/quant_ref_*.c), so that on a device without fused
// multiply-add contraction the values would be bit-identical; nvcc contracts by default, which moves the
// last bit of the K-quant values at most.
#ifndef TACHYON_CUDA_TCU_QUANT_H
#define TACHYON_CUDA_TCU_QUANT_H

#include <stdint.h>

#ifdef __CUDACC__
#define TCU_HD static inline __host__ __device__
#else
#define TCU_HD static inline
#endif

// ggml type ids (tt_type's values; backend_cuda.c checks that they agree)
enum {
    TCU_F32 = 0,
    TCU_F16 = 1,
    TCU_Q4_0 = 2,
    TCU_Q4_1 = 3,
    TCU_Q8_0 = 8,
    TCU_Q4_K = 12,
    TCU_Q6_K = 14,
    TCU_BF16 = 30,
};

#define TCU_CHUNK 32

TCU_HD float tcu_f32_from_bits(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    union { uint32_t u; float f; } v;
    v.u = u;
    return v.f;
#endif
}

TCU_HD uint32_t tcu_f32_bits(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    union { uint32_t u; float f; } v;
    v.f = f;
    return v.u;
#endif
}

// IEEE half → float, exactly (subnormals, inf and NaN payloads as tt_f16_to_f32).
TCU_HD float tcu_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0) return tcu_f32_from_bits(sign | tcu_f32_bits((float)mant * 5.9604644775390625e-8f)); // mant·2^-24
    if (exp == 31) return tcu_f32_from_bits(sign | 0x7f800000u | (mant << 13));
    return tcu_f32_from_bits(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

TCU_HD float tcu_bf16_to_f32(uint16_t h) { return tcu_f32_from_bits((uint32_t)h << 16); }

// Unaligned little-endian half read (block structs are packed at 2-byte alignment, rows at any offset).
TCU_HD uint16_t tcu_ld16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

// Bytes per block and values per block of a type (0 for types this backend does not read).
TCU_HD int tcu_block_bytes(int type) {
    switch (type) {
    case TCU_F32: return 4;
    case TCU_F16: case TCU_BF16: return 2;
    case TCU_Q4_0: return 18;
    case TCU_Q4_1: return 20;
    case TCU_Q8_0: return 34;
    case TCU_Q4_K: return 144;
    case TCU_Q6_K: return 210;
    default: return 0;
    }
}

TCU_HD int tcu_block_values(int type) {
    switch (type) {
    case TCU_F32: case TCU_F16: case TCU_BF16: return 1;
    case TCU_Q4_0: case TCU_Q4_1: case TCU_Q8_0: return 32;
    case TCU_Q4_K: case TCU_Q6_K: return 256;
    default: return 0;
    }
}

// --- one chunk per format: out[0..32) = values [32c, 32c+32) of the row at `row`

// x = (q - 8)·d; bytes: d (f16), qs[16] (low nibbles: values 0..15, high: 16..31)
TCU_HD void tcu_deq_q4_0(const uint8_t *row, int c, float *out) {
    const uint8_t *b = row + (int64_t)c * 18;
    float d = tcu_f16_to_f32(tcu_ld16(b));
    for (int j = 0; j < 16; j++) {
        out[j] = (float)((b[2 + j] & 0x0f) - 8) * d;
        out[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
    }
}

// x = q·d + m; bytes: d, m (f16), qs[16]
TCU_HD void tcu_deq_q4_1(const uint8_t *row, int c, float *out) {
    const uint8_t *b = row + (int64_t)c * 20;
    float d = tcu_f16_to_f32(tcu_ld16(b)), m = tcu_f16_to_f32(tcu_ld16(b + 2));
    for (int j = 0; j < 16; j++) {
        out[j] = (float)(b[4 + j] & 0x0f) * d + m;
        out[j + 16] = (float)(b[4 + j] >> 4) * d + m;
    }
}

// x = q·d; bytes: d (f16), qs[32] int8
TCU_HD void tcu_deq_q8_0(const uint8_t *row, int c, float *out) {
    const uint8_t *b = row + (int64_t)c * 34;
    float d = tcu_f16_to_f32(tcu_ld16(b));
    for (int j = 0; j < 32; j++) out[j] = (float)(int8_t)b[2 + j] * d;
}

// Q4_K super-block (144 bytes): d, dmin (f16), scales[12] (8 pairs of 6-bit scale and min), qs[128].
// Sub-block j: x = (d·sc_j)·q − dmin·m_j, q the low (j even) or high (j odd) nibbles of qs[32·(j/2) ..].
TCU_HD void tcu_deq_q4_k(const uint8_t *row, int c, float *out) {
    const uint8_t *b = row + (int64_t)(c / 8) * 144;
    const int j = c % 8;
    const uint8_t *s = b + 4, *qs = b + 16 + 32 * (j / 2);
    uint8_t sc, m;
    if (j < 4) {
        sc = s[j] & 63, m = s[j + 4] & 63;
    } else {
        sc = (uint8_t)((s[j + 4] & 0x0f) | (s[j - 4] >> 6) << 4);
        m = (uint8_t)((s[j + 4] >> 4) | (s[j] >> 6) << 4);
    }
    float d = tcu_f16_to_f32(tcu_ld16(b)), dmin = tcu_f16_to_f32(tcu_ld16(b + 2));
    float d1 = d * sc, m1 = dmin * m;
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 32; l++) out[l] = d1 * (float)((qs[l] >> shift) & 0x0f) - m1;
}

// Q6_K super-block (210 bytes): ql[128], qh[64], scales[16] int8, d (f16). Value e = 32j + l of the
// super-block: h = j/4, k = j%4, q = (ql[64h + l + 32(k&1)] >> 4(k>>1) & 15 | (qh[32h + l] >> 2k & 3) << 4) − 32,
// x = d·scales[e/16]·q.
TCU_HD void tcu_deq_q6_k(const uint8_t *row, int c, float *out) {
    const uint8_t *b = row + (int64_t)(c / 8) * 210;
    const int j = c % 8, h = j / 4, k = j % 4;
    const uint8_t *ql = b + 64 * h + 32 * (k & 1), *qh = b + 128 + 32 * h;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = tcu_f16_to_f32(tcu_ld16(b + 208));
    for (int l = 0; l < 32; l++) {
        int lo = (ql[l] >> (4 * (k >> 1))) & 0x0f, hi = (qh[l] >> (2 * k)) & 3;
        int q = (lo | hi << 4) - 32;
        out[l] = d * (float)sc[(32 * j + l) / 16] * (float)q;
    }
}

// Plain types: n_valid values (the last chunk of a row may be short); the rest of out is zeroed.
TCU_HD void tcu_deq_plain(int type, const uint8_t *row, int c, int n_valid, float *out) {
    const int64_t e0 = (int64_t)c * 32;
    for (int l = 0; l < 32; l++) {
        float v = 0.0f;
        if (l < n_valid) {
            if (type == TCU_F32) v = tcu_f32_from_bits((uint32_t)row[4 * (e0 + l)] | (uint32_t)row[4 * (e0 + l) + 1] << 8 |
                                                      (uint32_t)row[4 * (e0 + l) + 2] << 16 | (uint32_t)row[4 * (e0 + l) + 3] << 24);
            else if (type == TCU_F16) v = tcu_f16_to_f32(tcu_ld16(row + 2 * (e0 + l)));
            else v = tcu_bf16_to_f32(tcu_ld16(row + 2 * (e0 + l)));
        }
        out[l] = v;
    }
}

// Chunk c of a row of type `type` with `cols` values; returns 0, or -1 for a type this backend does not read.
TCU_HD int tcu_deq_chunk(int type, const uint8_t *row, int c, int cols, float *out) {
    switch (type) {
    case TCU_Q4_0: tcu_deq_q4_0(row, c, out); return 0;
    case TCU_Q4_1: tcu_deq_q4_1(row, c, out); return 0;
    case TCU_Q8_0: tcu_deq_q8_0(row, c, out); return 0;
    case TCU_Q4_K: tcu_deq_q4_k(row, c, out); return 0;
    case TCU_Q6_K: tcu_deq_q6_k(row, c, out); return 0;
    case TCU_F32: case TCU_F16: case TCU_BF16: {
        int n_valid = cols - 32 * c;
        tcu_deq_plain(type, row, c, n_valid > 32 ? 32 : n_valid, out);
        return 0;
    }
    default: return -1;
    }
}

// 1 when a row of `cols` values of this type can be read chunk by chunk (block types need whole blocks).
TCU_HD int tcu_type_ok(int type, int64_t cols) {
    int bv = tcu_block_values(type);
    return bv > 0 && cols > 0 && cols % bv == 0;
}

#endif
