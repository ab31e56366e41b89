// Scheduling policies (sched_order.h, sched_admit.h): priority order, preemption by priority and its bound,
// aging, shortest-remaining-prefill-first and its aging, TTFT prediction, SLO refusal input (drain time),
// expiry of a hopeless waiting request, outcome counters. Fake clock (every call takes `now`) and fake step
// costs (sched_observe with made-up timings); no model.
#include <string.h>

#include "sched/sched.h"
#include "sched/sched_admit.h"
#include "test_sched_util.h"
#include "test_util.h"

typedef struct ph {
    kv_pool *pool;
    sched *s;
    sched_req *r[64];
    sched_end end[64];
    int done[64];
} ph;

static void ph_init(ph *h, int policy, int max_batch_tokens, int max_seqs, double aging_s) {
    memset(h, 0, sizeof *h);
    tc_err err;
    sched_opts o = {
        .max_batch_tokens = max_batch_tokens, .max_seqs = max_seqs, .policy = policy, .aging_s = aging_s};
    CHECK_EQ_INT(kv_pool_new(256, 4, &h->pool, &err), 0);
    CHECK_EQ_INT(sched_new(&o, h->pool, &h->s, &err), 0);
}

static void ph_free(ph *h) {
    for (int i = 0; i < 64; i++)
        if (h->done[i]) sched_req_free(h->r[i]);
    tu_sched_teardown(h->s, h->pool);
}

static sched_req *ph_add(ph *h, int id, int n_prompt, int max_tokens, int priority, double t_arrival) {
    int32_t p[256];
    for (int i = 0; i < n_prompt; i++)
        p[i] = 1 + (id * 31 + i * 7) % 300;
    tc_err err;
    sched_req *r;
    CHECK_EQ_INT(sched_req_new(p, n_prompt, max_tokens, 4, &r, &err), 0);
    r->id = (uint64_t)id;
    r->priority = priority;
    r->t_arrival = t_arrival;
    h->r[id] = r;
    sched_add(h->s, r);
    return r;
}

// One step at time now: plan, commit, a fake token for each sampled item (LENGTH at max_tokens, first-token
// time = now). Returns the plan (valid until the next step).
static const sched_plan *ph_step(ph *h, double now) {
    const sched_plan *p = sched_step(h->s, now);
    for (sched_req *r = p->ended; r; r = r->next)
        h->done[r->id] = 1, h->end[r->id] = r->end;
    sched_item items[64];
    int n = p->n_items;
    memcpy(items, p->items, (size_t)n * sizeof *items);
    sched_commit(h->s);
    for (int i = 0; i < n; i++) {
        sched_req *r = items[i].r;
        if (!items[i].sample) continue;
        r->tokens[r->n_tokens++] = 1;
        if (!r->t_first_token) r->t_first_token = now;
        if (sched_req_n_generated(r) >= r->max_tokens) {
            sched_finish(h->s, r, SCHED_END_LENGTH);
            h->done[r->id] = 1, h->end[r->id] = SCHED_END_LENGTH;
        }
    }
    return p;
}

static int in_plan(const sched_plan *p, int id) {
    for (int i = 0; i < p->n_items; i++)
        if (p->items[i].r->id == (uint64_t)id) return i;
    return -1;
}

