// TTFT prediction (see sched_admit.h for the model and its limits).
#include "sched/sched_admit.h"

#include <math.h>

#include "sched/sched_impl.h"

void sched_load_fill(const sched *s, sched_load *l) {
    l->policy = s->o.policy;
    l->aging_s = s->o.aging_s;
    l->ready = sched_step_cost_fit(s, &l->a, &l->b);
    l->n_decoding = 0;
    l->catching = 0;
    for (const sched_req *r = s->running.head; r; r = r->next) {
        int left = r->n_tokens - r->num_computed;
        if (left == 1)
            l->n_decoding++;
        else if (left > 1)
            l->catching += left;
    }
    l->step_tokens = sched_guard_budget(s, l->n_decoding);
    l->wait_tokens = 0;
    l->n_wait = 0;
    for (const sched_req *r = s->waiting.head; r; r = r->next) {
        sched_key k = sched_key_of(r);
        l->wait_tokens += k.remaining;
        if (l->n_wait < l->cap_wait) l->wait[l->n_wait++] = k;
    }
}

static double cost_of(const sched_load *l, long long tokens) {
    long long per = l->step_tokens - l->n_decoding;
    if (per < 1) per = 1;
    long long steps = (tokens + per - 1) / per;
    if (steps < 1) steps = 1;
    return (double)steps * l->a + l->b * ((double)steps * l->n_decoding + (double)tokens);
}

double sched_predict_ttft(const sched_load *l, const sched_key *k, double now, long long extra,
                          double *drain_s) {
    long long ahead = l->catching + extra + k->remaining, all = l->catching + extra + l->wait_tokens;
    int listed = 0;
    for (int i = 0; i < l->n_wait; i++) {
        const sched_key *w = &l->wait[i];
        if (w->id == k->id) {
            listed = 1;
            continue;
        }
        if (l->policy == SCHED_POL_FIFO || sched_key_before(w, k, l->aging_s, now)) ahead += w->remaining;
    }
    if (!listed) all += k->remaining;
    if (drain_s) *drain_s = l->ready ? cost_of(l, all) : 0;
    return l->ready ? cost_of(l, ahead) : 0;
}
