#include "loadgen/lg_report.h"
#include "loadgen/lg_model.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

// --- console

static void row_f(FILE *f, const char *k, double v) { fprintf(f, "%-40s%10.2f\n", k, v); }
static void row_i(FILE *f, const char *k, long long v) { fprintf(f, "%-40s%10lld\n", k, v); }

static void banner(FILE *f, const char *t) {
    int len = (int)strlen(t), left = (50 - len - 2) / 2, right = 50 - len - 2 - left;
    fprintf(f, "%.*s %s %.*s\n", left, "==================================================", t, right,
            "==================================================");
}
static void sub(FILE *f, const char *t) {
    int len = (int)strlen(t), left = (50 - len - 2) / 2, right = 50 - len - 2 - left;
    fprintf(f, "%.*s %s %.*s\n", left, "--------------------------------------------------", t, right,
            "--------------------------------------------------");
}

static void dist_block(FILE *f, const char *name, const char *title, const lg_dist *d) {
    char k[64];
    sub(f, title);
    snprintf(k, sizeof k, "Mean %s (ms):", name), row_f(f, k, d->mean);
    snprintf(k, sizeof k, "Median %s (ms):", name), row_f(f, k, d->median);
    snprintf(k, sizeof k, "P90 %s (ms):", name), row_f(f, k, d->p90);
    snprintf(k, sizeof k, "P95 %s (ms):", name), row_f(f, k, d->p95);
    snprintf(k, sizeof k, "P99 %s (ms):", name), row_f(f, k, d->p99);
}

void lg_print_table(FILE *f, const lg_result *r, const lg_slo *slo) {
    const lg_summary *s = &r->sum;
    char t[128];
    snprintf(t, sizeof t, "Serving Benchmark Result%s%s%s%s", r->label[0] ? " " : "", r->label,
             r->server[0] ? " server " : "", r->server);
    banner(f, t);
    row_i(f, "Successful requests:", (long long)s->completed);
    row_i(f, "Failed requests:", (long long)s->failed);
    row_i(f, "Max concurrent requests:", s->max_inflight);
    row_f(f, "Benchmark duration (s):", s->duration);
    row_i(f, "Total input tokens:", (long long)s->total_input);
    row_i(f, "Total generated tokens:", (long long)s->total_output);
    row_f(f, "Request throughput (req/s):", s->req_throughput);
    if (s->has_slo) row_f(f, "Request goodput (req/s):", s->goodput);
    row_f(f, "Output token throughput (tok/s):", s->output_throughput);
    row_f(f, "Total token throughput (tok/s):", s->total_throughput);
    if (s->pred_reported) {
        row_i(f, "Accepted prediction tokens:", (long long)s->accepted_pred);
        row_i(f, "Rejected prediction tokens:", (long long)s->rejected_pred);
    }
    dist_block(f, "TTFT", "Time to First Token", &s->ttft);
    dist_block(f, "TPOT", "Time per Output Token (excl. 1st token)", &s->tpot);
    dist_block(f, "ITL", "Inter-token Latency", &s->itl);
    dist_block(f, "E2EL", "End-to-end Latency", &s->e2e);
    fprintf(f, "%.*s\n", 50, "==================================================");
    if (s->has_slo && slo)
        fprintf(f, "goodput SLOs: ttft<=%g ms, tpot<=%g ms, e2e<=%g ms (0 = not set)\n", slo->ttft_ms, slo->tpot_ms,
                slo->e2e_ms);
    if (s->completed && s->usage_from_server < s->completed)
        fprintf(f,
                "note: %zu of %zu completed requests had no usage from the server; their output tokens are counted "
                "as content chunks and input tokens are the workload's estimate\n",
                s->completed - s->usage_from_server, s->completed);
    if (r->cls.n) {
        fprintf(f, "%-14s%8s%8s%8s%12s%12s%12s\n", "class", "ok", "failed", "good", "goodput/s", "TTFT p50", "TTFT p99");
        for (int k = 0; k < r->cls.n; k++) {
            const lg_class_sum *c = &r->cls.c[k];
            fprintf(f, "%-14s%8zu%8zu%8zu%12.2f%12.2f%12.2f\n", c->name, c->completed, c->failed, c->good, c->goodput,
                    c->ttft.median, c->ttft.p99);
        }
    }
    size_t shown = 0;
    for (size_t i = 0; i < r->run.n && shown < 5; i++)
        if (r->run.recs[i].index >= 0 && !r->run.recs[i].ok)
            fprintf(f, "failed request %lld: %s\n", (long long)r->run.recs[i].index,
                    r->run.recs[i].error ? r->run.recs[i].error : "?"),
                shown++;
}

