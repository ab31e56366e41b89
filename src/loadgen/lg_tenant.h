// Several API keys in one benchmark run (--tenant KEY[:WEIGHT], repeated): request idx is sent with the key
// of tenant lg_tenant_of(idx), chosen deterministically in proportion to the weights, and the report
// breaks latency and throughput down per tenant. Against a server with --api-key-file this measures rate
// limits and fair share from the client's side.
#ifndef TACHYON_LOADGEN_TENANT_H
#define TACHYON_LOADGEN_TENANT_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "loadgen/lg_stats.h"
#include "common/err.h"

#define LG_MAX_TENANTS 16

typedef struct lg_tenants {
    int n;
    const char *key[LG_MAX_TENANTS]; // borrowed (argv)
    double weight[LG_MAX_TENANTS];   // > 0
    char name[LG_MAX_TENANTS][24];   // "t1 (sk-ab…)": never the whole key in a report
} lg_tenants;

// Adds "KEY" (weight 1) or "KEY:WEIGHT". TC_ERR_INVALID on a bad weight or too many tenants.
int lg_tenant_add(lg_tenants *t, const char *spec, tc_err *err);
// The tenant of request idx (warmup indices < 0 too): a low-discrepancy sequence, so any window of requests
// is split close to the weights. -1 when t is NULL or empty.
int lg_tenant_of(const lg_tenants *t, int64_t idx);
// Prints one line per tenant: completed, failed (429s included), req/s, output tok/s, TTFT and E2E p50/p99.
void lg_tenant_print(FILE *f, const lg_tenants *t, const lg_record *recs, size_t n, double duration);
// {"t1 (sk-ab…)": {"weight": w, "summary": {...}}, …}; NULL on OOM. Owned by the caller.
json_t *lg_tenant_json(const lg_tenants *t, const lg_record *recs, size_t n, double duration);

#endif
