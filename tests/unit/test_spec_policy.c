// auto's choice of draft source and length (spec_policy.h), with an OpenAI prediction: a prediction that the
// output left stops drafting at once and prompt lookup takes over (no probes from it); a re-alignment on a
// common token is no rejoin; a real rejoin starts with a short draft that grows; a prediction whose record
// fell comes back when the output follows it, learnt for free; the arbiter settles a difference at any
// position of the two drafts. The simulated request below is the engine's loop (follow, ask, propose, verify,
// observe) over a known output, so the counts are those a server would see.
#include <stdlib.h>
#include <string.h>

#include "speculation/spec.h"
#include "speculation/spec_policy.h"
#include "test_util.h"

#define N_OUT 64   // the request's output tokens
#define COMMON 7   // a token that both the output and the wrong text contain often (" the")

// A request whose answer copies its prompt (prompt lookup finds it) and carries a prediction.
typedef struct sim {
    int32_t toks[4 * N_OUT]; // prompt, then the output so far
    int n_prompt, n;
    int32_t truth[N_OUT];    // the output the target produces
    spec_pred p;
    spec_accept acc, pacc;
    spec_costs c;
    int pred_drafted, pred_rejected, ngram_drafted, pred_drafts_after; // after: drafts once the output left it
    int steps, no_shadow; // verify steps taken; 1: prompt lookup's record ignores the free verdicts
} sim;

static int32_t truth_tok(int i) { return i % 5 == 4 ? COMMON : 1000 + i; }
static int32_t wrong_tok(int i) { return i % 4 == 1 ? COMMON : 2000 + i; }

// The step being planned: one decoding stream, steps of 10 ms + 1 ms per row (a row at 10% of a step).
static void one_stream(spec_step *st) {
    spec_step_begin(st, SPEC_AUTO, 1);
    st->n_decoding = 1, st->have_fit = 1, st->ga = 0.010, st->gb = 0.001;
}

static void sim_init(sim *s, const int32_t *pred, int n_pred) {
    memset(s, 0, sizeof *s);
    for (int i = 0; i < N_OUT; i++) s->truth[i] = truth_tok(i);
    s->toks[s->n++] = 1, s->toks[s->n++] = 2;
    for (int i = 0; i < N_OUT; i++) s->toks[s->n++] = s->truth[i]; // "repeat this:"
    s->toks[s->n++] = 3;
    s->n_prompt = s->n;
    if (pred) {
        s->p.tokens = malloc((size_t)n_pred * sizeof *s->p.tokens);
        memcpy(s->p.tokens, pred, (size_t)n_pred * sizeof *pred);
        s->p.n = n_pred;
    }
    spec_accept_init(&s->acc);
    spec_accept_init(&s->pacc);
    spec_costs_init(&s->c);
}

// One decode step: the rule with rows at 10% of a step (10 ms + 1 ms per row), the draft verified against
// the truth, the accepted tokens and the target's own appended.
static void sim_step(sim *s) {
    int32_t *gen = s->toks + s->n_prompt;
    const int n_gen = s->n - s->n_prompt;
    spec_pred_follow(&s->p, gen, n_gen);
    spec_step st;
    one_stream(&st);
    spec_ask q = {.k = 8, .pred = s->p.tokens ? &s->p : NULL, .pacc = &s->pacc, .tokens = s->toks, .n_tokens = s->n};
    int src = -1, ng_len = -1, ng_from = 0, d = 0;
    int32_t draft[SPEC_MAX_K];
    const int k = spec_policy_k(&s->c, &st, &s->acc, &q, &src, &ng_len, &ng_from);
    if (k > 0 && src == SPEC_M_PRED) d = spec_pred_propose(&s->p, gen, n_gen, k, draft);
    else if (k > 0) {
        if (ng_len < 0) ng_len = spec_ngram_match(s->toks, s->n, &ng_from);
        d = spec_ngram_draft(s->toks, s->n, ng_len, ng_from, k, s->acc.probing ? 2 : 1, draft);
    }
    if (d == 0) s->acc.probing = s->acc.long_match = 0;
    int32_t shadow = -1; // as the engine: prompt lookup's token after its draft, where its record is its own
    if (!q.pred && !s->no_shadow && src != SPEC_M_PRED) {
        if (ng_len < 0) ng_len = spec_ngram_match(s->toks, s->n, &ng_from);
        shadow = ng_len >= 1 && ng_from + d < s->n ? s->toks[ng_from + d] : -1;
    }
    int a = 0;
    while (a < d && n_gen + a < N_OUT && draft[a] == s->truth[n_gen + a]) a++;
    const int32_t next = n_gen + a < N_OUT ? s->truth[n_gen + a] : -1;
    if (d > 0) spec_observe_step(src == SPEC_M_PRED ? &s->pacc : &s->acc, d, a, next, shadow);
    else if (shadow >= 0) spec_observe_step(&s->acc, 0, 0, next, shadow);
    s->steps++;
    if (d > 0 && src == SPEC_M_PRED) {
        s->pred_drafted += d, s->pred_rejected += d - a;
        s->pred_drafts_after += s->p.strayed;
    } else s->ngram_drafted += d;
    for (int i = 0; i <= a && s->n - s->n_prompt < N_OUT; i++) s->toks[s->n] = s->truth[s->n - s->n_prompt], s->n++;
}

