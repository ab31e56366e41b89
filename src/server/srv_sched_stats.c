// The scheduler's outcomes per priority class (served within the TTFT target, served late, refused at
// arrival, expired) and queue-time histograms per class, as Prometheus metrics and as the "sched" object
// of /stats (the dashboard's scheduling panel). The engine counts; this file only copies its snapshot.
#include <stdio.h>

#include "sched/sched_order.h"
#include "server/srv_internal.h"

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
