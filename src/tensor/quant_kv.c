// Least-squares scale search for q4_0 KV rows (see quant_kv.h).
//
// Why: a K row's q4_0 rounding is what costs most of a q4_0 cache's perplexity (K only: +7.9% on SmolLM2,
// V only: +1.0%; docs/QUALITY.md). The reference maps the block's largest-magnitude value exactly to -8
// and rounds the rest to the nearest level of that grid; the other 31 values, which carry most of a dot
// product, pay for that one exact value. As llama.cpp's make_qx_quants does for weights, we try a small set
// of inverse scales around -8/max (and around 7/max, the other end of the asymmetric range [-8, 7]), take
// for each the least-squares d of its rounded levels (d = sum x q / sum q q), rounded to f16 as it is
// stored, round x again to that d's nearest levels, and keep the candidate whose decoded block is closest to x. The reference block is a candidate
// too, so no block ever gets worse. Cost: ~40 x 32 multiply-adds a block, one row per token, per KV head,
// per layer: small next to the matmuls.
#include <math.h>

#include "tensor/quant_kv.h"
#include "tensor/quant_ref.h"

enum { QKV_STEPS = 9 }; // candidates per family: base * (1 + 0.0125 * is), is in [-9, 9] (about +-11%)

// Squared error of the block (d, q) against x.
static float block_err(const float *x, float d, const int8_t *q) {
    float e = 0.0f;
    for (int j = 0; j < QK4_0; j++) {
        float r = x[j] - d * (float)q[j];
        e += r * r;
    }
    return e;
}

// q = round(x * id) clamped to [-8, 7]; NaN-safe (NaN -> -8, as the reference's clamp does).
static void round_levels(const float *x, float id, int8_t *q) {
    for (int j = 0; j < QK4_0; j++) {
        float v = fminf(fmaxf(nearbyintf(x[j] * id), -8.0f), 7.0f);
        q[j] = v == v ? (int8_t)v : -8;
    }
}

static void block_from_levels(tt_block_q4_0 *b, tt_f16 d, const int8_t *q) {
    b->d = d;
    for (int j = 0; j < QK4_0 / 2; j++)
        b->qs[j] = (uint8_t)((q[j] + 8) | (q[j + QK4_0 / 2] + 8) << 4);
}

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
        for (int is = -QKV_STEPS; is <= QKV_STEPS; is++) {
            round_levels(x, bases[f] * (1.0f + 0.0125f * (float)is), q);
            float sxq = 0.0f, sqq = 0.0f;
            for (int j = 0; j < QK4_0; j++) {
                sxq += x[j] * (float)q[j];
                sqq += (float)(q[j] * q[j]);
            }
            if (sqq <= 0.0f) continue;
            tt_f16 d = tt_f32_to_f16(sxq / sqq);
            float df = tt_f16_to_f32(d);
            if (!(df != 0.0f)) continue;
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
