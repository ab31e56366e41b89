// The engine: one thread that owns the model, the paged KV cache and the scheduler, and runs one step (one
// forward pass over a ragged batch) at a time. Other threads talk to it only through this API: submit and
// cancel go into its inbox; tokens and finishes come out of its outbox, signalled on an fd so an event loop
// can wait on it. Neither side blocks on the other.
#ifndef TACHYON_ENGINE_H
#define TACHYON_ENGINE_H

#include <stdint.h>

#include "backend/backend.h"
#include "common/err.h"
#include "grammar/gram.h"
#include "model/model.h"
#include "sampling/sampling.h"
#include "sched/sched_stats.h"

#define ENGINE_SPEC_METHODS 4 // = SPEC_N_METHODS (checked in engine.c)

typedef struct engine_opts {
    int max_batch_tokens;   // token budget per step (prefill chunks + decode tokens)
    int max_seqs;           // running sequences at most
    int block_size;         // KV block size in tokens (16)
    size_t kv_mem_bytes;    // KV pool size in bytes; 0 = a quarter of the free memory (a ctx_size the quarter
                            // does not hold may take up to three quarters for one sequence; more is an error)
    tt_type kv_type_k, kv_type_v; // KV cache storage types (TT_F16 default, TT_Q8_0, TT_Q4_0): a quantized
                            // cache holds proportionally more tokens in the same kv_mem_bytes
    int ctx_size;           // per-request limit on prompt + generated tokens (0 = model's ctx_train, cut to
                            // what the default KV memory holds, never below 4096 tokens)
    int max_queue;          // requests waiting beyond the max_seqs running slots at most; beyond → TC_ERR_FULL
                            // (the server answers 503). A request that finds a free slot is always admitted.
    int max_queued_tokens;  // prompt tokens waiting at most (0 = unlimited)
    int n_threads;          // compute threads
    backend_device device;  // where the forward pass runs (BACKEND_CPU default; BACKEND_CUDA: --device cuda)
    int prefix_cache;       // 1: reuse KV of identical prompt prefixes across requests
    float itl_guard;        // > 0: while streams decode, cap a step's tokens so it takes at most itl_guard ×
                            // a decode-only step (chunked prefill sized by measured step cost); 0: off
    float itl_guard_floor_ms; // the guard's cap never makes a step shorter than this (default 30; 0: none)
    int itl_guard_fair;     // 1 (default): a tenant below its fair share prefills without the guard's cap
    int spec;               // speculative decoding, a spec_mode: SPEC_OFF, SPEC_NGRAM (prompt lookup, k = spec_k
                            // whenever it finds a match), SPEC_AUTO (default: the request's prediction if
                            // given, else prompt lookup; k adapted per request, 0 when it does not pay)
    int spec_k;             // drafted tokens per request per step at most (1..SPEC_MAX_K)
    int spec_max_streams;   // SPEC_AUTO drafts only while at most this many requests decode (default 1: on a
                            // CPU a drafted row lengthens every peer's step; as vLLM's
                            // speculative_disable_by_batch_size). Above 1, multi-stream steps keep to
                            // spec_itl.h's bound.
    // Model-based drafting (src/speculation/spec_draft.h). SPEC_DRAFT needs draft_model; SPEC_AUTO uses the draft
    // model when one is given, else self-speculation when self_spec_layers > 0.
    model *draft_model;         // (optional) borrowed, must outlive the engine; its vocabulary must be the target's
    size_t draft_kv_mem_bytes;  // the draft model's KV pool in bytes; 0: kv_mem_bytes / 4 when that is set, else
                                // as many blocks as the target's pool (the same token capacity)
    int self_spec_layers;       // SPEC_SELF/AUTO: draft with the target's first L layers (0: n_layers / 4 for
                                // SPEC_SELF, off for SPEC_AUTO), in the target's own KV (no pool: draft_kv_mem_bytes
                                // does not apply); device BACKEND_CPU only (engine_new refuses another)
    const int32_t *eog_ids; // tokens that end generation (EOS/EOT …), copied at engine_new
    int n_eog;
    int sched_policy;       // a sched_policy (sched/sched_order.h): SCHED_POL_FIFO (default), _PRIORITY, _SLO
    double sched_aging;     // seconds waited per priority class gained (0: SCHED_AGING_S)
    double ttft_slo;        // default TTFT target per request, seconds (0 = none); under SCHED_POL_SLO a request
                            // whose predicted TTFT exceeds its target is refused at submit
} engine_opts;

