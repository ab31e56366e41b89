// Token sampling: greedy, temperature, top-k, top-p, min-p, repetition/presence/frequency penalties,
// seeded RNG (same seed + same logits → same tokens), top-logprobs, and llama-server's samplers (DRY,
// top-n-sigma, typical-p, XTC, dynamic temperature, mirostat v1/v2), min_tokens.
// Two chains. The OpenAI chain (none of llama-server's samplers set): logit bias → penalties → top-k →
// softmax at temperature → top-p → min-p → draw; temperature == 0 means greedy (argmax of the penalized
// logits; ties → lowest id). llama-server's chain (any of DRY, top_n_sigma, typical_p, XTC, dynatemp set),
// in its default order: logit bias → penalties → DRY → top-n-sigma → top-k → typical-p → top-p → min-p →
// XTC → temperature (dynamic) → draw, where top-p and min-p see temperature-1 probabilities and
// temperature 0 keeps the largest survivor. Mirostat (as llama-server): logit bias → temperature → mirostat;
// penalties, DRY and the other filters do not apply. While fewer than min_tokens tokens were accepted,
// the end-of-generation ids (samp_set_eog) and end_ids have probability 0 in every chain.
#ifndef TACHYON_SAMPLING_H
#define TACHYON_SAMPLING_H

#include <stdint.h>

#include "common/err.h"

#define SAMP_MAX_LOGPROBS 20

// One logit_bias entry: added to the token's logit before every other transform (greedy included).
// bias <= -100 bans the token outright (its logit becomes -inf), as OpenAI documents -100.
typedef struct samp_bias {
    int32_t id;
    float bias;
} samp_bias;
#define SAMP_BIAS_MAX 100.0f

typedef struct samp_params {
    float temperature;        // 0 = greedy
    int top_k;                // <= 0: off
    float top_p;              // >= 1: off
    float min_p;              // <= 0: off
    float repetition_penalty; // 1: off (llama.cpp semantics: divide positive logits, multiply negative)
    float presence_penalty;   // 0: off (OpenAI semantics: subtract once if the token occurred)
    float frequency_penalty;  // 0: off (OpenAI semantics: subtract count times)
    int penalty_last_n;       // window of history for penalties; -1 = all
    uint64_t seed;            // RNG seed
    int n_logprobs;           // 0..SAMP_MAX_LOGPROBS top alternatives to report (logprob of the chosen token is always reported)
    int no_logprob;           // 1: nobody reads samp_result's logprob (no logprobs requested, n_logprobs 0): skip the
                              // full-vocabulary log-softmax per sampled row; res gets the token, logprob 0, n_top 0
    const samp_bias *bias;    // (n_bias) borrowed until samp_new returns (it copies them); ids < n_vocab
    int n_bias;
    // llama-server's samplers (llama.cpp semantics; the defaults turn each off)
    float dry_multiplier;     // 0: off
    float dry_base;           // >= 1 (1.75)
    int dry_allowed_length;   // repeats up to this long are free (2)
    int dry_penalty_last_n;   // history DRY looks at; -1 = all of it (up to SAMP_DRY_MAX_N), 0 = off
    const int32_t *dry_breakers; // (n_dry_breakers) token ids a repeat never spans; borrowed until samp_new
    int n_dry_breakers;
    float top_n_sigma;        // <= 0: off
    float typical_p;          // >= 1: off
    float xtc_probability;    // 0: off
    float xtc_threshold;      // > 0.5: off (0.1)
    float dynatemp_range;     // 0: off
    float dynatemp_exponent;  // (1)
    int mirostat;             // 0 off, 1 or 2
    float mirostat_tau;       // target surprise, bits (5)
    float mirostat_eta;       // learning rate (0.1)
    int min_tokens;           // end ids banned until this many tokens were accepted (0: off)
    const int32_t *end_ids;   // (n_end_ids) extra ids banned with the end-of-generation ones under min_tokens
    int n_end_ids;            // (stop_token_ids); borrowed until samp_new
} samp_params;

#define SAMP_DRY_MAX_N 8192 // dry_penalty_last_n -1 looks back this far at most
#define SAMP_MAX_IDS 1024   // dry_breakers, end_ids at most

void samp_params_default(samp_params *p); // greedy, all filters off, penalty_last_n 64, seed 0, llama.cpp's
                                          // defaults for the others (off)

typedef struct samp_result {
    int32_t token;
    float logprob; // log-softmax of the raw (unpenalized, temperature 1) logits at token, as OpenAI reports
    int n_top;
    int32_t top_ids[SAMP_MAX_LOGPROBS];
    float top_logprobs[SAMP_MAX_LOGPROBS];
} samp_result;

typedef struct samp_state samp_state; // opaque; owns scratch sized for the vocabulary

// Validates params (TC_ERR_INVALID with a message naming the field on out-of-range values).
int samp_new(const samp_params *p, int n_vocab, samp_state **out, tc_err *err);
void samp_free(samp_state *s);
// The model's end-of-generation ids (n <= SAMP_MAX_IDS), banned while min_tokens is not reached (copied).
void samp_set_eog(samp_state *s, const int32_t *ids, int n);
// Records a token in the penalty history (call for generated tokens; prompt tokens too for
// repetition_penalty as llama.cpp does — samp_accept_prompt does that without touching OpenAI counts).
void samp_accept(samp_state *s, int32_t token);
void samp_accept_prompt(samp_state *s, const int32_t *tokens, int n);
// Samples from logits (n_vocab floats; not modified). Does not call samp_accept.
int32_t samp_sample(samp_state *s, const float *logits, samp_result *res);
// The final distribution samp_sample would draw from (after all transforms), written as probabilities
// into probs (n_vocab). Used by speculative verification.
void samp_probs(samp_state *s, const float *logits, float *probs);
int samp_is_greedy(const samp_state *s); // always the same token for the same logits and history
// One uniform draw in [0, 1) from the request's RNG (speculative rejection sampling's acceptance test).
double samp_uniform(samp_state *s);
// Fills res for a token chosen elsewhere (a drafted token the verifier accepted): its logprob and the
// request's n_logprobs alternatives under the raw logits, as samp_sample reports them.
void samp_result_for(const samp_state *s, const float *logits, int32_t token, samp_result *res);
// Logprob of `token` under the raw logits (log-softmax, as samp_sample reports) and the n_top best
// alternatives (n_top <= SAMP_MAX_LOGPROBS): scoring tokens that were given, not sampled (prompt logprobs).
void samp_logprobs(const float *logits, int n_vocab, int32_t token, int n_top, samp_result *res);

#endif
