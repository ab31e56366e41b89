// Greedy decoding with speculative verification for the CLI's single sequence (tachyon bench's spec modes):
// the same propose → one verify forward of 1 + d rows → spec_verify loop as `tachyon run`, without printing,
// counting what it drafted and accepted.
#ifndef TACHYON_CLI_GEN_SPEC_H
#define TACHYON_CLI_GEN_SPEC_H

#include "cli/gen.h"
#include "common/err.h"

// Proposer choice of one run: spec_mode values (SPEC_OFF, SPEC_NGRAM, SPEC_AUTO). A draft model plugs in
// here: `draft` (reserved, must be NULL until the draft-model proposer lands) would be a second gen_session.
typedef struct gen_spec_opts {
    int mode;    // spec_mode
    int k;       // drafted tokens per step at most (1..SPEC_MAX_K)
    void *draft; // reserved for --draft-model (NULL)
} gen_spec_opts;

typedef struct gen_spec_stats {
    int n_gen;         // tokens generated (the first one, from the prompt's last row, included)
    long n_drafted, n_accepted, n_steps; // drafted tokens, accepted ones, verify steps with a draft
    double t_prefill;  // seconds
    double t_decode;   // seconds from the first generated token to the last (n_gen - 1 tokens)
} gen_spec_stats;

// Prefills prompt[0..n_prompt) at position 0 and generates n_gen tokens greedily (end-of-generation tokens
// do not stop it: a benchmark wants a fixed length). g must hold n_prompt + n_gen + SPEC_MAX_K positions and
// a batch of at least SPEC_MAX_K + 1. Returns 0 or a TC_ERR_* with err set.
int gen_spec_decode(gen_session *g, const int32_t *prompt, int n_prompt, int n_gen, const gen_spec_opts *o,
                    gen_spec_stats *st, tc_err *err);

#endif
