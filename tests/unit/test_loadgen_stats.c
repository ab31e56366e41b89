// bench-serve math and parsing: percentiles, TPOT, goodput and summaries on fixed arrays (hand-computed
// expectations in the comments), the SSE parser fed with the same stream split at every byte, chunk JSON,
// the arrival-time generator and workload determinism.
#include <jansson.h>
#include <string.h>

#include "loadgen/lg_rng.h"
#include "loadgen/lg_sse.h"
#include "loadgen/lg_stats.h"
#include "loadgen/lg_workload.h"
#include "test_util.h"

static void test_percentile(void) {
    const double v[] = {1, 2, 3, 4};
    CHECK_NEAR(lg_percentile(v, 4, 0), 1, 1e-12);
    CHECK_NEAR(lg_percentile(v, 4, 50), 2.5, 1e-12);  // rank 1.5
    CHECK_NEAR(lg_percentile(v, 4, 90), 3.7, 1e-12);  // rank 2.7 -> 3 + 0.7
    CHECK_NEAR(lg_percentile(v, 4, 99), 3.97, 1e-12); // rank 2.97
    CHECK_NEAR(lg_percentile(v, 4, 100), 4, 1e-12);
    const double one[] = {7};
    CHECK_NEAR(lg_percentile(one, 1, 99), 7, 1e-12);
    // 100..190 ms, each twice (the integration test's TTFT script): p50 = 145, p90 = 181, p99 = 190.
    double s[20];
    for (int i = 0; i < 20; i++) s[i] = (100 + 10 * (i / 2)) * 1e-3;
    lg_dist d;
    CHECK_EQ_INT(lg_dist_compute(&d, s, 20), 0);
    CHECK_EQ_INT(d.n, 20);
    CHECK_NEAR(d.mean, 145, 1e-9);
    CHECK_NEAR(d.median, 145, 1e-9);
    CHECK_NEAR(d.p90, 181, 1e-9);
    CHECK_NEAR(d.p95, 190, 1e-9); // rank 18.05, both neighbours 190
    CHECK_NEAR(d.p99, 190, 1e-9);
    CHECK_NEAR(d.min, 100, 1e-9);
    CHECK_NEAR(d.max, 190, 1e-9);
    CHECK_NEAR(d.std, sqrt(825.0), 1e-9); // population variance of 100..190 step 10 = 825
    // Unsorted input gives the same answer.
    double u[] = {0.004, 0.001, 0.003, 0.002};
    CHECK_EQ_INT(lg_dist_compute(&d, u, 4), 0);
    CHECK_NEAR(d.median, 2.5, 1e-9);
    CHECK_EQ_INT(lg_dist_compute(&d, u, 0), 0);
    CHECK_EQ_INT(d.n, 0);
}

static lg_record rec(int64_t index, int ok, double t_send, double t_first, double t_end, int64_t out) {
    lg_record r;
    memset(&r, 0, sizeof r);
    r.index = index, r.ok = ok, r.t_send = t_send, r.t_first = t_first, r.t_end = t_end;
    r.output_tokens = out, r.input_tokens = 10, r.usage_from_server = 1;
    lg_record_finalize(&r);
    return r;
}

