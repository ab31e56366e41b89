// Adaptive k: an acceptance-rate estimate per request and the step-cost model decide how many tokens to draft.
#include <math.h>

#include "spec/spec.h"

#define SPEC_EWMA 0.3f     // weight of the newest verify step: adapts within a few steps
#define SPEC_RATE0 0.5f    // prior before any verify step: optimistic enough to try

#define SPEC_MAX_BACKOFF 64

void spec_accept_init(spec_accept *a) {
    a->rate = SPEC_RATE0;
    a->n_obs = 0;
    a->idle = 0;
    a->backoff = 1;
    a->probing = 0;
}

void spec_accept_observe(spec_accept *a, int n_draft, int n_accepted) {
    if (n_draft <= 0) return;
    if (a->probing) {
        a->probing = 0;
        if (n_accepted > 0) a->backoff = 1;
        else if (a->backoff < SPEC_MAX_BACKOFF) a->backoff *= 2;
    }
    float x = (float)n_accepted / (float)n_draft;
    a->rate = a->n_obs == 0 ? 0.5f * (a->rate + x) : (1.0f - SPEC_EWMA) * a->rate + SPEC_EWMA * x;
    a->n_obs++;
}

double spec_expected_tokens(double rate, int k) {
    double e = 1.0, t = 1.0;
    for (int i = 0; i < k; i++) e += (t *= rate);
    return e;
}

int spec_pick_k(double rate, int k_max, double a, double b, int n_rows, int n_other_tok) {
    if (k_max <= 0 || !(rate > 0)) return 0;
    if (!(b >= 0) || !(a >= 0) || a + b <= 0) return 0; // no cost model yet: do not guess
    // The k of the best predicted tokens per second; drafting at all only if that beats k = 0 by 5% (noise
    // in the cost model must not buy rows). The margin is not applied between drafting k's: on the flat top of
    // the curve (high acceptance, costly rows) each further row gains a few % only, and a margin per step
    // stopped at k ~ 2-4 short of the best.
    int best = 0;
    double best_v = 0, v0 = (n_other_tok + 1.0) / (a + b * n_rows);
    for (int k = 1; k <= k_max; k++) {
        double v = (n_other_tok + spec_expected_tokens(rate, k)) / (a + b * (n_rows + k));
        if (v > best_v) best = k, best_v = v;
    }
    return best_v > v0 * 1.05 ? best : 0;
}

int spec_accept_pick(spec_accept *a, int k_max, double t_a, double t_b, int n_rows, int n_other_tok) {
    if (k_max <= 0) return 0;
    int k = spec_pick_k(a->rate, k_max, t_a, t_b, n_rows, n_other_tok);
    if (k > 0) {
        a->idle = 0;
        return k;
    }
    if (++a->idle < a->backoff) return 0;
    a->idle = 0;
    a->probing = 1;
    return 1;
}
