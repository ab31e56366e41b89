// Speculative decoding over a gen_session (see gen_spec.h). Mirrors the engine's eng_draft / run_drafter /
// take_tokens for one sequence: the policy of `auto` sees the same step-cost fit, acceptance estimate and
// measured draft cost the engine uses.
#include <stdlib.h>
#include <string.h>

#include "cli/gen_spec.h"
#include "common/timeutil.h"
#include "sched/step_cost.h"
#include "spec/spec.h"

int gen_spec_device_check(int mode, int have_draft_model, int self_layers, backend_device dev, tc_err *err) {
    return spec_self_device_check(spec_drafter_choice(mode, have_draft_model, self_layers), dev == BACKEND_CPU, err);
}

int gen_spec_drafter_new(gen_session *g, model *draft_model, int mode, int self_layers, int max_ctx, int k,
                         int n_threads, spec_drafter **out, tc_err *err) {
    model *target = g->m;
    const model_hparams *hp = model_get_hparams(target);
    model *dm = NULL;
    int layers = 0;
    *out = NULL;
    if (mode == SPEC_DRAFT && !draft_model)
        return tc_err_set(err, TC_ERR_INVALID, "--spec draft needs a draft model (--draft-model)");
    int choice = spec_drafter_choice(mode, draft_model != NULL, self_layers);
    if (choice == SPEC_M_DRAFT) {
        int rc = spec_vocab_check(target, draft_model, err);
        if (rc) return rc;
        dm = draft_model;
        layers = model_get_hparams(dm)->n_layers;
    } else if (choice == SPEC_M_SELF) {
        layers = self_layers > 0 ? self_layers : (hp->n_layers / 4 > 0 ? hp->n_layers / 4 : 1);
        if (layers >= hp->n_layers)
            return tc_err_set(err, TC_ERR_INVALID, "--self-spec-layers %d must be below the model's %d layers",
                              layers, hp->n_layers);
        int rc = spec_self_device_check(choice, backend_get_device(g->be) == BACKEND_CPU, err);
        if (rc) return rc;
        // in the session's own runner and KV (spec_draft.h): one request, one sampled draft's q buffer
        return spec_drafter_new_self(target, layers, g->ctx, g->kv, 1, k, 1, out, err);
    } else return 0;
    int bs = 16, nb = (max_ctx + SPEC_MAX_K + bs) / bs;
    // one request; a sampled draft keeps one (k, n_vocab) q buffer
    return spec_drafter_new(dm, layers, nb, bs, TT_F16, 512, n_threads, 1, k, 1, out, err);
}

// k drafts for this step and whether the model drafts them: eng_draft's rule for one decoding sequence.
// Rows are priced by the verify steps' own line (vcost) once it has one, else by the line the prefill seeded.
static int pick_k(const gen_spec_opts *o, int left, const step_cost *cost, const step_cost *vcost, spec_accept *acc,
                  double draft_cost, const int32_t *hist, int n_hist, int *ng_len, int *ng_from,
                  int *use_model) {
    int k = o->mode == SPEC_OFF ? 0 : o->k;
    if (k > left) k = left;
    *use_model = o->draft != NULL && (o->mode == SPEC_DRAFT || o->mode == SPEC_SELF || o->mode == SPEC_AUTO);
    if (k <= 0 || o->mode != SPEC_AUTO) return k;
    double a, b;
    if (!step_cost_line(vcost, &a, &b) && !step_cost_line(cost, &a, &b)) return *use_model = 0;
    int k_model = 0;
    if (*use_model) // a model draft also costs a draft forward per drafted token (measured; until then one try
        // at the full k: it measures that cost, and a draft model is there to be accepted)
        k_model = draft_cost > 0 ? spec_pick_k(acc->p1, acc->pc, k, a + b, b + draft_cost, 0, 0) : k;
    *use_model = k_model > 0;
    if (*use_model) return k_model;
    *ng_len = spec_ngram_match(hist, n_hist, ng_from); // prompt lookup: a long match is judged by its own record
    return spec_accept_pick_match(acc, *ng_len, k, a, b, 1, 0);
}

