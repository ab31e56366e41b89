// The forward pass written once. An architecture's layer is a sequence of operations (RMSNorm, matmul, bias,
// RoPE, attention over the paged KV cache, GLU, residual add) on named activation buffers (fwd_buf); a
// backend supplies the operations and the buffers behind the names (fwd_ops), never a copy of the sequence.
// The sequences are the builder functions of fwd.c, chosen per architecture by arch_desc.layer; the CPU's
// operations are in forward.c, the CUDA backend's in src/cuda/ (tcu_fwd_*), wired in backend_cuda.c.
//
// Adding an architecture: a row in arch.c; its tensor roles in arch.h when it has new ones; a builder in fwd.c
// when its block is not the standard one; and, per backend, only the operations it lacks (a new fwd_ops slot).
//
// This header is plain C with no dependencies beyond arch.h, so that device code can include it.
#ifndef TACHYON_MODEL_FWD_H
#define TACHYON_MODEL_FWD_H

#include <stddef.h>

#include "model/arch.h"

// The activation buffers of a step, each (max_tokens, fwd_buf_floats) floats, allocated once by the backend.
// A buffer's rows are packed: an operation on rows of len values reads row t at t·len.
typedef enum fwd_buf {
    FWD_X = 0, // (n, dim) residual stream
    FWD_XB,    // (n, max(dim, q_dim)) normed input; attention output
    FWD_Q,     // (n, max(dim, q_dim)) queries; output of the o and down projections
    FWD_K,     // (n, kv_dim)
    FWD_V,     // (n, kv_dim)
    FWD_HB,    // (n, max(ffn_dim, 2·q_dim with a gated q)) gate, then the GLU; gated q projection
    FWD_HB2,   // (n, max(ffn_dim, q_dim with a gated q)) up; the attention's output gate
    FWD_BUF_COUNT
} fwd_buf;

typedef enum fwd_act { FWD_ACT_SILU = 0, FWD_ACT_GELU_TANH = 1 } fwd_act;

// The operations a backend implements. be: the backend's context for the step being run (its buffers, the
// batch, the KV cache); n: the step's rows. Weights are named by (layer, role) and resolved by the backend
// (its own copy or layout of model_layer_w). Every slot returns 0 or a negative TC_ERR_* code; a backend that
// queues work (a device stream) may report its failures at the end of the step instead.
typedef struct fwd_ops {
    // dst (n, dim) = the token embeddings of the batch's rows, times hparams.embd_scale.
    int (*embed)(void *be, fwd_buf dst, int n);
    // dst (rows, len) = RMSNorm(src rows) · w, w = (layer, role) of len values; dst may be src.
    int (*norm)(void *be, fwd_buf dst, fwd_buf src, int rows, int len, int layer, arch_role w, float eps);
    // outs[i] (n, rows of W_i) = x (n, cols) @ W_iᵀ, W_i = (layer, ws[i]), for count <= 3 weights sharing x.
    int (*matmul)(void *be, const fwd_buf *outs, fwd_buf x, int n, int layer, const arch_role *ws, int count);
    // x (n, len) += b (len) on every row, b = (layer, role).
    int (*add_bias)(void *be, fwd_buf x, int n, int len, int layer, arch_role b);
    // Rotates q (n, n_heads, head_dim) and k (n, n_kv_heads, head_dim) in place at each row's position, with
    // the layer's RoPE (its base: global or sliding-window layer); then q times the row's attention temperature
    // where the model has one (model_hparams.attn_temp_scale).
    int (*rope)(void *be, fwd_buf q, fwd_buf k, int n, int layer);
    // Writes k and v (n, kv_dim) into the layer's paged KV cache at each row's (sequence, position), then
    // out (n, q_dim) = softmax(q·Kᵀ·scale)·V per query head over the positions each row sees (its sequence's,
    // up to its own; the window's on a sliding-window layer). A layer with attention sinks (ROLE_ATTN_SINKS)
    // adds exp(sink_h) to head h's softmax denominator (a logit with no value). q and k may be changed (cache
    // transforms).
    int (*attention)(void *be, fwd_buf out, fwd_buf q, fwd_buf k, fwd_buf v, int n, int layer);
    // x (count) += y (count)
    int (*add)(void *be, fwd_buf x, fwd_buf y, int count);
    // (optional: Granite's residual multiplier) x (count) *= s
    int (*scale)(void *be, fwd_buf x, int count, float s);
    // g (count) = act(g) · u
    int (*glu)(void *be, fwd_buf g, fwd_buf u, int count, fwd_act act);
    // The end of the layers: dst (n_logits, dim) = the final RMSNorm (output_norm) of the rows whose logits the
    // batch wants, gathered; the backend also hands out what else its batch asks of the residual stream src.
    int (*out_norm)(void *be, fwd_buf dst, fwd_buf src, float eps);
    // (optional: MoE architectures) The mixture-of-experts FFN of the layer: dst (n, dim) = Σ over each row's
    // top n_expert_used experts of weight_e · down_e(SiLU(gate_e·x) · up_e·x), x (n, dim) = the normed input.
    // Routing: softmax over all n_expert of the router's logits (ffn_gate_inp · x), the top n_expert_used,
    // their weights renormalised to sum 1 when hparams.moe_norm_w; plus, when the layer has a shared expert,
    // sigmoid(gate_inp_shexp · x) · down_s(SiLU(gate_s·x) · up_s·x). Where the layer has them, the router's bias
    // is added to its logits and each expert's biases to its gate, up and down outputs (gpt-oss), and with
    // hparams.swiglu_limit > 0 the SwiGLU is the clamped one (model.h). A row's result does not depend on the other
    // rows. A backend without it leaves it NULL: the sequence then fails with TC_ERR_UNSUPPORTED.
    int (*moe)(void *be, fwd_buf dst, fwd_buf x, int n, int layer);
    // (optional: hybrid models) A gated DeltaNet layer: dst (n, dim) from x (n, dim), the normed input, with each
    // row's sequence's recurrent state (the CPU's: src/model/gdn.h states the arithmetic). NULL: the sequence fails
    // with TC_ERR_UNSUPPORTED.
    int (*gdn)(void *be, fwd_buf dst, fwd_buf x, int n, int layer);
    // (optional: hybrid models) q (n, q_dim) and gate (n, q_dim) from src (n, 2·q_dim), whose rows hold each
    // head's q then its gate (head_dim values each).
    int (*gate_split)(void *be, fwd_buf q, fwd_buf gate, fwd_buf src, int n);
    // (optional: hybrid models) x (count) *= sigmoid(g (count))
    int (*mul_sigmoid)(void *be, fwd_buf x, fwd_buf g, int count);
} fwd_ops;

