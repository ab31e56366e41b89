// A request as the scheduler sees it: token ids (prompt then generated), how many of them have KV
// (num_computed), its block table, limits and timestamps. There is no prefill or decode phase: each step
// num_computed catches up with n_tokens; when it does, the step's logits give the next token.
#ifndef TACHYON_SCHED_REQUEST_H
#define TACHYON_SCHED_REQUEST_H

#include <stdint.h>

#include "common/err.h"
#include "kv/kv.h"

typedef enum { SCHED_WAITING = 0, SCHED_RUNNING, SCHED_DONE } sched_state;

// Why a request ended; same values, same order as engine_finish (engine.c checks this at compile time).
typedef enum {
    SCHED_END_NONE = 0,
    SCHED_END_STOP,
    SCHED_END_LENGTH,
    SCHED_END_CANCELLED,
    SCHED_END_DEADLINE,
    SCHED_END_ERROR,
    SCHED_END_SHUTDOWN,
    SCHED_END_SLO, // dropped while waiting: its TTFT target could no longer be met (--sched slo)
} sched_end;

typedef struct sched_req {
    uint64_t id;
    int32_t *tokens;  // (cap) prompt ids then generated ids; owned
    int n_tokens;     // ids in tokens
    int n_prompt;
    int cap;          // n_prompt + max_tokens
    int max_tokens;   // generated tokens at most
    int num_computed; // leading tokens whose KV is in the cache (after a verify step it may include rejected
                      // speculative positions until the engine rolls it back with sched_rollback)
    int n_draft;      // speculative tokens proposed for this step, stored at tokens[n_tokens, n_tokens+n_draft)
                      // (unverified: never counted in n_tokens, never registered in the prefix cache)
    int n_cached;     // prompt tokens served from the prefix cache at the first admission
    int no_prefix;    // 1: never served from the prefix cache (every row must be computed)
    int tenant;       // fair-share group (sched_fair.c): 0 = none (all untagged requests form one group)
    float share;      // the tenant's weight for fair share (> 0; 0 counts as 1)
    kv_seq kv;        // block table (with a sliding-window pool: the global layers')
    kv_seq kv_swa;    // the local (sliding-window) layers' table, used only with sched_set_swa
    sched_state state;
    sched_end end;    // why it ended (valid once SCHED_DONE)
    sched_end cancel; // != NONE: end requested (engine_cancel); acted on at the start of the next step
    double deadline;  // monotonic seconds, 0 = none
    double t_arrival, t_first_sched, t_first_token, t_last_token; // monotonic seconds, 0 = not yet
    int n_preempted;
    int n_prio_preempted; // times it lost its slot to a higher-priority request (at most SCHED_PRIO_PREEMPT_MAX)
    int priority;     // lower runs first (vLLM's convention); 0 = default
    double ttft_slo;  // seconds from t_arrival to the first token it targets; 0 = none
    double drain_s;   // when it ended with SCHED_END_SLO: predicted seconds until the queue drains (Retry-After)
    int plan_idx;     // index of its item in the current plan, -1 when not scheduled
    void *owner;      // the engine's per-request data (sampler, user pointer …)
    struct sched_req *prev, *next; // queue links (waiting or running), or the `ended` list
} sched_req;

// Copies prompt (n_prompt >= 1) into a table with room for max_tokens more. Owned by the caller:
// sched_req_free (after the scheduler let go of it).
int sched_req_new(const int32_t *prompt, int n_prompt, int max_tokens, int block_size, sched_req **out,
                  tc_err *err);
void sched_req_free(sched_req *r);
static inline int sched_req_n_generated(const sched_req *r) { return r->n_tokens - r->n_prompt; }

#endif
