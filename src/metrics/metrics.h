// Metrics: counters, gauges and histograms with fixed buckets, rendered as Prometheus text exposition
// (version 0.0.4), plus rolling windows of samples for percentiles over the last N seconds.
// Not thread-safe: one registry is owned and updated by one thread (the server's event loop).
#ifndef TACHYON_METRICS_H
#define TACHYON_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef enum { METRIC_COUNTER = 1, METRIC_GAUGE, METRIC_HISTOGRAM } metric_type;

#define METRIC_MAX_BUCKETS 32

typedef struct metric {
    metric_type type;
    char name[96];   // e.g. "tachyon:e2e_request_latency_seconds"
    char labels[96]; // pre-rendered label pairs without braces, e.g. `finish_reason="stop"`, or ""
    char help[160];
    double value;    // counter / gauge
    int n_bounds;    // histogram: upper bounds (ascending), +Inf implied
    double bounds[METRIC_MAX_BUCKETS];
    uint64_t counts[METRIC_MAX_BUCKETS + 1]; // per-bucket (non-cumulative) counts; last = +Inf
    double sum;
    uint64_t count;
} metric;

typedef struct metrics metrics; // opaque registry

// Latency buckets in seconds (1 ms .. 60 s), for histograms of TTFT, TPOT, E2E …
extern const double METRICS_LATENCY_BUCKETS[];
extern const int METRICS_N_LATENCY_BUCKETS;

metrics *metrics_new(void); // NULL on OOM; free with metrics_free
void metrics_free(metrics *m);
// Registers a metric; the returned pointer is owned by the registry and valid until metrics_free.
// Metrics sharing a name (different labels) share one HELP/TYPE header. bounds: histograms only
// (ascending, at most METRIC_MAX_BUCKETS). NULL on OOM or bad arguments.
metric *metrics_add(metrics *m, metric_type type, const char *name, const char *labels, const char *help,
                    const double *bounds, int n_bounds);
metric *metrics_find(metrics *m, const char *name, const char *labels); // NULL if absent

static inline void metric_inc(metric *x, double v) { x->value += v; }
static inline void metric_set(metric *x, double v) { x->value = v; }
void metric_observe(metric *x, double v); // histogram; NaN ignored

// Prometheus text exposition. *out malloc'd (NUL-terminated), owned by the caller; *len without NUL.
int metrics_render(const metrics *m, char **out, size_t *len);

// --- rolling windows -------------------------------------------------------------------------------
// A ring of (time, value) samples; the oldest are overwritten when full. Times are monotonic seconds.
typedef struct mwindow {
    double *t, *v; // (cap)
    double *scratch; // (cap) sort buffer
    int cap, head, n;
} mwindow;

int mwindow_init(mwindow *w, int cap, tc_err *err);
void mwindow_free(mwindow *w);
void mwindow_add(mwindow *w, double t, double v);
// Percentiles (nearest rank: the ceil(q*n)-th smallest) of the samples with t > now - span, for each
// q in qs (0 < q <= 1). Returns the number of samples used; out[] is left as NaN when it is 0.
int mwindow_percentiles(mwindow *w, double now, double span, const double *qs, int nq, double *out);

// Event counts in one-second buckets over the last MRATE_SECONDS seconds (e.g. generated tokens).
#define MRATE_SECONDS 600
typedef struct mrate {
    int64_t sec[MRATE_SECONDS]; // which absolute second each slot holds
    double n[MRATE_SECONDS];
} mrate;

void mrate_init(mrate *r);
void mrate_add(mrate *r, double t, double count);
// Events per second over the span seconds before now (complete and partial seconds; span <= MRATE_SECONDS).
double mrate_per_sec(const mrate *r, double now, double span);

#endif
