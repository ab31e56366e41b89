// The verifier: the target's sampler decides every row; drafted tokens survive while they agree with it.
#include "speculation/spec.h"

int spec_verify(samp_state *s, const float *logits, int n_vocab, const int32_t *draft, int n_draft, int32_t *out,
                samp_result *res) {
    int i = 0;
    for (;; i++) {
        // y ~ p (the sampler's final distribution for this row). With a one-hot draft at x, accepting iff
        // y == x is the rejection test (probability p(x)), and a rejected y is p conditioned on y != x.
        int32_t y = samp_sample(s, logits + (size_t)i * n_vocab, &res[i]);
        samp_accept(s, y);
        out[i] = y;
        if (i == n_draft || y != draft[i]) break;
    }
    return i + 1;
}

int spec_verify_q(samp_state *s, const float *logits, int n_vocab, const int32_t *draft, const float *q, int n_draft,
                  int32_t *out, samp_result *res, float *probs) {
    if (!q) return spec_verify(s, logits, n_vocab, draft, n_draft, out, res);
    for (int i = 0; i < n_draft; i++) {
        const float *row = logits + (size_t)i * n_vocab, *qi = q + (size_t)i * n_vocab;
        samp_probs(s, row, probs); // p after every sampler setting, penalties seeing this step's accepts
        int32_t x = draft[i];
        double px = probs[x], qx = qi[x];
        // accept with probability min(1, p/q): u·q < p (q(x) > 0 since x was drawn from q)
        if (qx > 0 && samp_uniform(s) * qx < px) {
            out[i] = x;
            samp_result_for(s, row, x, &res[i]);
            samp_accept(s, x);
            continue;
        }
        // rejected: y ~ normalize(max(0, p - q)); the residual is empty only if p == q (then x was
        // accepted with probability 1), so a zero total only comes from rounding: fall back to p
        double z = 0;
        for (int v = 0; v < n_vocab; v++) {
            float d = probs[v] - qi[v];
            probs[v] = d > 0 ? d : 0;
            z += probs[v];
        }
        int32_t y = -1;
        if (z > 0) {
            double u = samp_uniform(s) * z, acc = 0;
            int last = -1;
            for (int v = 0; v < n_vocab && y < 0; v++) {
                if (probs[v] > 0) last = v;
                acc += probs[v];
                if (u < acc) y = v;
            }
            if (y < 0) y = last;
        }
        if (y < 0) y = samp_sample(s, row, &res[i]);
        else samp_result_for(s, row, y, &res[i]);
        res[i].token = y;
        samp_accept(s, y);
        out[i] = y;
        return i + 1;
    }
    out[n_draft] = samp_sample(s, logits + (size_t)n_draft * n_vocab, &res[n_draft]);
    samp_accept(s, out[n_draft]);
    return n_draft + 1;
}
