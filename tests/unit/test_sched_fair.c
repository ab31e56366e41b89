// Fair share between tenants at admission (sched_fair.c) through the scheduler's public API, with a fake
// clock (sched_step's `now` is a counter) and no model: which requests each step admits is all we look at.
#include <string.h>

#include "sched/sched.h"
#include "sched/sched_fair.h"
#include "test_sched_util.h"
#include "test_util.h"

typedef struct fh {
    kv_pool *pool;
    sched *s;
    double now; // fake clock, monotonic seconds
    sched_req *r[32];
    int n;
} fh;

static void fh_init(fh *h, int max_seqs) {
    memset(h, 0, sizeof *h);
    tc_err err;
    sched_opts o = {.max_batch_tokens = 256, .max_seqs = max_seqs};
    CHECK_EQ_INT(kv_pool_new(256, 4, &h->pool, &err), 0);
    CHECK_EQ_INT(sched_new(&o, h->pool, &h->s, &err), 0);
}

static sched_req *fh_add(fh *h, int tenant, float share) {
    int32_t prompt[4] = {1, 2, 3, 4};
    sched_req *r;
    tc_err err;
    CHECK_EQ_INT(sched_req_new(prompt, 4, 50, 4, &r, &err), 0);
    r->id = (uint64_t)h->n;
    r->tenant = tenant;
    r->share = share;
    h->r[h->n++] = r;
    sched_add(h->s, r);
    return r;
}

// One step; returns how many requests of `tenant` the step newly admitted (plan items starting at 0).
static int fh_step(fh *h, int tenant, int *other) {
    const sched_plan *p = sched_step(h->s, h->now += 0.01);
    int mine = 0, oth = 0;
    for (int i = 0; i < p->n_items; i++)
        if (p->items[i].start == 0) (p->items[i].r->tenant == tenant ? &mine : &oth)[0]++;
    sched_commit(h->s);
    for (int i = 0; i < p->n_items; i++) {
        sched_req *r = p->items[i].r;
        if (p->items[i].sample) r->tokens[r->n_tokens++] = 7;
    }
    if (other) *other = oth;
    return mine;
}

static int fh_running(fh *h, int tenant) {
    int n = 0;
    for (int i = 0; i < h->n; i++) n += h->r[i]->state == SCHED_RUNNING && h->r[i]->tenant == tenant;
    return n;
}

static void fh_free(fh *h) {
    for (int i = 0; i < h->n; i++)
        if (h->r[i]->state == SCHED_DONE) sched_req_free(h->r[i]); // finished here, out of the scheduler
    tu_sched_teardown(h->s, h->pool);
}

// A floods (queued first), B sends one: B gets a slot at once, not after A's whole queue.
static void test_flood(void) {
    fh h;
    fh_init(&h, 2);
    for (int i = 0; i < 6; i++) fh_add(&h, 1, 1);
    fh_add(&h, 2, 1);
    int b = 0, a = fh_step(&h, 1, &b);
    CHECK_MSG(a == 1 && b == 1, "first step admitted A %d, B %d (want 1 and 1)", a, b);
    fh_free(&h);
}

// A holds every slot when B arrives: B takes one at once (A's most recently admitted request is preempted and
// waits again at the head of the queue), and the slots then stay put (no ping-pong).
static void test_takes_slot(void) {
    fh h;
    fh_init(&h, 2);
    for (int i = 0; i < 6; i++) fh_add(&h, 1, 1);
    int a = fh_step(&h, 1, NULL);
    CHECK_EQ_INT(a, 2); // A alone: work-conserving, takes both slots
    fh_step(&h, 1, NULL);
    sched_req *b = fh_add(&h, 2, 1);
    fh_add(&h, 2, 1);
    int other = 0;
    a = fh_step(&h, 1, &other);
    CHECK_EQ_INT(a, 0);
    CHECK_MSG(other == 1 && b->state == SCHED_RUNNING, "B not admitted at once");
    CHECK_MSG(h.r[1]->state == SCHED_WAITING && h.r[0]->state == SCHED_RUNNING,
              "the victim must be A's most recently admitted request");
    sched_counters c;
    sched_get_counters(h.s, &c);
    CHECK_EQ_INT(c.preemptions, 1);
    for (int i = 0; i < 5; i++) fh_step(&h, 1, NULL);
    CHECK_EQ_INT(fh_running(&h, 1), 1);
    CHECK_EQ_INT(fh_running(&h, 2), 1);
    sched_get_counters(h.s, &c);
    CHECK_EQ_INT(c.preemptions, 1);
    // B's request ends: its slot goes to its next request (B at 0 running is below A at 1)
    sched_finish(h.s, b, SCHED_END_STOP);
    fh_step(&h, 1, NULL);
    CHECK(h.r[7]->state == SCHED_RUNNING);
    // no more B: A takes the freed slot back (work-conserving)
    sched_finish(h.s, h.r[7], SCHED_END_STOP);
    fh_step(&h, 1, NULL);
    CHECK_EQ_INT(fh_running(&h, 1), 2);
    fh_free(&h);
}