void engine_opts_default(engine_opts *o);

typedef enum {
    ENGINE_FINISH_NONE = 0,
    ENGINE_FINISH_STOP,      // an end-of-generation token (or the server's stop string via engine_cancel)
    ENGINE_FINISH_LENGTH,    // max_tokens or the context limit
    ENGINE_FINISH_CANCELLED, // engine_cancel (client went away)
    ENGINE_FINISH_DEADLINE,  // deadline passed
    ENGINE_FINISH_ERROR,     // internal error (message in the event)
    ENGINE_FINISH_SHUTDOWN,  // cut by engine_stop
    ENGINE_FINISH_SLO,       // dropped while waiting: its TTFT target could no longer be met (SCHED_POL_SLO)
} engine_finish;

const char *engine_finish_name(engine_finish f); // "stop", "length", "cancelled", …

typedef struct engine_req {
    int32_t *prompt;  // (n_prompt) token ids; ownership passes to the engine on a successful submit
    int n_prompt;
    int max_tokens;   // new tokens at most (>= 1)
    samp_params sp;
    double deadline;  // monotonic seconds (tc_now), 0 = none
    int ignore_eos;
    int32_t *prediction; // (n_prediction) expected output tokens (OpenAI Predicted Outputs) or NULL: the
    int n_prediction;    // draft source under SPEC_AUTO; ownership passes to the engine on a successful submit
    gram_matcher *grammar; // NULL, or the grammar the output must follow: ownership passes to the engine on a
                           // successful submit (freed with the request); generation ends (STOP) when the
                           // grammar is complete and nothing can follow
    int embed;        // ENGINE_EMBED_*: 0 generates; otherwise the prompt is only run through the model and
                      // its FINISH (STOP) carries the pooled, L2-normalised final hidden state (no TOKEN events;
                      // max_tokens and sp are ignored; the prefix cache is not used, every row is computed)
    int prompt_logprobs; // 0: off; 1 + n_top: one PROMPT_LP event per prompt token after the first (its logprob
                         // given the tokens before it, and n_top alternatives), in order, before any TOKEN;
                         // the prefix cache is not used for it
    uint64_t cache_salt; // 0 = shared prefix cache; else the prefix-cache namespace (per tenant / cache_salt):
                         // blocks cached under another salt are never matched
    int tenant;       // fair-share group for admission (0 = none), see sched_fair.c
    float share;      // that tenant's weight (0 = 1)
    void *user;       // opaque to the engine, returned in every event of this request
    int priority;     // lower runs first (0 default); ordering and preemption under SCHED_POL_PRIORITY / _SLO
    double ttft_slo;  // TTFT target in seconds (0: engine_opts.ttft_slo)
    double retry_after; // out: when submit refuses it for its SLO (TC_ERR_FULL), the predicted seconds until
                        // the queued work has drained (> 0); 0 otherwise
} engine_req;

enum { ENGINE_EMBED_NONE = 0, ENGINE_EMBED_MEAN, ENGINE_EMBED_LAST };

typedef enum { ENGINE_EV_TOKEN = 1, ENGINE_EV_FINISH = 2, ENGINE_EV_PROMPT_LP = 3 } engine_ev_type;

typedef struct engine_event {
    engine_ev_type type;
    uint64_t id;
    void *user;
    samp_result tok;          // TOKEN: the sampled token and its logprobs; PROMPT_LP: the prompt token and its
    engine_finish finish;     // FINISH: why
    int n_prompt, n_cached, n_generated; // FINISH: usage; n_cached = prompt tokens served from the prefix cache
    double t_arrival, t_first_sched, t_first_token, t_finish; // monotonic seconds (FINISH)
    int n_spec_drafted, n_spec_accepted; // FINISH: speculative tokens proposed / accepted by the target
    int n_pred_accepted;                 // FINISH: the request's prediction tokens that appeared in its output
                                         // (OpenAI's accepted_prediction_tokens; spec_pred.n_followed)
    double retry_after;       // FINISH with SLO: predicted seconds until the queue drains (for Retry-After)
    char msg[128];            // FINISH with ERROR: message
    float *embedding;         // FINISH (STOP) of an embedding request: (n_embd) malloc'd, owned by the receiver
    int n_embd;
} engine_event;

