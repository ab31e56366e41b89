// Scheduling outcomes per priority class, for /metrics, /stats and the dashboard: how many requests were
// served within their TTFT target, served late, refused at arrival (--sched slo) or expired (deadline, or
// dropped while waiting once hopeless), and a histogram of queue time (arrival → first scheduled).
// Priorities map to a bounded set of classes so the label set stays small whatever clients send.
#ifndef TACHYON_SCHED_STATS_H
#define TACHYON_SCHED_STATS_H

#include <stdint.h>

#define SCHED_N_CLASSES 8 // priority <= -3, -2, -1, 0, 1, 2, 3, >= 4
#define SCHED_QT_BUCKETS 12

enum { SCHED_OUT_OK = 0, SCHED_OUT_LATE, SCHED_OUT_REFUSED, SCHED_OUT_EXPIRED, SCHED_N_OUTCOMES };

extern const double SCHED_QT_BOUNDS[SCHED_QT_BUCKETS]; // seconds, ascending (+Inf implied)

typedef struct sched_stats {
    uint64_t outcome[SCHED_N_CLASSES][SCHED_N_OUTCOMES];
    uint64_t qt_counts[SCHED_N_CLASSES][SCHED_QT_BUCKETS + 1]; // per bucket, not cumulative; last = +Inf
    double qt_sum[SCHED_N_CLASSES];                            // seconds
} sched_stats;

int sched_class_of(int priority);
const char *sched_class_label(int c);  // "<=-3", "-2", … "3", ">=4"
const char *sched_outcome_name(int o); // "ok", "late", "refused", "expired"
void sched_stats_outcome(sched_stats *st, int priority, int outcome);
void sched_stats_queue(sched_stats *st, int priority, double seconds);
// dst += src (the engine adds its submit-time refusals to the scheduler's counts)
void sched_stats_add(sched_stats *dst, const sched_stats *src);

#endif
