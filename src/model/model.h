// A model: weights (read-only, pointing into the GGUF mapping), hyper-parameters from metadata, and the
// batched forward pass over a paged KV cache. The forward pass never sees "a sequence": it gets a ragged
// batch of tokens, each with (sequence slot, position), every sequence's KV block table, and the rows
// that need logits. Prefill chunks, single decode tokens and speculative positions mix freely.
#ifndef TACHYON_MODEL_H
#define TACHYON_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "gguf/gguf.h"
#include "kv/kv_store.h"
#include "tensor/ttype.h"

// Bounds of the mixture-of-experts counts a model may declare (the largest released: 512 experts, 10 used).
#define MODEL_MAX_EXPERTS 1024
#define MODEL_MAX_EXPERTS_USED 64

typedef struct model_hparams {
    char arch[32];     // "llama", "qwen2", "qwen3", …
    char name[128];    // general.name, may be empty
    int n_vocab;
    int dim;           // embedding width
    int n_layers;
    int n_heads;
    int n_kv_heads;
    int head_dim;
    int ffn_dim;
    int ctx_train;     // context length the model was trained for
    float norm_eps;
    float rope_base;
    float rope_scale;  // linear position scale (1 = none)
    int rope_neox;     // 1: NeoX-style rotation (pairs i, i+d/2); 0: adjacent pairs (GPT-J/llama style)
    int rope_dim;      // rotated dims per head
    int tied_embeddings;
    float attn_scale;  // softmax scale of q·k (1/sqrt(head_dim) unless the model says otherwise)
    float embd_scale;  // token embeddings are multiplied by this (1, or sqrt(dim) for gemma, or Granite's)
    float residual_scale; // each block's output is multiplied by this before its residual add (0: none)
    float logit_scale; // logits are divided by this (Granite; 0: none)
    int ffn_gelu;      // 1: GeGLU (tanh GELU); 0: SwiGLU
    // Sliding-window attention: local layers see only the last swa_window positions (0: every layer global).
    int swa_window;
    int swa_pattern;   // layer l is global when (l + 1) % swa_pattern == 0; 0 with a window: all local
    // RoPE base of local layers (their positions are never scaled); 0: local layers rotate as global ones
    float rope_base_swa;
    int rope_orig_ctx; // rope.scaling.original_context_length (YaRN, LongRoPE, temperature), else ctx_train
    // YaRN (Mistral 3): positions unscaled, each frequency mixed between itself and itself / yarn_factor by the
    // ramp between the dims that turn beta_fast and beta_slow times over the original context; 0: none
    float yarn_factor, yarn_beta_fast, yarn_beta_slow;
    float attn_temp_scale; // queries at position p times 1 + attn_temp_scale·ln(1 + floor(p / rope_orig_ctx))
    float rope_mscale; // RoPE's cos and sin are multiplied by this (rope.scaling.attn_factor; LongRoPE), 1: none
    int rope_long;     // Phi-3 LongRoPE: 1 when the long frequency factors were chosen, 0 the short ones
    int no_rope_step;  // layer l has no RoPE when no_rope_step > 0 and (l + 1) % no_rope_step == 0 (SmolLM3)
    // Soft-capping (Gemma 2): attention scores s → c·tanh(s/c) after the scale, logits likewise; 0: none
    float attn_softcap, final_softcap;
    // Mixture of experts (0 for dense models): each row goes through n_expert_used of n_expert experts of
    // expert_ffn_dim, routed per layer; moe_norm_w: the top-k weights are renormalised to sum 1; a shared expert
    // of shexp_ffn_dim (0: none) runs on every row.
    int n_expert, n_expert_used, expert_ffn_dim, moe_norm_w, shexp_ffn_dim;
    // The experts' clamped SwiGLU (gpt-oss): gate ≤ limit, up within ±limit, gate·σ(alpha·gate)·(up + 1); 0: SwiGLU
    float swiglu_limit, swiglu_alpha;
    int attn_sinks; // 1: every layer has a learned sink logit per query head (gpt-oss)
    // Hybrid linear attention (Qwen3.5, Qwen3-Next; 0 otherwise): layer l is a gated DeltaNet layer unless
    // (l + 1) % full_attn_interval == 0. Its heads: ssm_groups key heads and ssm_vheads value heads of ssm_state
    // values (value head h reads key head h % ssm_groups; with ssm_grouped, Qwen3-Next's order, key head
    // h / (ssm_vheads / ssm_groups)), a causal conv1d of ssm_conv taps over q, k and v.
    // The attention layers' q projection carries a sigmoid gate per head (attn_gated).
    int full_attn_interval, ssm_conv, ssm_state, ssm_groups, ssm_vheads, ssm_grouped, attn_gated;
    uint64_t n_params;
    uint64_t weight_bytes; // bytes of all tensors
} model_hparams;

typedef struct model model; // opaque

