// Adaptive k: an acceptance-rate estimate per request and the step-cost model decide how many tokens to draft.
#include <math.h>

#include "spec/spec.h"

#define SPEC_DECAY 0.7f   // weight of the older verify steps: adapts within a few steps
#define SPEC_RATE0 0.5f   // prior before any verify step (one pseudo-trial): optimistic enough to try
#define SPEC_LONG0 0.8f   // priors of a long prompt-lookup match (one pseudo-trial each): its first token,
#define SPEC_LONGC 0.95f  // and a later one (a passage being copied goes on)

#define SPEC_MAX_BACKOFF 64

void spec_accept_init(spec_accept *a) {
    a->acc_w = a->f_acc = a->c_acc = SPEC_RATE0;
    a->try_w = a->f_try = a->c_try = 1.0f;
    a->rate = a->p1 = a->pc = SPEC_RATE0;
    a->l_acc = a->pl = SPEC_LONG0;
    a->lc_acc = a->plc = SPEC_LONGC;
    a->l_try = a->lc_try = 1.0f;
    a->long_match = 0;
    a->n_obs = 0;
    a->idle = 0;
    a->backoff = 1;
    a->probing = 0;
}

// One verify step into a chain's decayed counts: the first position (tried once), the later ones (c_try tries).
static void chain_observe(float *f_acc, float *f_try, float *c_acc, float *c_try, float first, float acc, float tries) {
    *f_acc = SPEC_DECAY * *f_acc + first;
    *f_try = SPEC_DECAY * *f_try + 1.0f;
    if (tries > 0) {
        *c_acc = SPEC_DECAY * *c_acc + acc;
        *c_try = SPEC_DECAY * *c_try + tries;
    }
}

void spec_accept_observe(spec_accept *a, int n_draft, int n_accepted) {
    if (n_draft <= 0) return;
    if (n_accepted < 0) n_accepted = 0;
    if (n_accepted > n_draft) n_accepted = n_draft;
    if (a->probing) {
        a->probing = 0;
        if (n_accepted > 0) a->backoff = 1;
        else if (a->backoff < SPEC_MAX_BACKOFF) a->backoff *= 2;
    }
    // Verification stops at the first rejection: a step that accepted n of d drafts saw n acceptances and,
    // if n < d, one rejection; the drafts after it were never tried. The per-token acceptance probability is
    // then (acceptances) / (tries), over decayed sums. (The fraction n / d would count the untried drafts as
    // rejected: at a true rate of 0.9 and k = 8 it reads about 0.64, and the k picked from it came out short.)
    a->acc_w = SPEC_DECAY * a->acc_w + (float)n_accepted;
    a->try_w = SPEC_DECAY * a->try_w + (float)(n_accepted + (n_accepted < n_draft));
    a->rate = a->try_w > 0 ? a->acc_w / a->try_w : 0.0f;
    // the chain: position 1 is always tried; position i > 1 is tried iff i - 1 was accepted (a step whose first
    // draft failed says nothing of the later ones). Drafts from a long prompt-lookup match keep a chain of their
    // own besides (spec_accept_pick_match).
    const float first = (float)(n_accepted > 0);
    const float c_acc = (float)(n_accepted > 0 ? n_accepted - 1 : 0);
    const float c_try = (float)(n_accepted == 0 ? 0 : n_accepted < n_draft ? n_accepted : n_draft - 1);
    chain_observe(&a->f_acc, &a->f_try, &a->c_acc, &a->c_try, first, c_acc, c_try);
    a->p1 = a->f_acc / a->f_try;
    a->pc = a->c_acc / a->c_try;
    if (a->long_match) {
        a->long_match = 0;
        chain_observe(&a->l_acc, &a->l_try, &a->lc_acc, &a->lc_try, first, c_acc, c_try);
        a->pl = a->l_acc / a->l_try;
        a->plc = a->lc_acc / a->lc_try;
    }
    a->n_obs++;
}

double spec_expected_tokens(double p1, double pc, int k) {
    double e = 1.0, t = p1;
    for (int i = 0; i < k; i++, t *= pc) e += t;
    return e;
}

int spec_pick_k(double p1, double pc, int k_max, double a, double b, int n_rows, double n_other_tok) {
    if (k_max <= 0 || !(p1 > 0)) return 0;
    if (!(b >= 0) || !(a >= 0) || a + b <= 0) return 0; // no cost model yet: do not guess
    // The k of the best predicted tokens per second; drafting at all only if that beats k = 0 by 5% (noise
    // in the cost model must not buy rows). The margin is not applied between drafting k's: on the flat top of
    // the curve (high acceptance, costly rows) each further row gains a few % only, and a margin per step
    // stopped at k ~ 2-4 short of the best.
    int best = 0;
    double best_v = 0, v0 = (n_other_tok + 1.0) / (a + b * n_rows);
    for (int k = 1; k <= k_max; k++) {
        double v = (n_other_tok + spec_expected_tokens(p1, pc, k)) / (a + b * (n_rows + k));
        if (v > best_v) best = k, best_v = v;
    }
    return best_v > v0 * 1.05 ? best : 0;
}

int spec_accept_pick(spec_accept *a, int k_max, double t_a, double t_b, int n_rows, double n_other_tok) {
    a->long_match = 0;
    if (k_max <= 0) return 0;
    // The first draft is a try at the full k: the estimate starts from a prior, and the proposer already drafts
    // little where its match is short (spec_ngram_propose), so a long draft is one that copies; ramping up
    // from the prior's k = 2 cost a copying request several steps at its start.
    if (a->n_obs == 0 && t_a + t_b > 0) return k_max;
    int k = spec_pick_k(a->p1, a->pc, k_max, t_a, t_b, n_rows, n_other_tok);
    if (k > 0) {
        a->idle = 0;
        return k;
    }
    if (++a->idle < a->backoff) return 0;
    a->idle = 0;
    a->probing = 1;
    return 1;
}

int spec_accept_pick_match(spec_accept *a, int match_len, int k_max, double t_a, double t_b, int n_rows,
                           double n_other_tok) {
    if (match_len >= SPEC_NGRAM_LONG && k_max > 0 && t_a + t_b > 0) {
        int k = a->n_obs == 0 ? k_max : spec_pick_k(a->pl, a->plc, k_max, t_a, t_b, n_rows, n_other_tok);
        if (k > 0) {
            a->idle = 0, a->probing = 0, a->long_match = 1;
            return k;
        }
    }
    return spec_accept_pick(a, k_max, t_a, t_b, n_rows, n_other_tok);
}
