// The scheduler's state (struct sched) behind the opaque handle of sched.h. Internal to src/sched/: only
// sched.c and sched_yield.c read it; the other files of the folder see requests, keys or load snapshots,
// never the scheduler.
#ifndef TACHYON_SCHED_IMPL_H
#define TACHYON_SCHED_IMPL_H

#include "sched/sched.h"
#include "sched/sched_admit.h"
#include "sched/sched_fair.h"

typedef struct sched_list {
    sched_req *head, *tail;
    int n;
} sched_list;

struct sched {
    sched_opts o;
    kv_pool *pool;
    kv_pool *pool_swa; // (optional) the local layers' blocks (sched_set_swa)
    int swa_window;    // positions a local layer's query sees (with pool_swa)
    sched_list waiting, running; // running in admission order (tail = most recently admitted)
    sched_item *items;           // (max_seqs) plan storage
    sched_plan plan;
    int budget;              // tokens left in the step being built
    int prio_floor;          // the best raw priority among running and waiting requests (sched_order.h)
    // requests the ITL guard does not hold back this step (itl_guard_fair): effective priority below
    // fav_prio (INT_MIN: none), or a tenant in fav_ten (sched_fair_behind)
    int fav_prio, n_fav_ten, fav_ten[SCHED_FAIR_MAX_TENANTS];
    // lower classes yield (sched_yield.h): per tenant with a prefill item in the plan being built, the best
    // effective priority among those items (lead_ten[i] → lead_prio[i], n_lead entries); low_left: prefill
    // tokens the yielding requests may still take in this step; best_seen: the best priority that arrived
    // in the last aging_s seconds (seen: any), the latest of them at t_seen (monotonic seconds)
    int n_lead, lead_ten[SCHED_FAIR_MAX_TENANTS], lead_prio[SCHED_FAIR_MAX_TENANTS], low_left;
    int seen, best_seen;
    double t_seen;
    double now; // monotonic seconds: the time of the step being built
    step_cost cost;          // learned step time vs tokens (ITL guard, speculation policy, TTFT prediction)
    sched_draft_fn draft_fn; // (optional) speculation
    void *draft_ctx;
    uint64_t steps, preemptions, prio_preemptions, prefix_query_tokens, prefix_hit_tokens;
    sched_stats stats; // outcomes and queue times per priority class
    sched_key *keys;   // (cap_keys) scratch for the waiting-expiry check (--sched slo)
    int cap_keys;
    sched_load load; // the load at the start of the step being built (its wait = keys)
};

// The best (lowest) raw priority among s's running and waiting requests (0 when there are none).
static inline int sched_prio_floor(const sched *s) {
    int f = 0, any = 0;
    for (int pass = 0; pass < 2; pass++)
        for (const sched_req *r = pass ? s->waiting.head : s->running.head; r; r = r->next)
            if (!any++ || r->priority < f) f = r->priority;
    return f;
}

#endif
