// Request classes for scheduling benchmarks: the priority mix a workload draws from ("0:0.8,5:0.2"), the
// length class of the mixed-length dataset, and the per-class summary (completed, refused/failed, TTFT
// distribution, goodput = requests meeting the SLOs per second). Pure functions; no I/O.
#ifndef TACHYON_BENCH_CLASS_H
#define TACHYON_BENCH_CLASS_H

#include <stddef.h>

#include "bench/bench_stats.h"
#include "common/err.h"

#define BENCH_MAX_PRIO 8

// Priorities with their weights, normalised to cumulative probabilities.
typedef struct bench_prio_mix {
    int n;
    int prio[BENCH_MAX_PRIO];
    double cum[BENCH_MAX_PRIO]; // cum[n-1] == 1
} bench_prio_mix;

// Parses "P:W,P:W,..." (integer priorities, weights > 0, normalised). Returns 0 or TC_ERR_INVALID.
int bench_prio_mix_parse(bench_prio_mix *m, const char *s, tc_err *err);
// The priority for a uniform draw u in [0, 1).
int bench_prio_mix_pick(const bench_prio_mix *m, double u);

// Length classes of a record (bench_record.len_class).
enum { BENCH_LEN_NONE = 0, BENCH_LEN_SHORT = 1, BENCH_LEN_LONG = 2 };

#define BENCH_MAX_CLASSES (BENCH_MAX_PRIO + 2)

typedef struct bench_class_sum {
    char name[32];            // "priority=5", "short", "long"
    size_t completed, failed; // failed includes requests the server refused (503 from SLO admission)
    size_t good;              // completed and meeting every SLO that is set
    double goodput;           // good / duration, req/s (0 when no SLO is set)
    bench_dist ttft;          // over completed requests, ms
} bench_class_sum;

typedef struct bench_classes {
    int n;
    bench_class_sum c[BENCH_MAX_CLASSES]; // priority classes in ascending order, then short, long
} bench_classes;

// Per-class summary of n records (warmup records skipped); no classes when the records carry none.
int bench_classes_compute(bench_classes *out, const bench_record *recs, size_t n, double duration,
                          const bench_slo *slo, tc_err *err);

#endif
