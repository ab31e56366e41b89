// The llama-server sampler chain's filters as plain functions over a candidate list (internal to
// src/sampling/; exposed for tests). Each one is the scalar reference: straightforward loops with the
// semantics of llama.cpp's samplers of the same name (src/llama-sampling.cpp). Candidates carry the logit
// and, after samp_td_softmax, the probability; a filter either shrinks *n (dropping a tail or reordering)
// or sets logits to -inf, as llama.cpp does, so later filters see the same list llama.cpp's would.
#ifndef TACHYON_SAMP_EXT_H
#define TACHYON_SAMP_EXT_H

#include <stdint.h>

typedef struct samp_td {
    int32_t id;
    float logit;
    float p; // valid after samp_td_softmax
} samp_td;

// Sorts c[0..n) by (logit desc, id asc) and sets p to the softmax of the logits (at temperature 1).
void samp_td_softmax(samp_td *c, int n);
// Keeps the k candidates with the largest logits (sorted); k <= 0 or k >= n: no change but the sort.
void samp_td_top_k(samp_td *c, int *n, int k);
// Logits below max - nsig * std (over the finite logits) become -inf; nsig <= 0 or n <= 1: no change.
void samp_td_top_n_sigma(samp_td *c, int n, float nsig);
// Locally typical sampling: keeps the tokens whose surprise is closest to the entropy until their mass
// exceeds p (at least one); p >= 1: no change. The list comes out in that order. scratch: 2 * n entries.
void samp_td_typical(samp_td *c, int *n, float p, samp_td *scratch);
// Nucleus: the shortest prefix (by probability) whose mass reaches p; p >= 1: no change.
void samp_td_top_p(samp_td *c, int *n, float p);
// Keeps tokens with logit >= max + log(p) (probability >= p * the largest); p <= 0: no change.
void samp_td_min_p(samp_td *c, int *n, float p);
// Exclude Top Choices: when applied (the caller has drawn u < prob), removes every token with probability
// >= thr except the least likely of them. Returns 1 when it removed any. prob <= 0, thr > 0.5 or n < 2: 0.
int samp_td_xtc_applies(float prob, float thr, int n);
int samp_td_xtc(samp_td *c, int *n, float thr);
// Temperature (delta <= 0): logits / t, or only the largest kept (-inf elsewhere) at t <= 0. Dynamic
// temperature (delta > 0, n > 1): t' = lo + (t + delta - lo) * (H / log n)^exponent, lo = max(0, t - delta),
// over the current list's entropy H at temperature 1; logits / t' (t' <= 0: only the largest kept).
void samp_td_temp(samp_td *c, int n, float t, float delta, float exponent);
// Mirostat (Basu et al. 2021) truncation for the current target surprise mu (bits). v1 estimates the Zipf
// exponent from the m most likely tokens and keeps the top k it implies (n_vocab in that estimate);
// v2 keeps the tokens with surprise <= mu (at least one). Both leave c sorted with p renormalized.
void samp_td_mirostat_v1(samp_td *c, int *n, float mu, int n_vocab, int m);
void samp_td_mirostat_v2(samp_td *c, int *n, float mu);
// The surprise update after a draw with probability p_chosen: mu <- mu - eta * (-log2 p_chosen - tau).
float samp_mirostat_update(float mu, float p_chosen, float tau, float eta);

// DRY ("don't repeat yourself", llama.cpp): for history h[0..len) (oldest first), each token that would
// extend a repeat of the history's suffix of length L >= allowed gets logit -= mult * base^(L - allowed).
// A repeat never reaches back over a sequence-breaker token (is_breaker[id] != 0, may be NULL).
// by_id is indexed by token id (by_id[t].id == t); scratch holds 2 * len ints; best (n_vocab ints) is all
// 0 on entry and is left so. Returns how many tokens it penalized.
int samp_dry_apply(samp_td *by_id, const int32_t *h, int len, const uint8_t *is_breaker, float mult, float base,
                   int allowed, int *scratch, int *best);

#endif
