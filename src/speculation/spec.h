// Speculative decoding: proposers guess the next tokens of a request for free (no model time), the target
// model scores the guesses in ONE item of the ragged batch (the last sampled token + k drafted tokens, logits
// for every row), and the verifier keeps the longest prefix the target agrees with plus the target's own next
// token. Each step yields 1..k+1 tokens. The policy picks k per request from its acceptance rate and the
// step-cost model so that speculation only runs when it pays.
#ifndef TACHYON_SPEC_H
#define TACHYON_SPEC_H

#include <stdint.h>

#include "sampling/sampling.h"

#define SPEC_MAX_K 16 // drafted tokens per request per step at most
#define SPEC_NGRAM_MAX_N 4     // prediction re-alignment: the output's last n tokens, n = 4..1
#define SPEC_NGRAM_MAX_L 64    // prompt lookup: the longest common suffix that counts
#define SPEC_NGRAM_WORK 65536  // prompt lookup: token comparisons per proposal, at most (about)
#define SPEC_NGRAM_LONG 5      // prompt lookup: a match this long drafts the full k (a passage being copied)
#define SPEC_NGRAM_COPY 3      // prompt lookup: a match this long is judged by the copy record (pl, plc)

// SPEC_DRAFT: a draft model (--draft-model); SPEC_SELF: the target's first L layers (--self-spec-layers).
typedef enum { SPEC_OFF = 0, SPEC_NGRAM, SPEC_AUTO, SPEC_DRAFT, SPEC_SELF } spec_mode;

// Where a draft came from: the `method` label of the speculation metrics.
typedef enum { SPEC_M_NGRAM = 0, SPEC_M_PRED, SPEC_M_DRAFT, SPEC_M_SELF, SPEC_N_METHODS } spec_method;
const char *spec_method_name(spec_method m); // "ngram", "prediction", "draft", "self"

// "off" | "ngram" | "auto" | "draft" | "self" → mode; -1 when unknown.
int spec_mode_parse(const char *s);
const char *spec_mode_name(spec_mode m);

// --- proposers

// Prompt lookup (n-gram): finds, among the earlier occurrences of the last token of tokens[0..n_tokens), the one
// with the longest common suffix L with the whole sequence (up to SPEC_NGRAM_MAX_L; the most recent among
// equals), and copies the tokens that followed it into out: up to k, and fewer for a short match (L = 1: 1 token, 2: 2,
// 3-4: 4, 5 or more: k). Returns how many (0: no match). Searches the prompt and the output so far alike. The
// longest suffix, not the most recent short n-gram, is what follows a passage being copied in order (a
// repeated `if shape == "` has many earlier occurrences, only one of them after the same preceding line).
int spec_ngram_propose(const int32_t *tokens, int n_tokens, int k, int32_t *out);
// The same, with matches of at least min_n tokens only. `auto`'s 1-token probes (spec_accept_pick, while
// drafting does not pay) use min_n = 2: on free text a one-token match (a common word) is accepted often
// enough to reset the probe back-off now and then, and each probe costs a verify row, while a repeated pair of
// tokens is the sign that the output started copying.
int spec_ngram_propose_min(const int32_t *tokens, int n_tokens, int k, int min_n, int32_t *out);
// The match spec_ngram_propose drafts from: returns its suffix length L (0: none) and sets *from (if not NULL)
// to the index of the first token it would draft.
int spec_ngram_match(const int32_t *tokens, int n_tokens, int *from);
// The draft of a match found by spec_ngram_match (len, from) on the same tokens: spec_ngram_propose_min's
// result, for a caller that looked at the match first (auto prices a long match's draft apart).
int spec_ngram_draft(const int32_t *tokens, int n_tokens, int len, int from, int k, int min_n, int32_t *out);

// Predicted output (OpenAI `prediction`): the expected completion, tokenized, as the draft source. The cursor
// follows the output; after a mismatch it is re-aligned by finding the output's last tokens in the prediction
// again (the first occurrence at or after the old cursor, else the last one before it). A prediction is
// trusted until the output first leaves it; after that it drafts only where the output agrees with it again
// on SPEC_PRED_REJOIN tokens or more (a re-alignment on one common token, " the", means nothing).
typedef struct spec_pred {
    int32_t *tokens; // (n) owned, free with spec_pred_free
    int n;
    int pos;         // index in tokens of the next expected output token; n = exhausted
    int n_seen;      // generated tokens already followed
    int run;         // the output's last tokens that agree with it up to the cursor: the ones followed in a row,
                     // plus those a re-alignment matched on (0 when lost)
    int left;        // the output left it and has not agreed with it on SPEC_PRED_REJOIN tokens since
    int strayed;     // the output has left it at least once (from then on its drafts are bounded by run)
    int drafting;    // its tokens are the current draft (spec_pred_propose); cleared when the output is followed
    int sh_n, sh_m;  // a draft it did not make: of the sh_n output tokens the last follow compared while it agreed
                     // with the output and did not draft, the first sh_m followed it (read by the policy, which
                     // clears them)
    int n_followed;  // its tokens that appeared in the output: the ones the output followed, and the ones a
                     // re-alignment found on 2 or more tokens ahead of the cursor
} spec_pred;

#define SPEC_PRED_REJOIN 4 // tokens the output must agree on with a prediction it left before it drafts again

