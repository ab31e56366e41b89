// Greedy speculative decoding over a gen_session (see gen_spec.h). Mirrors cmd_run.c's loop: the policy of
// `auto` sees the same step-cost fit and acceptance estimate the engine uses.
#include <stdlib.h>
#include <string.h>

#include "cli/gen_spec.h"
#include "common/timeutil.h"
#include "sampling/sampling.h"
#include "sched/step_cost.h"
#include "spec/spec.h"

int gen_spec_decode(gen_session *g, const int32_t *prompt, int n_prompt, int n_gen, const gen_spec_opts *o,
                    gen_spec_stats *st, tc_err *err) {
    const model_hparams *hp = model_get_hparams(g->m);
    memset(st, 0, sizeof *st);
    if (o->draft) return tc_err_set(err, TC_ERR_UNSUPPORTED, "draft-model speculation is not available yet");
    if (n_prompt < 1 || n_gen < 1 || n_prompt + n_gen + SPEC_MAX_K > g->max_ctx || g->max_batch < SPEC_MAX_K + 1)
        return tc_err_set(err, TC_ERR_INVALID, "spec decode: %d + %d tokens do not fit the session", n_prompt, n_gen);
    samp_params sp;
    samp_params_default(&sp);
    sp.temperature = 0.0f;
    samp_state *ss = NULL;
    int32_t *hist = malloc(((size_t)n_prompt + n_gen + SPEC_MAX_K + 1) * sizeof *hist);
    float *rows = malloc((size_t)(SPEC_MAX_K + 1) * hp->n_vocab * sizeof *rows);
    int rc = 0;
    if (!hist || !rows) {
        rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = samp_new(&sp, hp->n_vocab, &ss, err))) goto done;
    samp_accept_prompt(ss, prompt, n_prompt);
    memcpy(hist, prompt, (size_t)n_prompt * sizeof *hist);
    int n_hist = n_prompt;

    double t0 = tc_now();
    if ((rc = gen_eval(g, prompt, n_prompt, 0, err))) goto done;
    st->t_prefill = tc_now() - t0;
    step_cost cost = {0};
    int wide = n_prompt < g->max_batch ? n_prompt : g->max_batch;
    step_cost_observe(&cost, wide, st->t_prefill * wide / n_prompt); // a wide step seeds the fit
    spec_accept acc;
    spec_accept_init(&acc);
    int32_t out[SPEC_MAX_K + 1];
    samp_result res[SPEC_MAX_K + 1];
    int n_out = spec_verify(ss, g->logits, hp->n_vocab, NULL, 0, out, res);
    double t_first = tc_now();
    for (;;) {
        for (int i = 0; i < n_out && st->n_gen < n_gen; i++) hist[n_hist++] = out[i], st->n_gen++;
        if (st->n_gen >= n_gen) break;
        int k = o->mode == SPEC_OFF ? 0 : o->k, left = n_gen - st->n_gen - 1;
        if (k > left) k = left;
        if (k > 0 && o->mode == SPEC_AUTO) {
            double t1 = step_cost_predict(&cost, 1), b = step_cost_predict(&cost, 2) - t1;
            k = step_cost_ready(&cost) ? spec_accept_pick(&acc, k, t1 - b, b, 1, 0) : 0;
        }
        int d = k > 0 ? spec_ngram_propose(hist, n_hist, k, hist + n_hist) : 0;
        if (d == 0) acc.probing = 0;
        double ts = tc_now();
        if ((rc = gen_eval_rows(g, hist + n_hist - 1, 1 + d, n_hist - 1, rows, err))) goto done;
        step_cost_observe(&cost, 1 + d, tc_now() - ts);
        n_out = spec_verify(ss, rows, hp->n_vocab, hist + n_hist, d, out, res);
        if (d > 0) {
            st->n_drafted += d, st->n_accepted += n_out - 1, st->n_steps++;
            spec_accept_observe(&acc, d, n_out - 1);
        }
    }
    st->t_decode = tc_now() - t_first;
done:
    samp_free(ss);
    free(hist);
    free(rows);
    return rc;
}
