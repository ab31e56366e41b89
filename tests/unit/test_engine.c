// Engine end to end on the tiny real model (stories260K): batch invariance of greedy output (8 prompts at
// once, chunked prefill mixed with decode = each alone), prefix-cache hits with identical output, a tiny KV
// pool forcing preemption with identical output, cancel and deadline within a step, validation, queue
// bounds, shutdown.
#include <poll.h>
#include <sys/resource.h>
#include <string.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "engine/engine.h"
#include "test_util.h"

#define MODEL "../shared/testdata/models/stories260K.gguf"
#define NP 8
#define MAXGEN 64

typedef struct result {
    int32_t toks[MAXGEN + 1];
    int n;
    engine_event fin;
    int done;
} result;

static model *g_model;

static void make_prompt(int32_t *t, int n, int seed) {
    t[0] = 1; // BOS
    for (int i = 1; i < n; i++) t[i] = 3 + (seed * 131 + i * 29) % 500;
}

static int submit(engine *e, const int32_t *prompt, int n, int max_tokens, uint64_t *id, int *err_code) {
    engine_req q;
    memset(&q, 0, sizeof q);
    q.prompt = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    memcpy(q.prompt, prompt, (size_t)n * sizeof(int32_t));
    q.n_prompt = n;
    q.max_tokens = max_tokens;
    samp_params_default(&q.sp);
    q.ignore_eos = 1;
    tc_err err = {0};
    int rc = engine_submit(e, &q, id, &err);
    if (err_code) *err_code = rc;
    if (rc) free(q.prompt);
    else CHECK(q.prompt == NULL);
    return rc;
}

// Waits (on the event fd, no spinning) until every request in ids has finished or timeout seconds pass.
static int wait_all(engine *e, const uint64_t *ids, result *res, int n, double timeout) {
    double t_end = tc_now() + timeout;
    int left = 0;
    for (int i = 0; i < n; i++) left += !res[i].done;
    while (left > 0 && tc_now() < t_end) {
        struct pollfd pfd = {.fd = engine_event_fd(e), .events = POLLIN};
        poll(&pfd, 1, 100);
        uint64_t v;
        ssize_t rd = read(engine_event_fd(e), &v, sizeof v);
        (void)rd;
        engine_event evs[32];
        int k;
        while ((k = engine_poll(e, evs, 32)) > 0) {
            for (int j = 0; j < k; j++) {
                int i = 0;
                while (i < n && ids[i] != evs[j].id) i++;
                CHECK_MSG(i < n, "event for unknown id %llu", (unsigned long long)evs[j].id);
                if (i == n) continue;
                CHECK(evs[j].user == &res[i]);
                CHECK_MSG(!res[i].done, "event after FINISH for request %d", i);
                if (evs[j].type == ENGINE_EV_TOKEN) {
                    if (res[i].n < MAXGEN) res[i].toks[res[i].n++] = evs[j].tok.token;
                } else {
                    res[i].fin = evs[j];
                    res[i].done = 1;
                    left--;
                }
            }
        }
    }
    return left;
}

// Submits prompts (with user = &res[i]) all at once and waits for all of them.
static void run_all(engine *e, int32_t (*prompts)[40], const int *lens, int n, int max_tokens, result *res) {
    uint64_t ids[NP];
    memset(res, 0, sizeof(result) * (size_t)n);
    for (int i = 0; i < n; i++) {
        engine_req q;
        memset(&q, 0, sizeof q);
        q.prompt = malloc((size_t)lens[i] * sizeof(int32_t));
        memcpy(q.prompt, prompts[i], (size_t)lens[i] * sizeof(int32_t));
        q.n_prompt = lens[i];
        q.max_tokens = max_tokens;
        samp_params_default(&q.sp);
        q.ignore_eos = 1;
        q.user = &res[i];
        tc_err err;
        CHECK_EQ_INT(engine_submit(e, &q, &ids[i], &err), 0);
    }
    CHECK_EQ_INT(wait_all(e, ids, res, n, 20.0), 0);
}

static int32_t g_eog = 2;

static engine *make_engine(int max_batch_tokens, int max_seqs, int block_size, size_t kv_blocks, int prefix) {
    engine_opts o;
    engine_opts_default(&o);
    o.max_batch_tokens = max_batch_tokens;
    o.max_seqs = max_seqs;
    o.block_size = block_size;
    o.kv_mem_bytes = kv_blocks * model_kv_block_bytes(g_model, block_size, TT_F16, TT_F16);
    o.ctx_size = 256;
    o.n_threads = 1;
    o.prefix_cache = prefix;
    o.eog_ids = &g_eog;
    o.n_eog = 1;
    engine *e = NULL;
    tc_err err;
    int rc = engine_new(g_model, &o, &e, &err);
    CHECK_MSG(rc == 0, "engine_new: %s", err.msg);
    return e;
}