static void sim_run(sim *s) {
    for (int steps = 0; s->n - s->n_prompt < N_OUT && steps < 4 * N_OUT; steps++) sim_step(s);
    CHECK_EQ_INT(s->n - s->n_prompt, N_OUT);
}

// The answer's first half, then other text in which the common token recurs (a coincidental re-alignment on it
// every few tokens): after its first failed draft the prediction drafts nothing more, and prompt lookup (the
// answer copies the prompt) drafts the rest.
static void test_half_wrong(void) {
    int32_t pred[N_OUT];
    for (int i = 0; i < N_OUT; i++) pred[i] = i < N_OUT / 2 ? truth_tok(i) : wrong_tok(i);
    sim s;
    sim_init(&s, pred, N_OUT);
    sim_run(&s);
    CHECK_MSG(s.pred_rejected <= 8, "%d prediction tokens drafted and rejected (one draft of 8 at most)",
              s.pred_rejected);
    CHECK_MSG(s.pred_drafts_after == 0, "%d prediction drafts after the output left it", s.pred_drafts_after);
    CHECK_MSG(s.pred_drafted - s.pred_rejected >= N_OUT / 2 - 8, "%d accepted from the right half",
              s.pred_drafted - s.pred_rejected);
    CHECK_MSG(s.ngram_drafted >= 8, "prompt lookup drafted %d after the prediction went wrong", s.ngram_drafted);
    spec_pred_free(&s.p);
}

// A prediction that is all wrong text except the common token: it never drafts after its first try.
static void test_all_wrong(void) {
    int32_t pred[N_OUT];
    for (int i = 0; i < N_OUT; i++) pred[i] = wrong_tok(i);
    sim s;
    sim_init(&s, pred, N_OUT);
    sim_run(&s);
    CHECK_MSG(s.pred_rejected <= 8 && s.pred_drafts_after == 0, "%d rejected, %d drafts after the first",
              s.pred_rejected, s.pred_drafts_after);
    spec_pred_free(&s.p);
}

