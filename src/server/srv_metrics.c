// One model's metrics (see srv_metrics.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched_order.h"
#include "server/srv_metrics.h"

#define WINDOW_SAMPLES 65536

// metrics_add with model="name" put before the metric's own labels (model NULL: no label, one model).
static metric *madd(metrics *r, const char *model, metric_type type, const char *name, const char *labels,
                    const char *help, const double *bounds, int n_bounds) {
    char l[96];
    if (model) {
        int n = snprintf(l, sizeof l, "model=\"%s\"%s%s", model, labels ? "," : "", labels ? labels : "");
        if (n < 0 || n >= (int)sizeof l) return NULL;
        labels = l;
    }
    return metrics_add(r, type, name, labels, help, bounds, n_bounds);
}

int srv_metrics_init(srv_metrics *mt, tc_err *err) { return srv_metrics_init_model(mt, NULL, NULL, err); }

int srv_metrics_init_model(srv_metrics *mt, metrics *hub_reg, const char *model, tc_err *err) {
    memset(mt, 0, sizeof *mt);
    mt->reg = hub_reg ? hub_reg : metrics_new();
    mt->reg_borrowed = hub_reg != NULL;
    if (!mt->reg) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    metrics *r = mt->reg;
    const double *B = METRICS_LATENCY_BUCKETS;
    int nb = METRICS_N_LATENCY_BUCKETS;
    mt->ttft = madd(r, model, METRIC_HISTOGRAM, "tachyon:time_to_first_token_seconds", NULL,
                           "Time from request arrival to the first generated token", B, nb);
    mt->tpot = madd(r, model, METRIC_HISTOGRAM, "tachyon:time_per_output_token_seconds", NULL,
                           "Mean time per output token after the first, per request", B, nb);
    mt->itl = madd(r, model, METRIC_HISTOGRAM, "tachyon:inter_token_latency_seconds", NULL,
                          "Time between consecutive tokens of a stream", B, nb);
    mt->e2e = madd(r, model, METRIC_HISTOGRAM, "tachyon:e2e_request_latency_seconds", NULL,
                          "Time from request arrival to its last token", B, nb);
    mt->queue = madd(r, model, METRIC_HISTOGRAM, "tachyon:request_queue_time_seconds", NULL,
                            "Time a request waited before it was first scheduled", B, nb);
    mt->prefill = madd(r, model, METRIC_HISTOGRAM, "tachyon:request_prefill_time_seconds", NULL,
                              "Time from first scheduling to the first token", B, nb);
    mt->decode = madd(r, model, METRIC_HISTOGRAM, "tachyon:request_decode_time_seconds", NULL,
                             "Time from the first token to the last", B, nb);
    mt->running = madd(r, model, METRIC_GAUGE, "tachyon:num_requests_running", NULL, "Sequences in the running batch", NULL, 0);
    mt->waiting = madd(r, model, METRIC_GAUGE, "tachyon:num_requests_waiting", NULL, "Requests waiting to be scheduled", NULL, 0);
    mt->kv_used = madd(r, model, METRIC_GAUGE, "tachyon:kv_blocks_used", NULL, "KV cache blocks in use", NULL, 0);
    mt->kv_total = madd(r, model, METRIC_GAUGE, "tachyon:kv_blocks_total", NULL, "KV cache blocks in the pool", NULL, 0);
    mt->kv_cap_tokens = madd(r, model, METRIC_GAUGE, "tachyon:kv_capacity_tokens", NULL,
                                    "Tokens the KV cache pool holds (all blocks)", NULL, 0);
    mt->kv_token_bytes = madd(r, model, METRIC_GAUGE, "tachyon:kv_bytes_per_token", NULL,
                                     "KV cache bytes per token, all layers, K and V (depends on --kv-type)", NULL, 0);
    mt->batch_size = madd(r, model, METRIC_GAUGE, "tachyon:batch_size", NULL, "Sequences in the last step", NULL, 0);
    mt->batch_tokens = madd(r, model, METRIC_GAUGE, "tachyon:batch_tokens", NULL, "Tokens in the last step", NULL, 0);
    const char *hs = "Finished generation choices by finish reason";
    mt->success_stop = madd(r, model, METRIC_COUNTER, "tachyon:request_success_total", "finish_reason=\"stop\"", hs, NULL, 0);
    mt->success_length = madd(r, model, METRIC_COUNTER, "tachyon:request_success_total", "finish_reason=\"length\"", hs, NULL, 0);
    mt->success_abort = madd(r, model, METRIC_COUNTER, "tachyon:request_success_total", "finish_reason=\"abort\"", hs, NULL, 0);
    mt->prompt_tokens = madd(r, model, METRIC_COUNTER, "tachyon:prompt_tokens_total", NULL, "Prompt tokens of finished requests", NULL, 0);
    mt->gen_tokens = madd(r, model, METRIC_COUNTER, "tachyon:generation_tokens_total", NULL, "Generated tokens of finished requests", NULL, 0);
    mt->preemptions = madd(r, model, METRIC_COUNTER, "tachyon:preemptions_total", NULL, "Sequences preempted for lack of KV blocks", NULL, 0);
    mt->rejected = madd(r, model, METRIC_COUNTER, "tachyon:requests_rejected_total", NULL, "Requests rejected because the queue was full", NULL, 0);
    mt->cancelled = madd(r, model, METRIC_COUNTER, "tachyon:requests_cancelled_total", NULL, "Requests cancelled because the client went away", NULL, 0);
    mt->prefix_hit = madd(r, model, METRIC_COUNTER, "tachyon:prefix_cache_hit_tokens_total", NULL, "Prompt tokens served from the prefix cache", NULL, 0);
    mt->prefix_query = madd(r, model, METRIC_COUNTER, "tachyon:prefix_cache_queries_total", NULL, "Prompt tokens looked up in the prefix cache", NULL, 0);
    static const char *methods[ENGINE_SPEC_METHODS] = {"method=\"ngram\"", "method=\"prediction\"",
                                                       "method=\"draft\"", "method=\"self\""};
    for (int i = 0; i < ENGINE_SPEC_METHODS; i++) {
        mt->spec_draft[i] = madd(r, model, METRIC_COUNTER, "tachyon:spec_draft_tokens_total", methods[i],
                                        "Speculative tokens proposed, by draft method", NULL, 0);
        mt->spec_accepted[i] = madd(r, model, METRIC_COUNTER, "tachyon:spec_accepted_tokens_total", methods[i],
                                           "Speculative tokens the target model accepted, by draft method", NULL, 0);
        if (!mt->spec_draft[i] || !mt->spec_accepted[i]) goto oom;
    }
    static const double rate_b[10] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0};
    mt->spec_steps = madd(r, model, METRIC_COUNTER, "tachyon:spec_verify_steps_total", NULL,
                                 "Speculative verifications (one request's 1+k rows in a step)", NULL, 0);
    mt->spec_rate = madd(r, model, METRIC_HISTOGRAM, "tachyon:spec_acceptance_rate", NULL,
                                "Accepted / drafted speculative tokens per finished request that speculated", rate_b, 10);
    if (!mt->spec_steps || !mt->spec_rate || srv_sched_metrics_init(mt)) goto oom;
    if (!mt->ttft || !mt->tpot || !mt->itl || !mt->e2e || !mt->queue || !mt->prefill || !mt->decode || !mt->running ||
        !mt->waiting || !mt->kv_used || !mt->kv_total || !mt->kv_cap_tokens || !mt->kv_token_bytes || !mt->batch_size ||
        !mt->batch_tokens || !mt->success_stop ||
        !mt->success_length || !mt->success_abort || !mt->prompt_tokens || !mt->gen_tokens || !mt->preemptions ||
        !mt->rejected || !mt->cancelled || !mt->prefix_hit || !mt->prefix_query)
        goto oom;
    if (mwindow_init(&mt->w_ttft, WINDOW_SAMPLES, err) || mwindow_init(&mt->w_tpot, WINDOW_SAMPLES, err) ||
        mwindow_init(&mt->w_itl, WINDOW_SAMPLES, err) || mwindow_init(&mt->w_e2e, WINDOW_SAMPLES, err))
        goto oom;
    mrate_init(&mt->gen_rate);
    return 0;