// --- the ordering rule itself
static void test_key_order(void) {
    sched_key hi = {0, 50, 10.0, 1, 0, 0}, lo = {3, 5, 10.0, 2, 0, 0};
    CHECK(sched_key_before(&hi, &lo, 1.0, 10.0)); // priority first, whatever the prompt length
    CHECK(!sched_key_before(&lo, &hi, 1.0, 10.0));
    // aging: lo (arrived at 0) gains a class per second; at 3 s waited it ranks with a fresh priority-0
    sched_key old_lo = {3, 5, 0.0, 3, 0, 0}, fresh_hi = {0, 5, 2.99, 4, 0, 0};
    CHECK_EQ_INT(sched_eff_priority(&old_lo, 1.0, 2.99), 1);
    CHECK(sched_key_before(&fresh_hi, &old_lo, 1.0, 2.99));
    fresh_hi.t_arrival = 3.0;
    CHECK_EQ_INT(sched_eff_priority(&old_lo, 1.0, 3.0), 0);
    CHECK(sched_key_before(&old_lo, &fresh_hi, 1.0, 3.0));              // same class: it has waited longer
    CHECK_EQ_INT(sched_eff_priority(&old_lo, 0, 3 * SCHED_AGING_S), 0); // default aging
    // shortest remaining prefill first within a class, with aging: a long prompt that has waited
    // (4000 - 100) / SCHED_SRPF_AGING_TOK seconds more than a short one goes first
    sched_key lng = {0, 4000, 0.0, 5, 0, 0}, sht = {0, 100, 3.89, 6, 0, 0};
    CHECK(sched_key_before(&sht, &lng, 100, 5.0));    // the long one is 3.89 s older: not yet
    CHECK(sched_key_before(&sht, &lng, 1000, 100.0)); // (the age difference, not the clock, decides)
    sht.t_arrival = 3.91;
    CHECK(sched_key_before(&lng, &sht, 100, 5.0)); // > 3.9 s older: first
    // the aging floor: a priority-0 request that waited 6 aging periods does not outrank a fresh priority-0
    // one by class when 0 is the best class present (rule 2 decides: 8000 - 6000 tokens > 100)
    sched_key old0 = {0, 8000, 0.0, 10, 0, 1}, new0 = {0, 100, 6.0, 11, 0, 1};
    CHECK_EQ_INT(sched_eff_priority(&old0, 1.0, 6.0), 0);
    CHECK(sched_key_before(&new0, &old0, 1.0, 6.0));
    old0.has_floor = new0.has_floor = 0; // without it the old one ranks first (effective class -6)
    CHECK(sched_key_before(&old0, &new0, 1.0, 6.0));
    sched_key low = {3, 5, 0.0, 12, 0, 1}; // a lower class ages up to the floor, not past it
    CHECK_EQ_INT(sched_eff_priority(&low, 1.0, 10.0), 0);
    sched_key neg = {-2, 5, 0.0, 13, 0, 1}; // a key better than the floor keeps its own class
    CHECK_EQ_INT(sched_eff_priority(&neg, 1.0, 10.0), -2);
    // fifo among equals
    sched_key e1 = {0, 10, 1.0, 8, 0, 0}, e2 = {0, 10, 1.0, 9, 0, 0};
    CHECK(sched_key_before(&e1, &e2, 1, 1.0) && !sched_key_before(&e2, &e1, 1, 1.0));
    CHECK_EQ_INT(sched_policy_parse("slo"), SCHED_POL_SLO);
    CHECK_EQ_INT(sched_policy_parse("fifo"), SCHED_POL_FIFO);
    CHECK_EQ_INT(sched_policy_parse("lifo"), -1);
}

// --- admission order and preemption by priority
static void test_priority_admission(void) {
    ph h;
    ph_init(&h, SCHED_POL_PRIORITY, 64, 1, 100);
    ph_add(&h, 0, 8, 20, 5, 0.0);
    ph_step(&h, 0.0); // 0 runs
    ph_add(&h, 1, 8, 2, 5, 0.1);
    ph_add(&h, 2, 8, 2, 0, 0.2); // better priority: displaces 0 at once
    const sched_plan *p = ph_step(&h, 0.2);
    CHECK_MSG(in_plan(p, 2) >= 0 && in_plan(p, 0) < 0,
              "priority 0 arrival should preempt the running priority 5");
    sched_counters c;
    sched_get_counters(h.s, &c);
    CHECK_EQ_INT(c.prio_preemptions, 1);
    CHECK_EQ_INT(h.r[0]->n_prio_preempted, 1);
    CHECK_EQ_INT(h.r[0]->state, SCHED_WAITING);
    ph_step(&h, 0.3); // 2 finishes (2 tokens)
    CHECK(h.done[2]);
    p = ph_step(&h, 0.4); // 0 (older, same priority as 1) comes back before 1
    CHECK(in_plan(p, 0) >= 0);
    // 0 has lost its slot once: a new better arrival waits instead of displacing it again
    ph_add(&h, 3, 8, 2, 0, 0.5);
    p = ph_step(&h, 0.5);
    CHECK_MSG(in_plan(p, 0) >= 0 && in_plan(p, 3) < 0, "a request is displaced at most once");
    ph_free(&h);

    // fifo: no overtaking, no displacement
    ph_init(&h, SCHED_POL_FIFO, 64, 1, 100);
    ph_add(&h, 0, 8, 20, 5, 0.0);
    ph_step(&h, 0.0);
    ph_add(&h, 1, 8, 2, 5, 0.1);
    ph_add(&h, 2, 8, 2, 0, 0.2);
    p = ph_step(&h, 0.2);
    CHECK(in_plan(p, 0) >= 0 && in_plan(p, 2) < 0);
    sched_get_counters(h.s, &c);
    CHECK_EQ_INT(c.prio_preemptions, 0);
    ph_free(&h);

    // priority order among waiting requests (slots full, then freed): lower value first, FIFO within
    ph_init(&h, SCHED_POL_PRIORITY, 64, 1, 100);
    ph_add(&h, 0, 8, 1, 0, 0.0);
    ph_add(&h, 1, 8, 1, 2, 0.1);
    ph_add(&h, 2, 8, 1, 1, 0.2);
    ph_add(&h, 3, 8, 1, -1, 0.3);
    ph_add(&h, 4, 8, 1, 1, 0.4);
    int order[5], n = 0;
    for (int step = 0; step < 10 && n < 5; step++) {
        p = ph_step(&h, 1.0);
        if (p->n_items) order[n++] = (int)p->items[0].r->id;
    }
    int want[5] = {3, 0, 2, 4, 1};
    for (int i = 0; i < 5; i++)
        CHECK_MSG(order[i] == want[i], "admission %d: got %d, want %d", i, order[i], want[i]);
    ph_free(&h);
}

