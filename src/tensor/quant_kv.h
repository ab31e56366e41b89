// Quantizers for KV-cache rows that pick each block's scale to minimise the squared error, instead of the
// reference quantizer's d = signed absmax / -8 (q4_0). The output is the standard block format, so every
// kernel that reads a q4_0 cache reads these blocks unchanged; only the choice of d and of the rounded
// values differs. Used by the forward pass when it writes a quantized K or V row (src/model/forward.c).
//
// Guarantee (tested in tests/unit/test_quant_kv.c): for every block, the squared error of the decoded
// block against x is never larger than that of tt_q4_0_from_float's block (the reference is one of the
// candidates).
#ifndef TACHYON_TENSOR_QUANT_KV_H
#define TACHYON_TENSOR_QUANT_KV_H

#include <stdint.h>

// x (n,) -> dst (n / 32 q4_0 blocks); n a multiple of 32.
void tt_q4_0_from_float_mse(const float *x, void *dst, int64_t n);

#endif
