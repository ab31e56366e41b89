// Metric registry and Prometheus text exposition.
#include "metrics/metrics.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const double METRICS_LATENCY_BUCKETS[] = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2,
                                          0.3,   0.4,    0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 60.0};
const int METRICS_N_LATENCY_BUCKETS = (int)(sizeof METRICS_LATENCY_BUCKETS / sizeof METRICS_LATENCY_BUCKETS[0]);

struct metrics {
    metric **items; // (n) owned
    int n, cap;
};

metrics *metrics_new(void) { return calloc(1, sizeof(metrics)); }

void metrics_free(metrics *m) {
    if (!m) return;
    for (int i = 0; i < m->n; i++) free(m->items[i]);
    free(m->items);
    free(m);
}

metric *metrics_add(metrics *m, metric_type type, const char *name, const char *labels, const char *help,
                    const double *bounds, int n_bounds) {
    if (!m || !name || strlen(name) >= sizeof(((metric *)0)->name)) return NULL;
    if (labels && strlen(labels) >= sizeof(((metric *)0)->labels)) return NULL;
    if (type == METRIC_HISTOGRAM) {
        if (!bounds || n_bounds < 1 || n_bounds > METRIC_MAX_BUCKETS) return NULL;
        for (int i = 1; i < n_bounds; i++)
            if (!(bounds[i] > bounds[i - 1])) return NULL;
    }
    if (m->n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 32;
        metric **p = realloc(m->items, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        m->items = p;
        m->cap = cap;
    }
    metric *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->type = type;
    snprintf(x->name, sizeof x->name, "%s", name);
    snprintf(x->labels, sizeof x->labels, "%s", labels ? labels : "");
    snprintf(x->help, sizeof x->help, "%s", help ? help : "");
    if (type == METRIC_HISTOGRAM) {
        x->n_bounds = n_bounds;
        memcpy(x->bounds, bounds, (size_t)n_bounds * sizeof *bounds);
    }
    m->items[m->n++] = x;
    return x;
}

metric *metrics_find(metrics *m, const char *name, const char *labels) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->items[i]->name, name) && !strcmp(m->items[i]->labels, labels ? labels : ""))
            return m->items[i];
    return NULL;
}

void metric_observe(metric *x, double v) {
    if (x->type != METRIC_HISTOGRAM || isnan(v)) return;
    int b = 0;
    while (b < x->n_bounds && v > x->bounds[b]) b++; // Prometheus buckets are "le" (<=)
    x->counts[b]++;
    x->sum += v;
    x->count++;
}

// --- exposition ------------------------------------------------------------------------------------

typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)n + 1;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

// Prometheus floats: integers print exactly; +Inf/-Inf/NaN by name.
static void fmt_num(char *out, size_t cap, double v) {
    if (isnan(v)) snprintf(out, cap, "NaN");
    else if (isinf(v)) snprintf(out, cap, v > 0 ? "+Inf" : "-Inf");
    else if (v == floor(v) && fabs(v) < 1e15) snprintf(out, cap, "%.0f", v);
    else snprintf(out, cap, "%.9g", v);
}

static const char *type_name(metric_type t) {
    return t == METRIC_COUNTER ? "counter" : t == METRIC_GAUGE ? "gauge" : "histogram";
}

int metrics_render(const metrics *m, char **out, size_t *len) {
    sbuf b = {malloc(4096), 0, 4096, 0};
    if (!b.p) return TC_ERR_NOMEM;
    b.p[0] = 0;
    // one group per name, in order of first registration: a family's samples must be contiguous even when
    // its series were registered apart (several models each register the whole set)
    for (int g = 0; g < m->n; g++) {
        int first = 1;
        for (int j = 0; j < g && first; j++)
            if (!strcmp(m->items[j]->name, m->items[g]->name)) first = 0;
        if (!first) continue;
        sb_printf(&b, "# HELP %s %s\n", m->items[g]->name, m->items[g]->help);
        sb_printf(&b, "# TYPE %s %s\n", m->items[g]->name, type_name(m->items[g]->type));
        for (int i = g; i < m->n; i++) {
            const metric *x = m->items[i];
            if (i != g && strcmp(x->name, m->items[g]->name)) continue;
            char num[48];
            if (x->type != METRIC_HISTOGRAM) {
                fmt_num(num, sizeof num, x->value);
                if (x->labels[0]) sb_printf(&b, "%s{%s} %s\n", x->name, x->labels, num);
                else sb_printf(&b, "%s %s\n", x->name, num);
                continue;
            }
            const char *sep = x->labels[0] ? "," : "";
            uint64_t cum = 0;
            for (int k = 0; k <= x->n_bounds; k++) {
                cum += x->counts[k];
                if (k < x->n_bounds) fmt_num(num, sizeof num, x->bounds[k]);
                else snprintf(num, sizeof num, "+Inf");
                sb_printf(&b, "%s_bucket{%s%sle=\"%s\"} %llu\n", x->name, x->labels, sep, num, (unsigned long long)cum);
            }
            fmt_num(num, sizeof num, x->sum);
            if (x->labels[0]) {
                sb_printf(&b, "%s_sum{%s} %s\n", x->name, x->labels, num);
                sb_printf(&b, "%s_count{%s} %llu\n", x->name, x->labels, (unsigned long long)x->count);
            } else {
                sb_printf(&b, "%s_sum %s\n", x->name, num);
                sb_printf(&b, "%s_count %llu\n", x->name, (unsigned long long)x->count);
            }
        }
    }
    if (b.oom) {
        free(b.p);
        return TC_ERR_NOMEM;
    }
    *out = b.p;
    *len = b.len;
    return 0;
}
