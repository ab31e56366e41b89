// The step-cost model (seconds ≈ a + b·tokens) and the ITL guard budget the scheduler derives from it.
#include "kv/kv.h"
#include "sched/sched.h"
#include "sched/step_cost.h"
#include "test_util.h"

static void test_fit(void) {
    step_cost c = {0};
    step_cost_observe(&c, 4, 0.010 + 0.003 * 4);
    step_cost_observe(&c, 4, 0.010 + 0.003 * 4);
    CHECK(!step_cost_ready(&c)); // one step size: no slope yet
    const int sizes[] = {1, 32, 4, 20, 8, 1, 64};
    for (int i = 0; i < 7; i++) step_cost_observe(&c, sizes[i], 0.010 + 0.003 * sizes[i]);
    CHECK(step_cost_ready(&c));
    CHECK_NEAR(step_cost_predict(&c, 10), 0.040, 1e-9);
    CHECK_NEAR(step_cost_predict(&c, 0), 0.010, 1e-9);
    CHECK_EQ_INT(step_cost_max_tokens(&c, 0.040 + 1e-9), 10);
    CHECK_EQ_INT(step_cost_max_tokens(&c, 0.001), 1); // even one token does not fit: still 1
    // A steady load (every step 3 tokens) for long enough that the spread of step sizes has decayed away:
    // the slope stays the one learned (a decayed spread must not turn the model off, and the ITL guard with it)...
    for (int i = 0; i < 300; i++) step_cost_observe(&c, 3, 0.010 + 0.003 * 3);
    CHECK(step_cost_ready(&c));
    CHECK_NEAR(step_cost_predict(&c, 13), 0.049, 1e-6);
    CHECK_EQ_INT(step_cost_max_tokens(&c, 0.049 + 1e-9), 13);
    // ...and the line is re-anchored on the recent steps when they get slower (longer contexts, more load).
    for (int i = 0; i < 300; i++) step_cost_observe(&c, 3, 0.020 + 0.003 * 3);
    CHECK(step_cost_ready(&c));
    CHECK_NEAR(step_cost_predict(&c, 3), 0.029, 1e-4);
    CHECK_NEAR(step_cost_predict(&c, 13) - step_cost_predict(&c, 3), 0.030, 1e-6);
    step_cost bad = {0};
    step_cost_observe(&bad, 0, 1.0);  // ignored
    step_cost_observe(&bad, 3, -1.0); // ignored
    CHECK_EQ_INT(bad.n_obs, 0);
}

static void test_guard_budget(void) {
    tc_err err;
    kv_pool *pool = NULL;
    sched *s = NULL;
    CHECK_EQ_INT(kv_pool_new(64, 16, &pool, &err), 0);
    sched_opts o = {.max_batch_tokens = 256, .max_seqs = 8, .prefix_cache = 0, .itl_guard = 2.0f};
    CHECK_EQ_INT(sched_new(&o, pool, &s, &err), 0);
    CHECK_EQ_INT(sched_guard_budget(s, 4), 256); // no observations: no cap
    for (int n = 1; n <= 64; n *= 2) sched_observe(s, n, 0.010 + 0.003 * n);
    CHECK_EQ_INT(sched_guard_budget(s, 0), 256); // nobody decoding: full prefill budget
    // 4 streams: a decode step takes 0.022 s; 2x that allows (0.044 - 0.010) / 0.003 = 11.3 tokens.
    CHECK_EQ_INT(sched_guard_budget(s, 4), 11);
    // many streams: the cap never drops below one prefill token beyond the decodes
    CHECK(sched_guard_budget(s, 200) >= 201 || sched_guard_budget(s, 200) == 256);
    sched_free(s);
    // A floor: 2x a 4-stream decode step (0.044 s) is under 0.05 s, so the cap is (0.05 - 0.010) / 0.003 = 13.3
    // tokens; with 12 streams 2x a decode step (0.092 s) is above the floor, which then changes nothing.
    o.itl_guard_floor_s = 0.05;
    CHECK_EQ_INT(sched_new(&o, pool, &s, &err), 0);
    for (int n = 1; n <= 64; n *= 2) sched_observe(s, n, 0.010 + 0.003 * n);
    CHECK_EQ_INT(sched_guard_budget(s, 4), 13);
    CHECK_EQ_INT(sched_guard_budget(s, 12), 27);
    sched_free(s);
    o.itl_guard_floor_s = 0;
    o.itl_guard = 0;
    CHECK_EQ_INT(sched_new(&o, pool, &s, &err), 0);
    for (int n = 1; n <= 64; n *= 2) sched_observe(s, n, 0.010 + 0.003 * n);
    CHECK_EQ_INT(sched_guard_budget(s, 4), 256); // guard off
    sched_free(s);
    kv_pool_free(pool);
}

int main(void) {
    test_fit();
    test_guard_budget();
    TEST_MAIN_END();
}
