#include "sched/sched_stats.h"

const double SCHED_QT_BOUNDS[SCHED_QT_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                  0.5,   1,    2.5,   5,    10,  30};

int sched_class_of(int priority) {
    int c = priority + 3;
    return c < 0 ? 0 : c >= SCHED_N_CLASSES ? SCHED_N_CLASSES - 1 : c;
}

const char *sched_class_label(int c) {
    static const char *l[SCHED_N_CLASSES] = {"<=-3", "-2", "-1", "0", "1", "2", "3", ">=4"};
    return c >= 0 && c < SCHED_N_CLASSES ? l[c] : "?";
}

const char *sched_outcome_name(int o) {
    static const char *n[SCHED_N_OUTCOMES] = {"ok", "late", "refused", "expired"};
    return o >= 0 && o < SCHED_N_OUTCOMES ? n[o] : "?";
}

void sched_stats_outcome(sched_stats *st, int priority, int outcome) {
    if (outcome >= 0 && outcome < SCHED_N_OUTCOMES) st->outcome[sched_class_of(priority)][outcome]++;
}

void sched_stats_queue(sched_stats *st, int priority, double seconds) {
    if (!(seconds >= 0)) return;
    int c = sched_class_of(priority), b = 0;
    while (b < SCHED_QT_BUCKETS && seconds > SCHED_QT_BOUNDS[b])
        b++;
    st->qt_counts[c][b]++;
    st->qt_sum[c] += seconds;
}

void sched_stats_add(sched_stats *dst, const sched_stats *src) {
    for (int c = 0; c < SCHED_N_CLASSES; c++) {
        for (int o = 0; o < SCHED_N_OUTCOMES; o++)
            dst->outcome[c][o] += src->outcome[c][o];
        for (int b = 0; b <= SCHED_QT_BUCKETS; b++)
            dst->qt_counts[c][b] += src->qt_counts[c][b];
        dst->qt_sum[c] += src->qt_sum[c];
    }
}