static void test_tpot_goodput(void) {
    // Sent at 1.0 s, first token at 1.1, last at 1.28, 10 tokens: TTFT 100 ms, E2E 280 ms, TPOT 180/9 = 20 ms.
    lg_record r = rec(0, 1, 1.0, 1.1, 1.28, 10);
    CHECK_NEAR(r.ttft, 0.100, 1e-12);
    CHECK_NEAR(r.e2e, 0.280, 1e-12);
    CHECK_NEAR(r.tpot, 0.020, 1e-12);
    lg_record one = rec(1, 1, 0, 0.05, 0.05, 1);
    CHECK_NEAR(one.tpot, 0, 1e-15); // one token: no TPOT

    lg_record rs[6] = {
        rec(0, 1, 0.0, 0.10, 0.28, 10), // ttft 100, tpot 20, e2e 280
        rec(1, 1, 0.0, 0.20, 0.38, 10), // ttft 200, tpot 20, e2e 380
        rec(2, 1, 0.0, 0.10, 0.46, 10), // ttft 100, tpot 40, e2e 460
        rec(3, 1, 0.0, 0.05, 0.05, 1),  // ttft 50, 1 token (tpot counts as 0 for goodput, not in TPOT stats)
        rec(4, 0, 0.0, -1, 0.30, 0),    // failed
        rec(-1, 1, 0.0, 0.9, 0.99, 10), // warmup: ignored
    };
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 9; k++) CHECK_EQ_INT(lg_record_push_itl(&rs[i], i == 2 ? 0.040 : 0.020), 0);
    lg_slo slo;
    tc_err err = {0};
    CHECK_EQ_INT(lg_slo_parse(&slo, "ttft=150,tpot=25", &err), 0);
    CHECK_NEAR(slo.ttft_ms, 150, 0);
    CHECK_NEAR(slo.tpot_ms, 25, 0);
    CHECK_NEAR(slo.e2e_ms, 0, 0);
    lg_summary s = {0};
    CHECK_EQ_INT(lg_summarize(&s, rs, 6, 2.0, &slo, &err), 0);
    CHECK_EQ_INT(s.completed, 4);
    CHECK_EQ_INT(s.failed, 1);
    CHECK_EQ_INT(s.total_input, 40);
    CHECK_EQ_INT(s.total_output, 31);
    CHECK_NEAR(s.req_throughput, 2.0, 1e-12);
    CHECK_NEAR(s.output_throughput, 15.5, 1e-12);
    CHECK_NEAR(s.total_throughput, 35.5, 1e-12);
    // Good: #0 (100 ms, 20 ms) and #3 (50 ms, 1 token). #1 misses TTFT, #2 misses TPOT.
    CHECK_EQ_INT(s.good, 2);
    CHECK_NEAR(s.goodput, 1.0, 1e-12);
    CHECK_EQ_INT(s.ttft.n, 4);
    CHECK_NEAR(s.ttft.mean, 112.5, 1e-9);   // (100+200+100+50)/4
    CHECK_NEAR(s.ttft.median, 100, 1e-9);   // sorted 50,100,100,200
    CHECK_EQ_INT(s.tpot.n, 3);
    CHECK_NEAR(s.tpot.mean, 80.0 / 3, 1e-9); // (20+20+40)/3
    CHECK_NEAR(s.tpot.p99, 39.6, 1e-9);      // sorted 20,20,40; rank 1.98 -> 20 + 0.98*20
    CHECK_EQ_INT(s.itl.n, 27);
    CHECK_NEAR(s.itl.mean, (18 * 20.0 + 9 * 40.0) / 27, 1e-9);
    CHECK_NEAR(s.e2e.max, 460, 1e-9);
    CHECK(lg_slo_parse(&slo, "ttft=abc", &err) != 0);
    CHECK(lg_slo_parse(&slo, "latency=5", &err) != 0);
    CHECK(lg_slo_parse(&slo, "ttft=-1", &err) != 0);
    // No SLO: goodput not reported.
    CHECK_EQ_INT(lg_summarize(&s, rs, 6, 2.0, NULL, &err), 0);
    CHECK_EQ_INT(s.has_slo, 0);
    for (int i = 0; i < 6; i++) lg_record_free(&rs[i]);
}

// --- SSE

typedef struct {
    char events[16][256];
    int n;
} sink;

static int on_ev(void *ud, const char *data, size_t len) {
    sink *s = ud;
    if (s->n < 16) snprintf(s->events[s->n], sizeof s->events[0], "%.*s", (int)len, data);
    s->n++;
    return 0;
}

static const char STREAM[] =
    ": keep-alive comment\r\n"
    "data: {\"id\":\"a\",\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\r\n\r\n"
    "event: message\n"
    "data:{\"x\":1}\n\n"
    "data: line1\n"
    "data: line2\n"
    "\n"
    "id: 7\n"
    "\n" // an event without data: nothing dispatched
    "data: [DONE]\n\n"
    "data: tail-without-blank-line";

static const char *const EXPECT[] = {
    "{\"id\":\"a\",\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}", "{\"x\":1}", "line1\nline2", "[DONE]",
    "tail-without-blank-line"};

static void check_sink(const sink *s, const char *how, size_t cut) {
    CHECK_MSG(s->n == 5, "%s at %zu: %d events", how, cut, s->n);
    for (int i = 0; i < 5 && i < s->n; i++)
        CHECK_MSG(!strcmp(s->events[i], EXPECT[i]), "%s at %zu: event %d '%s' != '%s'", how, cut, i, s->events[i],
                  EXPECT[i]);
}