void spec_pred_free(spec_pred *p);
// Follows the generated tokens new since the last call (gen: ALL generated tokens so far, n_gen): the cursor
// advances while they match, and is re-aligned when they leave the prediction.
void spec_pred_follow(spec_pred *p, const int32_t *gen, int n_gen);
// out: up to k tokens predicted to follow `gen` (spec_pred_follow first). Returns how many.
int spec_pred_propose(spec_pred *p, const int32_t *gen, int n_gen, int k, int32_t *out);

// --- verifier

// Verifies n_draft drafted tokens against the target's logits rows (n_draft + 1 rows of n_vocab, row i
// predicting the token after draft[i-1]). Row by row, the request's sampler (samp_sample: the full pipeline,
// penalties seeing the tokens accepted so far in this step) draws the target's token y_i, which is recorded
// with samp_accept; verification stops after the first y_i != draft[i] or after the last row.
// For a deterministic draft (q one-hot at x) this IS standard speculative rejection sampling: P(accept x) =
// p(x), and when rejected, y is distributed as p with x removed and renormalised — the residual
// normalize(max(0, p - q)). It draws one uniform per emitted token, exactly as decoding without speculation
// does, so a seed gives the same tokens with speculation on or off. Greedy: y_i is the argmax.
// Writes y_0..y_a (a = accepted drafts, 0..n_draft) to out and res (both n_draft + 1 long); returns a + 1.
int spec_verify(samp_state *s, const float *logits, int n_vocab, const int32_t *draft, int n_draft, int32_t *out,
                samp_result *res);

// The same with the draft's distribution q (n_draft rows of n_vocab probabilities, row i the distribution
// draft[i] was drawn from), for a draft that is not deterministic (a sampled draft model): standard speculative
// rejection sampling. Row i accepts draft[i] = x with probability min(1, p(x)/q(x)) (p: the sampler's final
// distribution, samp_probs), else draws y from normalize(max(0, p - q)) and stops; after n_draft acceptances
// the last row draws from p. The output is distributed exactly as p row by row. q == NULL: spec_verify (a
// deterministic draft, q one-hot; the same tokens as plain decoding for a seed). probs: n_vocab floats scratch.
int spec_verify_q(samp_state *s, const float *logits, int n_vocab, const int32_t *draft, const float *q, int n_draft,
                  int32_t *out, samp_result *res, float *probs);

// --- policy (adaptive k)

// Per-request acceptance estimate. Acceptance comes in runs (a draft that copies a passage is accepted to its
// end; one that guessed the wrong place fails at its first token), so it is modelled as a chain: p1, the
// probability that the target accepts a draft's first token, and pc, that it accepts a later one given that it
// accepted the one before (one per-token rate made k = 4 look best where drafts were accepted whole or not at
// all). Both from exponentially decayed counts of acceptances and tries (a step's drafts after its first
// rejection are never tried); `rate` is the per-token rate over all positions.
typedef struct spec_accept {
    float acc_w, try_w; // decayed acceptances and tries, every position (a prior of 0.5 of one try to start)
    float f_acc, f_try; // the same, first positions only
    float c_acc, c_try; // the same, later positions only
    float l_acc, l_try;   // the same, drafts from a long prompt-lookup match only: first positions
    float lc_acc, lc_try; // and later positions
    float rate;   // acc_w / try_w, in [0, 1]
    float p1, pc; // f_acc / f_try, c_acc / c_try
    float pl, plc; // l_acc / l_try, lc_acc / lc_try: p1 and pc of long-match drafts
    int n_obs;    // verify steps seen
    int idle;     // steps since the last draft while the estimate said it does not pay
    int backoff;  // steps between 1-token probes while it does not pay (doubles after a failed probe)
    int probing;  // the current draft is a probe
    int long_match; // the current draft is from a copy match of prompt lookup (spec_accept_pick_match)
} spec_accept;

void spec_accept_init(spec_accept *a);
void spec_accept_observe(spec_accept *a, int n_draft, int n_accepted);
// k for this step: k_max before the first verify step (a try at the full k), then spec_pick_k with the
// request's estimate; when that says 0, a 1-token probe every
// `backoff` steps (1, 2, 4 … 64 after failed probes) notices when the text turns repetitive, at a cost of at
// most one row per 64 steps once it has not paid for a while.
int spec_accept_pick(spec_accept *a, int k_max, double t_a, double t_b, int n_rows, double n_other_tok);
// The same when the draft will come from prompt lookup with a match of match_len tokens: a match of
// SPEC_NGRAM_COPY or more tokens (the output copying a passage: drafts of 4 (ngram_cap), then the full k from
// SPEC_NGRAM_LONG) is priced with its own chain (pl, plc; priors 0.8 and 0.95 of one try): drafts from shorter
// matches, a common word or symbol, fail often and would keep p1 and pc low when the copying resumes after an
// edit. A short match or a copy match that does not pay: as spec_accept_pick.
int spec_accept_pick_match(spec_accept *a, int match_len, int k_max, double t_a, double t_b, int n_rows,
                           double n_other_tok);

// Expected tokens a step yields with k drafts under the chain above: 1 + p1·(1 + pc + … + pc^(k-1)) (with
// p1 = pc, independent acceptances: 1 + p + … + p^k).
double spec_expected_tokens(double p1, double pc, int k);

// The k in [0, k_max] that maximises the batch's expected tokens per second of step time, with the step time
// modelled as t(n) = a + b·n (seconds, n = rows): (n_other_tok + E(k)) / t(n_rows + k), where n_rows is the
// step's rows without this draft and n_other_tok the tokens the rest of the step yields. 0 when it does not pay.
int spec_pick_k(double p1, double pc, int k_max, double a, double b, int n_rows, double n_other_tok);

#endif