// --- aging: nothing starves. A priority-3 request under a stream of priority-0 arrivals with one slot is
// admitted once it has waited 3 × aging_s.
static void test_aging_no_starvation(void) {
    ph h;
    ph_init(&h, SCHED_POL_PRIORITY, 64, 1, 1.0);
    ph_add(&h, 0, 4, 1, 3, 0.0); // the low-priority one
    int next = 1;
    double t_low = -1;
    for (int step = 0; step < 100 && t_low < 0; step++) {
        double now = step * 0.1;
        if (next < 64) ph_add(&h, next++, 4, 1, 0, now); // a fresh high-priority request every step
        const sched_plan *p = ph_step(&h, now);
        if (in_plan(p, 0) >= 0) t_low = now;
    }
    CHECK_MSG(t_low >= 2.95 && t_low <= 3.05, "low priority admitted at %.2f s, want 3.0 (3 classes x 1 s)",
              t_low);
    ph_free(&h);
}

// --- shortest remaining prefill first: a short prompt arriving while a long one is being prefilled gets
// its chunk first (and its first token in the next step); the long one goes on with what budget is left.
static void test_short_before_long(void) {
    ph h;
    ph_init(&h, SCHED_POL_PRIORITY, 16, 4, 100);
    ph_add(&h, 0, 200, 1, 0, 0.0);
    ph_step(&h, 0.0); // long: first 16-token chunk
    ph_add(&h, 1, 6, 1, 0, 0.01);
    const sched_plan *p = ph_step(&h, 0.01);
    int is = in_plan(p, 1), il = in_plan(p, 0);
    CHECK_MSG(is == 0 && p->items[0].n == 6, "the short prompt is planned first, whole (item %d)", is);
    CHECK(il == 1 && p->items[1].n == 10);
    CHECK(h.done[1]); // its one token came in that step
    ph_free(&h);

    // fifo: the running long prompt's chunk takes the whole budget; the short one waits
    ph_init(&h, SCHED_POL_FIFO, 16, 4, 100);
    ph_add(&h, 0, 200, 1, 0, 0.0);
    ph_step(&h, 0.0);
    ph_add(&h, 1, 6, 1, 0, 0.01);
    p = ph_step(&h, 0.01);
    CHECK(in_plan(p, 1) < 0 && p->n_items == 1 && p->items[0].n == 16);
    ph_free(&h);

    // aging: two waiting prompts, a long one that arrived earlier and a short one; the long one goes first
    // once it is (200 - 6) / SCHED_SRPF_AGING_TOK s older
    ph_init(&h, SCHED_POL_PRIORITY, 16, 1, 100);
    ph_add(&h, 0, 200, 1, 0, 0.0);
    ph_add(&h, 1, 6, 1, 0, 0.1);
    p = ph_step(&h, 0.1);
    CHECK(in_plan(p, 1) == 0);
    ph_free(&h);
    ph_init(&h, SCHED_POL_PRIORITY, 16, 1, 100);
    ph_add(&h, 0, 200, 1, 0, 0.0);
    ph_add(&h, 1, 6, 1, 0, 0.3);
    p = ph_step(&h, 0.3);
    CHECK(in_plan(p, 0) == 0);
    ph_free(&h);
}