struct model;
struct model_hparams;

// One step as the sequence sees it.
typedef struct fwd_graph {
    const fwd_ops *ops;
    void *be;              // the backend's step context, passed to every operation
    const struct model *m; // borrowed: hyper-parameters and which optional weights exist
    int n;                 // rows of the batch (or sub-batch) being run
} fwd_graph;

// An architecture's transformer block: layer `layer` of the model over g's rows, as calls to g->ops.
typedef int (*fwd_layer_fn)(const fwd_graph *g, int layer);

// Floats one row of buffer b takes for a model (the backend allocates max_tokens rows of each).
size_t fwd_buf_floats(const struct model_hparams *hp, fwd_buf b);
// The token embeddings into FWD_X.
int fwd_embed(const fwd_graph *g);
// Layers [l0, l1) through the architecture's builder; the first error stops them and names the layer.
int fwd_layers(const fwd_graph *g, int l0, int l1, int *failed_layer);
// The final norm into FWD_XB (fwd_ops.out_norm).
int fwd_out_norm(const fwd_graph *g);

// The pre-norm block of llama, qwen2, qwen3, gemma2, gemma3 and smollm3: RMSNorm, q/k/v projections
// (optional biases, optional per-head q/k RMSNorm), RoPE (not on no-RoPE layers), attention, output
// projection (optional post-norm), residual; RMSNorm, gate/up projections, SwiGLU or tanh-GeGLU, down
// projection (optional post-norm), residual.
int fwd_layer_std(const fwd_graph *g, int layer);
// The block of OLMo 2: q/k/v projections of the residual stream itself (no norm before), q and k RMSNormed
// over all heads at once, RoPE, attention, output projection, RMSNorm (post_attention_norm), residual; SwiGLU
// FFN of the residual stream, RMSNorm (post_ffw_norm), residual.
int fwd_layer_post(const fwd_graph *g, int layer);
// The block of qwen3moe, qwen2moe and gpt-oss: fwd_layer_std's attention half (gpt-oss: with the output
// projection's bias and attention sinks), then RMSNorm (ffn_norm, or gpt-oss's post_attention_norm), the MoE FFN
// (fwd_ops.moe), residual.
int fwd_layer_moe(const fwd_graph *g, int layer);
// The block of hybrid models (qwen35): RMSNorm; a gated DeltaNet layer (fwd_ops.gdn) or gated attention (q and
// its gate from one projection, per-head q/k RMSNorm, RoPE, attention, times sigmoid(gate), output projection);
// residual; RMSNorm (post_attention_norm), SwiGLU FFN, residual.
int fwd_layer_hybrid(const fwd_graph *g, int layer);

#endif