static int32_t g_prompts[NP][40];
static int g_lens[NP];
static result g_ref[NP];

static void check_same(const result *got, const char *what) {
    for (int i = 0; i < NP; i++) {
        CHECK_MSG(got[i].done && got[i].fin.finish == ENGINE_FINISH_LENGTH, "%s: request %d finish %s", what, i,
                  engine_finish_name(got[i].fin.finish));
        CHECK_EQ_INT(got[i].n, g_ref[i].n);
        int first = -1;
        for (int k = 0; k < got[i].n && k < g_ref[i].n; k++)
            if (got[i].toks[k] != g_ref[i].toks[k] && first < 0) first = k;
        CHECK_MSG(first < 0, "%s: request %d differs from alone at token %d (%d vs %d)", what, i, first,
                  first >= 0 ? got[i].toks[first] : 0, first >= 0 ? g_ref[i].toks[first] : 0);
    }
}

// Reference: each prompt alone on a fresh engine, no prefix cache, whole prompt in one step.
static void make_reference(void) {
    for (int i = 0; i < NP; i++) {
        g_lens[i] = 5 + 4 * i; // 5 … 33 tokens
        make_prompt(g_prompts[i], g_lens[i], i);
    }
    engine *e = make_engine(64, 1, 16, 64, 0);
    for (int i = 0; i < NP; i++) {
        run_all(e, &g_prompts[i], &g_lens[i], 1, 24, &g_ref[i]);
        CHECK_EQ_INT(g_ref[i].n, 24);
        CHECK_EQ_INT(g_ref[i].fin.n_generated, 24);
        CHECK_EQ_INT(g_ref[i].fin.n_prompt, g_lens[i]);
        CHECK_EQ_INT(g_ref[i].fin.n_cached, 0);
        CHECK(g_ref[i].fin.t_arrival <= g_ref[i].fin.t_first_sched);
        CHECK(g_ref[i].fin.t_first_sched <= g_ref[i].fin.t_first_token);
        CHECK(g_ref[i].fin.t_first_token <= g_ref[i].fin.t_finish);
    }
    // the 8 outputs are not all the same (otherwise the comparisons below prove little)
    int distinct = 0;
    for (int i = 1; i < NP; i++) distinct += memcmp(g_ref[i].toks, g_ref[0].toks, 24 * sizeof(int32_t)) != 0;
    CHECK(distinct > 0);
    engine_free(e, 1.0);
}

static void test_batch_invariance(void) {
    result got[NP];
    // all 8 at once, budget 16: prefill chunks of long prompts interleave with decode of short ones
    engine *e = make_engine(16, 8, 16, 256, 0);
    run_all(e, g_prompts, g_lens, NP, 24, got);
    check_same(got, "concurrent, budget 16");
    engine_stats st;
    engine_get_stats(e, &st);
    CHECK_EQ_INT(st.generated_tokens, NP * 24);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    CHECK_EQ_INT(st.running + st.waiting, 0);
    engine_free(e, 1.0);
    // a bigger budget, 3 sequences at most
    e = make_engine(128, 3, 16, 256, 0);
    run_all(e, g_prompts, g_lens, NP, 24, got);
    check_same(got, "concurrent, max_seqs 3");
    engine_free(e, 1.0);
}

static void test_prefix_cache(void) {
    result got[NP];
    engine *e = make_engine(64, 8, 4, 256, 1);
    run_all(e, g_prompts, g_lens, NP, 24, got); // cold: may hit across requests only by chance
    check_same(got, "prefix cache cold");
    run_all(e, g_prompts, g_lens, NP, 24, got); // warm: every prompt is cached
    check_same(got, "prefix cache warm");
    for (int i = 0; i < NP; i++)
        CHECK_MSG(got[i].fin.n_cached >= (g_lens[i] - 1) / 4 * 4 && got[i].fin.n_cached < g_lens[i],
                  "request %d: n_cached %d of %d", i, got[i].fin.n_cached, g_lens[i]);
    engine_stats st;
    engine_get_stats(e, &st);
    CHECK(st.prefix_hit_tokens > 0 && st.prefix_hit_tokens <= st.prefix_query_tokens);
    engine_free(e, 1.0);
}