int gen_spec_generate(gen_session *g, samp_state *ss, float temperature, uint64_t seed, const int32_t *prompt,
                      int n_prompt, int n_gen, const gen_spec_opts *o, gen_spec_emit_fn emit, void *ctx,
                      gen_spec_stats *st, tc_err *err) {
    const model_hparams *hp = model_get_hparams(g->m);
    memset(st, 0, sizeof *st);
    if ((o->mode == SPEC_DRAFT || o->mode == SPEC_SELF) && !o->draft)
        return tc_err_set(err, TC_ERR_INVALID, "--spec %s needs a drafter", spec_mode_name((spec_mode)o->mode));
    if (n_prompt < 1 || n_gen < 1 || n_prompt + n_gen > g->max_ctx || g->max_batch < SPEC_MAX_K + 1 ||
        o->k < 1 || o->k > SPEC_MAX_K)
        return tc_err_set(err, TC_ERR_INVALID, "spec decode: %d + %d tokens do not fit the session", n_prompt, n_gen);
    spec_dseq ds = {0};
    uint64_t drng = seed ^ 0x5eedd4a7f00dull; // the draft's own RNG stream (sampled drafts)
    int32_t *hist = malloc(((size_t)n_prompt + n_gen + SPEC_MAX_K + 1) * sizeof *hist);
    float *rows = malloc((size_t)(SPEC_MAX_K + 1) * hp->n_vocab * sizeof *rows);
    float *probs = malloc((size_t)hp->n_vocab * sizeof *probs);
    int rc = 0;
    if (!hist || !rows || !probs) {
        rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (o->draft && !spec_drafter_is_self(o->draft) &&
        (rc = spec_dseq_init(&ds, n_prompt + n_gen + SPEC_MAX_K + 1, 16, err)))
        goto done;
    memcpy(hist, prompt, (size_t)n_prompt * sizeof *hist);
    int n_hist = n_prompt;

    double t0 = tc_now();
    if ((rc = gen_eval(g, prompt, n_prompt, 0, err))) goto done;
    // A draft model prefills the prompt too, here rather than lazily at its first draft: it is prompt work (TTFT),
    // and a decode rate that hid a draft's prefill of hundreds of tokens in its first step would measure that.
    // (Self-speculation has nothing to prefill: it drafts in the target's KV.)
    int may_use_model = o->draft && (o->mode == SPEC_DRAFT || o->mode == SPEC_SELF || o->mode == SPEC_AUTO);
    int self = spec_drafter_is_self(o->draft);
    if (may_use_model && !self && spec_dseq_reserve(o->draft, &ds, n_prompt, 1) == 0) {
        spec_draft_req dr = {.ds = &ds, .tokens = hist, .n_tokens = n_prompt, .k = 1, .rng = &drng};
        tc_err derr = {0};
        if (spec_drafter_run(o->draft, &dr, 1, &derr) == 0) spec_dseq_keep(o->draft, &ds, n_prompt);
    }
    st->t_prefill = tc_now() - t0;
    step_cost cost = {0}, vcost = {0};
    int wide = n_prompt < g->max_batch ? n_prompt : g->max_batch;
    step_cost_observe(&cost, wide, st->t_prefill * wide / n_prompt); // a wide step seeds the fit
    spec_accept acc;
    spec_accept_init(&acc);
    double draft_cost = 0; // seconds per draft position, EWMA (engine_step.c run_drafter)
    int32_t out[SPEC_MAX_K + 1];
    samp_result res[SPEC_MAX_K + 1];
    int n_out = spec_verify(ss, g->logits, hp->n_vocab, NULL, 0, out, res);
    double t_first = tc_now();
    st->t_first = t_first - t0;
    for (;;) {
        int stop = 0;
        for (int i = 0; i < n_out && !stop && st->n_gen < n_gen; i++) { // an end drops what follows it
            hist[n_hist++] = out[i], st->n_gen++;
            if (emit && emit(ctx, out[i])) stop = 1;
        }
        if (stop || st->n_gen >= n_gen) break;
        int use_model = 0, ng_len = -1, ng_from = 0; // prompt lookup's match, once looked up
        int k = pick_k(o, n_gen - st->n_gen - 1, &cost, &vcost, &acc, draft_cost, hist, n_hist, &ng_len, &ng_from,
                       &use_model),
            d = 0;
        const float *q = NULL, *x = NULL;
        if (k > 0 && use_model && spec_dseq_reserve(o->draft, &ds, n_hist, k) == 0) {
            // self: the target has KV of positions < n_hist - 1 (the last token is computed by the verify step)
            spec_draft_req dr = {.ds = &ds, .tokens = hist, .n_tokens = n_hist, .k = k,
                                 .temperature = samp_is_greedy(ss) ? 0.0f : temperature, .rng = &drng,
                                 .blocks = g->blocks};
            int catch_up = spec_drafter_catch_up(o->draft, &dr); // rows before draft 0: 1-2 in steady state
            double td = tc_now();
            tc_err derr = {0}; // a failed draft run only costs this step its draft (the engine does the same)
            if (spec_drafter_run(o->draft, &dr, 1, &derr) == 0) {
                // Price a draft position from steady-state steps only: a long catch-up (after the draft model
                // sat out steps) is a one-off that would make auto give up on a draft that pays.
                double per_pos = (tc_now() - td) / (k + catch_up - 1);
                if (catch_up <= 2) draft_cost = draft_cost > 0 ? 0.8 * draft_cost + 0.2 * per_pos : per_pos;
                d = k, q = dr.q, x = dr.x;
                st->n_model_drafted += d;
            }
        }
        if (d == 0 && k > 0 && (o->mode == SPEC_AUTO || o->mode == SPEC_NGRAM)) {
            if (ng_len < 0) ng_len = spec_ngram_match(hist, n_hist, &ng_from);
            d = spec_ngram_draft(hist, n_hist, ng_len, ng_from, k, acc.probing ? 2 : 1, hist + n_hist);
        }
        if (d == 0) acc.probing = acc.long_match = 0;
        double ts = tc_now();
        // self: the last token and drafts 0..d-2 resume at layer L from the drafter's residuals (their KV of the
        // layers below is in the cache); the last draft runs every layer
        if ((rc = gen_eval_rows_resumed(g, hist + n_hist - 1, 1 + d, n_hist - 1, x ? d : 0, x,
                                        x ? spec_drafter_layers(o->draft) : 0, rows, err)))
            goto done;
        double dt = tc_now() - ts;
        step_cost_observe(&cost, 1 + d, dt);
        step_cost_observe(&vcost, 1 + d, dt);
        n_out = spec_verify_q(ss, rows, hp->n_vocab, hist + n_hist, q, d, out, res, probs);
        if (o->draft) spec_dseq_keep(o->draft, &ds, n_hist + n_out - 1); // its KV follows the verdict
        if (d > 0) {
            st->n_drafted += d, st->n_accepted += n_out - 1, st->n_steps++;
            spec_accept_observe(&acc, d, n_out - 1);
        }
    }
    st->t_decode = tc_now() - t_first;
done:
    if (o->draft && ds.inited) spec_dseq_free(o->draft, &ds);
    free(hist);
    free(rows);
    free(probs);
    return rc;
}

int gen_spec_decode(gen_session *g, const int32_t *prompt, int n_prompt, int n_gen, const gen_spec_opts *o,
                    gen_spec_stats *st, tc_err *err) {
    samp_params sp;
    samp_params_default(&sp);
    sp.temperature = 0.0f;
    sp.no_logprob = 1; // bench reads tokens only
    samp_state *ss = NULL;
    memset(st, 0, sizeof *st);
    int rc = samp_new(&sp, model_get_hparams(g->m)->n_vocab, &ss, err);
    if (rc) return rc;
    samp_accept_prompt(ss, prompt, n_prompt);
    rc = gen_spec_generate(g, ss, 0.0f, 0, prompt, n_prompt, n_gen, o, NULL, NULL, st, err);
    samp_free(ss);
    return rc;
}
