// Re-quantizing a GGUF model (`tachyon quantize`): every 2-D weight is dequantized to f32 with the scalar
// reference (src/tensor/) and quantized again to the target type with the reference quantizers, which match
// ggml bit for bit; metadata (tokenizer, chat template, hyper-parameters) is copied verbatim.
#ifndef TACHYON_GGUF_QUANTIZE_H
#define TACHYON_GGUF_QUANTIZE_H

#include <stdint.h>
#include <stdio.h>

#include "common/err.h"
#include "gguf/gguf.h"

// A target: one tensor type for every weight, or a llama.cpp-style mix.
typedef enum { GQ_PLAIN = 0, GQ_Q4_K_M } gq_mix;

typedef struct gq_target {
    gq_mix mix;
    uint32_t type;      // tt_type of the plain target (the base type, Q4_K, for Q4_K_M)
    uint32_t file_type; // llama.cpp's general.file_type (LLAMA_FTYPE_*) for the target
    const char *name;   // "Q8_0", "Q4_K_M", ...
} gq_target;

// "F32" | "F16" | "BF16" | "Q8_0" | "Q4_0" | "Q4_1" | "Q5_0" | "Q5_1" | "Q4_K" | "Q5_K" | "Q6_K" | "Q4_K_M"
// (case-insensitive) → *out; TC_ERR_INVALID otherwise.
int gq_target_parse(const char *s, gq_target *out);
// The names above, comma-separated, for error messages.
const char *gq_target_names(void);

// The type tensor `name` (shape ne, n_dims) of file src gets under target t: 1-D tensors keep their type;
// 2-D+ weights get the target's type (for Q4_K_M: Q6_K for the output head and for attn_v/ffn_down of the
// layers where llama.cpp spends more bits, Q5_K for fused attn_qkv, Q4_K elsewhere), and a type whose block
// does not divide the row length falls back as llama.cpp does (Q4_K→Q5_0, Q5_K→Q5_1, Q6_K→Q8_0, then F16).
// n_layer is the number of blocks kept.
uint32_t gq_tensor_type(const gq_target *t, const gguf_ctx *src, const gguf_tensor *ti, int n_layer);

typedef struct gq_params {
    gq_target target;
    int keep_layers; // < 0: all; else only blocks 0..keep_layers-1 (and block_count rewritten)
    int overwrite;   // replace an existing OUT
    FILE *log;       // per-tensor lines and a summary; NULL: quiet
} gq_params;

// Reads in_path, writes out_path (through a temporary file renamed at the end, so a failure never leaves a
// partial OUT and IN may equal OUT). Returns 0 or a TC_ERR_* with a message in err.
int gq_quantize_file(const char *in_path, const char *out_path, const gq_params *p, tc_err *err);

#endif
