// Metrics: histogram bucketing, Prometheus exposition text, rolling-window percentiles against a
// brute-force reference, per-second rates.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics.h"
#include "test_util.h"

static int has_line(const char *text, const char *line) {
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)); p++)
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == 0)) return 1;
    return 0;
}

#define CHECK_LINE(text, line) CHECK_MSG(has_line(text, line), "missing line '%s' in:\n%s", line, text)

static void test_exposition(void) {
    metrics *m = metrics_new();
    CHECK(m != NULL);
    metric *c1 = metrics_add(m, METRIC_COUNTER, "tachyon:request_success_total", "finish_reason=\"stop\"",
                             "Finished requests", NULL, 0);
    metric *c2 = metrics_add(m, METRIC_COUNTER, "tachyon:request_success_total", "finish_reason=\"length\"",
                             "Finished requests", NULL, 0);
    metric *g = metrics_add(m, METRIC_GAUGE, "tachyon:num_requests_running", NULL, "Running", NULL, 0);
    double b[] = {0.1, 0.5, 1.0};
    metric *h = metrics_add(m, METRIC_HISTOGRAM, "tachyon:e2e_request_latency_seconds", NULL, "E2E", b, 3);
    double bad[] = {1.0, 0.5};
    CHECK(metrics_add(m, METRIC_HISTOGRAM, "x", NULL, "", bad, 2) == NULL); // bounds must ascend
    CHECK(c1 && c2 && g && h);
    CHECK(metrics_find(m, "tachyon:request_success_total", "finish_reason=\"length\"") == c2);
    CHECK(metrics_find(m, "nope", NULL) == NULL);
    metric_inc(c1, 3);
    metric_inc(c2, 1);
    metric_set(g, 7);
    metric_observe(h, 0.05);
    metric_observe(h, 0.1); // le is inclusive
    metric_observe(h, 0.7);
    metric_observe(h, 5.0);
    metric_observe(h, NAN); // ignored
    char *t = NULL;
    size_t len = 0;
    CHECK(metrics_render(m, &t, &len) == 0);
    CHECK_EQ_INT(len, strlen(t));
    CHECK_LINE(t, "# TYPE tachyon:request_success_total counter");
    CHECK_LINE(t, "tachyon:request_success_total{finish_reason=\"stop\"} 3");
    CHECK_LINE(t, "tachyon:request_success_total{finish_reason=\"length\"} 1");
    CHECK_LINE(t, "# TYPE tachyon:num_requests_running gauge");
    CHECK_LINE(t, "tachyon:num_requests_running 7");
    CHECK_LINE(t, "# TYPE tachyon:e2e_request_latency_seconds histogram");
    CHECK_LINE(t, "tachyon:e2e_request_latency_seconds_bucket{le=\"0.1\"} 2");
    CHECK_LINE(t, "tachyon:e2e_request_latency_seconds_bucket{le=\"0.5\"} 2");
    CHECK_LINE(t, "tachyon:e2e_request_latency_seconds_bucket{le=\"1\"} 3");
    CHECK_LINE(t, "tachyon:e2e_request_latency_seconds_bucket{le=\"+Inf\"} 4");
    CHECK_LINE(t, "tachyon:e2e_request_latency_seconds_count 4");
    CHECK_LINE(t, "tachyon:e2e_request_latency_seconds_sum 5.85");
    // HELP/TYPE once per name
    const char *p = strstr(t, "# TYPE tachyon:request_success_total");
    CHECK(p && !strstr(p + 1, "# TYPE tachyon:request_success_total"));
    free(t);
    metrics_free(m);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void test_window(void) {
    mwindow w;
    CHECK(mwindow_init(&w, 100, NULL) == 0);
    double qs[3] = {0.5, 0.95, 0.99}, out[3];
    CHECK_EQ_INT(mwindow_percentiles(&w, 10, 60, qs, 3, out), 0);
    CHECK(isnan(out[0]));
    // 150 samples at t = 0..149 (one per second), values pseudo-random; capacity 100 keeps the last 100.
    double vals[150];
    unsigned s = 12345;
    for (int i = 0; i < 150; i++) {
        s = s * 1103515245u + 12345u;
        vals[i] = (double)(s >> 8 & 0xffff) / 1000.0;
        mwindow_add(&w, i, vals[i]);
    }
    double spans[3] = {30, 60, 1000};
    for (int k = 0; k < 3; k++) {
        double now = 149.5;
        double ref[150];
        int n = 0;
        for (int i = 50; i < 150; i++) // ring holds t=50..149
            if (i > now - spans[k]) ref[n++] = vals[i];
        qsort(ref, (size_t)n, sizeof(double), cmp_d);
        int got = mwindow_percentiles(&w, now, spans[k], qs, 3, out);
        CHECK_EQ_INT(got, n);
        for (int q = 0; q < 3; q++) {
            int r = (int)ceil(qs[q] * n) - 1;
            CHECK_MSG(out[q] == ref[r], "span %g q %g: %g vs %g", spans[k], qs[q], out[q], ref[r]);
        }
    }
    mwindow_free(&w);
}

static void test_rate(void) {
    mrate r;
    mrate_init(&r);
    CHECK_NEAR(mrate_per_sec(&r, 100.5, 10), 0, 0);
    for (int t = 90; t <= 100; t++) mrate_add(&r, t + 0.25, 20); // 20 events per second
    // window of 10 s ending at 100.5 covers seconds 91..100: 200 events over 9.5 s
    CHECK_NEAR(mrate_per_sec(&r, 100.5, 10), 200.0 / 9.5, 1e-9);
    // after the ring wraps, old seconds do not count
    CHECK_NEAR(mrate_per_sec(&r, 100.5 + MRATE_SECONDS, 10), 0, 0);
}

int main(void) {
    test_exposition();
    test_window();
    test_rate();
    TEST_MAIN_END();
}
