// The ranking of requests (see sched_order.h for the rules and why).
#include "sched/sched_order.h"

#include <math.h>
#include <string.h>

sched_key sched_key_of(const sched_req *r) {
    sched_key k = {r->priority, r->n_tokens - r->num_computed, r->t_arrival, r->id, 0, 0};
    return k;
}

int sched_policy_parse(const char *s) {
    if (!strcmp(s, "fifo")) return SCHED_POL_FIFO;
    if (!strcmp(s, "priority")) return SCHED_POL_PRIORITY;
    if (!strcmp(s, "slo")) return SCHED_POL_SLO;
    return -1;
}

const char *sched_policy_name(int policy) {
    return policy == SCHED_POL_PRIORITY ? "priority" : policy == SCHED_POL_SLO ? "slo" : "fifo";
}

static double waited(const sched_key *k, double now) {
    return now > k->t_arrival ? now - k->t_arrival : 0;
}

int sched_eff_priority(const sched_key *k, double aging_s, double now) {
    if (!(aging_s > 0)) aging_s = SCHED_AGING_S;
    double gained = floor(waited(k, now) / aging_s);
    if (gained > 1e9) gained = 1e9;
    double p = (double)k->priority - gained;
    if (k->has_floor) {
        int f = k->floor < k->priority ? k->floor : k->priority;
        if (p < f) p = f;
    }
    return p < -2e9 ? -2000000000 : (int)p;
}

int sched_key_before(const sched_key *a, const sched_key *b, double aging_s, double now) {
    int pa = sched_eff_priority(a, aging_s, now), pb = sched_eff_priority(b, aging_s, now);
    if (pa != pb) return pa < pb;
    double ra = a->remaining - SCHED_SRPF_AGING_TOK * waited(a, now);
    double rb = b->remaining - SCHED_SRPF_AGING_TOK * waited(b, now);
    if (ra != rb) return ra < rb;
    if (a->t_arrival != b->t_arrival) return a->t_arrival < b->t_arrival;
    return a->id < b->id;
}
