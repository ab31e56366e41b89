// llama-server's sampler chains (see sampling.h for the order): the filters of samp_ext.c over a list of
// the whole vocabulary, in the request's own state. Opt-in, so it favours plain loops over the OpenAI
// chain's bucketed top-p; it does not allocate.
#include "sampling/samp_impl.h"

#include <math.h>
#include <string.h>

// Logits at or below the grammar mask's value count as -inf (top-n-sigma's statistics skip them).
#define SAMP_MASKED_FLOOR (-1e29f)

static void ban_ids(samp_state *s, samp_td *by_id) {
    if (!samp_ban_on(s)) return;
    for (int i = 0; i < s->n_ban; i++) by_id[s->ban[i]].logit = -INFINITY;
}

// Writes the list's probabilities (after a final softmax) as the draw's weights, dropping zeros.
static void emit(samp_state *s, samp_td *c, int n) {
    samp_td_softmax(c, n);
    int k = 0;
    double z = 0.0;
    for (int i = 0; i < n; i++) {
        if (!(c[i].p > 0.0f)) continue;
        s->cand[k++] = (samp_cand){c[i].p, c[i].id};
        z += c[i].p;
    }
    if (!k) { // nothing finite: the lowest id, as the OpenAI chain does
        s->cand[0] = (samp_cand){1.0f, 0};
        k = 1, z = 1.0;
    }
    s->n_kept = k;
    s->z_kept = z;
}

static void prepare_mirostat(samp_state *s, const float *logits) {
    const samp_params *p = &s->p;
    samp_td *c = s->td;
    int n = s->n_vocab;
    for (int i = 0; i < n; i++) {
        float v = logits[i];
        c[i] = (samp_td){.id = i, .logit = isnan(v) || v <= SAMP_MASKED_FLOOR ? -INFINITY : v};
    }
    for (int i = 0; i < s->n_bias; i++) {
        samp_td *t = &c[s->bias[i].id];
        t->logit = s->bias[i].bias <= -SAMP_BIAS_MAX ? -INFINITY : t->logit + s->bias[i].bias;
    }
    ban_ids(s, c);
    samp_td_temp(c, n, p->temperature, 0.0f, 1.0f);
    if (p->mirostat == 1) samp_td_mirostat_v1(c, &n, s->mu, s->n_vocab, 100);
    else samp_td_mirostat_v2(c, &n, s->mu);
    emit(s, c, n);
    s->miro_pending = 1;
}

void samp_chain_prepare(samp_state *s, const float *logits, samp_xtc_mode xtc) {
    if (s->chain == SAMP_CHAIN_MIROSTAT) {
        prepare_mirostat(s, logits);
        return;
    }
    const samp_params *p = &s->p;
    int n = s->n_vocab;
    for (int i = 0; i < n; i++) {
        float v = logits[i];
        s->cand[i] = (samp_cand){isnan(v) || v <= SAMP_MASKED_FLOOR ? -INFINITY : v, i};
    }
    samp_penalize(s, samp_max(logits, n)); // logit bias, then the repetition penalties
    samp_td *c = s->td;
    for (int i = 0; i < n; i++) c[i] = (samp_td){.id = i, .logit = s->cand[i].v};
    ban_ids(s, c);
    if (p->dry_multiplier > 0.0f && s->dry_cap) {
        int len = s->dry_len < s->dry_cap ? s->dry_len : s->dry_cap;
        samp_dry_apply(c, s->dry_h + s->dry_len - len, len, s->dry_brk, p->dry_multiplier, p->dry_base,
                       p->dry_allowed_length, s->dry_scratch, s->dry_best);
    }
    samp_td_top_n_sigma(c, n, p->top_n_sigma);
    samp_td_top_k(c, &n, p->top_k);
    samp_td_typical(c, &n, p->typical_p, s->td + s->n_vocab);
    samp_td_top_p(c, &n, p->top_p);
    samp_td_min_p(c, &n, p->min_p);
    if (xtc != SAMP_XTC_SKIP && samp_td_xtc_applies(p->xtc_probability, p->xtc_threshold, n)) {
        // the draw happens whenever XTC could apply, as llama.cpp's; samp_probs asks for each branch
        int apply = xtc == SAMP_XTC_APPLY;
        if (xtc == SAMP_XTC_DRAW) apply = samp_uniform(s) < p->xtc_probability;
        if (apply) samp_td_xtc(c, &n, p->xtc_threshold);
    }
    samp_td_temp(c, n, p->temperature, p->dynatemp_range, p->dynatemp_exponent);
    emit(s, c, n);
}

void samp_chain_accept(samp_state *s, int32_t token) {
    if (!s->miro_pending) return;
    s->miro_pending = 0;
    for (int i = 0; i < s->n_kept; i++)
        if (s->cand[i].id == token) {
            float pc = (float)(s->cand[i].v / s->z_kept);
            s->mu = samp_mirostat_update(s->mu, pc, s->p.mirostat_tau, s->p.mirostat_eta);
            return;
        }
}
