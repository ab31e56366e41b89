// Request classes for scheduling benchmarks: the priority mix a workload draws from ("0:0.8,5:0.2"), the
// length class of the mixed-length dataset, and the per-class summary (completed, refused/failed, TTFT
// distribution, goodput = requests meeting the SLOs per second). Pure functions; no I/O.
#ifndef TACHYON_LOADGEN_CLASS_H
#define TACHYON_LOADGEN_CLASS_H

#include <stddef.h>

#include "loadgen/lg_stats.h"
#include "common/err.h"

#define LG_MAX_PRIO 8

// Priorities with their weights, normalised to cumulative probabilities.
typedef struct lg_prio_mix {
    int n;
    int prio[LG_MAX_PRIO];
    double cum[LG_MAX_PRIO]; // cum[n-1] == 1
} lg_prio_mix;

// Parses "P:W,P:W,..." (integer priorities, weights > 0, normalised). Returns 0 or TC_ERR_INVALID.
int lg_prio_mix_parse(lg_prio_mix *m, const char *s, tc_err *err);
// The priority for a uniform draw u in [0, 1).
int lg_prio_mix_pick(const lg_prio_mix *m, double u);

// Length classes of a record (lg_record.len_class).
enum { LG_LEN_NONE = 0, LG_LEN_SHORT = 1, LG_LEN_LONG = 2 };

#define LG_MAX_CLASSES (LG_MAX_PRIO + 2)

typedef struct lg_class_sum {
    char name[32];            // "priority=5", "short", "long"
    size_t completed, failed; // failed includes requests the server refused (503 from SLO admission)
    size_t good;              // completed and meeting every SLO that is set
    double goodput;           // good / duration, req/s (0 when no SLO is set)
    lg_dist ttft;             // over completed requests, ms
} lg_class_sum;

typedef struct lg_classes {
    int n;
    lg_class_sum c[LG_MAX_CLASSES]; // priority classes in ascending order, then short, long
} lg_classes;

// Per-class summary of n records (warmup records skipped); no classes when the records carry none.
int lg_classes_compute(lg_classes *out, const lg_record *recs, size_t n, double duration,
                       const lg_slo *slo, tc_err *err);

#endif