// --- lanes: a long prompt that has aged past the short ones (rank) still leaves them (1 - SCHED_LONG_SHARE)
// of every step's budget; it keeps at least SCHED_LONG_SHARE of it under a stream of short ones (no
// starvation); an aged long prompt still gets the next free slot.
static void test_lanes(void) {
    ph h;
    ph_init(&h, SCHED_POL_PRIORITY, 16, 4, 100);
    ph_add(&h, 0, 250, 1, 0, 0.0);
    ph_step(&h, 0.0);
    ph_add(&h, 1, 14, 1, 0, 2.0); // the long one has waited 2 s: ranks first (234 - 2000 < 14)
    sched_key kl = sched_key_of(h.r[0]), ks = sched_key_of(h.r[1]);
    CHECK(sched_key_before(&kl, &ks, 100, 2.0));
    const sched_plan *p = ph_step(&h, 2.0);
    int is = in_plan(p, 1), il = in_plan(p, 0);
    CHECK_MSG(is >= 0 && p->items[is].n == 12, "the short prompt gets its lane (item %d, n %d)", is,
              is >= 0 ? p->items[is].n : -1);
    CHECK(il >= 0 && p->items[il].n == 4);
    p = ph_step(&h, 2.01);
    is = in_plan(p, 1), il = in_plan(p, 0);
    CHECK(is >= 0 && p->items[is].n == 2 && il >= 0 &&
          p->items[il].n == 14); // its rest; the long one the rest
    CHECK(h.done[1]);
    // a short prompt arriving every step: the long one still moves >= 4 tokens a step and finishes
    int id = 2, steps = 0;
    for (; steps < 200 && !h.done[0]; steps++) {
        if (id < 64) ph_add(&h, id++, 12, 1, 0, 2.02 + steps * 0.01);
        p = ph_step(&h, 2.02 + steps * 0.01);
        il = in_plan(p, 0);
        if (!h.done[0]) CHECK(il >= 0 && p->items[il].n >= 4);
    }
    CHECK_MSG(h.done[0] && steps <= 60, "the long prompt finished in %d steps", steps);
    ph_free(&h);

    // the same with class aging on (1 s per class): the long prompt has waited 2 classes' worth, but 0 is the
    // best class present, so it does not leave the short one's lane by class
    ph_init(&h, SCHED_POL_PRIORITY, 16, 4, 1.0);
    ph_add(&h, 0, 250, 1, 0, 0.0);
    ph_step(&h, 0.0);
    ph_add(&h, 1, 14, 1, 0, 2.0);
    p = ph_step(&h, 2.0);
    is = in_plan(p, 1);
    CHECK_MSG(is >= 0 && p->items[is].n == 12, "aged long prompt, short lane (item %d)", is);
    ph_free(&h);

    // (fifo keeps the running chunk first: test_short_before_long)

    // slots: one slot, an aged waiting long prompt and a fresh short one: the long one is admitted (the short
    // one does not take the last slot from it), with the whole budget since the short one cannot run
    ph_init(&h, SCHED_POL_PRIORITY, 16, 1, 100);
    ph_add(&h, 0, 200, 1, 0, 0.0);
    ph_add(&h, 1, 6, 1, 0, 0.3);
    p = ph_step(&h, 0.3);
    CHECK(in_plan(p, 0) == 0 && p->items[0].n == 16 && in_plan(p, 1) < 0);
    ph_free(&h);
}

