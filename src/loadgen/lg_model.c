// Per-model breakdown for bench-serve (see lg_model.h): the records are grouped by the model that
// answered, each group summarized with lg_summarize over the whole run's duration.
#include "loadgen/lg_model.h"

#include <stdlib.h>
#include <string.h>

const char *lg_model_of(const lg_record *r) {
    return r->routed_model && *r->routed_model ? r->routed_model : r->model && *r->model ? r->model : "(none)";
}

// The distinct names in first-seen order (borrowed from the records); beyond the cap, "(other)".
static int names_of(const lg_record *recs, size_t n, const char **names) {
    int m = 0;
    for (size_t k = 0; k < n; k++) {
        const char *s = lg_model_of(&recs[k]);
        int i = 0;
        while (i < m && strcmp(names[i], s)) i++;
        if (i == m && m < LG_MAX_MODELS) names[m++] = s;
        else if (i == m && m == LG_MAX_MODELS) names[m++] = "(other)";
    }
    return m;
}

int lg_model_count(const lg_record *recs, size_t n) {
    const char *names[LG_MAX_MODELS + 1];
    return names_of(recs, n, names);
}

// The records of model `name` (shallow copies: the summary only reads them); "(other)": those beyond the
// cap. *out malloc'd; returns how many.
static size_t subset(const lg_record *recs, size_t n, const char **names, int m, int i, lg_record **out) {
    *out = malloc((n ? n : 1) * sizeof **out);
    size_t c = 0;
    for (size_t k = 0; *out && k < n; k++) {
        const char *s = lg_model_of(&recs[k]);
        int j = 0;
        while (j < m && strcmp(names[j], s)) j++;
        if (j == m) j = LG_MAX_MODELS; // over the cap: "(other)"
        if (j == i) (*out)[c++] = recs[k];
    }
    return c;
}

// Summary of model i; 0 or -1 (out of memory / nothing to summarize).
static int summarize(const lg_record *recs, size_t n, const char **names, int m, int i, double duration,
                     lg_summary *s) {
    lg_record *sub;
    size_t c = subset(recs, n, names, m, i, &sub);
    tc_err err;
    int rc = sub ? lg_summarize(s, sub, c, duration, NULL, &err) : -1;
    free(sub);
    return rc ? -1 : 0;
}

void lg_model_print(FILE *f, const lg_record *recs, size_t n, double duration) {
    const char *names[LG_MAX_MODELS + 1];
    int m = names_of(recs, n, names);
    if (m < 2) return;
    fprintf(f, "%-22s %9s %6s %8s %10s %10s %10s %10s %10s %10s\n", "Per model", "completed", "failed", "req/s",
            "out tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "E2EL p99");
    for (int i = 0; i < m; i++) {
        lg_summary s;
        if (summarize(recs, n, names, m, i, duration, &s)) continue;
        fprintf(f, "%-22.22s %9zu %6zu %8.2f %10.1f %10.2f %10.2f %10.2f %10.2f %10.2f\n", names[i], s.completed,
                s.failed, s.req_throughput, s.output_throughput, s.ttft.median, s.ttft.p99, s.tpot.median, s.tpot.p99,
                s.e2e.p99);
    }
    fprintf(f, "(latencies in ms over completed requests; the model that answered, as the server reported it)\n");
}

static json_t *dist(const lg_dist *d) {
    return json_pack("{s:I, s:f, s:f, s:f, s:f}", "n", (json_int_t)d->n, "mean_ms", d->mean, "median_ms", d->median,
                     "p90_ms", d->p90, "p99_ms", d->p99);
}

json_t *lg_model_json(const lg_record *recs, size_t n, double duration) {
    const char *names[LG_MAX_MODELS + 1];
    int m = names_of(recs, n, names);
    json_t *o = json_object();
    for (int i = 0; o && i < m; i++) {
        lg_summary s;
        if (summarize(recs, n, names, m, i, duration, &s)) continue;
        json_object_set_new(o, names[i],
                            json_pack("{s:I, s:I, s:f, s:f, s:o, s:o, s:o}", "completed", (json_int_t)s.completed,
                                      "failed", (json_int_t)s.failed, "req_throughput", s.req_throughput,
                                      "output_throughput", s.output_throughput, "ttft", dist(&s.ttft), "tpot",
                                      dist(&s.tpot), "e2e", dist(&s.e2e)));
    }
    return o;
}

static void esc(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '\'') fputs("&#39;", f);
        else fputc(*s, f);
    }
}

void lg_model_html(FILE *f, const char *label, const lg_record *recs, size_t n, double duration) {
    const char *names[LG_MAX_MODELS + 1];
    int m = names_of(recs, n, names);
    if (m < 2) return;
    fputs("<h2>Per model", f);
    if (label && *label) fputs(": ", f), esc(f, label);
    fputs("</h2>\n<table><tr><th>model</th><th>ok</th><th>failed</th><th>req/s</th><th>out tok/s</th>"
          "<th>TTFT p50</th><th>TTFT p99</th><th>TPOT p50</th><th>TPOT p99</th><th>E2E p99</th></tr>\n", f);
    for (int i = 0; i < m; i++) {
        lg_summary s;
        if (summarize(recs, n, names, m, i, duration, &s)) continue;
        fputs("<tr><td>", f);
        esc(f, names[i]);
        fprintf(f, "</td><td>%zu</td><td>%zu</td><td>%.2f</td><td>%.1f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td>"
                   "<td>%.2f</td><td>%.2f</td></tr>\n",
                s.completed, s.failed, s.req_throughput, s.output_throughput, s.ttft.median, s.ttft.p99, s.tpot.median,
                s.tpot.p99, s.e2e.p99);
    }
    fputs("</table>\n", f);
}