// Loads and validates a GGUF model; unknown architecture → TC_ERR_UNSUPPORTED naming it. Owned by the
// caller: free with model_free.
int model_load(const char *path, model **out, tc_err *err);
// Same over a caller-owned GGUF image (fuzzing, tests): no copy is made, data must outlive the model.
int model_load_memory(const void *data, size_t size, model **out, tc_err *err);
void model_free(model *m);
const model_hparams *model_get_hparams(const model *m);
const gguf_ctx *model_gguf(const model *m); // borrowed, valid while m lives
// Bytes of the matrices the load moved out of the file mapping (model_place.c): repacked for the CPU
// kernels, and copied unchanged into huge-page memory.
void model_placement(const model *m, uint64_t *repacked, uint64_t *copied);
// 1 when layer l attends within the sliding window only.
static inline int model_layer_is_swa(const model_hparams *hp, int l) {
    return hp->swa_window > 0 && (hp->swa_pattern <= 0 || (l + 1) % hp->swa_pattern != 0);
}

// 1 when layer l rotates q and k with the local layers' own RoPE (base rope_base_swa, positions unscaled).
static inline int model_layer_own_rope(const model_hparams *hp, int l) {
    return hp->rope_base_swa > 0 && model_layer_is_swa(hp, l);
}

// 1 when layer l rotates q and k (every layer but SmolLM3's every no_rope_step-th).
static inline int model_layer_has_rope(const model_hparams *hp, int l) {
    return hp->no_rope_step <= 0 || (l + 1) % hp->no_rope_step != 0;
}

// 1 when layer l is a gated DeltaNet (recurrent) layer of a hybrid model.
static inline int model_layer_is_recurrent(const model_hparams *hp, int l) {
    return hp->full_attn_interval > 0 && (l + 1) % hp->full_attn_interval != 0;
}

// --- the recurrent state of hybrid models: per sequence, every DeltaNet layer's conv state (the last ssm_conv-1
// inputs of each conv channel) and its delta-rule state (ssm_vheads matrices of ssm_state²), in slots of the
// KV storage (kv_store.rs). A sequence's state starts over at its row of position 0.
#define MODEL_RS_SLOTS 64 // sequences a storage keeps state for (the engine's max_seqs at most)
#define MODEL_RS_CKPT 17 // rows of one item whose state a slot may keep (speculation: 1 + SPEC_MAX_K verify rows)
// Floats one slot holds over all DeltaNet layers (0: not a hybrid model).
size_t model_rs_slot_floats(const model_hparams *hp);
#define MODEL_RS_SEQ_MAX (1ull << 30) // bytes of one sequence's recurrent state at most (larger files are refused)
// Speculation on a hybrid model: keep the state after each of up to n_rows (<= MODEL_RS_CKPT) rows of an item
// for slots 0..n_slots-1 (n_slots <= MODEL_RS_SLOTS). A slot's checkpoints are as large as its state times
// n_rows (a 9B model's state is ~50 MiB), so the caller sizes them by its running sequences and draft length;
// TC_ERR_NOMEM with a message saying what to lower when they do not fit in this machine's memory.
int model_rs_reserve_ckpt(kv_store *kv, int n_slots, int n_rows, tc_err *err);
// Sets slot's state to the one after row `row` (0..rs_ckpt_n-1) of its rows in the last batch that kept them
// (model_batch.rs_ckpt): a verify step's state before its rejected drafts.
void model_rs_restore(kv_store *kv, int slot, int row);
// Prefix-cache hits: the state after block `block`'s last position (kept when a sequence computed it) into
// slot; 0, or TC_ERR_UNSUPPORTED when the storage keeps no block states (model_rs_has_blocks).
int model_rs_load_block(kv_store *kv, int slot, int block);
// 1 when the storage keeps the state at every full block (at most MODEL_RS_BLK_MAX bytes of them).
int model_rs_has_blocks(const kv_store *kv);
#define MODEL_RS_BLK_MAX (8ull << 30) // bytes of block states at most (pages touched as blocks fill)

// --- the paged KV storage (kv/kv_store.h: blocks, row types, layout) bound to this model: the shape of one
// position from the hyper-parameters, and which layers are sliding-window layers.
// Bytes one block of block_size positions takes over all layers, K and V; 0 if a type does not fit the model.
size_t model_kv_block_bytes(const model *m, int block_size, tt_type k_type, tt_type v_type);
// A storage of n_blocks blocks for every layer (kv_store_new's errors). Owned: free with kv_store_free.
int model_kv_new(const model *m, int n_blocks, int block_size, tt_type k_type, tt_type v_type, kv_store **out,
                 tc_err *err);