// --- the ITL guard does not hold a better priority's prompt back for lower-priority streams (itl_guard_fair)
static void test_itl_guard_priority(void) {
    CHECK_EQ_INT(tu_guard_case(SCHED_POL_PRIORITY, 1, 1, 0), 64); // priority 0 beside priority-5 streams
    CHECK_EQ_INT(tu_guard_case(SCHED_POL_SLO, 1, 1, 0), 64);
    CHECK_EQ_INT(tu_guard_case(SCHED_POL_PRIORITY, 0, 1, 0), 13); // option off: 16 - 3 decode rows
    CHECK_EQ_INT(tu_guard_case(SCHED_POL_PRIORITY, 1, 1, 5), 13); // their own class: capped
    CHECK_EQ_INT(tu_guard_case(SCHED_POL_FIFO, 1, 1, 0), 13);     // fifo: priorities are not used
    // the exemption is the favored prompt's only: a priority-5 prompt arriving with it still fits in what the
    // guard allows (16 - 3 decode rows - 64 favored tokens: nothing this step)
    int other = -1;
    CHECK_EQ_INT(tu_guard_case_full(SCHED_POL_PRIORITY, 1, 1, 0, NULL, &other), 64);
    CHECK_EQ_INT(other, 0);
    CHECK_EQ_INT(tu_guard_case_full(SCHED_POL_PRIORITY, 0, 1, 0, NULL, &other),
                 13); // off: ranks first, capped
    CHECK_EQ_INT(other, 0);
    // the TTFT prediction follows: one uncapped step (3 decode rows + 64) vs 13 prefill tokens a step
    double t = 0;
    tu_guard_case_full(SCHED_POL_SLO, 1, 1, 0, &t, NULL);
    CHECK_NEAR(t, 0.01 + 0.001 * (3 + 64), 1e-9);
    tu_guard_case_full(SCHED_POL_SLO, 1, 1, 5, &t, NULL);
    CHECK_NEAR(t, 5 * 0.01 + 0.001 * (5 * 3 + 64), 1e-9);
}

// Teaches the step-cost model t(n) = 0.01 + 0.001 n seconds.
static void fake_costs(sched *s) {
    for (int i = 0; i < 40; i++)
        sched_observe(s, i % 2 ? 1 : 11, i % 2 ? 0.011 : 0.021);
}

// --- room for a better class: for aging_s after a priority-0 request arrived, a step of lower-class prefill
// alone (nobody decoding) is capped as the ITL guard caps a one-stream step (t(n) = 0.01 + 0.001 n, 2x a
// one-row step = 0.022 s: 12 tokens), so a priority-0 arrival waits for a short step; afterwards, and under
// fifo, the whole budget.
static void test_room_for_a_better_class(void) {
    for (int policy = SCHED_POL_FIFO; policy <= SCHED_POL_PRIORITY; policy++) {
        ph h;
        tc_err err;
        memset(&h, 0, sizeof h);
        sched_opts o = {
            .max_batch_tokens = 128, .max_seqs = 8, .itl_guard = 2, .policy = policy, .aging_s = 1.0};
        CHECK_EQ_INT(kv_pool_new(256, 4, &h.pool, &err), 0);
        CHECK_EQ_INT(sched_new(&o, h.pool, &h.s, &err), 0);
        fake_costs(h.s);
        ph_add(&h, 0, 4, 1, 0, 0.0);
        ph_step(&h, 0.0);
        CHECK(h.done[0]);
        ph_add(&h, 1, 250, 1, 5, 0.1);
        const sched_plan *p = ph_step(&h, 0.1);
        int want = policy == SCHED_POL_FIFO ? 128 : 12;
        CHECK_MSG(p->n_items == 1 && p->items[0].n == want, "policy %d: low prefill alone %d tokens, want %d",
                  policy, p->n_items ? p->items[0].n : -1, want);
        p = ph_step(&h, 1.1); // a class's aging period after the priority-0 arrival: the whole budget again
        CHECK(p->n_items == 1 && p->items[0].n == (policy == SCHED_POL_FIFO ? 122 : 128));
        ph_free(&h);
    }
}