typedef struct engine_stats {
    int running, waiting;
    int kv_blocks_used, kv_blocks_total;
    int kv_capacity_tokens;       // kv_blocks_total × block size
    size_t kv_bytes_per_token;    // all layers, K and V, for the configured types (with a sliding-window pool:
                                  // the global layers only; the local layers' pool is fixed, see below)
    // Sliding-window models: the local layers' own pool (0 when they share the global one). A request holds
    // at most ceil((window + step rows) / block size) + 1 of its blocks, whatever its length.
    int kv_swa_blocks_used, kv_swa_blocks_total;
    int kv_swa_blocks_peak;       // most ever in use at once (since start)
    tt_type kv_type_k, kv_type_v;
    int last_batch_seqs, last_batch_tokens;
    uint64_t steps, preemptions, prefix_hit_tokens, prefix_query_tokens;
    uint64_t prompt_tokens, generated_tokens;
    uint64_t spec_draft[ENGINE_SPEC_METHODS], spec_accepted[ENGINE_SPEC_METHODS]; // speculative tokens by
                                              // method (spec_method: n-gram, prediction, draft, self)
    uint64_t spec_verify_steps;               // items verified (a request's 1 + k rows in one step)
    uint64_t spec_draft_prefill;              // prompt tokens the draft model prefilled beside the target
    int sched_policy;                         // engine_opts.sched_policy
    uint64_t prio_preemptions;                // preemptions for a higher-priority request
    sched_stats sched;                        // outcomes and queue times per priority class (refusals included)
} engine_stats;

typedef struct engine engine; // opaque

// Events: one TOKEN per generated token, then one FINISH per request (always, whatever the reason). An
// end-of-generation token is not sent as a TOKEN (it ends the request with STOP) but counts in n_generated.
// Timestamps are monotonic seconds (tc_now); t_first_sched / t_first_token are 0 if it never got there.

// Creates the engine over a loaded model (borrowed: must outlive the engine) and starts its thread.
int engine_new(model *m, const engine_opts *o, engine **out, tc_err *err);
// Stops accepting, finishes or cuts in-flight requests (cut ones get FINISH with SHUTDOWN) within
// grace seconds, joins the thread and frees everything.
void engine_free(engine *e, double grace);
// Non-blocking start of a shutdown: submits fail with TC_ERR_FULL from now on; requests in flight
// run on for up to grace seconds, then get FINISH with SHUTDOWN. Events stay pollable until engine_free.
void engine_stop(engine *e, double grace);

// Validates (prompt fits ctx_size, max_tokens fits, sampling params) → TC_ERR_INVALID with a message;
// queue full → TC_ERR_FULL. On success *id identifies the request in events.
int engine_submit(engine *e, engine_req *r, uint64_t *id, tc_err *err);
// Asks the engine to end a request (acted on within one step); a FINISH event with `reason` follows.
// Unknown or finished ids are ignored.
void engine_cancel(engine *e, uint64_t id, engine_finish reason);
// The real per-request limit on prompt + generated tokens: ctx_size (or the model's), lowered to what the
// KV pool holds when kv_mem_bytes is small. Fixed after engine_new.
int engine_ctx_limit(const engine *e);
// fd that becomes readable when events are pending (an eventfd; read it to clear).
int engine_event_fd(engine *e);
// Non-blocking: moves up to cap pending events into evs; returns how many.
int engine_poll(engine *e, engine_event *evs, int cap);
void engine_get_stats(engine *e, engine_stats *s); // a consistent snapshot
// Predicted seconds until the first token of a priority-0 request of n_prompt tokens submitted now, from the
// queue ahead of it and the step-cost model (sched/sched_admit.h); 0 while the model has no fit. Any thread.
double engine_predict_ttft(engine *e, int n_prompt);

#endif