// Weights with preemption: A (share 3) holds all 4 slots, B (share 1) arrives → 3:1, and stays 3:1 while
// more of B wait.
static void test_weighted_takeover(void) {
    fh h;
    fh_init(&h, 4);
    for (int i = 0; i < 6; i++) fh_add(&h, 1, 3);
    fh_step(&h, 1, NULL);
    CHECK_EQ_INT(fh_running(&h, 1), 4);
    for (int i = 0; i < 3; i++) fh_add(&h, 2, 1);
    for (int i = 0; i < 4; i++) fh_step(&h, 1, NULL);
    CHECK_EQ_INT(fh_running(&h, 1), 3);
    CHECK_EQ_INT(fh_running(&h, 2), 1);
    fh_free(&h);
}

// Weights: shares 3:1 over 4 slots with both queues long → 3 slots for A, 1 for B.
static void test_weights(void) {
    fh h;
    fh_init(&h, 4);
    for (int i = 0; i < 6; i++) fh_add(&h, 1, 3);
    for (int i = 0; i < 6; i++) fh_add(&h, 2, 1);
    int b = 0, a = fh_step(&h, 1, &b);
    CHECK_MSG(a == 3 && b == 1, "shares 3:1 admitted A %d, B %d", a, b);
    // a third tenant arrives: the next freed slot goes to it (0 running), not to A or B
    sched_req *c = fh_add(&h, 3, 1);
    sched_finish(h.s, h.r[0], SCHED_END_STOP);
    fh_step(&h, 1, NULL);
    CHECK(c->state == SCHED_RUNNING);
    fh_free(&h);
}

// Untagged requests (tenant 0) keep plain FIFO order; sched_fair_pick returns the head.
static void test_untagged_fifo(void) {
    fh h;
    fh_init(&h, 1);
    for (int i = 0; i < 4; i++) fh_add(&h, 0, 0);
    for (int i = 0; i < 4; i++) {
        fh_step(&h, 0, NULL);
        CHECK_MSG(h.r[i]->state == SCHED_RUNNING, "request %d not admitted in FIFO order", i);
        sched_finish(h.s, h.r[i], SCHED_END_STOP);
    }
    fh_free(&h);
}

// The ITL guard caps a step's prefill while streams decode; with itl_guard_fair it does not cap a step in
// which a tenant below its share has a prompt to prefill (tenant 2's first prompt beside tenant 1's three
// streams), and still caps tenant 1's own new prompt.
static void test_itl_guard_fair(void) {
    CHECK_EQ_INT(tu_guard_case(SCHED_POL_FIFO, 1, 2, 0), 64); // tenant 2 below its share: whole prompt now
    CHECK_EQ_INT(tu_guard_case(SCHED_POL_FIFO, 0, 2, 0), 13); // option off: 16 - 3 decode rows
    CHECK_EQ_INT(tu_guard_case(SCHED_POL_FIFO, 1, 1, 0), 13); // tenant 1's own fourth prompt: capped
    int other = -1; // tenant 1's new prompt arriving with tenant 2's: not favored, the guard's cap is used up
    CHECK_EQ_INT(tu_guard_case_full(SCHED_POL_FIFO, 1, 2, 0, NULL, &other), 64);
    CHECK_EQ_INT(other, 0);
}

int main(void) {
    test_flood();
    test_takes_slot();
    test_weighted_takeover();
    test_weights();
    test_untagged_fifo();
    test_itl_guard_fair();
    TEST_MAIN_END();
}