oom:
    srv_metrics_free(mt);
    return tc_err_set(err, TC_ERR_NOMEM, "out of memory (metrics)");
}

void srv_metrics_free(srv_metrics *mt) {
    if (!mt->reg_borrowed) metrics_free(mt->reg);
    mwindow_free(&mt->w_ttft);
    mwindow_free(&mt->w_tpot);
    mwindow_free(&mt->w_itl);
    mwindow_free(&mt->w_e2e);
    memset(mt, 0, sizeof *mt);
}

// --- the scheduler's outcomes ----------------------------------------------------------------------
// The scheduler's outcomes per priority class (served within the TTFT target, served late, refused at
// arrival, expired) and queue-time histograms per class, as Prometheus metrics and as the "sched" object
// of /stats (the dashboard's scheduling panel). The engine counts; this file only copies its snapshot.

int srv_sched_metrics_init(srv_metrics *mt) {
    char labels[96];
    for (int c = 0; c < SCHED_N_CLASSES; c++) {
        for (int o = 0; o < SCHED_N_OUTCOMES; o++) {
            snprintf(labels, sizeof labels, "priority=\"%s\",outcome=\"%s\"", sched_class_label(c),
                     sched_outcome_name(o));
            mt->sched_out[c][o] =
                metrics_add(mt->reg, METRIC_COUNTER, "tachyon:sched_requests_total", labels,
                            "Generation requests by priority class and scheduling outcome: ok "
                            "(first token within its TTFT target), late, refused (at arrival, "
                            "--sched slo), expired (deadline, or dropped while waiting)",
                            NULL, 0);
            if (!mt->sched_out[c][o]) return -1;
        }
        snprintf(labels, sizeof labels, "priority=\"%s\"", sched_class_label(c));
        mt->sched_qt[c] = metrics_add(mt->reg, METRIC_HISTOGRAM, "tachyon:sched_queue_time_seconds", labels,
                                      "Time from arrival to first scheduled, by priority class",
                                      SCHED_QT_BOUNDS, SCHED_QT_BUCKETS);
        if (!mt->sched_qt[c]) return -1;
    }
    mt->prio_preemptions =
        metrics_add(mt->reg, METRIC_COUNTER, "tachyon:sched_priority_preemptions_total", NULL,
                    "Running requests preempted for a higher-priority request", NULL, 0);
    return mt->prio_preemptions ? 0 : -1;
}