// Re-alignment: one common token is no rejoin; four tokens of agreement are; then a short draft that grows.
static void test_rejoin(void) {
    spec_pred p = {0};
    p.n = 32;
    p.tokens = malloc(32 * sizeof *p.tokens);
    for (int i = 0; i < 32; i++) p.tokens[i] = i % 4 == 3 ? COMMON : 100 + i;
    spec_accept pacc, acc;
    spec_accept_init(&pacc);
    spec_accept_init(&acc);
    spec_costs c;
    spec_costs_init(&c);
    spec_step st;
    one_stream(&st);
    const int32_t toks[] = {50, 51, 52};
    spec_ask q = {.k = 8, .pred = &p, .pacc = &pacc, .tokens = toks, .n_tokens = 3};
    int src = -1, ng_len = -1, ng_from = 0;
    int32_t gen[40];
    int n = 0;
    for (; n < 4; n++) gen[n] = p.tokens[n]; // followed: 100 101 102 COMMON
    spec_pred_follow(&p, gen, n);
    CHECK(!p.left && !p.strayed && p.run == 4);
    CHECK_EQ_INT(spec_policy_k(&c, &st, &acc, &q, &src, &ng_len, &ng_from), 8); // trusted: the full k
    CHECK_EQ_INT(src, SPEC_M_PRED);
    gen[n++] = 99, gen[n++] = COMMON; // the output leaves it, then has the common token
    spec_pred_follow(&p, gen, n);
    CHECK(p.left && p.strayed && p.run == 1 && p.pos == 8); // re-aligned after the next COMMON, not rejoined
    spec_policy_k(&c, &st, &acc, &q, &src, &ng_len, &ng_from);
    CHECK_EQ_INT(src, SPEC_M_NGRAM);
    for (int i = 8; i < 11; i++) gen[n++] = p.tokens[i]; // it follows for 3 more: 4 in agreement
    spec_pred_follow(&p, gen, n);
    CHECK(!p.left && p.run == 4);
    for (int i = 0; i < 6; i++) spec_accept_observe(&pacc, 8, 8); // its record from before it left: the full k
    int k = spec_policy_k(&c, &st, &acc, &q, &src, &ng_len, &ng_from);
    CHECK_EQ_INT(src, SPEC_M_PRED);
    CHECK_MSG(k >= 1 && k <= 2, "k %d right after a rejoin", k);
    int32_t out[SPEC_MAX_K];
    int d = spec_pred_propose(&p, gen, n, k, out);
    for (int i = 0; i <= d; i++) gen[n + i] = p.tokens[11 + i]; // all accepted, plus the target's token
    spec_accept_observe(&pacc, d, d);
    n += d + 1;
    spec_pred_follow(&p, gen, n);
    int k2 = spec_policy_k(&c, &st, &acc, &q, &src, &ng_len, &ng_from);
    CHECK_MSG(src == SPEC_M_PRED && k2 > k, "k %d then %d: it grows as the output follows", k, k2);
    // a 4-token re-alignment (the output skipped a stretch of it) is a rejoin by itself
    gen[n++] = 98;
    for (int i = 24; i < 28; i++) gen[n++] = p.tokens[i];
    spec_pred_follow(&p, gen, n);
    CHECK(!p.left && p.run == 4 && p.pos == 28);
    spec_pred_free(&p);
}

// A prediction whose record fell (its drafts failed) returns when the output follows it: what it would have
// drafted is learnt from the output (spec_pred_shadow), without a probe row.
static void test_comes_back(void) {
    spec_pred p = {0};
    p.n = 64;
    p.tokens = malloc(64 * sizeof *p.tokens);
    for (int i = 0; i < 64; i++) p.tokens[i] = 100 + i;
    spec_accept pacc, acc;
    spec_accept_init(&pacc);
    spec_accept_init(&acc);
    for (int i = 0; i < 8; i++) spec_accept_observe(&pacc, 2, 0);
    spec_costs c;
    spec_costs_init(&c);
    spec_step st;
    one_stream(&st);
    const int32_t toks[] = {50, 51, 52};
    spec_ask q = {.k = 8, .pred = &p, .pacc = &pacc, .tokens = toks, .n_tokens = 3};
    int src = -1, ng_len = -1, ng_from = 0;
    int32_t gen[64] = {99};
    int n = 1, back = -1;
    spec_pred_follow(&p, gen, n); // the output left it at once
    CHECK(p.left && p.strayed);
    for (int step = 0; step < 16 && back < 0; step++) {
        int k = spec_policy_k(&c, &st, &acc, &q, &src, &ng_len, &ng_from);
        if (src == SPEC_M_PRED && k > 0) back = step;
        gen[n] = p.tokens[n - 1], n++; // then it follows it, one token per step
        spec_pred_follow(&p, gen, n);
    }
    CHECK_MSG(back >= 0, "the prediction did not come back (p1 %.2f)", pacc.p1);
    CHECK(pacc.probing == 0);
    // the record prices rows: a prediction accepted whole in 9 drafts of 10 drafts the full k where a row costs
    // 2% of a step; one whose first token is accepted 3 times in 10 (and nothing after it) drafts where rows
    // cost 2% and nothing where they cost 40%
    spec_pred fresh = {.tokens = p.tokens, .n = p.n}; // (borrows p's tokens)
    spec_accept_init(&pacc);
    for (int i = 0; i < 20; i++) spec_accept_observe(&pacc, 8, i % 10 ? 8 : 0);
    CHECK_EQ_INT(spec_pred_pick(&fresh, &pacc, 8, 0.010, 0.0002, 1, 0), 8);
    pacc.p1 = 0.3f, pacc.pc = 0.1f;
    CHECK(spec_pred_pick(&fresh, &pacc, 8, 0.010, 0.0002, 1, 0) >= 1);
    CHECK_EQ_INT(spec_pred_pick(&fresh, &pacc, 8, 0.010, 0.004, 1, 0), 0);
    spec_pred_free(&p);
}

