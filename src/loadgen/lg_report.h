// Benchmark output: the console table (shaped like `vllm bench serve`), a side-by-side comparison, the JSON
// document (summary + every request) and a self-contained HTML report (inline SVG, no network).
#ifndef TACHYON_LOADGEN_REPORT_H
#define TACHYON_LOADGEN_REPORT_H

#include <stdio.h>

#include "loadgen/lg_class.h"
#include "loadgen/lg_client.h"
#include "loadgen/lg_stats.h"
#include "common/err.h"

// One measured run: a sweep point and/or one server of a comparison. Owns run (records).
typedef struct lg_result {
    char label[64];  // sweep point, e.g. "rate=4" or "concurrency=8"; "" when not sweeping
    char server[16]; // "A" / "B" for --compare, else ""
    const char *url; // borrowed
    double x;        // sweep value (INFINITY for rate=inf), 0 when not sweeping
    lg_run run;
    lg_summary sum;
    lg_classes cls; // per priority / length class (empty when the workload has no classes)
    void *tenants_json; // (optional) borrowed json_t: per-tenant breakdown, written as the run's "tenants"
} lg_result;

// The console table for one result.
void lg_print_table(FILE *f, const lg_result *r, const lg_slo *slo);
// Two columns (A, B) and their ratio B/A.
void lg_print_compare(FILE *f, const lg_result *a, const lg_result *b, const lg_slo *slo);
// Writes {"config": <config, borrowed>, "runs": [...], and for one run also "summary"/"requests"}.
// config may be NULL. Returns 0 or TC_ERR_IO / TC_ERR_NOMEM.
int lg_write_json(const char *path, void *config_json, const lg_result *res, size_t n, tc_err *err);
// The HTML report: latency CDFs for every result; with more than one sweep point, p50/p99 TTFT and TPOT
// against output throughput; with per-class results, goodput and p99 TTFT per class against the sweep value
// (sweep == 2: an overload sweep, x = offered load as a multiple of the measured capacity).
int lg_write_html(const char *path, const char *title, const lg_result *res, size_t n, int sweep,
                  tc_err *err);

#endif
