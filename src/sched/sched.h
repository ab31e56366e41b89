// The continuous-batching scheduler. One sched_step = one forward pass. Order of work in a step:
//   1. requests with a pending cancel or a passed deadline leave (KV freed) → plan.ended;
//   2. running requests that are decoding get one token each (oldest admitted first), plus the speculative
//      tokens the draft callback proposes for them (as long as the budget keeps one row for every other
//      decoding request) — one item of 1 + n_draft rows;
//   3. running requests still catching up (a prompt spread over steps) get a chunk of what budget is left
//      (under priority/slo, steps 3 and 4 interleave by rank, see below);
//   4. waiting requests are admitted (prefix-cache hit first, then a chunk) while the token budget, max_seqs
//      and the KV pool allow; the first one that does not fit stops admission.
// Policies (sched_opts.policy, rules in sched_order.h). Aging rule: a waiting request's effective priority
// is priority - floor(waited / aging_s), i.e. it gains one class per aging_s seconds (default 5 s), so a
// priority-p request waits at most (p - q) * aging_s behind a stream of priority-q arrivals.
//   SCHED_POL_FIFO      admission in arrival order; catching-up chunks in admission order;
//   SCHED_POL_PRIORITY  admission and catching-up chunks ranked by sched_key_before (effective priority with
//                   aging, then shortest remaining prefill with aging, then arrival); catching-up chunks and
//                   admissions compete for the budget in that order (a short prompt waiting is not held up by
//                   a long one already prefilling); a waiting request whose effective priority is strictly
//                   better than a running one's may take its place when no slot or no block is free: the
//                   running one is preempted (recompute), at most SCHED_PRIO_PREEMPT_MAX times per request,
//                   so a low-priority request, once aged into a slot, finishes. The victim is the running
//                   request with the worst effective priority (most recent on ties);
//   SCHED_POL_SLO       as PRIORITY, and in step 1 a waiting request that has never run and has a TTFT target is
//                   dropped (SCHED_END_SLO) once its predicted TTFT (sched_admit.h) would miss the target.
// When the pool runs out for a running request, a running request is preempted (the most recently admitted
// under fifo, the worst-priority one otherwise): its blocks are freed and it goes back to the waiting queue
// with num_computed = 0 (its generated tokens are kept and recomputed as part of its prompt). No admission
// in a step that preempted for lack of blocks.
// The scheduler knows block counts, never KV layouts. Single-threaded (the engine thread).
#ifndef TACHYON_SCHED_H
#define TACHYON_SCHED_H

#include "kv/kv.h"
#include "sched/request.h"
#include "sched/sched_admit.h"
#include "sched/sched_order.h"
#include "sched/sched_stats.h"
#include "sched/step_cost.h"

typedef struct sched_opts {
    int max_batch_tokens; // token budget per step
    int max_seqs;         // running requests at most
    int prefix_cache;     // 1: match and register prefix hashes
    float itl_guard;      // > 0: while any request is decoding, a step's tokens are capped so its predicted
                          // time stays within itl_guard × a decode-only step (step cost learned online via
                          // sched_observe); 0: off, the budget is max_batch_tokens
    double itl_guard_floor_s; // the guard never caps a step below this many seconds (0: no floor): where a
                              // decode step is a few ms, itl_guard × it leaves room for a few prefill tokens
                              // only, and a prompt crawls through dozens of steps that each pay the fixed cost
    int itl_guard_fair;   // 1: the guard protects streams from their peers only: prompts of a tenant below
                          // its fair share (sched_fair_behind) or, under the ranked policies, of a better
                          // effective priority than every decoding stream are planned first, uncapped; the
                          // rest of the step still fits within the guard
    int policy;           // a sched_policy (0 = SCHED_POL_FIFO)
    double aging_s;       // seconds waited per priority class gained (<= 0: SCHED_AGING_S)
} sched_opts;

typedef struct sched_item {
    sched_req *r;
    int start;   // first token index (= its position) to compute
    int n;       // tokens [start, start+n) of r->tokens are computed this step (n_draft of them speculative)
    int n_draft; // the last n_draft rows are drafted tokens past r->n_tokens (speculation), else 0
    int sample;  // 1: start+n-n_draft == r->n_tokens: the logits of the last 1+n_draft rows give next tokens
} sched_item;