// --- lower classes yield: a step carrying a better request's prefill gives the lower classes of its tenant
// at most SCHED_YIELD_SHARE of max_batch_tokens of prefill (128 / 16 = 8 tokens here), every step (no
// starvation); not across tenants, not to a request aged into the better class, not under fifo.
static void test_lower_classes_yield(void) {
    ph h;
    ph_init(&h, SCHED_POL_PRIORITY, 128, 8, 100);
    ph_add(&h, 0, 250, 1, 5, 0.0);
    const sched_plan *p = ph_step(&h, 0.0); // the low one alone: the whole budget
    CHECK(in_plan(p, 0) == 0 && p->items[0].n == 128);
    ph_add(&h, 1, 20, 4, 0, 0.1);
    p = ph_step(&h, 0.1);
    int ih = in_plan(p, 1), il = in_plan(p, 0);
    CHECK_MSG(ih >= 0 && p->items[ih].n == 20, "the high prompt whole (item %d)", ih);
    CHECK_MSG(il >= 0 && p->items[il].n == 8, "the low prompt yields: %d tokens, want 8 (not 108)",
              il >= 0 ? p->items[il].n : -1);
    CHECK_EQ_INT(p->n_tokens, 28);
    p = ph_step(&h, 0.2); // the high one decodes (a stream, not a prefill): the low one gets the rest
    il = in_plan(p, 0);
    CHECK(in_plan(p, 1) >= 0 && il >= 0 && p->items[il].n == 114);
    ph_free(&h);

    // a high prompt with one token to compute (a prompt found whole in the prefix cache has only its last
    // token left): the row that gives its first token leads as a prefill chunk does
    ph_init(&h, SCHED_POL_PRIORITY, 128, 8, 100);
    ph_add(&h, 0, 250, 1, 5, 0.0);
    ph_step(&h, 0.0);
    ph_add(&h, 1, 1, 4, 0, 0.1);
    p = ph_step(&h, 0.1);
    il = in_plan(p, 0);
    CHECK_MSG(in_plan(p, 1) >= 0 && il >= 0 && p->items[il].n == 8,
              "a one-row first token: the low prompt got %d tokens, want 8", il >= 0 ? p->items[il].n : -1);
    ph_free(&h);

    // a high prompt every step: the low one still moves 8 tokens a step, and a second low one that arrives
    // meanwhile shares those 8 (none left for it while the first takes them)
    ph_init(&h, SCHED_POL_PRIORITY, 128, 8, 100);
    ph_add(&h, 0, 250, 1, 5, 0.0);
    ph_step(&h, 0.0);
    ph_add(&h, 2, 30, 1, 5, 0.01);
    for (int step = 0; step < 5; step++) {
        ph_add(&h, 10 + step, 20, 1, 0, 0.1 * (step + 1));
        p = ph_step(&h, 0.1 * (step + 1));
        il = in_plan(p, 0);
        int i2 = in_plan(p, 2), low = (il >= 0 ? p->items[il].n : 0) + (i2 >= 0 ? p->items[i2].n : 0);
        CHECK_MSG(in_plan(p, 10 + step) >= 0 && low == 8, "step %d: lower classes got %d tokens, want 8",
                  step, low);
    }
    ph_free(&h);

    // another tenant's low prompt does not yield to this tenant's high one (fair share decides across them)
    ph_init(&h, SCHED_POL_PRIORITY, 128, 8, 100);
    ph_add(&h, 0, 250, 1, 5, 0.0)->tenant = 2;
    ph_step(&h, 0.0);
    ph_add(&h, 1, 20, 4, 0, 0.1)->tenant = 1;
    p = ph_step(&h, 0.1);
    il = in_plan(p, 0);
    CHECK(in_plan(p, 1) >= 0 && il >= 0 && p->items[il].n == 108);
    ph_free(&h);

    // aged into the better class (1 s per class, 3 s waited: priority 2 ranks as 0): it does not yield
    ph_init(&h, SCHED_POL_PRIORITY, 128, 8, 1.0);
    ph_add(&h, 0, 250, 1, 2, 0.0);
    ph_step(&h, 0.0);
    ph_add(&h, 1, 20, 4, 0, 3.0);
    p = ph_step(&h, 3.0);
    il = in_plan(p, 0);
    CHECK_MSG(il >= 0 && p->items[il].n > 8 && in_plan(p, 1) >= 0, "aged: %d tokens",
              il >= 0 ? p->items[il].n : -1);
    ph_free(&h);

    // fifo: priorities are not used; the running chunk first, whole
    ph_init(&h, SCHED_POL_FIFO, 128, 8, 100);
    ph_add(&h, 0, 250, 1, 5, 0.0);
    ph_step(&h, 0.0);
    ph_add(&h, 1, 20, 4, 0, 0.1);
    p = ph_step(&h, 0.1);
    il = in_plan(p, 0);
    CHECK(il >= 0 && p->items[il].n == 122);
    ph_free(&h);
}

