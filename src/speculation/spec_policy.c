// Adaptive k: an acceptance-rate estimate per request and the step-cost model decide how many tokens to draft
// (spec.h's spec_accept and spec_pick_k; the rule that asks them, spec_policy.h).
#include <math.h>
#include <string.h>

#include "speculation/spec_policy.h"

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
    if (match_len >= SPEC_NGRAM_COPY && k_max > 0 && t_a + t_b > 0) {
        int k = a->n_obs == 0 ? k_max : spec_pick_k(a->pl, a->plc, k_max, t_a, t_b, n_rows, n_other_tok);
        if (k > 0) {
            a->idle = 0, a->probing = 0, a->long_match = 1;
            return k;
        }
    }
    return spec_accept_pick(a, k_max, t_a, t_b, n_rows, n_other_tok);
}

// --- the arbiter between the prediction and prompt lookup (spec_policy.h)

int spec_arbiter_pick(spec_arbiter *a, int at, int32_t pred_tok, int32_t ngram_tok) {
    a->pending = 0;
    if (pred_tok == ngram_tok) return SPEC_ARB_PRED;
    a->pending = 1;
    a->at = at;
    a->pred_tok = pred_tok, a->ngram_tok = ngram_tok;
    a->chose_pred = a->learned ? a->prefer_pred : -1;
    return !a->learned ? SPEC_ARB_COMMON : a->prefer_pred ? SPEC_ARB_PRED : SPEC_ARB_NGRAM;
}

void spec_arbiter_observe(spec_arbiter *a, int n_accepted, int32_t actual) {
    if (!a->pending) return;
    a->pending = 0;
    if (n_accepted < a->at) return; // rejected before the difference: no lesson
    // past `at`: the chosen one was right; at `at`: the target's own token says which (or neither)
    int pred_right = n_accepted > a->at ? a->chose_pred : actual == a->pred_tok ? 1 : actual == a->ngram_tok ? 0 : -1;
    if (pred_right < 0) return;
    a->prefer_pred = pred_right;
    a->learned = 1;
}

// --- the prediction's draft length (spec_policy.h)

int spec_pred_pick(const spec_pred *p, spec_accept *pacc, int k_max, double t_a, double t_b, int n_rows,
                   double n_other_tok) {
    pacc->probing = pacc->long_match = 0;
    if (k_max <= 0 || !p->tokens || p->left || p->pos >= p->n || !(t_a + t_b > 0)) return 0;
    if (!p->strayed) // never wrong yet: the client's claim, at the full k until its record says otherwise
        return pacc->n_obs == 0 ? k_max : spec_pick_k(pacc->p1, pacc->pc, k_max, t_a, t_b, n_rows, n_other_tok);
    int k = spec_pick_k(pacc->p1, pacc->pc, k_max, t_a, t_b, n_rows, n_other_tok);
    int cap = p->run / 2; // after a rejoin, half the stretch the output agrees on: 2 at first, growing
    return k < cap ? k : cap;
}

void spec_pred_shadow(spec_pred *p, spec_accept *pacc) {
    if (p->sh_n > 0) spec_accept_observe(pacc, p->sh_n, p->sh_m);
    p->sh_n = p->sh_m = 0;
}

void spec_observe_step(spec_accept *acc, int d, int a, int32_t next, int32_t shadow) {
    if (shadow >= 0 && a >= d) spec_accept_observe(acc, d + 1, a + (next == shadow));
    else spec_accept_observe(acc, d, a);
}

// --- the draft-length rule and its cost model (spec_policy.h)

void spec_costs_init(spec_costs *c) {
    memset(c, 0, sizeof *c);
    spec_itl_init(&c->itl);
}

void spec_costs_observe_step(spec_costs *c, int rows, int n_drafted, int n_gaps, int decode_only, double seconds,
                             int track_itl) {
    if (decode_only) step_cost_observe(&c->verify, rows, seconds);
    if (track_itl) spec_itl_observe(&c->itl, rows - n_drafted, n_gaps); // the step as it would have been
}

void spec_costs_observe_draft(spec_costs *c, double seconds, int k_max, int catch_up) {
    if (k_max <= 0 || catch_up > 2) return;
    double per_pos = seconds / k_max;
    c->draft_pos = c->draft_pos > 0 ? 0.8 * c->draft_pos + 0.2 * per_pos : per_pos;
}