static void cmp_row(FILE *f, const char *k, double a, double b) {
    if (a != 0) fprintf(f, "%-36s%12.2f%12.2f%9.3fx\n", k, a, b, b / a);
    else fprintf(f, "%-36s%12.2f%12.2f%10s\n", k, a, b, "-");
}

static void cmp_dist(FILE *f, const char *name, const lg_dist *a, const lg_dist *b) {
    char k[64];
    snprintf(k, sizeof k, "Mean %s (ms):", name), cmp_row(f, k, a->mean, b->mean);
    snprintf(k, sizeof k, "Median %s (ms):", name), cmp_row(f, k, a->median, b->median);
    snprintf(k, sizeof k, "P90 %s (ms):", name), cmp_row(f, k, a->p90, b->p90);
    snprintf(k, sizeof k, "P95 %s (ms):", name), cmp_row(f, k, a->p95, b->p95);
    snprintf(k, sizeof k, "P99 %s (ms):", name), cmp_row(f, k, a->p99, b->p99);
}

void lg_print_compare(FILE *f, const lg_result *ra, const lg_result *rb, const lg_slo *slo) {
    const lg_summary *a = &ra->sum, *b = &rb->sum;
    char t[128];
    snprintf(t, sizeof t, "Serving Benchmark Comparison%s%s", ra->label[0] ? " " : "", ra->label);
    fprintf(f, "%.*s %s %.*s\n", 10, "==========", t, 10, "==========");
    fprintf(f, "A = %s\nB = %s\n", ra->url, rb->url);
    fprintf(f, "%-36s%12s%12s%10s\n", "", "A", "B", "B/A");
    cmp_row(f, "Successful requests:", (double)a->completed, (double)b->completed);
    cmp_row(f, "Failed requests:", (double)a->failed, (double)b->failed);
    cmp_row(f, "Benchmark duration (s):", a->duration, b->duration);
    cmp_row(f, "Total input tokens:", (double)a->total_input, (double)b->total_input);
    cmp_row(f, "Total generated tokens:", (double)a->total_output, (double)b->total_output);
    cmp_row(f, "Request throughput (req/s):", a->req_throughput, b->req_throughput);
    if (a->has_slo) cmp_row(f, "Request goodput (req/s):", a->goodput, b->goodput);
    cmp_row(f, "Output token throughput (tok/s):", a->output_throughput, b->output_throughput);
    cmp_row(f, "Total token throughput (tok/s):", a->total_throughput, b->total_throughput);
    cmp_dist(f, "TTFT", &a->ttft, &b->ttft);
    cmp_dist(f, "TPOT", &a->tpot, &b->tpot);
    cmp_dist(f, "ITL", &a->itl, &b->itl);
    cmp_dist(f, "E2EL", &a->e2e, &b->e2e);
    (void)slo;
}

// --- JSON

static json_t *dist_json(const lg_dist *d) {
    return json_pack("{s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "n", (json_int_t)d->n, "mean_ms", d->mean,
                     "std_ms", d->std, "median_ms", d->median, "p90_ms", d->p90, "p95_ms", d->p95, "p99_ms", d->p99,
                     "min_ms", d->min, "max_ms", d->max);
}

static json_t *summary_json(const lg_summary *s) {
    json_t *o = json_pack("{s:I, s:I, s:f, s:I, s:I, s:f, s:f, s:f, s:I, s:i}", "completed", (json_int_t)s->completed,
                          "failed", (json_int_t)s->failed, "duration_s", s->duration, "total_input_tokens",
                          (json_int_t)s->total_input, "total_output_tokens", (json_int_t)s->total_output,
                          "request_throughput", s->req_throughput, "output_throughput", s->output_throughput,
                          "total_token_throughput", s->total_throughput, "usage_from_server",
                          (json_int_t)s->usage_from_server, "max_inflight", s->max_inflight);
    if (!o) return NULL;
    if (s->pred_reported) {
        json_object_set_new(o, "accepted_prediction_tokens", json_integer((json_int_t)s->accepted_pred));
        json_object_set_new(o, "rejected_prediction_tokens", json_integer((json_int_t)s->rejected_pred));
    }
    if (s->has_slo) {
        json_object_set_new(o, "goodput", json_real(s->goodput));
        json_object_set_new(o, "good_requests", json_integer((json_int_t)s->good));
    } else {
        json_object_set_new(o, "goodput", json_null());
    }
    json_object_set_new(o, "ttft", dist_json(&s->ttft));
    json_object_set_new(o, "tpot", dist_json(&s->tpot));
    json_object_set_new(o, "itl", dist_json(&s->itl));
    json_object_set_new(o, "e2e", dist_json(&s->e2e));
    return o;
}