static void test_preemption(void) {
    result got[NP];
    // 16 blocks of 4 tokens = 64 slots; each request needs up to 33+24 = 57
    engine *e = make_engine(32, 8, 4, 16, 0);
    run_all(e, g_prompts, g_lens, NP, 24, got);
    check_same(got, "tiny pool");
    engine_stats st;
    engine_get_stats(e, &st);
    printf("tiny pool: %llu steps, %llu preemptions\n", (unsigned long long)st.steps, (unsigned long long)st.preemptions);
    CHECK_MSG(st.preemptions > 0, "expected preemptions, got %llu", (unsigned long long)st.preemptions);
    CHECK_EQ_INT(st.kv_blocks_total, 16);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    engine_free(e, 1.0);
    // and with the prefix cache on
    e = make_engine(32, 8, 4, 16, 1);
    run_all(e, g_prompts, g_lens, NP, 24, got);
    check_same(got, "tiny pool + prefix cache");
    engine_get_stats(e, &st);
    printf("tiny pool + cache: %llu steps, %llu preemptions\n", (unsigned long long)st.steps, (unsigned long long)st.preemptions);
    engine_free(e, 1.0);
}

static void test_cancel_deadline(void) {
    engine *e = make_engine(64, 4, 16, 64, 0);
    result res[2];
    memset(res, 0, sizeof res);
    uint64_t ids[2];
    int32_t p[8];
    make_prompt(p, 8, 3);
    engine_req q;
    memset(&q, 0, sizeof q);
    q.prompt = malloc(sizeof p);
    memcpy(q.prompt, p, sizeof p);
    q.n_prompt = 8;
    q.max_tokens = 240;
    samp_params_default(&q.sp);
    q.ignore_eos = 1;
    q.user = &res[0];
    tc_err err;
    CHECK_EQ_INT(engine_submit(e, &q, &ids[0], &err), 0);
    // wait for the first token, then cancel
    while (!res[0].n && !res[0].done) wait_all(e, ids, res, 1, 0.01);
    engine_stats st;
    engine_get_stats(e, &st);
    uint64_t steps_at_cancel = st.steps;
    engine_cancel(e, ids[0], ENGINE_FINISH_CANCELLED);
    CHECK_EQ_INT(wait_all(e, ids, res, 1, 5.0), 0);
    CHECK_EQ_INT(res[0].fin.finish, ENGINE_FINISH_CANCELLED);
    CHECK(res[0].fin.n_generated < 240);
    engine_get_stats(e, &st);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    // acted on at the start of the next step: at most one more step ran (the one in flight at cancel)
    CHECK_MSG(st.steps <= steps_at_cancel + 1, "%llu steps after the cancel",
              (unsigned long long)(st.steps - steps_at_cancel));
    engine_cancel(e, ids[0], ENGINE_FINISH_CANCELLED); // finished id: ignored
    engine_cancel(e, 12345, ENGINE_FINISH_CANCELLED);  // unknown id: ignored

    memset(&q, 0, sizeof q);
    q.prompt = malloc(sizeof p);
    memcpy(q.prompt, p, sizeof p);
    q.n_prompt = 8;
    q.max_tokens = 240;
    samp_params_default(&q.sp);
    q.ignore_eos = 1;
    q.user = &res[1];
    q.deadline = tc_now() + 0.02;
    CHECK_EQ_INT(engine_submit(e, &q, &ids[1], &err), 0);
    CHECK_EQ_INT(wait_all(e, ids + 1, res + 1, 1, 5.0), 0);
    CHECK_EQ_INT(res[1].fin.finish, ENGINE_FINISH_DEADLINE);
    CHECK(res[1].fin.t_finish >= q.deadline);
    CHECK_MSG(res[1].fin.t_finish < q.deadline + 0.5, "finished %.3f s after the deadline",
              res[1].fin.t_finish - q.deadline);
    engine_get_stats(e, &st);
    CHECK_EQ_INT(st.kv_blocks_used, 0);
    engine_free(e, 1.0);
}

