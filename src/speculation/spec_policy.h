// The draft-length rule: how many tokens a request drafts this step, and whether the drafter (draft model or
// self-speculation) or a free proposer (prediction, prompt lookup) drafts them. It lives here once, with its
// cost model (spec_costs) and the per-request acceptance estimate (spec.h's spec_accept); the engine asks it
// once per decoding request while it plans a step (engine_step.c eng_draft) and tells it what each step and
// each draft run cost.
#ifndef TACHYON_SPEC_POLICY_H
#define TACHYON_SPEC_POLICY_H

#include <stdint.h>

#include "sched/step_cost.h"
#include "speculation/spec.h"
#include "speculation/spec_itl.h"

// What a drafted row costs, measured on one engine. Plain data, no ownership.
typedef struct spec_costs {
    step_cost verify;  // cost line of decode/verify-only steps: prices verify rows (a prefill row costs otherwise)
    double draft_pos;  // seconds per position of a model draft run, EWMA (0: not measured yet)
    spec_itl itl;      // the streams' recent gaps as they would have been without drafts (several streams)
} spec_costs;

void spec_costs_init(spec_costs *c);
// A decode/verify-only step of rows rows that took seconds (decode_only 0: a step with prefill rows, which
// says nothing of a verify row). With track_itl (auto with several streams, its only reader) its plain part
// (rows - n_drafted) enters the gaps' window once per decoding stream that got a token after an earlier one.
void spec_costs_observe_step(spec_costs *c, int rows, int n_drafted, int n_gaps, int decode_only, double seconds,
                             int track_itl);
// One run of the drafter that took seconds for drafts of k_max positions at most, after catch_up rows at
// most before draft 0. Only steady-state runs (catch_up <= 2) are priced: a first draft catching up on a whole
// prompt is a one-off that would price the drafter out of `auto` for good (nothing re-measures it then).
void spec_costs_observe_draft(spec_costs *c, double seconds, int k_max, int catch_up);

// The step being planned, as the rule sees it. Reset with spec_step_begin before each plan.
typedef struct spec_step {
    int mode;              // spec_mode of the engine
    int max_streams;       // auto drafts only while at most this many requests decode
    int n_waiting, n_catching, n_decoding; // the scheduler's view (sched_draft_info)
    int have_fit;          // the scheduler's step-cost line is known: t(n) = ga + gb·n seconds
    double ga, gb;
    int n_drafts;          // rows drafted so far in this step
    double extra_tok;      // tokens those drafts are expected to add (beyond one per request)
    double draft_s;        // seconds of draft forwards those drafts need (the longest model draft)
} spec_step;

void spec_step_begin(spec_step *s, int mode, int max_streams);

// One decoding request's question.
typedef struct spec_ask {
    int k;                 // drafts allowed (spec_k, the scheduler's room, the step's free logits rows), > 0
    int may_model;         // the drafter may draft for it
    spec_pred *pred;       // its prediction, followed up to the output so far (spec_pred_follow), or NULL
    spec_accept *pacc;     // the record of the prediction's drafts (with pred)
    const int32_t *tokens; // (n_tokens) its tokens so far, borrowed: prompt lookup's text
    int n_tokens;
} spec_ask;

// The number of tokens to draft (0: none this step), and in *src where from: SPEC_M_DRAFT (the drafter),
// SPEC_M_PRED or SPEC_M_NGRAM. acc is the record of the drafter's and prompt lookup's drafts. When the rule
// looked up prompt lookup's match, *ng_len and *ng_from are set (spec_ngram_match); else *ng_len stays as it
// was. Fixed modes (ngram, draft, self) draft q->k, with the drafter where one may draft, else by prompt
// lookup. `auto` backs off while prompts wait or prefill and above max_streams decoding streams, bounds a
// multi-stream step by the gaps' window (spec_itl.h), and picks k from the records and the rows' prices
// (spec_pick_k, spec_accept_pick, spec_accept_pick_match). A prediction drafts while its own record says it
// pays, agrees with the output (spec_pred: not left) and has tokens at the cursor (spec_pred_pick); else prompt
// lookup does, on its own record, so a prediction that turned wrong costs no more than none.
int spec_policy_k(const spec_costs *c, const spec_step *s, spec_accept *acc, const spec_ask *q, int *src,
                  int *ng_len, int *ng_from);