void srv_sched_metrics_refresh(srv_metrics *mt, const engine_stats *st) {
    for (int c = 0; c < SCHED_N_CLASSES; c++) {
        for (int o = 0; o < SCHED_N_OUTCOMES; o++)
            metric_set(mt->sched_out[c][o], (double)st->sched.outcome[c][o]);
        metric *h = mt->sched_qt[c];
        h->count = 0;
        for (int b = 0; b <= SCHED_QT_BUCKETS; b++) {
            h->counts[b] = st->sched.qt_counts[c][b];
            h->count += h->counts[b];
        }
        h->sum = st->sched.qt_sum[c];
    }
    metric_set(mt->prio_preemptions, (double)st->prio_preemptions);
}

// Upper bound of the bucket holding the q-quantile of class c's queue times (NaN-free: 0 when empty).
static double qt_quantile(const sched_stats *s, int c, uint64_t n, double q) {
    uint64_t want = (uint64_t)(q * (double)n + 0.999999), acc = 0;
    for (int b = 0; b < SCHED_QT_BUCKETS; b++)
        if ((acc += s->qt_counts[c][b]) >= want) return SCHED_QT_BOUNDS[b];
    return SCHED_QT_BOUNDS[SCHED_QT_BUCKETS - 1]; // beyond the last bound: reported as "> last"
}

json_t *srv_sched_stats_json(const engine_stats *st) {
    json_t *classes = json_array();
    for (int c = 0; c < SCHED_N_CLASSES; c++) {
        const uint64_t *o = st->sched.outcome[c];
        uint64_t nq = 0;
        for (int b = 0; b <= SCHED_QT_BUCKETS; b++)
            nq += st->sched.qt_counts[c][b];
        if (!nq && !o[0] && !o[1] && !o[2] && !o[3]) continue; // only classes that saw traffic
        json_array_append_new(
            classes, json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:f,s:f}", "priority", sched_class_label(c), "ok",
                               (json_int_t)o[SCHED_OUT_OK], "late", (json_int_t)o[SCHED_OUT_LATE], "refused",
                               (json_int_t)o[SCHED_OUT_REFUSED], "expired", (json_int_t)o[SCHED_OUT_EXPIRED],
                               "scheduled", (json_int_t)nq, "queue_time_mean_s",
                               nq ? st->sched.qt_sum[c] / (double)nq : 0.0, "queue_time_p95_le_s",
                               nq ? qt_quantile(&st->sched, c, nq, 0.95) : 0.0));
    }
    return json_pack("{s:s,s:I,s:o}", "policy", sched_policy_name(st->sched_policy), "priority_preemptions",
                     (json_int_t)st->prio_preemptions, "classes", classes);
}