static void test_validation(void) {
    engine *e = make_engine(64, 4, 16, 64, 0);
    int32_t p[300];
    make_prompt(p, 300, 1);
    uint64_t id;
    int rc;
    submit(e, p, 0, 4, &id, &rc);
    CHECK_EQ_INT(rc, TC_ERR_INVALID);
    submit(e, p, 256, 4, &id, &rc); // ctx 256: prompt + 1 does not fit
    CHECK_EQ_INT(rc, TC_ERR_INVALID);
    submit(e, p, 8, 0, &id, &rc);
    CHECK_EQ_INT(rc, TC_ERR_INVALID);
    int32_t bad[3] = {1, 600, 5};
    submit(e, bad, 3, 4, &id, &rc);
    CHECK_EQ_INT(rc, TC_ERR_INVALID);
    // max_tokens clamped to the context: finish "length" at 256 tokens in all
    result res;
    memset(&res, 0, sizeof res);
    engine_req q;
    memset(&q, 0, sizeof q);
    q.prompt = malloc(253 * sizeof(int32_t));
    memcpy(q.prompt, p, 253 * sizeof(int32_t));
    q.n_prompt = 253;
    q.max_tokens = 100;
    samp_params_default(&q.sp);
    q.ignore_eos = 1;
    q.user = &res;
    tc_err err;
    CHECK_EQ_INT(engine_submit(e, &q, &id, &err), 0);
    CHECK_EQ_INT(wait_all(e, &id, &res, 1, 5.0), 0);
    CHECK_EQ_INT(res.fin.finish, ENGINE_FINISH_LENGTH);
    CHECK_EQ_INT(res.fin.n_generated, 3);
    engine_free(e, 1.0);
}

// An end-of-generation token ends the request with STOP and is not sent as a TOKEN.
static void test_eog_stop(void) {
    int k = 5;
    while (k < 20) { // a token of the reference output that does not occur before position k
        int seen = 0;
        for (int j = 0; j < k; j++) seen |= g_ref[0].toks[j] == g_ref[0].toks[k];
        if (!seen) break;
        k++;
    }
    CHECK(k < 20);
    g_eog = g_ref[0].toks[k];
    engine *e = make_engine(64, 4, 16, 64, 0);
    g_eog = 2;
    result res;
    memset(&res, 0, sizeof res);
    engine_req q;
    memset(&q, 0, sizeof q);
    q.prompt = malloc((size_t)g_lens[0] * sizeof(int32_t));
    memcpy(q.prompt, g_prompts[0], (size_t)g_lens[0] * sizeof(int32_t));
    q.n_prompt = g_lens[0];
    q.max_tokens = 24;
    samp_params_default(&q.sp);
    q.user = &res;
    uint64_t id;
    tc_err err;
    CHECK_EQ_INT(engine_submit(e, &q, &id, &err), 0);
    CHECK_EQ_INT(wait_all(e, &id, &res, 1, 5.0), 0);
    CHECK_EQ_INT(res.fin.finish, ENGINE_FINISH_STOP);
    CHECK_EQ_INT(res.n, k);
    CHECK_EQ_INT(res.fin.n_generated, k + 1);
    CHECK(!memcmp(res.toks, g_ref[0].toks, (size_t)k * sizeof(int32_t)));
    engine_free(e, 1.0);
}

// engine_stop with a grace period lets requests in flight finish normally; events stay pollable.
static void test_graceful_stop(void) {
    engine *e = make_engine(64, 4, 16, 64, 0);
    result res[2];
    memset(res, 0, sizeof res);
    uint64_t ids[2];
    for (int i = 0; i < 2; i++) {
        engine_req q;
        memset(&q, 0, sizeof q);
        q.prompt = malloc((size_t)g_lens[i] * sizeof(int32_t));
        memcpy(q.prompt, g_prompts[i], (size_t)g_lens[i] * sizeof(int32_t));
        q.n_prompt = g_lens[i];
        q.max_tokens = 24;
        samp_params_default(&q.sp);
        q.ignore_eos = 1;
        q.user = &res[i];
        tc_err err;
        CHECK_EQ_INT(engine_submit(e, &q, &ids[i], &err), 0);
    }
    engine_stop(e, 30.0);
    CHECK_EQ_INT(wait_all(e, ids, res, 2, 10.0), 0);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(res[i].fin.finish, ENGINE_FINISH_LENGTH);
        CHECK(res[i].n == 24 && !memcmp(res[i].toks, g_ref[i].toks, 24 * sizeof(int32_t)));
    }
    double t0 = tc_now();
    engine_free(e, 30.0);
    CHECK(tc_now() - t0 < 1.0);
}

static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

