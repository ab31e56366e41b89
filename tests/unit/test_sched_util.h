// Shared by the scheduler tests: tear a scheduler down with whatever it still holds.
#ifndef TACHYON_TEST_SCHED_UTIL_H
#define TACHYON_TEST_SCHED_UTIL_H

#include "kv/kv.h"
#include "sched/sched.h"

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

#endif
