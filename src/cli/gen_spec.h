// Speculative decoding for the CLI's single sequence (tachyon run, tachyon bench's spec modes): propose →
// one verify forward of 1 + d rows → spec_verify, with the engine's proposers (prompt lookup, and the draft
// model or self-speculation through the same spec_drafter the engine drives) and the engine's `auto` policy.
#ifndef TACHYON_CLI_GEN_SPEC_H
#define TACHYON_CLI_GEN_SPEC_H

#include "cli/gen.h"
#include "common/err.h"
#include "sampling/sampling.h"
#include "spec/spec_draft.h"

// Proposer choice of one run.
typedef struct gen_spec_opts {
    int mode;             // spec_mode: SPEC_OFF, _NGRAM, _AUTO, _DRAFT, _SELF
    int k;                // drafted tokens per step at most (1..SPEC_MAX_K)
    spec_drafter *draft;  // borrowed, from gen_spec_drafter_new, or NULL: _DRAFT/_SELF need it; _AUTO uses it
                          // where its measured cost pays (as the engine's eng_draft does)
} gen_spec_opts;

typedef struct gen_spec_stats {
    int n_gen;         // tokens generated (the first one, from the prompt's last row, included)
    long n_drafted, n_accepted, n_steps; // drafted tokens, accepted ones, verify steps with a draft
    long n_model_drafted;                // of n_drafted, drafted by the model (draft model or self)
    double t_prefill;  // seconds (prompt forward)
    double t_first;    // seconds from the start to the first token
    double t_decode;   // seconds from the first generated token to the last (n_gen - 1 tokens)
} gen_spec_stats;

// The drafter the engine would build for these options (engine.c new_drafter) over session g's model (the
// target): the draft model when given and mode is SPEC_DRAFT or SPEC_AUTO (its vocabulary checked against the
// target's: TC_ERR_INVALID with the first difference); the target's first self_layers layers for SPEC_SELF
// (0: n_layers / 4) or for SPEC_AUTO with self_layers > 0, drafting in g's own runner and KV (g must outlive
// it; a CPU session only: TC_ERR_UNSUPPORTED on another device); else none (*out NULL). max_ctx: tokens of
// draft KV; k: drafts per step at most. Owned by the caller: spec_drafter_free.
// Self-speculation resumes the verify rows in the CPU forward only: TC_ERR_UNSUPPORTED with a message when these
// options would build a self-speculation drafter (mode, whether a draft model is given, self_layers as
// gen_spec_drafter_new takes them) on another device. For the CLI to refuse before it opens anything.
int gen_spec_device_check(int mode, int have_draft_model, int self_layers, backend_device dev, tc_err *err);
int gen_spec_drafter_new(gen_session *g, model *draft_model, int mode, int self_layers, int max_ctx, int k,
                         int n_threads, spec_drafter **out, tc_err *err);

// Called with every generated token in order; returns nonzero to stop generating (an end-of-generation token).
typedef int (*gen_spec_emit_fn)(void *ctx, int32_t tok);

// Prefills prompt[0..n_prompt) at position 0 and generates up to n_gen tokens with sampler ss (borrowed; its
// prompt already accepted): greedy ss gives the same tokens in every mode. emit (may be NULL) sees each token.
// A sampled ss draws a model draft from q = softmax(draft logits / temperature) and verifies it with
// spec_verify_q. g must hold n_prompt + n_gen positions and a batch of at least SPEC_MAX_K + 1.
// Returns 0 or a TC_ERR_* with err set.
int gen_spec_generate(gen_session *g, samp_state *ss, float temperature, uint64_t seed, const int32_t *prompt,
                      int n_prompt, int n_gen, const gen_spec_opts *o, gen_spec_emit_fn emit, void *ctx,
                      gen_spec_stats *st, tc_err *err);

// Greedy, end-of-generation tokens do not stop it (a benchmark wants a fixed length).
int gen_spec_decode(gen_session *g, const int32_t *prompt, int n_prompt, int n_gen, const gen_spec_opts *o,
                    gen_spec_stats *st, tc_err *err);

#endif
