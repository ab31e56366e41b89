// The CPU's gated DeltaNet layer (fwd_ops.gdn, fwd.h) of hybrid models (Qwen3.5, Qwen3-Next), as llama.cpp's
// qwen35 and qwen3next graphs compute it, with each sequence's recurrent state in the KV storage's slots
// (model.h: model_rs_*). Private to src/model/ (forward.c calls it).
#ifndef TACHYON_MODEL_GDN_H
#define TACHYON_MODEL_GDN_H

#include "cpu/cpu.h"
#include "model/model_internal.h"

// A runner's scratch for the DeltaNet layers of model m, up to max_tokens rows. Owned: free with
// gdn_scratch_free.
typedef struct gdn_scratch gdn_scratch;
int gdn_scratch_new(const model *m, int max_tokens, gdn_scratch **out, tc_err *err);
void gdn_scratch_free(gdn_scratch *s);

// out (n, dim) = DeltaNet layer l over x (n, dim) (the normed input) for the batch's rows, in row order:
//   qkv = W_qkv·x, z = W_gate·x, beta = σ(W_beta·x), g = softplus(W_alpha·x + dt_bias)·ssm_a (per value
//   head; Qwen3-Next: q, k, v, z from ssm_in or as Qwen3.5, beta and alpha from ssm_ba); c = SiLU(causal
//   conv1d of qkv with the sequence's last ssm_conv-1 inputs); q, k, v = c's parts, q and k L2-normed per
//   head; per value head h (key head h % ssm_groups; Qwen3-Next's h / (ssm_vheads / ssm_groups)), with state
//   S (ssm_state²): S ← exp(g)·S; S ← S + k·(β·(v - Sᵀk))ᵀ; o = Sᵀq / sqrt(ssm_state);
//   o ← RMSNorm(o)·ssm_norm·SiLU(z) per head; out = W_out·o.
// A row at position 0 starts its sequence's state from zero. State slots: b->rs_slots (NULL: slot =
// sequence). mm_scratch: cpu_matmul scratch for the layer's matrices at n rows. 0 or a TC_ERR_* code.
int gdn_layer(cpu_pool *pool, void *mm_scratch, gdn_scratch *s, const model *m, int l, kv_store *kv,
              const model_batch *b, float *out, const float *x, int n);

#endif
