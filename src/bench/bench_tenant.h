// Several API keys in one benchmark run (--tenant KEY[:WEIGHT], repeated): request idx is sent with the key
// of tenant bench_tenant_of(idx), chosen deterministically in proportion to the weights, and the report
// breaks latency and throughput down per tenant. Against a server with --api-key-file this measures rate
// limits and fair share from the client's side.
#ifndef TACHYON_BENCH_TENANT_H
#define TACHYON_BENCH_TENANT_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "bench/bench_stats.h"
#include "common/err.h"

#define BENCH_MAX_TENANTS 16

typedef struct bench_tenants {
    int n;
    const char *key[BENCH_MAX_TENANTS]; // borrowed (argv)
    double weight[BENCH_MAX_TENANTS];   // > 0
    char name[BENCH_MAX_TENANTS][24];   // "t1 (sk-ab…)": never the whole key in a report
} bench_tenants;

// Adds "KEY" (weight 1) or "KEY:WEIGHT". TC_ERR_INVALID on a bad weight or too many tenants.
int bench_tenant_add(bench_tenants *t, const char *spec, tc_err *err);
// The tenant of request idx (warmup indices < 0 too): a low-discrepancy sequence, so any window of requests
// is split close to the weights. -1 when t is NULL or empty.
int bench_tenant_of(const bench_tenants *t, int64_t idx);
// Prints one line per tenant: completed, failed (429s included), req/s, output tok/s, TTFT and E2E p50/p99.
void bench_tenant_print(FILE *f, const bench_tenants *t, const bench_record *recs, size_t n, double duration);
// {"t1 (sk-ab…)": {"weight": w, "summary": {...}}, …}; NULL on OOM. Owned by the caller.
json_t *bench_tenant_json(const bench_tenants *t, const bench_record *recs, size_t n, double duration);

#endif