static void test_sse_split(void) {
    size_t n = strlen(STREAM);
    int bad = 0;
    for (size_t cut = 0; cut <= n; cut++) { // two pieces, split at every byte
        sink s = {0};
        lg_sse p;
        lg_sse_init(&p, on_ev, &s);
        tc_err err = {0};
        int rc = lg_sse_feed(&p, STREAM, cut, &err) | lg_sse_feed(&p, STREAM + cut, n - cut, &err) |
                 lg_sse_finish(&p, &err);
        lg_sse_free(&p);
        int before = tu_fail;
        CHECK_EQ_INT(rc, 0);
        check_sink(&s, "split", cut);
        if (tu_fail != before) bad++;
        if (bad > 3) break;
    }
    { // one byte at a time
        sink s = {0};
        lg_sse p;
        lg_sse_init(&p, on_ev, &s);
        for (size_t i = 0; i < n; i++) CHECK_EQ_INT(lg_sse_feed(&p, STREAM + i, 1, NULL), 0);
        CHECK_EQ_INT(lg_sse_finish(&p, NULL), 0);
        lg_sse_free(&p);
        check_sink(&s, "bytewise", 0);
    }
    { // CR-only line endings, and a CRLF whose CR and LF arrive in different feeds
        sink s = {0};
        lg_sse p;
        lg_sse_init(&p, on_ev, &s);
        CHECK_EQ_INT(lg_sse_feed(&p, "data: a\r\r", 9, NULL), 0);
        CHECK_EQ_INT(lg_sse_feed(&p, "data: b\r", 8, NULL), 0);
        CHECK_EQ_INT(lg_sse_feed(&p, "\n\r", 2, NULL), 0);
        CHECK_EQ_INT(lg_sse_feed(&p, "\n", 1, NULL), 0);
        lg_sse_free(&p);
        CHECK_EQ_INT(s.n, 2);
        CHECK(!strcmp(s.events[0], "a"));
        CHECK(!strcmp(s.events[1], "b"));
    }
    { // an over-long line is an error, not a crash
        sink s = {0};
        lg_sse p;
        lg_sse_init(&p, on_ev, &s);
        p.max_len = 16;
        tc_err err = {0};
        CHECK_EQ_INT(lg_sse_feed(&p, "data: 0123456789abcdefghij", 26, &err), TC_ERR_FORMAT);
        CHECK(strstr(err.msg, "malformed SSE") != NULL);
        lg_sse_free(&p);
    }
}

static void test_chunk(void) {
    lg_chunk c;
    tc_err err = {0};
    const char *chat = "{\"id\":\"x1\",\"choices\":[{\"delta\":{\"content\":\"Hello\"}}],\"usage\":null}";
    CHECK_EQ_INT(lg_chunk_parse(&c, chat, strlen(chat), 1, &err), 0);
    CHECK_EQ_INT(c.content_len, 5);
    CHECK(c.content && !memcmp(c.content, "Hello", 5));
    CHECK(c.id && !strcmp(c.id, "x1"));
    CHECK_EQ_INT(c.has_usage, 0);
    lg_chunk_clear(&c);
    const char *role = "{\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}";
    CHECK_EQ_INT(lg_chunk_parse(&c, role, strlen(role), 1, &err), 0);
    CHECK_EQ_INT(c.content_len, 0);
    lg_chunk_clear(&c);
    const char *cmpl = "{\"choices\":[{\"text\":\" world\"}]}";
    CHECK_EQ_INT(lg_chunk_parse(&c, cmpl, strlen(cmpl), 0, &err), 0);
    CHECK_EQ_INT(c.content_len, 6);
    lg_chunk_clear(&c);
    const char *usage = "{\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":34}}";
    CHECK_EQ_INT(lg_chunk_parse(&c, usage, strlen(usage), 1, &err), 0);
    CHECK_EQ_INT(c.has_usage, 1);
    CHECK_EQ_INT(c.prompt_tokens, 12);
    CHECK_EQ_INT(c.completion_tokens, 34);
    lg_chunk_clear(&c);
    CHECK_EQ_INT(lg_chunk_parse(&c, "[DONE]", 6, 1, &err), 0);
    CHECK_EQ_INT(c.done, 1);
    lg_chunk_clear(&c);
    CHECK_EQ_INT(lg_chunk_parse(&c, "{nope", 5, 1, &err), TC_ERR_FORMAT);
    const char *e = "{\"error\":{\"message\":\"overloaded\"}}";
    CHECK_EQ_INT(lg_chunk_parse(&c, e, strlen(e), 1, &err), TC_ERR_FORMAT);
    CHECK(strstr(err.msg, "overloaded") != NULL);
}

