// Least-squares scale search for q4_0 KV rows (see quant_kv.h).
//
// Why: a K row's q4_0 rounding is what costs most of a q4_0 cache's perplexity (K only: +7.9% on SmolLM2,
// V only: +1.0%; docs/QUALITY.md). The reference maps the block's largest-magnitude value exactly to -8
// and rounds the rest to the nearest level of that grid; the other 31 values, which carry most of a dot
// product, pay for that one exact value. We start from the levels of -8/max (the reference's grid) and of
// 7/max (the other end of the asymmetric range [-8, 7]) and improve each by two Lloyd rounds: the
// least-squares d of the current levels (d = sum x q / sum q q), rounded to f16 as it is stored, then x
// rounded again to that d's nearest levels; the block closest to x wins. The reference block is a candidate
// too, so no block ever gets worse.
//
// Cost and the choice of search: llama.cpp's make_qx_quants (for weights) tries ~20 scales around max/-8;
// doing that here (38 candidates) gave a squared error 0.886x the reference's on Gaussian rows against 0.918x
// for these 2 x 2 rounds, but cost 6x more: ~1.8 ms a token for SmolLM2's 180 rows against ~0.3 ms (the
// reference quantizer: ~0.06 ms). It runs for every cached row (spread over the thread pool: forward.c
// store_kv), so it is kept cheap.
#include <math.h>

#include "tensor/quant_kv.h"
#include "tensor/quant_ref.h"

// Squared error of the block (d, q) against x.
static float block_err(const float *x, float d, const int8_t *q) {
    float e = 0.0f;
    for (int j = 0; j < QK4_0; j++) {
        float r = x[j] - d * (float)q[j];
        e += r * r;
    }
    return e;
}

// q = round(x * id) clamped to [-8, 7] (halves up, as the reference rounds); NaN -> -8, as the reference's
// clamp gives. Comparisons and a truncation of a non-negative value: no libm calls (fmaxf / nearbyintf are
// calls at -O2 without SSE4.1, and made this search 100x slower than the reference quantizer).
static void round_levels(const float *x, float id, int8_t *q) {
    for (int j = 0; j < QK4_0; j++) {
        float v = x[j] * id + 8.5f;
        v = v > 0.0f ? v : 0.0f; // NaN -> 0
        v = v < 15.0f ? v : 15.0f;
        q[j] = (int8_t)((int)v - 8);
    }
}

static void block_from_levels(tt_block_q4_0 *b, tt_f16 d, const int8_t *q) {
    b->d = d;
    for (int j = 0; j < QK4_0 / 2; j++)
        b->qs[j] = (uint8_t)((q[j] + 8) | (q[j + QK4_0 / 2] + 8) << 4);
}

enum { QKV_ITERS = 2 }; // least-squares d / re-round rounds per starting scale

static void quantize_block(const float *x, tt_block_q4_0 *b) {
    // The reference block first: the candidate to beat.
    tt_q4_0_from_float(x, b, QK4_0);
    int8_t q[QK4_0], best_q[QK4_0];
    for (int j = 0; j < QK4_0 / 2; j++) {
        best_q[j] = (int8_t)((b->qs[j] & 0x0f) - 8);
        best_q[j + QK4_0 / 2] = (int8_t)((b->qs[j] >> 4) - 8);
    }
    tt_f16 best_d = b->d;
    float best = block_err(x, tt_f16_to_f32(best_d), best_q);
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK4_0; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
    if (!(amax > 0.0f) || !isfinite(amax) || !(best > 0.0f)) return; // zero, non-finite or already exact
    const float bases[2] = {-8.0f / max, 7.0f / max};
    for (int f = 0; f < 2; f++) {
        round_levels(x, bases[f], q);
        for (int it = 0; it < QKV_ITERS; it++) {
            float sxq = 0.0f, sqq = 0.0f;
            for (int j = 0; j < QK4_0; j++) {
                sxq += x[j] * (float)q[j];
                sqq += (float)(q[j] * q[j]);
            }
            if (sqq <= 0.0f) break;
            tt_f16 d = tt_f32_to_f16(sxq / sqq);
            float df = tt_f16_to_f32(d);
            if (!(df != 0.0f)) break;
            round_levels(x, 1.0f / df, q); // nearest levels for the stored d: never a larger error
            float e = block_err(x, df, q);
            if (e < best) {
                best = e;
                best_d = d;
                for (int j = 0; j < QK4_0; j++) best_q[j] = q[j];
            }
        }
    }
    block_from_levels(b, best_d, best_q);
}

void tt_q4_0_from_float_mse(const float *x, void *dst, int64_t n) {
    tt_block_q4_0 *b = dst;
    for (int64_t i = 0; i < n / QK4_0; i++) quantize_block(x + i * QK4_0, b + i);
}
