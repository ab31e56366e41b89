// Grammar-constrained sampling, a step apart from the plain sampler: sample, and if the grammar rejects the
// token, apply the grammar's token mask to the logits and sample again. The first draw is accepted only
// when the grammar allows it, so the result is a draw from the masked distribution (exactly so for greedy
// and plain temperature sampling; with top-k/top-p/min-p the truncation sees the unmasked logits first, as
// in llama.cpp). Checking one token is cheap; the full mask (a trie walk) is only computed on rejection.
#ifndef TACHYON_SAMPLING_SAMP_GRAMMAR_H
#define TACHYON_SAMPLING_SAMP_GRAMMAR_H

#include <stdint.h>

#include "grammar/gram.h"
#include "sampling/sampling.h"

// Writes -1e30 over the logits (n_vocab) of tokens whose bit is clear in bits; returns how many stay.
int samp_apply_mask(float *logits, int n_vocab, const uint32_t *bits);
// Samples a token the grammar allows; logits may be overwritten with the mask. Returns the token, or -1
// when no token can continue the grammar (or out of memory). Does not advance the matcher.
int32_t samp_sample_grammar(samp_state *s, float *logits, int n_vocab, gram_matcher *g, samp_result *res);

#endif
