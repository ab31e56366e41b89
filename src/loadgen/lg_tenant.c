// Per-tenant keys and breakdown for bench-serve (see lg_tenant.h).
#include "loadgen/lg_tenant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int lg_tenant_add(lg_tenants *t, const char *spec, tc_err *err) {
    if (t->n == LG_MAX_TENANTS) return tc_err_set(err, TC_ERR_INVALID, "--tenant: at most %d tenants", LG_MAX_TENANTS);
    const char *colon = strrchr(spec, ':');
    double w = 1;
    size_t klen = strlen(spec);
    if (colon) {
        char *end;
        w = strtod(colon + 1, &end);
        if (colon[1] == 0 || *end || !(w > 0) || !isfinite(w))
            return tc_err_set(err, TC_ERR_INVALID, "--tenant KEY[:WEIGHT]: bad weight '%s'", colon + 1);
        klen = (size_t)(colon - spec);
    }
    if (klen == 0) return tc_err_set(err, TC_ERR_INVALID, "--tenant KEY[:WEIGHT]: empty key");
    char *key = strndup(spec, klen); // lives as long as the process (a handful of short strings)
    if (!key) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    int i = t->n++;
    t->key[i] = key;
    t->weight[i] = w;
    snprintf(t->name[i], sizeof t->name[i], "t%d (%.5s%s)", i + 1, key, klen > 5 ? "..." : "");
    return 0;
}

int lg_tenant_of(const lg_tenants *t, int64_t idx) {
    if (!t || t->n == 0) return -1;
    double W = 0;
    for (int i = 0; i < t->n; i++) W += t->weight[i];
    uint64_t k = idx < 0 ? (uint64_t)(-idx) : (uint64_t)idx;
    double u = fmod((double)k * 0.6180339887498949, 1.0) * W; // golden-ratio sequence: evenly spread
    for (int i = 0; i < t->n; i++) {
        if (u < t->weight[i]) return i;
        u -= t->weight[i];
    }
    return t->n - 1;
}

// The records of tenant i (shallow copies: the summary only reads them). *out malloc'd.
static size_t subset(const lg_record *recs, size_t n, int i, lg_record **out) {
    *out = malloc((n ? n : 1) * sizeof **out);
    size_t m = 0;
    for (size_t k = 0; *out && k < n; k++)
        if (recs[k].tenant == i) (*out)[m++] = recs[k];
    return m;
}

void lg_tenant_print(FILE *f, const lg_tenants *t, const lg_record *recs, size_t n, double duration) {
    if (!t || t->n == 0) return;
    fprintf(f, "%-18s %6s %9s %6s %8s %10s %10s %10s %10s %10s\n", "Per tenant", "weight", "completed", "failed",
            "req/s", "out tok/s", "TTFT p50", "TTFT p99", "E2EL p50", "E2EL p99");
    for (int i = 0; i < t->n; i++) {
        lg_record *sub;
        size_t m = subset(recs, n, i, &sub);
        lg_summary s;
        tc_err err;
        if (!sub || lg_summarize(&s, sub, m, duration, NULL, &err)) {
            free(sub);
            continue;
        }
        fprintf(f, "%-18s %6g %9zu %6zu %8.2f %10.1f %10.2f %10.2f %10.2f %10.2f\n", t->name[i], t->weight[i],
                s.completed, s.failed, s.req_throughput, s.output_throughput, s.ttft.median, s.ttft.p99, s.e2e.median,
                s.e2e.p99);
        free(sub);
    }
    fprintf(f, "(latencies in ms over completed requests; failed includes HTTP 429 from rate limits)\n");
}

static json_t *dist(const lg_dist *d) {
    return json_pack("{s:I, s:f, s:f, s:f, s:f}", "n", (json_int_t)d->n, "mean_ms", d->mean, "median_ms", d->median,
                     "p90_ms", d->p90, "p99_ms", d->p99);
}

json_t *lg_tenant_json(const lg_tenants *t, const lg_record *recs, size_t n, double duration) {
    json_t *o = json_object();
    for (int i = 0; o && t && i < t->n; i++) {
        lg_record *sub;
        size_t m = subset(recs, n, i, &sub);
        lg_summary s;
        tc_err err;
        size_t n429 = 0;
        for (size_t k = 0; sub && k < m; k++) n429 += sub[k].index >= 0 && sub[k].http_status == 429;
        if (sub && !lg_summarize(&s, sub, m, duration, NULL, &err))
            json_object_set_new(o, t->name[i],
                                json_pack("{s:f, s:I, s:I, s:I, s:f, s:f, s:o, s:o, s:o}", "weight", t->weight[i],
                                          "completed", (json_int_t)s.completed, "failed", (json_int_t)s.failed,
                                          "http_429", (json_int_t)n429, "req_throughput", s.req_throughput,
                                          "output_throughput", s.output_throughput, "ttft", dist(&s.ttft), "tpot",
                                          dist(&s.tpot), "e2e", dist(&s.e2e)));
        free(sub);
    }
    return o;
}
