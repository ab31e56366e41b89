// The engine's internals, shared by engine.c (API, thread, lifetime) and engine_step.c (one step).
#ifndef TACHYON_ENGINE_IMPL_H
#define TACHYON_ENGINE_IMPL_H

#include <pthread.h>

#include "engine/engine.h"
#include "engine/engine_queue.h"
#include "kv/kv.h"
#include "sched/sched.h"
#include "sched/sched_admit.h"
#include "speculation/spec.h"
#include "speculation/spec_draft.h"
#include "speculation/spec_policy.h"

// Per-request engine data, reached through sched_req.owner. Owned by the engine from a successful submit
// to the request's FINISH event.
typedef struct eng_req {
    samp_state *samp;
    void *user;
    int ignore_eos;
    gram_matcher *grammar; // owned, or NULL
    int embed;       // ENGINE_EMBED_*
    float *embd_acc; // (dim) owned: embedding requests' running sum (mean) or last row
    int plp;         // prompt logprobs: 0 off, else 1 + alternatives
    int plp_next;    // next prompt position to report (rows recomputed after a preemption are not re-sent)
    int counted; // 1: no longer counted in the inbox's n_queued (scheduled once, or ended)
    spec_pred pred;      // predicted output (empty when none)
    spec_accept acc;     // acceptance-rate estimate (adaptive k) of the drafter's and prompt lookup's drafts
    spec_accept pacc;    // the same of the prediction's drafts
    spec_arbiter arb;    // prediction or prompt lookup when both draft and disagree (spec_policy.h)
    int draft_method;    // of the current draft: a spec_method
    int32_t ng_shadow;   // the token prompt lookup would have drafted after this step's draft (auto, records of
                         // prompt lookup alone), -1: none; the target's next token judges it (spec_observe_step)
    spec_drafter *drafter; // borrowed: the engine's, for ds (NULL: none)
    spec_dseq ds;        // draft-side KV (model-based drafting)
    float draft_temp;    // 0: greedy draft; else the request's temperature (sampled draft, q kept)
    uint64_t drng;       // draft RNG state
    const float *dq;     // (n_draft, n_vocab) q of this step's sampled draft, NULL: one-hot
    const float *dx;     // (n_draft, dim) self-speculation: this step's drafted rows' residuals after layer L-1
                         // (the verify item's first n_draft rows resume there), NULL: none
    int n_drafted, n_accepted;
    // Hybrid models: the recurrent-state slot it holds (-1: none) and the engine's owner entry of that slot,
    // cleared when the request is freed (eng_req_release) or the slot taken back (eng_rs_slot)
    int rs_slot;
    struct sched_req **rs_owner;
    int rs_pos; // the positions its slot's state has taken (0..rs_pos-1); -1: unknown (a slot just taken)
} eng_req;

#define ENG_PLP_ROWS 8 // prompt rows scored per output matmul (bounds the scratch, not the prompt)

struct engine {
    model *m;            // borrowed
    engine_opts o;       // eog_ids points at eog below
    int32_t *eog;        // (n_eog) owned copy
    int n_vocab;
    int ctx_limit;       // prompt + generated tokens at most per request (ctx_size, and what the pool holds)

    backend *be;         // owned: the model's weights on o.device
    backend_kv *kv;      // owned
    backend_ctx *mctx;   // owned
    kv_pool *pool;       // owned
    kv_pool *pool_swa;   // owned; the local layers' blocks of a sliding-window model, or NULL
    int n_blocks_swa;    // its size (0: none)
    sched *s;            // owned

    // step scratch, sized once
    int32_t *b_tokens, *b_pos, *b_seq;  // (max_batch_tokens)
    const int32_t **b_tables;           // (max_seqs)
    const int32_t **b_tables_swa;       // (max_seqs) the local layers' tables (with pool_swa)
    int32_t *b_rs_slots;                // (max_seqs) each item's recurrent-state slot (hybrid models)
    uint8_t *b_rs_ckpt;                 // (max_seqs) 1: keep the item's per-row states (a verify item)
    // Hybrid models: which request holds each recurrent-state slot (NULL: free). A request takes one when it
    // is first scheduled and keeps it until it is freed; a request waiting after preemption may lose it to a
    // running one (it restarts from position 0, where the state starts over).
    sched_req *rs_owner[MODEL_RS_SLOTS];
    int hybrid;
    int32_t *b_logit_rows;              // (max_logit_rows)
    int32_t *b_resume_rows;             // (max_logit_rows) self-speculation: the verify rows the drafter ran
    float *logits;                      // (max_logit_rows, n_vocab)
    int max_logit_rows;                 // max_seqs + speculative rows a step may carry
    int spec_rows_left;                 // speculative rows still free in the step being planned
    int32_t spec_tok[SPEC_MAX_K + 1];   // verify scratch
    samp_result spec_res[SPEC_MAX_K + 1];
    int32_t *b_embd_rows;               // (max_batch_tokens) rows of embedding requests
    float *embd_out;                    // (max_batch_tokens, dim) their final-normed hidden states
    float *plp_logits;                  // (ENG_PLP_ROWS, n_vocab) scratch for scoring prompt tokens
    int dim;
    engine_event *evs;                  // (ev_cap) events of the step being run
    int ev_cap, n_evs;
    int n_dequeued;                     // requests that left the queue bound this step
    long long n_dequeued_tokens;
    int n_finished;                     // requests that got their FINISH this step (inbox n_active)

    eng_inbox in;
    eng_outbox out;

    pthread_mutex_t stats_mu;
    engine_stats stats; // published once per step
    uint64_t prompt_tokens, generated_tokens;
    uint64_t spec_draft[SPEC_N_METHODS], spec_accepted[SPEC_N_METHODS], spec_verify_steps;
    uint64_t spec_draft_prefill;        // prompt tokens the draft model prefilled beside the target
    spec_drafter *drafter;              // owned, or NULL
    int drafter_method;                 // SPEC_M_DRAFT or SPEC_M_SELF
    spec_draft_req *dreqs;              // (max_seqs) this step's model drafts
    spec_costs spec_costs;              // what verify rows and draft positions cost (the draft-length rule's)
    spec_step spec_plan;                // the step being planned, as the draft-length rule sees it
    float *probs;                       // (n_vocab) verifier scratch
    int last_batch_seqs, last_batch_tokens;
    sched_load load;    // published each step under stats_mu, for engine_predict_ttft / SLO admission
    sched_key *load_keys; // (max_seqs + max_queue) storage of load.wait
    sched_stats refused;  // refusals at submit, under stats_mu
    int fault_step_ms, fault_token_ms; // test-only (TACHYON_FAULT=step_sleep_ms:A:B): every step takes A ms
                                       // + B ms per batch token longer; 0 = off
    int fault_pos; // test-only (TACHYON_FAULT=forward_pos:N): a step with a position >= N fails; -1 = off
    int spec_trace; // debug (TACHYON_SPEC_TRACE=1): one stderr line per decode step of a request (take_tokens)

    pthread_t thread;
    int thread_started;
};

// engine_step.c
// Runs one step at time now (monotonic seconds): plan, forward, sample, events.
void eng_step(engine *e, double now);
// Ends every request in flight with `end` (shutdown).
void eng_cut_all(engine *e, sched_end end);
// Emits the step's events and publishes stats.
void eng_flush(engine *e);
// Frees a request that has left the scheduler.
void eng_req_release(sched_req *r);
// The scheduler's draft callback (sched_draft_fn): proposes speculative tokens for a decoding request.
int eng_draft(void *ctx, sched_req *r, const sched_draft_info *info);

#endif