// --- TTFT prediction and drain time
static void test_predict(void) {
    ph h;
    ph_init(&h, SCHED_POL_FIFO, 16, 4, 100);
    sched_key keys[16];
    sched_load l = {.wait = keys, .cap_wait = 16};
    sched_load_fill(h.s, &l);
    sched_key k = {0, 16, 1.0, 99, 0, 0};
    CHECK_NEAR(sched_predict_ttft(&l, &k, 1.0, 0, NULL), 0.0, 1e-12); // no fit yet: never refuse
    fake_costs(h.s);
    double a, b;
    CHECK(sched_step_cost_fit(h.s, &a, &b));
    CHECK_NEAR(a, 0.01, 1e-6);
    CHECK_NEAR(b, 0.001, 1e-6);
    for (int i = 0; i < 3; i++)
        ph_add(&h, i, 32, 4, i == 2 ? 5 : 0, 0.5);
    sched_get_counters(h.s, &(sched_counters){0});
    sched_load_fill(h.s, &l);
    CHECK_EQ_INT(l.n_wait, 3);
    CHECK_EQ_INT(l.wait_tokens, 96);
    double drain = 0;
    // fifo: all 96 waiting tokens are ahead; 112 tokens in 16-token steps = 7 steps: 7a + 112b
    double t = sched_predict_ttft(&l, &k, 1.0, 0, &drain);
    CHECK_NEAR(t, 7 * 0.01 + 0.112, 1e-9);
    CHECK_NEAR(drain, t, 1e-9);
    // tokens submitted but not yet in the scheduler count too
    CHECK_NEAR(sched_predict_ttft(&l, &k, 1.0, 16, NULL), 8 * 0.01 + 0.128, 1e-9);
    ph_free(&h);

    // priority: only the requests that rank before it are ahead (here the priority-5 one is not); the drain
    // time still covers everything
    ph_init(&h, SCHED_POL_PRIORITY, 16, 4, 100);
    fake_costs(h.s);
    for (int i = 0; i < 3; i++)
        ph_add(&h, i, 16, 4, i == 2 ? 5 : 0, 0.5);
    sched_load_fill(h.s, &l);
    t = sched_predict_ttft(&l, &k, 1.0, 0, &drain);
    CHECK_NEAR(t, 3 * 0.01 + 0.048, 1e-9); // 16 + 16 + 16
    CHECK_NEAR(drain, 4 * 0.01 + 0.064, 1e-9);
    ph_free(&h);

    // lanes: the two priority-0 prompts are long (32 > 16-token budget), k is short: k drains in the short
    // lane (16 - 4 = 12 tokens a step: 2 steps) while the long ones fill the rest of both steps (16 tokens)
    ph_init(&h, SCHED_POL_PRIORITY, 16, 4, 100);
    fake_costs(h.s);
    for (int i = 0; i < 3; i++)
        ph_add(&h, i, 32, 4, i == 2 ? 5 : 0, 0.5);
    sched_load_fill(h.s, &l);
    t = sched_predict_ttft(&l, &k, 1.0, 0, &drain);
    CHECK_NEAR(t, 2 * 0.01 + 0.032, 1e-9);
    sched_key k40 = {0, 40, 1.0, 96, 0, 0}; // a long one: the short ones of its class are ahead (none here)
    CHECK_NEAR(sched_predict_ttft(&l, &k40, 1.0, 0, NULL), 7 * 0.01 + 0.104, 1e-9); // 32 + 32 + 40
    CHECK_NEAR(drain, 7 * 0.01 + 0.112, 1e-9);
    sched_key urgent = {-1, 16, 1.0, 98, 0, 0};
    CHECK_NEAR(sched_predict_ttft(&l, &urgent, 1.0, 0, NULL), 0.01 + 0.016, 1e-9);
    // running streams: each step carries their decode rows. Admit two (4 tokens each: 1 step), then they
    // decode: 2 rows per step, 14 prefill tokens per step.
    ph_free(&h);
    ph_init(&h, SCHED_POL_PRIORITY, 16, 4, 100);
    fake_costs(h.s);
    ph_add(&h, 0, 4, 50, 0, 0.0);
    ph_add(&h, 1, 4, 50, 0, 0.0);
    ph_step(&h, 0.0);
    sched_load_fill(h.s, &l);
    CHECK_EQ_INT(l.n_decoding, 2);
    sched_key k28 = {0, 28, 1.0, 97, 0, 0};
    CHECK_NEAR(sched_predict_ttft(&l, &k28, 1.0, 0, NULL), 2 * 0.01 + 0.001 * (2 * 2 + 28), 1e-9);
    ph_free(&h);
}