static json_t *classes_json(const lg_classes *cl) {
    json_t *a = json_array();
    for (int k = 0; a && k < cl->n; k++) {
        const lg_class_sum *c = &cl->c[k];
        json_array_append_new(a, json_pack("{s:s, s:I, s:I, s:I, s:f, s:o}", "class", c->name, "completed",
                                           (json_int_t)c->completed, "failed", (json_int_t)c->failed, "good",
                                           (json_int_t)c->good, "goodput", c->goodput, "ttft", dist_json(&c->ttft)));
    }
    return a;
}

static json_t *record_json(const lg_record *r) {
    json_t *itl = json_array();
    for (size_t i = 0; i < r->n_itl; i++) json_array_append_new(itl, json_real(r->itl[i] * 1e3));
    json_t *o = json_pack("{s:I, s:b, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:I, s:I, s:b, s:o}", "index",
                          (json_int_t)r->index, "ok", r->ok, "http_status", r->http_status, "t_send_s", r->t_send,
                          "t_first_s", r->t_first, "t_end_s", r->t_end, "ttft_ms", r->ttft * 1e3, "tpot_ms",
                          r->tpot * 1e3, "e2e_ms", r->e2e * 1e3, "input_tokens", (json_int_t)r->input_tokens,
                          "output_tokens", (json_int_t)r->output_tokens, "chunks", (json_int_t)r->n_chunks,
                          "usage_from_server", r->usage_from_server, "itl_ms", itl);
    if (!o) return NULL;
    if (r->tenant >= 0) json_object_set_new(o, "tenant", json_integer(r->tenant));
    json_object_set_new(o, "error", r->error ? json_string(r->error) : json_null());
    json_object_set_new(o, "id", r->id ? json_string(r->id) : json_null());
    json_object_set_new(o, "model", r->model ? json_string(r->model) : json_null());
    if (r->routed_model) json_object_set_new(o, "routed_model", json_string(r->routed_model));
    if (r->has_priority) json_object_set_new(o, "priority", json_integer(r->priority));
    if (r->len_class)
        json_object_set_new(o, "length_class", json_string(r->len_class == LG_LEN_LONG ? "long" : "short"));
    if (r->error && !json_is_string(json_object_get(o, "error"))) // not valid UTF-8
        json_object_set_new(o, "error", json_string("(error message not valid UTF-8)"));
    return o;
}

int lg_write_json(const char *path, void *config_json, const lg_result *res, size_t n, tc_err *err) {
    json_t *root = json_object(), *runs = json_array();
    if (!root || !runs) goto oom;
    if (config_json) json_object_set(root, "config", (json_t *)config_json);
    for (size_t i = 0; i < n; i++) {
        json_t *reqs = json_array();
        for (size_t k = 0; k < res[i].run.n; k++) json_array_append_new(reqs, record_json(&res[i].run.recs[k]));
        json_t *run = json_pack("{s:s, s:s, s:s, s:o, s:o}", "label", res[i].label, "server", res[i].server, "url",
                                res[i].url ? res[i].url : "", "summary", summary_json(&res[i].sum), "requests", reqs);
        if (!run) goto oom;
        json_object_set_new(run, "t0_monotonic_s", json_real(res[i].run.t0));
        json_object_set_new(run, "classes", classes_json(&res[i].cls));
        if (res[i].tenants_json) json_object_set(run, "tenants", (json_t *)res[i].tenants_json);
        json_object_set_new(run, "models", lg_model_json(res[i].run.recs, res[i].run.n, res[i].run.duration));
        json_object_set_new(run, "x", isfinite(res[i].x) ? json_real(res[i].x) : json_string("inf"));
        json_array_append_new(runs, run);
    }
    if (n == 1) {
        json_t *r0 = json_array_get(runs, 0);
        json_object_set(root, "summary", json_object_get(r0, "summary"));
        if (json_object_get(r0, "tenants")) json_object_set(root, "tenants", json_object_get(r0, "tenants"));
        json_object_set(root, "models", json_object_get(r0, "models"));
        json_object_set(root, "requests", json_object_get(r0, "requests"));
    }
    json_object_set_new(root, "runs", runs);
    runs = NULL;
    if (json_dump_file(root, path, JSON_INDENT(1) | JSON_REAL_PRECISION(10))) {
        json_decref(root);
        return tc_err_set(err, TC_ERR_IO, "cannot write '%s'", path);
    }
    json_decref(root);
    return 0;
oom:
    json_decref(runs);
    json_decref(root);
    return tc_err_set(err, TC_ERR_NOMEM, "out of memory writing JSON");
}
