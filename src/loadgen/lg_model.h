// Per-model breakdown for bench-serve: against a server with several models or a router alias, each record
// carries the model that answered (the response's "model", or the x-tachyon-routed-model header when the
// server sent one), and the report splits latency and throughput by it, as lg_tenant.h does by key.
#ifndef TACHYON_LOADGEN_MODEL_H
#define TACHYON_LOADGEN_MODEL_H

#include <jansson.h>
#include <stdio.h>

#include "loadgen/lg_stats.h"

#define LG_MAX_MODELS 16 // distinct names at most; the rest are counted under "(other)"

// The model a record is attributed to: routed_model, else model, else "(none)" (no answer, e.g. a failure).
const char *lg_model_of(const lg_record *r);
// The number of distinct model names among the records (capped at LG_MAX_MODELS + 1).
int lg_model_count(const lg_record *recs, size_t n);
// One line per model (when the records name at least two): completed, failed, req/s, output tok/s, TTFT and
// TPOT p50/p99, E2E p99.
void lg_model_print(FILE *f, const lg_record *recs, size_t n, double duration);
// {"model": {completed, failed, req_throughput, output_throughput, ttft, tpot, e2e}, …} (new reference; an
// empty object when no record names a model).
json_t *lg_model_json(const lg_record *recs, size_t n, double duration);
// The same as an HTML table with a heading (nothing when fewer than two models); label names the run.
void lg_model_html(FILE *f, const char *label, const lg_record *recs, size_t n, double duration);

#endif
