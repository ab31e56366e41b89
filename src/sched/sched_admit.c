// TTFT prediction (see sched_admit.h for the model and its limits).
#include "sched/sched_admit.h"

#include <math.h>

// The step's token budget for a request of effective priority p: uncapped when the ITL guard does not hold
// p's prompt back for the decoding streams (a better class than all of them, sched.c prio_behind).
static int step_tokens_for(const sched_load *l, int p) {
    return l->guard_fair && l->n_decoding && p < l->best_dec_prio ? l->full_tokens : l->step_tokens;
}

static double cost_of(const sched_load *l, int step_tokens, long long tokens) {
    long long per = step_tokens - l->n_decoding;
    if (per < 1) per = 1;
    long long steps = (tokens + per - 1) / per;
    if (steps < 1) steps = 1;
    return (double)steps * l->a + l->b * ((double)steps * l->n_decoding + (double)tokens);
}

// Short prefill A drains in its lane (a step's prefill budget P less the long lane's reserve) while the long
// prompts of its class (lane_long tokens) fill the rest of every step.
static double cost_lanes(const sched_load *l, int step_tokens, long long tokens, long long lane_long) {
    long long per = step_tokens - l->n_decoding;
    if (per < 2) return cost_of(l, step_tokens, tokens + lane_long);
    long long reserve = (long long)((double)per * SCHED_LONG_SHARE + 0.999), lane = per - reserve;
    if (reserve < 1) reserve = 1, lane = per - 1;
    long long steps = (tokens + lane - 1) / lane;
    if (steps < 1) steps = 1;
    long long extra = steps * per - tokens;
    if (extra > lane_long) extra = lane_long;
    return (double)steps * l->a + l->b * ((double)steps * l->n_decoding + (double)(tokens + extra));
}

double sched_predict_ttft(const sched_load *l, const sched_key *k, double now, long long extra,
                          double *drain_s) {
    // ranked with the same aging floor as the waiting keys
    sched_key kf = sched_key_floored(*k, l->prio_floor);
    k = &kf;
    long long ahead = l->catching + extra + k->remaining, all = l->catching + extra + l->wait_tokens;
    int ranked = l->policy != SCHED_POL_FIFO, k_long = k->remaining > l->long_tok;
    int pk = sched_eff_priority(k, l->aging_s, now);
    long long lane_long = 0; // short k: long prompts of its class, which only take their lane's share
    if (ranked && !k_long && !l->slots_full) { // (all slots taken: k waits for one, lanes or not)
        ahead -= l->catching_long;
        lane_long = l->catching_long;
    }
    int listed = 0;
    for (int i = 0; i < l->n_wait; i++) {
        const sched_key *w = &l->wait[i];
        if (w->id == k->id) {
            listed = 1;
            continue;
        }
        if (!ranked) {
            ahead += w->remaining;
            continue;
        }
        int w_long = w->remaining > l->long_tok, pw = sched_eff_priority(w, l->aging_s, now);
        if (w_long != k_long && pw == pk) { // the other lane of k's class
            if (k_long)
                ahead += w->remaining; // short ones take their lane while k prefills
            else
                lane_long += w->remaining;
        } else if (sched_key_before(w, k, l->aging_s, now)) {
            ahead += w->remaining;
        }
    }
    if (!listed) all += k->remaining;
    if (drain_s) *drain_s = l->ready ? cost_of(l, l->step_tokens, all) : 0;
    if (!l->ready) return 0;
    int st = step_tokens_for(l, pk);
    return lane_long > 0 ? cost_lanes(l, st, ahead, lane_long) : cost_of(l, st, ahead);
}
