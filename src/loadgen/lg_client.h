// The load generator: one thread drives every connection through the libcurl multi interface (non-blocking,
// keep-alive, TCP_NODELAY), sends requests on a seeded arrival schedule under a concurrency limit, parses each
// SSE stream as bytes arrive and timestamps content chunks with the monotonic clock.
#ifndef TACHYON_LOADGEN_CLIENT_H
#define TACHYON_LOADGEN_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "loadgen/lg_stats.h"
#include "loadgen/lg_workload.h"
#include "common/err.h"

// Keeps connections (and DNS results) alive across runs, so a warmup's connections serve the measured run.
typedef struct lg_pool lg_pool;
int lg_pool_init(lg_pool **out, tc_err *err); // owned, free with lg_pool_free
void lg_pool_free(lg_pool *p);

typedef struct lg_target {
    const char *url;     // base URL, e.g. "http://127.0.0.1:8080" (a trailing "/v1" is accepted), borrowed
    const char *api_key; // sent as "Authorization: Bearer KEY" when non-NULL, borrowed
    const struct lg_tenants *tenants; // (optional) borrowed: several keys, one per request (lg_tenant.h)
    int chat;            // 1: POST /v1/chat/completions; 0: POST /v1/completions
    lg_pool *pool;       // optional, borrowed: connection cache shared by every run against this target
} lg_target;

typedef struct lg_run_cfg {
    double rate;          // requests/s; INFINITY sends every request at once
    double burstiness;    // gamma shape of inter-arrival times (1 = Poisson)
    int max_concurrency;  // most requests in flight; 0 = unlimited
    int64_t num_requests; // requests to send; < 0 = until duration
    double duration;      // seconds; > 0: stop sending new requests after this long
    double timeout;       // seconds per request (whole stream); 0 = none
    uint64_t seed;        // arrival schedule seed
    int warmup;           // 1: records get negative indices (excluded from statistics)
    int quiet;            // 1: no progress line on stderr
    int only_prio_set;    // 1: only requests of class only_prio (--priority-mix) are sent; the others' arrival
    int only_prio;        // slots stay empty, so the same schedule runs without them (--only-priority)
} lg_run_cfg;

typedef struct lg_run {
    lg_record *recs; // owned, (n,) in the order requests were sent
    size_t n, cap;
    double duration;    // seconds, from the start to the last completion
    double t0;          // the run's start on the monotonic clock (CLOCK_MONOTONIC), seconds
    int max_inflight;   // most requests in flight at once
} lg_run;

// Runs one benchmark against t. Per-request failures are recorded (never returned); the return value is
// non-zero only when the run itself cannot proceed (out of memory, libcurl setup failed).
int lg_run_exec(lg_run *out, const lg_target *t, const lg_run_cfg *cfg, lg_workload *wl,
                tc_err *err);
void lg_run_free(lg_run *r);

#endif