// The arbiter settles a difference wherever the two drafts first differ: the common part first (no guess),
// the target's token at the difference teaching which one to follow; then a wrong choice turns it.
static void test_arbiter_at(void) {
    spec_arbiter a = {0};
    CHECK_EQ_INT(spec_arbiter_pick(&a, 3, 7, 8), SPEC_ARB_COMMON); // 3 common tokens drafted, nothing guessed
    spec_arbiter_observe(&a, 1, 7);                                // rejected before the difference: no lesson
    CHECK_EQ_INT(a.learned, 0);
    CHECK_EQ_INT(spec_arbiter_pick(&a, 3, 7, 8), SPEC_ARB_COMMON);
    spec_arbiter_observe(&a, 3, 7); // all 3 accepted, and the target's next token is the prediction's
    CHECK(a.learned && a.prefer_pred);
    CHECK_EQ_INT(spec_arbiter_pick(&a, 2, 9, 10), SPEC_ARB_PRED);
    spec_arbiter_observe(&a, 5, 11); // accepted past the difference: it was right
    CHECK_EQ_INT(a.prefer_pred, 1);
    CHECK_EQ_INT(spec_arbiter_pick(&a, 2, 9, 10), SPEC_ARB_PRED);
    spec_arbiter_observe(&a, 2, 10); // rejected at the difference, where prompt lookup had it
    CHECK_EQ_INT(a.prefer_pred, 0);
    CHECK_EQ_INT(spec_arbiter_pick(&a, 4, 9, 10), SPEC_ARB_NGRAM);
}

// A code edit without a prediction: the answer copies the prompt with one identifier renamed (every 5th to
// every 20th token). Each rename breaks the match for a few tokens, and the drafts of 1 that follow never try a
// second position: the record of later positions learns from the target's token after a fully accepted draft,
// so the drafts grow back as the copying resumes instead of staying short.
static void code_edit_run(sim *s, int no_shadow, int every) {
    memset(s, 0, sizeof *s);
    s->no_shadow = no_shadow;
    s->toks[s->n++] = 1, s->toks[s->n++] = 2;
    for (int i = 0; i < N_OUT; i++) s->toks[s->n++] = 1000 + i; // the code to edit
    s->toks[s->n++] = 3;
    s->n_prompt = s->n;
    for (int i = 0; i < N_OUT; i++) s->truth[i] = i % every == every / 2 ? 5555 : 1000 + i; // the new name
    spec_accept_init(&s->acc);
    spec_accept_init(&s->pacc);
    spec_costs_init(&s->c);
    sim_run(s);
}

static void test_code_edit_recovers(void) {
    int n_with = 0, n_without = 0;
    for (int every = 5; every <= 20; every++) { // renames this far apart
        sim with, without;
        code_edit_run(&with, 0, every);
        code_edit_run(&without, 1, every);
        CHECK_MSG(with.steps <= without.steps + 1, "a rename every %d tokens: %d verify steps, %d without", every,
                  with.steps, without.steps);
        n_with += with.steps, n_without += without.steps;
    }
    CHECK_MSG(n_with < n_without, "%d verify steps in all, %d without the free verdicts", n_with, n_without);
}

int main(void) {
    test_code_edit_recovers();
    test_half_wrong();
    test_all_wrong();
    test_rejoin();
    test_comes_back();
    test_arbiter_at();
    TEST_MAIN_END();
}
