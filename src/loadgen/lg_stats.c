#include "loadgen/lg_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void lg_record_free(lg_record *r) {
    if (!r) return;
    free(r->error);
    free(r->id);
    free(r->model);
    free(r->routed_model);
    r->model = r->routed_model = NULL;
    free(r->itl);
    free(r->text);
    r->error = r->id = r->text = NULL;
    r->itl = NULL;
    r->n_itl = r->cap_itl = r->text_len = r->text_cap = 0;
}

int lg_record_push_itl(lg_record *r, double gap) {
    if (r->n_itl == r->cap_itl) {
        size_t cap = r->cap_itl ? r->cap_itl * 2 : 64;
        double *p = realloc(r->itl, cap * sizeof *p);
        if (!p) return TC_ERR_NOMEM;
        r->itl = p;
        r->cap_itl = cap;
    }
    r->itl[r->n_itl++] = gap;
    return 0;
}

void lg_record_finalize(lg_record *r) {
    r->e2e = r->t_end - r->t_send;
    r->ttft = r->t_first >= 0 ? r->t_first - r->t_send : 0;
    r->tpot = r->output_tokens > 1 ? (r->e2e - r->ttft) / (double)(r->output_tokens - 1) : 0;
}

// --- distributions

double lg_percentile(const double *sorted, size_t n, double p) {
    if (n == 0) return 0;
    if (p <= 0) return sorted[0];
    if (p >= 100) return sorted[n - 1];
    double rank = p / 100.0 * (double)(n - 1);
    size_t lo = (size_t)floor(rank);
    size_t hi = lo + 1 < n ? lo + 1 : lo;
    double frac = rank - (double)lo;
    return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int lg_dist_compute(lg_dist *out, const double *seconds, size_t n) {
    memset(out, 0, sizeof *out);
    if (n == 0) return 0;
    double *v = malloc(n * sizeof *v);
    if (!v) return TC_ERR_NOMEM;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        v[i] = seconds[i] * 1e3;
        sum += v[i];
    }
    qsort(v, n, sizeof *v, cmp_double);
    double mean = sum / (double)n, ss = 0;
    for (size_t i = 0; i < n; i++) ss += (v[i] - mean) * (v[i] - mean);
    out->n = n;
    out->mean = mean;
    out->std = sqrt(ss / (double)n); // population std, as numpy's default
    out->median = lg_percentile(v, n, 50);
    out->p90 = lg_percentile(v, n, 90);
    out->p95 = lg_percentile(v, n, 95);
    out->p99 = lg_percentile(v, n, 99);
    out->min = v[0];
    out->max = v[n - 1];
    free(v);
    return 0;
}

int lg_slo_met(const lg_record *r, const lg_slo *slo) {
    if (!r->ok) return 0;
    if (!slo) return 1;
    if (slo->ttft_ms > 0 && r->ttft * 1e3 > slo->ttft_ms) return 0;
    if (slo->tpot_ms > 0 && r->tpot * 1e3 > slo->tpot_ms) return 0;
    if (slo->e2e_ms > 0 && r->e2e * 1e3 > slo->e2e_ms) return 0;
    return 1;
}

int lg_summarize(lg_summary *out, const lg_record *recs, size_t n, double duration,
                 const lg_slo *slo, tc_err *err) {
    int max_inflight = out->max_inflight;
    memset(out, 0, sizeof *out);
    out->max_inflight = max_inflight;
    out->duration = duration;
    out->has_slo = slo && (slo->ttft_ms > 0 || slo->tpot_ms > 0 || slo->e2e_ms > 0);
    size_t n_itl = 0;
    for (size_t i = 0; i < n; i++)
        if (recs[i].index >= 0 && recs[i].ok) n_itl += recs[i].n_itl;
    double *ttft = malloc((n + 1) * sizeof *ttft), *tpot = malloc((n + 1) * sizeof *tpot);
    double *e2e = malloc((n + 1) * sizeof *e2e), *itl = malloc((n_itl + 1) * sizeof *itl);
    int rc = 0;
    if (!ttft || !tpot || !e2e || !itl) {
        rc = tc_err_set(err, TC_ERR_NOMEM, "lg_summarize: out of memory");
        goto done;
    }
    size_t nt = 0, np = 0, ni = 0;
    for (size_t i = 0; i < n; i++) {
        const lg_record *r = &recs[i];
        if (r->index < 0) continue;
        if (!r->ok) {
            out->failed++;
            continue;
        }
        out->completed++;
        out->total_input += r->input_tokens;
        out->total_output += r->output_tokens;
        out->usage_from_server += r->usage_from_server ? 1 : 0;
        if (r->has_pred) out->pred_reported++, out->accepted_pred += r->accepted_pred, out->rejected_pred += r->rejected_pred;
        ttft[nt] = r->ttft;
        e2e[nt++] = r->e2e;
        if (r->output_tokens > 1) tpot[np++] = r->tpot;
        if (r->n_itl) memcpy(itl + ni, r->itl, r->n_itl * sizeof *itl);
        ni += r->n_itl;
        if (out->has_slo && lg_slo_met(r, slo)) out->good++;
    }
    if (duration > 0) {
        out->req_throughput = (double)out->completed / duration;
        out->output_throughput = (double)out->total_output / duration;
        out->total_throughput = (double)(out->total_input + out->total_output) / duration;
        out->goodput = (double)out->good / duration;
    }
    if (lg_dist_compute(&out->ttft, ttft, nt) || lg_dist_compute(&out->tpot, tpot, np) ||
        lg_dist_compute(&out->e2e, e2e, nt) || lg_dist_compute(&out->itl, itl, ni))
        rc = tc_err_set(err, TC_ERR_NOMEM, "lg_summarize: out of memory");
done:
    free(ttft);
    free(tpot);
    free(e2e);
    free(itl);
    return rc;
}

int lg_slo_parse(lg_slo *out, const char *s, tc_err *err) {
    memset(out, 0, sizeof *out);
    const char *p = s;
    while (*p) {
        const char *eq = strchr(p, '=');
        if (!eq) return tc_err_set(err, TC_ERR_INVALID, "--slo: expected KEY=MS in '%s'", p);
        size_t klen = (size_t)(eq - p);
        char *end;
        double v = strtod(eq + 1, &end);
        if (end == eq + 1 || !(v > 0) || (*end && *end != ','))
            return tc_err_set(err, TC_ERR_INVALID, "--slo: bad value in '%s'", p);
        if (klen == 4 && !strncmp(p, "ttft", 4)) out->ttft_ms = v;
        else if (klen == 4 && !strncmp(p, "tpot", 4)) out->tpot_ms = v;
        else if (klen == 3 && !strncmp(p, "e2e", 3)) out->e2e_ms = v;
        else return tc_err_set(err, TC_ERR_INVALID, "--slo: unknown key '%.*s' (ttft, tpot, e2e)", (int)klen, p);
        p = *end ? end + 1 : end;
    }
    return 0;
}
