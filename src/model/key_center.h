// K centering and balancing for a quantized K cache: a property of the model, calibrated by running the model
// itself (its forward pass over a built-in text), so it lives here and not in src/kv/, which never calls the model.
//
// Keys share a large common offset (a per-channel mean: 50-85% of a key's energy in SmolLM2), which sets the
// scale of every q4_0/q8_0 block and so costs most of the 4 bits. Subtracting ONE fixed vector m from every
// key of a layer before it is quantized changes each query's scores by the same constant -q·m, which
// softmax ignores: attention is mathematically unchanged, the attention kernels need no change, and the
// quantized rows only carry what differs between keys. m must be the same for every key a query sees, and
// for every request (prefix caching shares blocks across requests), so it is a property of the model: the
// mean post-RoPE key of each layer over a fixed built-in English calibration text (about 520 tokens,
// positions >= 4 so that attention-sink tokens do not skew it), computed once at load when a quantized K
// cache is asked for. A cache of f16 keys is never centered (bit-identical to an uncentered run).
// Then the channels are balanced (as SmoothQuant does for weights and activations): after centering, channel
// i of every key is multiplied by s_i and channel i of every query of that kv head by 1/s_i, so q'·k' = q·k
// exactly, with s_i = (rms query_i / rms centered key_i)^0.3 from the same calibration run: loud key channels
// that quiet query channels barely read are turned down before the 4-bit rounding, whose error the query
// then reads less. Both happen before the Hadamard rotation (ops.h) and only for a quantized K cache.
// Measured (docs/QUALITY.md), q4_0 KV mean KL against f16 KV: SmolLM2 0.0472 -> 0.0290 centered -> 0.0210
// balanced too; Gemma 3 270M 0.0960 -> 0.0431 -> 0.0199.
// Values are NOT centered, though that would be exact too (the weights sum to 1: subtract m_v from every value
// row, add it to the output): tried, and it made a q4_0 V cache worse (SmolLM2 V-only KL 0.0065 -> 0.0096),
// probably because the attention-sink rows, which take much of the weight, hold small values that centering
// makes large (not checked further).
#ifndef TACHYON_MODEL_KEY_CENTER_H
#define TACHYON_MODEL_KEY_CENTER_H

#include "common/err.h"
#include "model/model.h"

// Computes the model's key centers and balance when k_type is a quantized type (idempotent: a no-op after the
// first call, for f16/f32 keys, and when TACHYON_KV_CENTER is "0"/"off", the A/B switch; TACHYON_KV_BALANCE=0
// keeps the centering without the balance, another value sets its exponent). Runs the model over the
// calibration text with a private f16 cache on n_threads threads. Call before the model's first forward
// into a quantized K cache. On failure the model stays uncentered (still correct) and the error says why.
int model_kv_center_init(model *m, tt_type k_type, int n_threads, tc_err *err);

#endif
