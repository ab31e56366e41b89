// Shared by the scheduler tests: tear a scheduler down with whatever it still holds.
#ifndef TACHYON_TEST_SCHED_UTIL_H
#define TACHYON_TEST_SCHED_UTIL_H

#include <string.h>

#include "kv/kv.h"
#include "sched/sched.h"
#include "sched/sched_admit.h"

// Frees every request still in s (running or waiting), then s and its pool. Requests that already left the
// scheduler (finished in the test) are the caller's to free.
static inline void tu_sched_teardown(sched *s, kv_pool *pool) {
    for (sched_req *r = sched_take_all(s, SCHED_END_SHUTDOWN), *n; r; r = n) {
        n = r->next;
        sched_req_free(r);
    }
    sched_free(s);
    kv_pool_free(pool);
}

// The ITL guard and its exemptions (sched_opts.itl_guard_fair): three streams of tenant 1, priority 5, are
// decoding (step cost t(n) = 0.01 + 0.001 n: the guard allows 16 tokens a step with 3 streams); then a
// 64-token prompt of tenant b_tenant, priority b_prio arrives. Returns how many of its tokens the next step plans;
// *pred (may be NULL): its TTFT predicted at arrival (sched_predict_ttft). *other (may be NULL): a 64-token
// prompt of tenant 1, priority 5 arrives with it; how many of its tokens that step plans.
static inline int tu_guard_case_full(int policy, int fair, int b_tenant, int b_prio, double *pred, int *other) {
    tc_err err;
    kv_pool *pool;
    sched *s;
    sched_opts o = {.max_batch_tokens = 256, .max_seqs = 5, .itl_guard = 2, .itl_guard_fair = fair,
                    .policy = policy, .aging_s = 100};
    if (kv_pool_new(256, 4, &pool, &err) || sched_new(&o, pool, &s, &err)) return -2;
    for (int i = 0; i < 40; i++)
        sched_observe(s, i % 2 ? 1 : 11, i % 2 ? 0.011 : 0.021);
    int32_t p[64];
    for (int i = 0; i < 64; i++)
        p[i] = 1 + i;
    sched_req *r[5];
    for (int i = 0; i < 5; i++) {
        if (sched_req_new(p, i < 3 ? 4 : 64, 50, 4, &r[i], &err)) return -3;
        r[i]->id = (uint64_t)i;
        r[i]->tenant = i == 3 ? b_tenant : 1;
        r[i]->priority = i == 3 ? b_prio : 5;
    }
    for (int i = 0; i < 3; i++)
        sched_add(s, r[i]);
    for (int k = 0; k < 2; k++) { // admit the three, then one decode step
        const sched_plan *pl = sched_step(s, 0.01 * (k + 1));
        int n = pl->n_items;
        sched_item it[8];
        memcpy(it, pl->items, (size_t)n * sizeof *it);
        sched_commit(s);
        for (int i = 0; i < n; i++)
            if (it[i].sample) it[i].r->tokens[it[i].r->n_tokens++] = 7;
    }
    if (pred) {
        sched_key keys[8];
        sched_load l = {.wait = keys, .cap_wait = 8};
        sched_load_fill(s, &l);
        sched_key k = sched_key_of(r[3]);
        *pred = sched_predict_ttft(&l, &k, 0.05, 0, NULL);
    }
    sched_add(s, r[3]);
    if (other) sched_add(s, r[4]);
    else sched_req_free(r[4]);
    const sched_plan *pl = sched_step(s, 0.05);
    int got = -1;
    if (other) *other = 0;
    for (int i = 0; i < pl->n_items; i++) {
        if (pl->items[i].r == r[3]) got = pl->items[i].n;
        if (other && pl->items[i].r == r[4]) *other = pl->items[i].n;
    }
    sched_commit(s);
    tu_sched_teardown(s, pool);
    return got;
}

static inline int tu_guard_case(int policy, int fair, int b_tenant, int b_prio) {
    return tu_guard_case_full(policy, fair, b_tenant, b_prio, NULL, NULL);
}

#endif
