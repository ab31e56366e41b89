// One served model's metrics: its series in the registry (Prometheus /metrics) and the rolling windows of
// /stats. The first model owns the registry; with several models the others add their series to it, each
// labelled model="name".
#ifndef TACHYON_SERVER_SRV_METRICS_H
#define TACHYON_SERVER_SRV_METRICS_H

#include <jansson.h>
#include <stdint.h>

#include "common/err.h"
#include "engine/engine.h"
#include "metrics/metrics.h"

typedef struct srv_metrics {
    metrics *reg; // owned
    metric *ttft, *tpot, *itl, *e2e, *queue, *prefill, *decode;
    metric *running, *waiting, *kv_used, *kv_total, *batch_size, *batch_tokens;
    metric *kv_cap_tokens, *kv_token_bytes; // KV capacity in tokens, bytes per token (set by the cache types)
    metric *success_stop, *success_length, *success_abort;
    metric *prompt_tokens, *gen_tokens, *preemptions, *rejected, *cancelled, *prefix_hit, *prefix_query;
    metric *spec_draft[ENGINE_SPEC_METHODS], *spec_accepted[ENGINE_SPEC_METHODS], *spec_steps; // by spec_method
    metric *spec_rate; // histogram: accepted / drafted tokens per finished request that speculated
    metric *sched_out[SCHED_N_CLASSES][SCHED_N_OUTCOMES]; // srv_sched_stats.c: outcomes per priority class
    metric *sched_qt[SCHED_N_CLASSES];                    // queue-time histograms per priority class
    metric *prio_preemptions;
    mwindow w_ttft, w_tpot, w_itl, w_e2e; // owned
    mrate gen_rate;                       // generated tokens per second
    uint64_t n_requests;                  // finished generation requests
    int reg_borrowed;                     // 1: reg is the first model's (several models), not freed here
} srv_metrics;

int srv_metrics_init(srv_metrics *mt, tc_err *err);
// A model's metrics in the first model's registry (hub_reg), every series labelled model="name" (several models).
int srv_metrics_init_model(srv_metrics *mt, metrics *hub_reg, const char *model_name, tc_err *err);
void srv_metrics_free(srv_metrics *mt);

// The scheduler's per-priority outcome counters and queue-time histograms (the engine counts; these copy).
int srv_sched_metrics_init(srv_metrics *mt);                         // -1 on OOM
void srv_sched_metrics_refresh(srv_metrics *mt, const engine_stats *st);
json_t *srv_sched_stats_json(const engine_stats *st);                 // the "sched" object of /stats

#endif