void spec_step_begin(spec_step *s, int mode, int max_streams) {
    memset(s, 0, sizeof *s);
    s->mode = mode;
    s->max_streams = max_streams;
}

void spec_step_add(spec_step *s, const spec_costs *c, const spec_accept *acc, int d, int src) {
    s->n_drafts += d;
    s->extra_tok += spec_expected_tokens(acc->p1, acc->pc, d) - 1.0;
    if (d > 0 && src == SPEC_M_DRAFT && c->draft_pos * d > s->draft_s)
        s->draft_s = c->draft_pos * d; // one batched draft forward per position: the longest draft
}

int spec_policy_k(const spec_costs *c, const spec_step *s, spec_accept *acc, const spec_ask *q, int *src,
                  int *ng_len, int *ng_from) {
    int k = q->k;
    *src = q->may_model ? SPEC_M_DRAFT : SPEC_M_NGRAM;
    if (s->mode != SPEC_AUTO) return k;
    *src = SPEC_M_NGRAM;
    if (q->pred) spec_pred_shadow(q->pred, q->pacc); // what it would have drafted, before anything returns
    // Back off while prompts wait or prefill (their chunks need the budget) and above max_streams decoding
    // streams; else k from this request's acceptance rate and what a row costs, with the rows and tokens of the
    // drafts already planned in this step counted (each request would otherwise price its rows as the only
    // drafter).
    if (s->n_waiting > 0 || s->n_catching > 0 || s->n_decoding > s->max_streams || !s->have_fit) return 0;
    // Rows are priced by the decode/verify steps' own line once it has one: the scheduler's line also spans
    // prefill steps, whose per-token cost is not what a verify row adds (an F16 model's GEMM rows cost several
    // times its memory-bound verify rows, and auto drafted short).
    double a = s->ga, b = s->gb;
    step_cost_line(&c->verify, &a, &b);
    int n_rows = s->n_decoding + s->n_drafts;
    double other = s->n_decoding - 1 + s->extra_tok;
    double cd = c->draft_pos; // a model draft also costs a draft forward per drafted token (measured)
    int model_ok = q->may_model;
    if (s->n_decoding >= 2) {
        // Peers wait for this step: drafts may not make it longer than the plain steps' recent p99 (spec_itl.h),
        // a prefill step's rows priced by the scheduler's line, this step's by the verify line (its rows all
        // produce logits: dearer than prefill rows). A model draft's forwards delay the step too (the drafter
        // runs before it).
        double t = a + b * n_rows + s->draft_s;
        int room = spec_itl_room(&c->itl, s->n_decoding, s->ga, s->gb, t, b);
        int room_m = spec_itl_room(&c->itl, s->n_decoding, s->ga, s->gb, t, b + cd);
        if (room_m < 1) model_ok = 0;
        if (room < k) k = room;
        if (k <= 0) return 0; // no probes either: a probe row is a longer step too
    }
    // t = (a + b·n) + (b + cd)·k; until cd is measured, one try at the full k (it measures cd, and a draft
    // model is there to be accepted). No probes: they are for the free proposers.
    int k_model = model_ok ? (cd > 0 ? spec_pick_k(acc->p1, acc->pc, k, a + b * n_rows, b + cd, 0, other) : k) : 0;
    if (k_model > 0) {
        *src = SPEC_M_DRAFT;
        return k_model;
    }
    if (q->pred) { // no probes: spec_pred_shadow learns from the output for free
        int kp = spec_pred_pick(q->pred, q->pacc, k, a, b, n_rows, other);
        if (kp > 0) {
            *src = SPEC_M_PRED;
            return kp;
        }
    }
    *ng_len = spec_ngram_match(q->tokens, q->n_tokens, ng_from); // a long match is judged by its own record
    return spec_accept_pick_match(acc, *ng_len, k, a, b, n_rows, other);
}

int spec_policy_long_k(const spec_costs *c, const spec_step *s, const spec_accept *acc, int k_max) {
    if (s->mode != SPEC_AUTO || s->n_decoding != 1 || !s->have_fit || k_max <= 0) return 0;
    double a = s->ga, b = s->gb;
    step_cost_line(&c->verify, &a, &b);
    if (acc->n_obs == 0) return k_max;
    return spec_pick_k(acc->pl, acc->plc, k_max, a, b, s->n_decoding + s->n_drafts, s->extra_tok);
}
