// Rolling windows: recent samples for percentiles, per-second event counts for rates.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics.h"

int mwindow_init(mwindow *w, int cap, tc_err *err) {
    memset(w, 0, sizeof *w);
    if (cap < 1) return tc_err_set(err, TC_ERR_INVALID, "mwindow: capacity %d < 1", cap);
    w->t = malloc((size_t)cap * sizeof(double));
    w->v = malloc((size_t)cap * sizeof(double));
    w->scratch = malloc((size_t)cap * sizeof(double));
    if (!w->t || !w->v || !w->scratch) {
        mwindow_free(w);
        return tc_err_set(err, TC_ERR_NOMEM, "mwindow: out of memory (%d samples)", cap);
    }
    w->cap = cap;
    return 0;
}

void mwindow_free(mwindow *w) {
    free(w->t);
    free(w->v);
    free(w->scratch);
    memset(w, 0, sizeof *w);
}

void mwindow_add(mwindow *w, double t, double v) {
    if (!w->cap || isnan(v)) return;
    w->t[w->head] = t;
    w->v[w->head] = v;
    w->head = (w->head + 1) % w->cap;
    if (w->n < w->cap) w->n++;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int mwindow_percentiles(mwindow *w, double now, double span, const double *qs, int nq, double *out) {
    int k = 0;
    for (int i = 0; i < w->n; i++) {
        int j = (w->head - 1 - i + w->cap) % w->cap; // newest first
        if (w->t[j] <= now - span) break;           // samples are added in time order
        w->scratch[k++] = w->v[j];
    }
    for (int q = 0; q < nq; q++) out[q] = NAN;
    if (!k) return 0;
    qsort(w->scratch, (size_t)k, sizeof(double), cmp_double);
    for (int q = 0; q < nq; q++) {
        long r = (long)ceil(qs[q] * k) - 1;
        if (r < 0) r = 0;
        if (r >= k) r = k - 1;
        out[q] = w->scratch[r];
    }
    return k;
}

void mrate_init(mrate *r) {
    for (int i = 0; i < MRATE_SECONDS; i++) {
        r->sec[i] = -1;
        r->n[i] = 0;
    }
}

void mrate_add(mrate *r, double t, double count) {
    int64_t s = (int64_t)floor(t);
    int i = (int)(s % MRATE_SECONDS);
    if (r->sec[i] != s) {
        r->sec[i] = s;
        r->n[i] = 0;
    }
    r->n[i] += count;
}

double mrate_per_sec(const mrate *r, double now, double span) {
    int S = (int)span;
    if (S < 1) S = 1;
    if (S > MRATE_SECONDS) S = MRATE_SECONDS;
    int64_t cur = (int64_t)floor(now);
    double sum = 0;
    for (int k = 0; k < S; k++) {
        int64_t s = cur - k;
        int i = (int)(s % MRATE_SECONDS);
        if (r->sec[i] == s) sum += r->n[i];
    }
    double elapsed = (S - 1) + (now - (double)cur);
    if (elapsed < 1e-3) elapsed = 1e-3;
    return sum / elapsed;
}
