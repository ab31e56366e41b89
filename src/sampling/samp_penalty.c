// The first transforms every sampler chain applies to the logits (samp_impl.h): logit_bias, then the
// repetition, presence and frequency penalties; and the state's uniform draw, which the chains share.
#include "sampling/samp_impl.h"
#include "sampling/samp_rng.h"

#include <math.h>

// Penalizes the logits in cand (still in id order). Returns the new maximum given the old one.
static float apply_penalties(samp_state *s, float vmax) {
    const samp_params *p = &s->p;
    float rp = p->repetition_penalty, pp = p->presence_penalty, fp = p->frequency_penalty;
    if (rp == 1.0f && pp == 0.0f && fp == 0.0f) return vmax;
    int lowered_max = 0;
    float m = -INFINITY;
    for (int i = 0; i < s->n_uniq; i++) {
        int32_t t = s->uniq[i];
        float v = s->cand[t].v;
        lowered_max |= v == vmax;
        if (rp != 1.0f) v = v > 0.0f ? v / rp : v * rp;
        int g = s->cnt_gen[t];
        if (g) v -= (float)g * fp + pp;
        s->cand[t].v = v;
        m = v > m ? v : m;
    }
    if (lowered_max) { // the old maximum may have been penalized: recompute
        m = -INFINITY;
        for (int i = 0; i < s->n_vocab; i++) m = s->cand[i].v > m ? s->cand[i].v : m;
        return m;
    }
    return m > vmax ? m : vmax;
}

// Adds logit_bias to cand (in id order) before anything else sees the logits, so greedy, sampling and
// samp_probs (the speculative verifier's distribution) agree. Returns the new maximum.
static float apply_bias(samp_state *s, float vmax) {
    int lowered_max = 0;
    float m = -INFINITY;
    for (int i = 0; i < s->n_bias; i++) {
        samp_cand *c = &s->cand[s->bias[i].id];
        lowered_max |= c->v == vmax;
        c->v = s->bias[i].bias <= -SAMP_BIAS_MAX ? -INFINITY : c->v + s->bias[i].bias;
        m = c->v > m ? c->v : m;
    }
    if (lowered_max) {
        m = -INFINITY;
        for (int i = 0; i < s->n_vocab; i++) m = s->cand[i].v > m ? s->cand[i].v : m;
        return m;
    }
    return m > vmax ? m : vmax;
}

float samp_penalize(samp_state *s, float vmax) {
    if (s->n_bias) vmax = apply_bias(s, vmax);
    return apply_penalties(s, vmax);
}

double samp_uniform(samp_state *s) { return rng_uniform(s->rng); }
