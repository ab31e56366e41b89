// Request classes for scheduling benchmarks (see lg_class.h).
#include "loadgen/lg_class.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lg_prio_mix_parse(lg_prio_mix *m, const char *s, tc_err *err) {
    memset(m, 0, sizeof *m);
    double w[LG_MAX_PRIO], total = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long pr = strtol(p, &end, 10);
        if (end == p || *end != ':' || pr < -1000000 || pr > 1000000)
            return tc_err_set(err, TC_ERR_INVALID, "--priority-mix: expected PRIORITY:WEIGHT in '%s'", p);
        const char *q = end + 1;
        double v = strtod(q, &end);
        if (end == q || !(v > 0) || v > 1e9 || (*end && *end != ','))
            return tc_err_set(err, TC_ERR_INVALID, "--priority-mix: bad weight in '%s'", p);
        if (m->n == LG_MAX_PRIO)
            return tc_err_set(err, TC_ERR_INVALID, "--priority-mix: at most %d classes", LG_MAX_PRIO);
        for (int i = 0; i < m->n; i++)
            if (m->prio[i] == (int)pr) return tc_err_set(err, TC_ERR_INVALID, "--priority-mix: priority %ld twice", pr);
        m->prio[m->n] = (int)pr;
        w[m->n++] = v;
        total += v;
        p = *end ? end + 1 : end;
    }
    if (!m->n) return tc_err_set(err, TC_ERR_INVALID, "--priority-mix: empty");
    double c = 0;
    for (int i = 0; i < m->n; i++) m->cum[i] = (c += w[i] / total);
    m->cum[m->n - 1] = 1;
    return 0;
}

int lg_prio_mix_pick(const lg_prio_mix *m, double u) {
    for (int i = 0; i < m->n; i++)
        if (u < m->cum[i]) return m->prio[i];
    return m->prio[m->n - 1];
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

// Whether record r belongs to class k of the list built below (prios[0..np) then short, long).
static int in_class(const lg_record *r, int k, const int *prios, int np) {
    if (k < np) return r->has_priority && r->priority == prios[k];
    return r->len_class == (k == np ? LG_LEN_SHORT : LG_LEN_LONG);
}

int lg_classes_compute(lg_classes *out, const lg_record *recs, size_t n, double duration,
                       const lg_slo *slo, tc_err *err) {
    memset(out, 0, sizeof *out);
    int prios[LG_MAX_PRIO], np = 0, has_len = 0;
    for (size_t i = 0; i < n; i++) {
        const lg_record *r = &recs[i];
        if (r->index < 0) continue;
        has_len |= r->len_class != LG_LEN_NONE;
        if (!r->has_priority) continue;
        int seen = 0;
        for (int k = 0; k < np; k++) seen |= prios[k] == r->priority;
        if (!seen && np < LG_MAX_PRIO) prios[np++] = r->priority;
    }
    qsort(prios, (size_t)np, sizeof *prios, cmp_int);
    int has_slo = slo && (slo->ttft_ms > 0 || slo->tpot_ms > 0 || slo->e2e_ms > 0);
    double *ttft = malloc((n + 1) * sizeof *ttft);
    if (!ttft) return tc_err_set(err, TC_ERR_NOMEM, "lg_classes_compute: out of memory");
    int n_cls = np + (has_len ? 2 : 0), rc = 0;
    for (int k = 0; k < n_cls; k++) {
        lg_class_sum *c = &out->c[out->n];
        size_t nt = 0;
        for (size_t i = 0; i < n; i++) {
            const lg_record *r = &recs[i];
            if (r->index < 0 || !in_class(r, k, prios, np)) continue;
            if (!r->ok) {
                c->failed++;
                continue;
            }
            c->completed++;
            ttft[nt++] = r->ttft;
            if (has_slo && lg_slo_met(r, slo)) c->good++;
        }
        if (k < np) snprintf(c->name, sizeof c->name, "priority=%d", prios[k]);
        else snprintf(c->name, sizeof c->name, "%s", k == np ? "short" : "long");
        c->goodput = duration > 0 ? (double)c->good / duration : 0;
        if (lg_dist_compute(&c->ttft, ttft, nt)) {
            rc = tc_err_set(err, TC_ERR_NOMEM, "lg_classes_compute: out of memory");
            break;
        }
        out->n++;
    }
    free(ttft);
    return rc;
}
