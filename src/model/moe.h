// The CPU's mixture-of-experts FFN (fwd_ops.moe, fwd.h): routing, then each chosen expert's matrices read
// once per step for all the rows routed to it. Private to src/model/ (forward.c calls it).
#ifndef TACHYON_MODEL_MOE_H
#define TACHYON_MODEL_MOE_H

#include "cpu/cpu.h"
#include "model/model_internal.h"

// Routing of one row: p = softmax(logits (n_expert)); ids (k) = the k most probable experts, most probable
// first (ties: the lower index); w (k) = their p, divided by their sum when norm (llama.cpp's build_moe_ffn
// with softmax gating and norm_w). With norm this is also the softmax over the k chosen logits alone (gpt-oss's
// routing, llama.cpp's softmax_weight gating): the full softmax's common denominator cancels.
void moe_route(const float *logits, int n_expert, int k, int norm, int32_t *ids, float *w);

// A runner's scratch for the MoE FFN of model m, for up to max_tokens rows. Owned: free with moe_scratch_free.
typedef struct moe_scratch moe_scratch;
int moe_scratch_new(const model *m, int max_tokens, moe_scratch **out, tc_err *err);
void moe_scratch_free(moe_scratch *s);

// out (n, dim) = the MoE FFN of layer l over x (n, dim) (fwd.h: fwd_ops.moe). Rows are grouped by expert: the
// matrices of an expert no row chose are never read, those of a chosen one once for all its rows (once per pass of
// up to 512 rows in a larger batch). Each row
// sums its experts' outputs in ascending expert order, so its result does not depend on the other rows. gpt-oss:
// the router's bias is added to its logits, each expert's biases to its gate, up and down outputs (the down bias
// before the routing weight), and the experts' SwiGLU is the clamped one (model_hparams.swiglu_limit).
// mm_scratch: cpu_matmul scratch for every matrix of the layer at n rows. 0 or a TC_ERR_* code.
int moe_ffn(cpu_pool *pool, void *mm_scratch, moe_scratch *s, const model *m, int l, float *out, const float *x,
            int n);

#endif