// Sliding-window models (model_hparams.swa_window > 0): the local layers' K/V in a storage of their own,
// n_blocks_swa blocks, addressed by model_batch.block_tables_swa, so that the local layers' memory is bounded
// by the window (kv/ releases their blocks behind it) while the global layers keep the whole context.
// The bytes of one block of each storage: model_kv_group_block_bytes. n_blocks_swa == 0: model_kv_new.
int model_kv_new_swa(const model *m, int n_blocks, int n_blocks_swa, int block_size, tt_type k_type, tt_type v_type,
                     kv_store **out, tc_err *err);
// Bytes one block takes over the global (swa = 0) or the local (swa = 1) layers only.
size_t model_kv_group_block_bytes(const model *m, int swa, int block_size, tt_type k_type, tt_type v_type);

typedef struct model_batch {
    int n_tokens;
    const int32_t *tokens;  // (n_tokens) token ids
    const int32_t *pos;     // (n_tokens) position of each token in its sequence
    const int32_t *seq;     // (n_tokens) sequence slot, index into block_tables
    int n_seqs;
    const int32_t *const *block_tables; // (n_seqs) block ids; table s covers positions 0..max pos of seq s
    // (n_seqs) the local layers' tables when the cache keeps them apart (model_kv_new_swa), else NULL; entries
    // of blocks wholly behind every query's window may be -1 (released)
    const int32_t *const *block_tables_swa;
    int n_logits;
    const int32_t *logits_rows; // (n_logits) ascending token rows whose logits are wanted
    // (optional) rows whose final hidden state (after the output norm, before the output projection) is
    // wanted, for embeddings; written to embd (n_embd, dim) row-major
    int n_embd;
    const int32_t *embd_rows; // (n_embd)
    float *embd;              // (n_embd, dim)
    // (optional) resumed rows: rows whose residual stream after layers 0..resume_layer-1 is given, and whose KV
    // of those layers is already in the cache (self-speculation: the drafted rows, computed by an early-exit
    // forward that wrote the target's own KV). Layers < resume_layer run on the other rows only; layers
    // >= resume_layer on every row, the resumed ones starting from resume_x. Logits and embeddings of any row.
    int n_resume;
    const int32_t *resume_rows; // (n_resume) ascending rows of the batch
    const float *resume_x;      // (n_resume, dim) their residual stream after layer resume_layer - 1
    int resume_layer;           // 1..n_layers-1, below the layers the forward runs
    // (optional) the residual stream of every row after the last layer the forward ran (before the output
    // norm): what a later forward resumes from. (n_tokens, dim)
    float *x_out;
    // (hybrid models) each sequence's recurrent-state slot, 0..MODEL_RS_SLOTS-1, distinct within the batch;
    // NULL: sequence s uses slot s
    const int32_t *rs_slots; // (n_seqs)
    // (hybrid models, optional) 1 for a sequence whose state after each of its first MODEL_RS_CKPT rows is kept
    // for model_rs_restore (speculative verify rows), or NULL
    const uint8_t *rs_ckpt; // (n_seqs)
} model_batch;
// What every backend checks of a batch before running it, whatever its KV cache: 1..max_tokens rows, token ids
// in [0, n_vocab), each row's sequence in [0, n_seqs) and position >= 0, logits rows ascending rows of the
// batch, embedding rows rows of the batch with an output, resumed rows ascending rows of the batch with their
// residuals and a resume layer in 1..n_layers-1 (n_layers: the model's). 0 or TC_ERR_INVALID naming the first
// bad row. (The block tables are the backend's to check against its own pool.)
int model_batch_check(const model_batch *b, int max_tokens, int n_vocab, int n_layers, tc_err *err);
// Contract: within a sequence, the batch's tokens have increasing positions; KV of every earlier position
// of that sequence is already in the cache (written by a previous forward or earlier in this batch). A
// token at position p attends to positions 0..p of its own sequence only.

// Per-runner state: scratch sized once for max_batch_tokens rows, and the thread pool. The hot path does
// not allocate. Owned by caller: free with model_ctx_free.
typedef struct model_ctx model_ctx;
int model_ctx_new(model *m, int max_batch_tokens, int n_threads, model_ctx **out, tc_err *err);
void model_ctx_free(model_ctx *c);
// Runs the batch, writes KV for every token, and fills logits (n_logits, n_vocab) row-major.
int model_forward(model_ctx *c, kv_store *kv, const model_batch *b, float *logits, tc_err *err);
// The same through the first n_layers layers only (1..n_layers of the model), then the final norm and the
// output head: early exit, for self-speculation. KV is written for those layers only. With resumed rows
// (model_batch.n_resume) the resume layer must be below n_layers.
int model_forward_layers(model_ctx *c, kv_store *kv, const model_batch *b, int n_layers, float *logits, tc_err *err);
// The output projection alone: logits (n, n_vocab) of n final-normed hidden rows (model_batch.embd's rows),
// n <= max_batch_tokens. Used to score given tokens (prompt logprobs) from rows computed by model_forward.
int model_logits_rows(model_ctx *c, const float *normed, int n, float *logits, tc_err *err);

#endif
