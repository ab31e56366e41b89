// Model-based proposers: a draft model (a second, smaller GGUF with the target's vocabulary) or the target's
// own first L layers (self-speculation: early exit through the final norm and the output head). Both run ONE
// batched forward per draft position over every request they draft for in a step. Single-threaded (engine
// thread).
// - A draft model keeps its own paged KV (its own block pool), catches up on a request's tokens lazily (only
//   when it drafts for it), and after verification truncates its KV to the tokens the target kept.
// - Self-speculation has no KV of its own: it runs in the target's runner (backend ctx) and writes the target's
//   KV of layers 0..L-1, through the request's own block tables, for the rows from the last token (the target
//   has KV for every position before it) through the drafts. It keeps each row's residual stream after layer
//   L-1 (spec_draft_req.x): the verify forward resumes those rows at layer L (model_batch.n_resume), so that
//   verification computes only layers L..N-1 for them. Rejected drafts' KV is stale past the target's
//   num_computed, as a rejected verify row's always is, and overwritten later.
#ifndef TACHYON_SPEC_DRAFT_H
#define TACHYON_SPEC_DRAFT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "backend/backend.h"
#include "kv/kv.h"
#include "model/model.h"

typedef struct spec_drafter spec_drafter; // opaque

// Which drafter a --spec mode selects: SPEC_M_DRAFT (a draft model: --spec draft, or auto with one loaded),
// SPEC_M_SELF (--spec self, or auto with --self-spec-layers > 0 and no draft model), -1 for none.
int spec_drafter_choice(int mode, int have_draft_model, int self_layers);
// Self-speculation resumes verify rows mid-stack, which only the CPU forward runs: TC_ERR_UNSUPPORTED with a
// message naming the way out when choice is SPEC_M_SELF off the CPU, else 0.
int spec_self_device_check(int choice, int on_cpu, tc_err *err);

// A request's draft-side state: its block table in the drafter's pool and how many leading tokens have
// draft KV. Embedded in the engine's per-request data; spec_dseq_init / spec_dseq_free.
typedef struct spec_dseq {
    kv_seq kv;
    int n_computed;
    int inited;
} spec_dseq;

// Checks that the draft's vocabulary is the target's: same token count and the same token strings
// (tokenizer.ggml.tokens). TC_ERR_INVALID with a message naming the first difference otherwise.
int spec_vocab_check(const model *target, const model *draft, tc_err *err);

// A draft model's drafter: n_layers, the layers a draft forward runs (the model's count).
// n_blocks × block_size tokens of draft KV; max_batch_tokens rows per draft forward (catch-up chunks);
// max_reqs requests drafted per step at most; k_max drafts per request; q_reqs requests per step that can
// draw a sampled (non-greedy) draft, each with a (k_max, n_vocab) distribution buffer. m is borrowed.
// Owned by the caller: spec_drafter_free.
int spec_drafter_new(model *m, int n_layers, int n_blocks, int block_size, tt_type kv_type, int max_batch_tokens,
                     int n_threads, int max_reqs, int k_max, int q_reqs, spec_drafter **out, tc_err *err);
// Self-speculation through the target's first n_layers (1..n_layers-1 of the model) layers, in the target's own
// runner ctx and KV kv (both borrowed: they must outlive the drafter; a CPU backend: the resumed verify rows
// are the CPU forward's). max_reqs requests per draft forward (at most ctx's batch rows). No KV pool.
int spec_drafter_new_self(model *m, int n_layers, backend_ctx *ctx, backend_kv *kv, int max_reqs, int k_max,
                          int q_reqs, spec_drafter **out, tc_err *err);
void spec_drafter_free(spec_drafter *d);
// 1 for a self-speculation drafter (spec_drafter_new_self).
int spec_drafter_is_self(const spec_drafter *d);
// The layers a draft forward runs: for self-speculation, the layer the verify forward resumes its rows at.
int spec_drafter_layers(const spec_drafter *d);
// Bytes one draft KV block takes (for sizing its pool from a memory budget).
size_t spec_drafter_block_bytes(const model *m, int block_size, tt_type kv_type);

int spec_dseq_init(spec_dseq *ds, int max_tokens, int block_size, tc_err *err);
void spec_dseq_free(spec_drafter *d, spec_dseq *ds);

// Reserves draft KV for drafting k tokens after tokens[0..n_tokens): positions [0, n_tokens + k - 1). Returns
// 0, or TC_ERR_FULL when the draft pool is out of blocks (the request's draft KV is then dropped entirely
// so that it cannot hold the pool; it catches up again later). Self-speculation: 0, nothing to reserve (the
// target's plan holds the blocks); ds may be uninitialised there, and keep / free do nothing with it.
int spec_dseq_reserve(spec_drafter *d, spec_dseq *ds, int n_tokens, int k);
// After verification: the target kept tokens[0..n_valid) of what the draft computed.
void spec_dseq_keep(spec_drafter *d, spec_dseq *ds, int n_valid);

// One request to draft for this step.
typedef struct spec_draft_req {
    spec_dseq *ds;
    int32_t *tokens;   // (n_tokens + k) the request's tokens; drafts are written to tokens[n_tokens ..)
    int n_tokens;
    int k;             // 1..k_max drafts (reserved with spec_dseq_reserve)
    float temperature; // 0: greedy draft (argmax, q one-hot); > 0: x ~ softmax(logits / temperature) = q
    uint64_t *rng;     // the request's draft RNG state (sampled drafts)
    const float *q;    // out: (k, n_vocab) the distributions drawn from, or NULL (greedy: one-hot)
    // Self-speculation: the request's block tables in the target's KV (the local layers' of a sliding-window
    // cache, else NULL), covering positions up to n_tokens + k - 2; the target has KV of positions < n_tokens - 1.
    const int32_t *blocks, *blocks_swa;
    // out (self-speculation; NULL otherwise or on failure): (k, dim) the residual stream after layer L-1 of rows
    // n_tokens-1 .. n_tokens+k-2, whose KV of layers 0..L-1 is now in the target's cache: the verify forward's
    // resumed rows. The rows of one run's requests follow each other in reqs order (one (sum k, dim) array).
    const float *x;
} spec_draft_req;

// A draft model's prefill: catches each request's draft KV up to tokens[0..n_tokens) (reserved with
// spec_dseq_reserve(d, ds, n_tokens, 1)), no drafts. The engine runs it over each prompt chunk beside the
// target's, so that the first draft does not catch up on the whole prompt inside a decode step (an
// inter-token gap). No-op for self-speculation (the target's own KV). 0 or an error (the KV then starts over).
int spec_drafter_prefill(spec_drafter *d, spec_draft_req *reqs, int n, tc_err *err);
// Drafts for n requests: catch-up rows, then one batched forward per draft position. A request whose
// sampled draft finds no free distribution buffer drafts greedily (q NULL, still exact). 0 or an error.
int spec_drafter_run(spec_drafter *d, spec_draft_req *reqs, int n, tc_err *err);
// Rows a request runs before its draft 0 in the next run (its catch-up, the last token included): 1 for
// self-speculation; for a draft model, the tokens its KV lacks.
int spec_drafter_catch_up(const spec_drafter *d, const spec_draft_req *q);

#endif