// What the draft callback knows about the step being planned.
typedef struct sched_draft_info {
    int max_draft;   // drafts it may propose at most (budget, max_tokens, table capacity)
    int n_decoding;  // running requests decoding this step (one row each, before drafts)
    int n_waiting;   // requests waiting for admission
    int n_catching;  // running requests still prefilling
} sched_draft_info;

// Proposes up to info->max_draft tokens for decoding request r, writes them to r->tokens[r->n_tokens …] and
// returns how many (0: no speculation for r this step). Called on the engine thread while planning.
typedef int (*sched_draft_fn)(void *ctx, sched_req *r, const sched_draft_info *info);

typedef struct sched_plan {
    sched_item *items; // (n_items) in batch order; borrowed from the scheduler, valid until the next step
    int n_items;
    int n_tokens;      // sum of items[i].n (<= max_batch_tokens)
    int n_sample;      // items with sample = 1
    sched_req *ended;  // requests that left in step 1, linked by ->next; the caller reports and frees them
    int n_preempted;   // preemptions in this step
} sched_plan;

typedef struct sched_counters {
    int n_running, n_waiting;
    uint64_t steps, preemptions;
    uint64_t prio_preemptions; // of the preemptions, for a higher-priority request
    uint64_t prefix_query_tokens, prefix_hit_tokens; // over admissions
} sched_counters;

typedef struct sched sched; // opaque

// pool is borrowed (must outlive the scheduler). Owned by the caller: sched_free (requests still inside are
// not freed: take them out with sched_take_all first).
int sched_new(const sched_opts *o, kv_pool *pool, sched **out, tc_err *err);
void sched_free(sched *s);

// Appends a new request to the waiting queue (it must have n_tokens >= 1, state WAITING).
void sched_add(sched *s, sched_req *r);
// Builds the next step's plan at time now (monotonic seconds). The plan is borrowed.
const sched_plan *sched_step(sched *s, double now);
// Sliding-window models: the local layers' KV lives in pool_swa (borrowed), one more table per request
// (r->kv_swa). Before a request's step, its local blocks wholly before num_computed + 1 - window (no query
// reads them again) go back to pool_swa, so a request holds at most ceil((window + chunk) / block) + 1 of
// them. Prefix hits: a cached prefix of m blocks is used only as far as the local blocks its next query
// needs (the window before position m·block) are cached in pool_swa too; otherwise the hit shrinks to the
// longest such m (kv_seq_match_window), possibly 0. Call before the first sched_add.
void sched_set_swa(sched *s, kv_pool *pool_swa, int window);
// Installs the draft callback (NULL: no speculation).
void sched_set_draft_fn(sched *s, sched_draft_fn fn, void *ctx);
// After the forward pass: advances num_computed of every planned request (drafted rows included) and
// registers its new full blocks of VERIFIED tokens (< n_tokens) in the prefix cache. The caller then appends
// sampled tokens (r->tokens[r->n_tokens++]) and, after a verify step, calls sched_rollback.
void sched_commit(sched *s);
// After the verify step of r: the KV past its last valid position (rejected drafts) is dropped —
// num_computed = min(num_computed, n_tokens - 1) and the blocks past it go back to the pool.
void sched_rollback(sched *s, sched_req *r);
// The step-cost model's fit t(n) = a + b·n seconds; returns 0 (and leaves a, b alone) while not ready.
int sched_step_cost_fit(const sched *s, double *a, double *b);
// Fills l (its wait/cap_wait storage set by the caller) from the scheduler's state, for sched_predict_ttft
// (sched_admit.h). Engine thread.
void sched_load_fill(const sched *s, sched_load *l);
// Feeds the step-cost model: a forward pass over n_tokens rows took `seconds`.
void sched_observe(sched *s, int n_tokens, double seconds);
// The step token cap the ITL guard would apply with n_decoding streams (max_batch_tokens when off/unready).
int sched_guard_budget(const sched *s, int n_decoding);
// A running or waiting request leaves now (finished, error): KV freed, state DONE, end recorded.
void sched_finish(sched *s, sched_req *r, sched_end end);
// Removes every request (KV freed, state DONE with `end`); returns them linked by ->next.
sched_req *sched_take_all(sched *s, sched_end end);
// Finds a live request by id (linear scan), NULL if none.
sched_req *sched_find(sched *s, uint64_t id);
int sched_has_work(const sched *s);
void sched_get_counters(const sched *s, sched_counters *c);
// Outcomes and queue times per priority class (see sched_stats.h), counted as requests leave and start.
const sched_stats *sched_get_stats(const sched *s);

#endif