// Which free proposer drafts when the prediction and prompt lookup (a long match: SPEC_NGRAM_LONG) both have
// a draft and the drafts differ (at their first differing position `at`). Until the output has settled one
// such difference, neither guesses: only the common part (the first `at` tokens) is drafted, and the target's
// own token at `at` (the verify step's extra token, or the plain step's when at = 0) tells which one was right,
// at no rejected row. From then on the one that was right at the last settled difference drafts, and a wrong
// choice (its draft rejected at `at` where the other had it) turns the preference. So a prediction that turns
// wrong where the answer copies its context, or a long match the answer edits, costs at most one step's tail.
// Zeroed = initial.
typedef struct spec_arbiter {
    int learned;       // a difference has been settled by the output
    int prefer_pred;   // of the last settled difference: 1 the prediction was right, 0 prompt lookup
    int pending;       // this step's draft was chosen at a difference and awaits its verdict
    int at;            // the position where the two differ
    int chose_pred;    // which proposer drafted past it (1 prediction, 0 prompt lookup, -1 neither)
    int32_t pred_tok, ngram_tok; // the two tokens at `at`
} spec_arbiter;

#define SPEC_ARB_PRED 0   // the prediction's draft
#define SPEC_ARB_NGRAM 1  // prompt lookup's draft
#define SPEC_ARB_COMMON 2 // their common part only (at tokens; none when at = 0)

// The draft for this step given the two drafts' first differing position `at` and their tokens there:
// SPEC_ARB_PRED also when they agree (pred_tok == ngram_tok: its draft may run longer). Only a difference
// is remembered (pending) for spec_arbiter_observe.
int spec_arbiter_pick(spec_arbiter *a, int at, int32_t pred_tok, int32_t ngram_tok);
// The verdict of the step drafted after spec_arbiter_pick: n_accepted of its drafted tokens were accepted and
// `actual` is the target's token at position n_accepted (the first rejected one, or the one after the draft).
void spec_arbiter_observe(spec_arbiter *a, int n_accepted, int32_t actual);

// The prediction's draft length (0: it does not draft). 0 while the output has left it (spec_pred.left) or it
// has nothing at the cursor. Until the output first leaves it: k_max, then k from its record (spec_pick_k).
// After that, when the output agrees with it again: k from its record, at most half the run of tokens the
// output agrees on (spec_pred.run): a rejoin starts with a short draft that grows as the output follows it.
// No probes: a prediction's record learns from the output for free (spec_pred_shadow).
int spec_pred_pick(const spec_pred *p, spec_accept *pacc, int k_max, double t_a, double t_b, int n_rows,
                   double n_other_tok);
// Enters the draft the prediction could have made and did not (spec_pred.sh_n, sh_m: what the output did) into
// its record as if it had been drafted and verified, and clears it: where the output follows it again its
// record recovers, where a re-alignment was a coincidence it falls, without a verify row spent on either.
void spec_pred_shadow(spec_pred *p, spec_accept *pacc);
// A verify step's verdict into a record: d drafted (0: none), a accepted, next the target's own token after
// them; shadow (-1: none) the token prompt lookup would have drafted at position d (after its draft, or its
// first with no draft). Where every draft was accepted, that position is judged for free by next: a record
// that fell (a draft of 1 never tries a second position) climbs back as the output copies again, without
// paying verify rows for it.
void spec_observe_step(spec_accept *acc, int d, int a, int32_t next, int32_t shadow);

// The draft length of a long prompt-lookup match (SPEC_NGRAM_LONG) by its own record (acc's pl, plc) at this
// step's prices, for a prediction's draft that the match agrees with and would run further, or that the arbiter
// set aside: k_max before any verify step; 0 with several decoding streams (their room is spec_policy_k's).
int spec_policy_long_k(const spec_costs *c, const spec_step *s, const spec_accept *acc, int k_max);

// Counts a planned draft of d rows (src: spec_policy_k's, acc: the record it was picked with) into the step,
// for the requests asked after it.
void spec_step_add(spec_step *s, const spec_costs *c, const spec_accept *acc, int d, int src);

#endif
