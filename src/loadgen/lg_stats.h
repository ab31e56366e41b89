// Serving-benchmark statistics: per-request records, latency distributions (numpy-style linear-interpolated
// percentiles), throughput and goodput. Pure functions over arrays; no I/O.
#ifndef TACHYON_LOADGEN_STATS_H
#define TACHYON_LOADGEN_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

// One request as the client saw it. Times are seconds on the monotonic clock relative to the run's start (t0).
typedef struct lg_record {
    int64_t index;           // request index in the workload (warmup requests are negative: -1, -2, ...)
    int tenant;              // --tenant index whose key it was sent with (lg_tenant.h), -1 = none
    int ok;                  // 1 = completed with a full stream ([DONE] seen, HTTP 2xx)
    int http_status;         // 0 when no response arrived
    char *error;             // owned (malloc), NULL when ok
    char *id;                // owned, the response's "id" field from the first chunk, or NULL
    char *model;             // owned, the "model" the server answered with (first chunk naming one), or NULL
    char *routed_model;      // owned, the x-tachyon-routed-model response header (a router's choice), or NULL
    double t_send;           // request handed to the transport, seconds since t0
    double t_first;          // first chunk with non-empty content, seconds since t0; < 0 if none
    double t_end;            // last byte / failure, seconds since t0
    double ttft;             // t_first - t_send, seconds (0 if no content arrived)
    double e2e;              // t_end - t_send, seconds
    double tpot;             // (e2e - ttft) / (output_tokens - 1), seconds; 0 when output_tokens <= 1
    double *itl;             // owned, (n_itl,) seconds: gap between consecutive content chunks
    size_t n_itl, cap_itl;
    int64_t input_tokens;    // from server usage, else the workload's estimate
    int64_t output_tokens;   // from server usage, else the number of content chunks
    int64_t n_chunks;        // content chunks received
    int usage_from_server;   // 1 when both counts came from the server's usage object
    int has_pred;            // the usage reported accepted/rejected prediction tokens (OpenAI `prediction`)
    int64_t accepted_pred, rejected_pred; // tokens
    char *text;              // owned, concatenated content (only collected when the workload needs it)
    size_t text_len, text_cap;
    int has_priority;        // the request carried a priority (workload --priority-mix): its value
    int priority;
    int len_class;           // LG_LEN_* (lg_class.h): short / long of the mixed-length dataset, or none
} lg_record;

void lg_record_free(lg_record *r); // frees owned fields, not r itself
// Appends one ITL sample (seconds). Returns 0 or TC_ERR_NOMEM.
int lg_record_push_itl(lg_record *r, double gap);
// Sets ttft/e2e/tpot from the timestamps and token counts.
void lg_record_finalize(lg_record *r);

// A latency distribution, in milliseconds. n == 0 means no samples (all fields 0).
typedef struct lg_dist {
    size_t n;
    double mean, std, median, p90, p95, p99, min, max; // ms
} lg_dist;

// Service-level objectives for goodput; a value <= 0 means "not set". Milliseconds.
typedef struct lg_slo {
    double ttft_ms, tpot_ms, e2e_ms;
} lg_slo;

typedef struct lg_summary {
    size_t completed, failed;
    double duration;          // seconds, run start to last completion
    int64_t total_input;      // tokens over completed requests
    int64_t total_output;     // tokens over completed requests
    double req_throughput;    // completed / duration, req/s
    double output_throughput; // total_output / duration, tok/s
    double total_throughput;  // (total_input + total_output) / duration, tok/s
    int has_slo;
    size_t good;              // completed requests meeting every SLO that is set
    double goodput;           // good / duration, req/s
    size_t usage_from_server; // completed requests whose token counts came from the server
    size_t pred_reported;     // completed requests whose usage had prediction token counts
    int64_t accepted_pred, rejected_pred; // summed over those, tokens
    int max_inflight;         // most requests in flight at once (filled by the runner)
    lg_dist ttft, tpot, itl, e2e;
} lg_summary;

// Percentile p in [0,100] of sorted (ascending) values, linear interpolation between closest ranks
// (numpy's default): rank = p/100 * (n-1). n must be > 0.
double lg_percentile(const double *sorted, size_t n, double p);
// Fills out from n values given in seconds (copied and sorted internally). Returns 0 or TC_ERR_NOMEM.
int lg_dist_compute(lg_dist *out, const double *seconds, size_t n);
// Whether a completed record meets every SLO that is set (TPOT of a 1-token output counts as 0).
int lg_slo_met(const lg_record *r, const lg_slo *slo);
// Summarises n records (warmup records, index < 0, are skipped). slo may be NULL.
int lg_summarize(lg_summary *out, const lg_record *recs, size_t n, double duration,
                 const lg_slo *slo, tc_err *err);
// Parses "ttft=MS,tpot=MS,e2e=MS" (any subset). Returns 0 or TC_ERR_INVALID.
int lg_slo_parse(lg_slo *out, const char *s, tc_err *err);

#endif