static void test_rng(void) {
    lg_rng a, b;
    lg_rng_seed(&a, 42, 1);
    lg_rng_seed(&b, 42, 1);
    for (int i = 0; i < 100; i++) CHECK_EQ_INT(lg_rng_u64(&a) == lg_rng_u64(&b), 1);
    // Inter-arrival means: 1/rate for every burstiness; the variance is 1/(rate^2 * shape).
    const double shapes[] = {0.5, 1.0, 4.0};
    for (int s = 0; s < 3; s++) {
        lg_rng_seed(&a, 7, 3);
        double sum = 0, sq = 0;
        const int n = 40000;
        for (int i = 0; i < n; i++) {
            double x = lg_rng_interarrival(&a, 10.0, shapes[s]);
            sum += x, sq += x * x;
        }
        double mean = sum / n, var = sq / n - mean * mean;
        CHECK_MSG(fabs(mean - 0.1) < 0.003, "shape %g: mean %g", shapes[s], mean);
        CHECK_MSG(fabs(var / (0.01 / shapes[s]) - 1) < 0.08, "shape %g: var %g", shapes[s], var);
    }
    CHECK_NEAR(lg_rng_interarrival(&a, INFINITY, 1), 0, 0);
}

static void test_workload(void) {
    lg_wl_cfg c = {.kind = LG_DS_RANDOM, .input_len = 50, .output_len = 20, .num_groups = 2, .turns = 3,
                      .chat = 1, .model = "m", .seed = 5, .ignore_eos = 1};
    lg_workload *w = NULL;
    tc_err err = {0};
    CHECK_EQ_INT(lg_workload_init(&w, &c, &err), 0);
    char *b1 = NULL, *b2 = NULL;
    int64_t est = 0;
    CHECK_EQ_INT(lg_workload_body(w, 3, &b1, &est, &err), 0);
    CHECK_EQ_INT(lg_workload_body(w, 3, &b2, &est, &err), 0);
    CHECK(b1 && b2 && !strcmp(b1, b2)); // deterministic
    json_t *j = json_loads(b1, 0, NULL);
    const char *content = json_string_value(json_object_get(json_array_get(json_object_get(j, "messages"), 0), "content"));
    int words = 0;
    for (const char *p = content; p && *p; p++) words += *p == ' ';
    CHECK_EQ_INT(words + 1, 50);
    CHECK_EQ_INT(json_integer_value(json_object_get(j, "max_tokens")), 20);
    CHECK_EQ_INT(json_integer_value(json_object_get(j, "min_tokens")), 20);
    CHECK(json_is_true(json_object_get(j, "ignore_eos")));
    CHECK(json_is_true(json_object_get(json_object_get(j, "stream_options"), "include_usage")));
    json_decref(j);
    free(b1), free(b2);
    lg_workload_free(w);

    c.kind = LG_DS_MULTI_TURN; // slots = num_groups 2: idx 0,1 first turns; 2 depends on 0, 4 on 2; 6 restarts
    CHECK_EQ_INT(lg_workload_init(&w, &c, &err), 0);
    CHECK_EQ_INT(lg_workload_depends_on(w, 1), -1);
    CHECK_EQ_INT(lg_workload_depends_on(w, 2), 0);
    CHECK_EQ_INT(lg_workload_depends_on(w, 5), 3);
    CHECK_EQ_INT(lg_workload_depends_on(w, 6), -1);
    CHECK_EQ_INT(lg_workload_complete(w, 0, "ANSWER0", 7, &err), 0);
    CHECK_EQ_INT(lg_workload_body(w, 2, &b1, &est, &err), 0);
    j = json_loads(b1, 0, NULL);
    json_t *msgs = json_object_get(j, "messages");
    CHECK_EQ_INT(json_array_size(msgs), 3); // user, assistant, user
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(msgs, 1), "content")), "ANSWER0"));
    json_decref(j);
    free(b1);
    lg_workload_free(w);
}

int main(void) {
    test_percentile();
    test_tpot_goodput();
    test_sse_split();
    test_chunk();
    test_rng();
    test_workload();
    TEST_MAIN_END();
}
