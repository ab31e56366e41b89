// Grammar-constrained sampling (see samp_grammar.h).
#include "sampling/samp_grammar.h"

// A large finite value rather than -inf: softmax gives it 0 probability, and logprobs stay valid JSON numbers.
#define SAMP_MASKED (-1e30f)

int samp_apply_mask(float *logits, int n_vocab, const uint32_t *bits) {
    int kept = 0;
    for (int i = 0; i < n_vocab; i++) {
        if ((bits[i >> 5] >> (i & 31)) & 1) kept++;
        else logits[i] = SAMP_MASKED;
    }
    return kept;
}

int32_t samp_sample_grammar(samp_state *s, float *logits, int n_vocab, gram_matcher *g, samp_result *res) {
    int32_t tok = samp_sample(s, logits, res);
    if (gram_matcher_token_ok(g, tok)) return tok;
    const uint32_t *bits = gram_matcher_mask(g);
    if (!bits || samp_apply_mask(logits, n_vocab, bits) == 0) return -1;
    return samp_sample(s, logits, res);
}