// --- slo: a waiting request whose target is out of reach is dropped in step 1 (SCHED_END_SLO, counted as
// expired); one with a reachable target stays. Outcomes ok / late are counted as requests finish.
static void test_slo_expiry_and_outcomes(void) {
    ph h;
    ph_init(&h, SCHED_POL_SLO, 16, 1, 100);
    fake_costs(h.s);
    ph_add(&h, 0, 160, 1, 0, 0.0); // running: 10 steps of prefill (~0.26 s)
    ph_step(&h, 0.0);
    sched_req *w1 = ph_add(&h, 1, 16, 1, 0, 0.0);
    w1->ttft_slo = 0.1; // 9 more steps of the long prompt ahead, then its own: ~0.27 s > 0.1
    sched_req *w2 = ph_add(&h, 2, 16, 1, 0, 0.0);
    w2->ttft_slo = 5.0;
    const sched_plan *p = ph_step(&h, 0.01);
    CHECK_MSG(h.done[1] && h.end[1] == SCHED_END_SLO, "hopeless waiting request dropped (done %d end %d)",
              h.done[1], h.end[1]);
    CHECK(p->ended == w1 || (p->ended && p->ended->next == w1));
    CHECK(!h.done[2]);
    for (int i = 0; i < 40 && !h.done[2]; i++)
        ph_step(&h, 0.02 + i * 0.01);
    CHECK(h.done[2] && h.end[2] == SCHED_END_LENGTH);
    const sched_stats *st = sched_get_stats(h.s);
    int c0 = sched_class_of(0);
    CHECK_EQ_INT(st->outcome[c0][SCHED_OUT_EXPIRED], 1);
    CHECK_EQ_INT(st->outcome[c0][SCHED_OUT_OK], 2); // 0 (no target) and 2 (within 5 s)
    uint64_t nq = 0;
    for (int b = 0; b <= SCHED_QT_BUCKETS; b++)
        nq += st->qt_counts[c0][b];
    CHECK_EQ_INT(nq, 2); // 0 and 2 were scheduled; 1 never was
    ph_free(&h);

    // the same under priority: nobody is dropped, and the late one is counted late
    ph_init(&h, SCHED_POL_PRIORITY, 16, 1, 100);
    fake_costs(h.s);
    ph_add(&h, 0, 160, 1, 0, 0.0);
    ph_step(&h, 0.0);
    ph_add(&h, 1, 16, 1, 7, 0.0)->ttft_slo = 0.1;
    for (int i = 0; i < 40 && !h.done[1]; i++)
        ph_step(&h, 0.01 + i * 0.05);
    CHECK(h.done[1] && h.end[1] == SCHED_END_LENGTH);
    st = sched_get_stats(h.s);
    CHECK_EQ_INT(st->outcome[sched_class_of(7)][SCHED_OUT_LATE], 1);
    CHECK_EQ_INT(st->outcome[sched_class_of(7)][SCHED_OUT_EXPIRED], 0);
    CHECK_EQ_INT(sched_class_of(7), SCHED_N_CLASSES - 1);
    CHECK(!strcmp(sched_class_label(sched_class_of(-100)), "<=-3"));
    ph_free(&h);
}

// --- tenants' fair share decides whose turn it is; the rank picks within that tenant
static void test_fair_share_then_rank(void) {
    ph h;
    ph_init(&h, SCHED_POL_PRIORITY, 64, 2, 100);
    ph_add(&h, 0, 4, 50, 0, 0.0)->tenant = 1; // tenant 1 runs one request
    ph_step(&h, 0.0);
    ph_add(&h, 1, 4, 5, 0, 0.1)->tenant = 1;  // ranks first, but tenant 1 is above its share
    ph_add(&h, 2, 40, 5, 3, 0.2)->tenant = 2; // tenant 2: a long, low-priority one
    ph_add(&h, 3, 8, 5, 2, 0.3)->tenant = 2;  // ...and a shorter, better one
    const sched_plan *p = ph_step(&h, 0.3);
    CHECK_MSG(in_plan(p, 3) >= 0 && in_plan(p, 1) < 0 && in_plan(p, 2) < 0,
              "tenant 2's turn (fair share), its best-ranked request (3)");
    ph_free(&h);
}

int main(void) {
    test_key_order();
    test_priority_admission();
    test_aging_no_starvation();
    test_lanes();
    test_itl_guard_priority();
    test_lower_classes_yield();
    test_room_for_a_better_class();
    test_short_before_long();
    test_predict();
    test_slo_expiry_and_outcomes();
    test_fair_share_then_rank();
    TEST_MAIN_END();
}