// An idle engine sleeps: no CPU burnt while there is no work (before and after a request).
static void test_idle_sleeps(void) {
    engine *e = make_engine(64, 4, 16, 64, 0);
    usleep(50000);
    double c0 = cpu_seconds();
    usleep(300000);
    double idle1 = cpu_seconds() - c0;
    result res;
    run_all(e, g_prompts, g_lens, 1, 8, &res);
    usleep(50000);
    c0 = cpu_seconds();
    usleep(300000);
    double idle2 = cpu_seconds() - c0;
    CHECK_MSG(idle1 < 0.03 && idle2 < 0.03, "CPU time while idle for 0.3 s: %.3f s, %.3f s", idle1, idle2);
    engine_free(e, 1.0);
}

// --max-queue bounds the requests waiting beyond the running slots: with 4 slots and room for 1 waiting, 5
// requests submitted back to back are all admitted (none has been scheduled yet), the 6th is refused.
static void test_queue_counts_waiting_only(void) {
    engine_opts o;
    engine_opts_default(&o);
    o.max_seqs = 4;
    o.max_queue = 1;
    o.ctx_size = 2048;
    o.n_threads = 1;
    engine *e;
    tc_err err;
    CHECK_EQ_INT(engine_new(g_model, &o, &e, &err), 0);
    int32_t p[8];
    make_prompt(p, 8, 5);
    uint64_t id;
    int rcs[6];
    for (int i = 0; i < 6; i++) submit(e, p, 8, 2000, &id, &rcs[i]);
    for (int i = 0; i < 5; i++) CHECK_MSG(rcs[i] == 0, "request %d of 5 refused (rc %d) with 4 free slots", i, rcs[i]);
    CHECK_EQ_INT(rcs[5], TC_ERR_FULL);
    engine_free(e, 0.0);
}

static void test_queue_and_shutdown(void) {
    engine_opts o;
    engine_opts_default(&o);
    o.max_seqs = 1;
    o.max_queue = 2;
    o.ctx_size = 2048;
    o.n_threads = 1;
    engine *e;
    tc_err err;
    CHECK_EQ_INT(engine_new(g_model, &o, &e, &err), 0);
    int32_t p[8];
    make_prompt(p, 8, 5);
    uint64_t ids[6];
    int n_ok = 0, n_full = 0;
    for (int i = 0; i < 6; i++) {
        int rc;
        submit(e, p, 8, 2000, &ids[n_ok], &rc);
        if (rc == 0) n_ok++;
        else if (rc == TC_ERR_FULL) n_full++;
    }
    CHECK_MSG(n_full >= 3 && n_ok >= 2 && n_ok <= 3, "accepted %d, refused %d with max_queue 2, max_seqs 1", n_ok,
              n_full);
    engine_stop(e, 0.0); // cut at once: everything in flight ends with SHUTDOWN
    int rc;
    submit(e, p, 8, 4, &ids[5], &rc);
    CHECK_EQ_INT(rc, TC_ERR_FULL);
    result res[6];
    memset(res, 0, sizeof res);
    // events carry user NULL here; match by id only
    double t_end = tc_now() + 5.0;
    int left = n_ok;
    while (left > 0 && tc_now() < t_end) {
        engine_event ev[16];
        int k = engine_poll(e, ev, 16);
        for (int j = 0; j < k; j++)
            if (ev[j].type == ENGINE_EV_FINISH) {
                CHECK_MSG(ev[j].finish == ENGINE_FINISH_SHUTDOWN, "finish %s", engine_finish_name(ev[j].finish));
                left--;
            }
        if (!k) usleep(1000);
    }
    CHECK_EQ_INT(left, 0);
    engine_free(e, 0.0);
}

int main(void) {
    tc_err err;
    if (model_load(MODEL, &g_model, &err)) {
        fprintf(stderr, "cannot load %s: %s\n", MODEL, err.msg);
        return 1;
    }
    void (*tests[])(void) = {make_reference, test_batch_invariance, test_prefix_cache, test_preemption,
                             test_cancel_deadline, test_validation, test_eog_stop, test_graceful_stop, test_idle_sleeps, test_queue_and_shutdown,
                             test_queue_counts_waiting_only};
    const char *names[] = {"reference", "batch_invariance", "prefix_cache", "preemption",
                           "cancel_deadline", "validation", "eog_stop", "graceful_stop", "idle_sleeps", "queue_and_shutdown",
                           "queue_waiting_only"};
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        double t0 = tc_now();
        tests[i]();
        printf("%-20s %.2f s\n", names[i], tc_now() - t0);
    }
    model_free(g_model);
    TEST_MAIN_END();
}
