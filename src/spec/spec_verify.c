// The verifier: the target's sampler decides every row; drafted tokens survive while they agree with it.
#include "spec/spec.h"

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
