// One engine step: the scheduler's plan → a ragged model_batch → model_forward → sample the rows that
// finish a request's known tokens → TOKEN / FINISH events. Runs on the engine thread without holding the
// inbox lock; allocates nothing (events go through a fixed buffer flushed to the outbox when full).
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/timeutil.h"
#include "engine/engine_impl.h"
#include "sampling/samp_grammar.h"

// --- events
static engine_event *ev_next(engine *e) {
    if (e->n_evs == e->ev_cap) {
        eng_outbox_push(&e->out, e->evs, e->n_evs);
        e->n_evs = 0;
    }
    engine_event *ev = &e->evs[e->n_evs++];
    memset(ev, 0, sizeof *ev);
    return ev;
}

static void publish_stats(engine *e) {
    sched_counters c;
    sched_get_counters(e->s, &c);
    kv_stats ks;
    kv_pool_stats(e->pool, &ks);
    pthread_mutex_lock(&e->stats_mu);
    engine_stats *st = &e->stats;
    st->running = c.n_running;
    st->waiting = c.n_waiting;
    st->kv_blocks_used = ks.n_used;
    st->kv_blocks_total = ks.n_blocks;
    if (e->pool_swa) {
        kv_pool_stats(e->pool_swa, &ks);
        st->kv_swa_blocks_used = ks.n_used;
        if (ks.n_used > st->kv_swa_blocks_peak) st->kv_swa_blocks_peak = ks.n_used;
    }
    st->last_batch_seqs = e->last_batch_seqs;
    st->last_batch_tokens = e->last_batch_tokens;
    st->steps = c.steps;
    st->preemptions = c.preemptions;
    st->prefix_hit_tokens = c.prefix_hit_tokens;
    st->prefix_query_tokens = c.prefix_query_tokens;
    st->prompt_tokens = e->prompt_tokens;
    st->generated_tokens = e->generated_tokens;
    memcpy(st->spec_draft, e->spec_draft, sizeof st->spec_draft);
    memcpy(st->spec_accepted, e->spec_accepted, sizeof st->spec_accepted);
    st->spec_verify_steps = e->spec_verify_steps;
    st->spec_draft_prefill = e->spec_draft_prefill;
    st->sched_policy = e->o.sched_policy;
    st->prio_preemptions = c.prio_preemptions;
    st->sched = *sched_get_stats(e->s);
    sched_load_fill(e->s, &e->load); // bounded by the requests in flight: storage sized at engine_new
    pthread_mutex_unlock(&e->stats_mu);
}

void eng_flush(engine *e) {
    if (e->n_dequeued || e->n_finished) {
        pthread_mutex_lock(&e->in.mu);
        e->in.n_queued -= e->n_dequeued;
        e->in.n_queued_tokens -= e->n_dequeued_tokens;
        e->in.n_active -= e->n_finished;
        pthread_mutex_unlock(&e->in.mu);
        e->n_dequeued = 0;
        e->n_dequeued_tokens = 0;
        e->n_finished = 0;
    }
    publish_stats(e); // before the events: whoever sees an event sees stats at least as new
    if (e->n_evs) {
        eng_outbox_push(&e->out, e->evs, e->n_evs);
        e->n_evs = 0;
        eng_outbox_signal(&e->out);
    }
}

// The request no longer counts against the queue bounds (first scheduled, or ended while waiting).
static void dequeue_count(engine *e, sched_req *r) {
    eng_req *er = r->owner;
    if (er->counted) return;
    er->counted = 1;
    e->n_dequeued++;
    e->n_dequeued_tokens += r->n_prompt;
}

void eng_req_release(sched_req *r) {
    eng_req *er = r->owner;
    if (er) {
        if (er->rs_owner && *er->rs_owner == r) *er->rs_owner = NULL; // its recurrent-state slot is free
        samp_free(er->samp);
        spec_pred_free(&er->pred);
        spec_dseq_free(er->drafter, &er->ds);
        gram_matcher_free(er->grammar);
        free(er->embd_acc);
    }
    free(er);
    sched_req_free(r);
}

// The prediction's tokens that appeared in r's output (OpenAI's accepted_prediction_tokens; the rest are its
// rejected ones): the output is followed to its end, whatever drafted it.
static int pred_followed(sched_req *r) {
    eng_req *er = r->owner;
    if (!er->pred.tokens) return 0;
    int n_gen = sched_req_n_generated(r);
    spec_pred_follow(&er->pred, r->tokens + r->n_prompt, n_gen);
    int n = er->pred.n_followed; // a re-alignment may find tokens the output already followed: a bound
    if (n > er->pred.n) n = er->pred.n;
    return n < n_gen ? n : n_gen;
}

// Emits FINISH for a request that has left the scheduler (state DONE) and frees it.
static void finish_event(engine *e, sched_req *r, const char *msg) {
    eng_req *er = r->owner;
    dequeue_count(e, r);
    e->n_finished++;
    engine_event *ev = ev_next(e);
    ev->type = ENGINE_EV_FINISH;
    ev->id = r->id;
    ev->user = er->user;
    ev->finish = (engine_finish)r->end;
    ev->n_prompt = r->n_prompt;
    ev->n_cached = r->n_cached;
    ev->n_generated = sched_req_n_generated(r);
    ev->t_arrival = r->t_arrival;
    ev->t_first_sched = r->t_first_sched;
    ev->t_first_token = r->t_first_token;
    ev->t_finish = tc_now();
    ev->n_spec_drafted = er->n_drafted;
    ev->n_spec_accepted = er->n_accepted;
    ev->n_pred_accepted = pred_followed(r);
    if (r->end == SCHED_END_SLO) ev->retry_after = r->drain_s;
    if (msg) snprintf(ev->msg, sizeof ev->msg, "%s", msg);
    if (er->embed && r->end == SCHED_END_STOP) { // the embedding goes to the receiver
        ev->embedding = er->embd_acc;
        ev->n_embd = e->dim;
        er->embd_acc = NULL;
    }
    eng_req_release(r);
}

void eng_cut_all(engine *e, sched_end end) {
    sched_req *r = sched_take_all(e->s, end);
    while (r) {
        sched_req *next = r->next;
        finish_event(e, r, NULL);
        r = next;
    }
}

static int is_eog(const engine *e, int32_t tok) {
    for (int i = 0; i < e->o.n_eog; i++)
        if (e->eog[i] == tok) return 1;
    return 0;
}

// Self-speculation: the item's first n_draft rows (the last token and every draft but the last) were run
// through layers 0..L-1 by the drafter, in this KV: they resume at layer L from its residuals (model.h
// n_resume). Their residuals must continue the rows resumed so far (run_drafter's order is the plan's, and
// spec_draft_req.x's rows follow each other): else the item computes every layer, which is as exact.
static void add_resumed(engine *e, const sched_item *it, int row0, model_batch *b) {
    const eng_req *er = it->r->owner;
    if (!er->dx || it->n_draft <= 0 || it->n != it->n_draft + 1) return;
    if (b->n_resume == 0) b->resume_x = er->dx;
    else if (er->dx != b->resume_x + (size_t)b->n_resume * e->dim) return;
    for (int k = 0; k < it->n_draft; k++) e->b_resume_rows[b->n_resume++] = row0 + k;
}

// Hybrid models: r's recurrent-state slot, taken when it has none: a free one, else one held by a request that
// is not running (preempted: it restarts from position 0, where its state starts over, and takes a slot again).
// The running requests are at most max_seqs <= MODEL_RS_SLOTS, so among the first max_seqs slots (those
// speculation keeps checkpoints for) one of the two is always there.
static int eng_rs_slot(engine *e, sched_req *r) {
    eng_req *er = r->owner;
    if (er->rs_slot >= 0) return er->rs_slot;
    int slot = -1;
    for (int s = 0; s < e->o.max_seqs && slot < 0; s++)
        if (!e->rs_owner[s]) slot = s;
    for (int s = 0; s < e->o.max_seqs && slot < 0; s++)
        if (e->rs_owner[s]->state != SCHED_RUNNING) {
            eng_req *old = e->rs_owner[s]->owner;
            old->rs_slot = -1, old->rs_owner = NULL;
            slot = s;
        }
    if (slot < 0) return -1;
    e->rs_owner[slot] = r;
    er->rs_slot = slot, er->rs_owner = &e->rs_owner[slot], er->rs_pos = -1;
    return slot;
}

// Hybrid models: the state slot of item `it`, its state brought to the item's first position: a chunk that
// starts at 0 starts over (in the forward), one that continues the slot's state runs on, and one after a
// prefix-cache hit (its first position a block boundary) loads the state kept at the last cached block.
// -1 when no state can be had (the forward then refuses the batch).
static int32_t eng_rs_item(engine *e, const sched_item *it) {
    eng_req *er = it->r->owner;
    const int bs = e->o.block_size, slot = eng_rs_slot(e, it->r);
    if (slot < 0) return -1;
    if (it->start > 0 && it->start != er->rs_pos &&
        (it->start % bs || backend_kv_rs_load_block(e->kv, slot, it->r->kv.blocks[it->start / bs - 1])))
        return -1;
    er->rs_pos = it->start + it->n;
    return slot;
}

// Fills the batch arrays from the plan. Returns the model_batch view.
static model_batch build_batch(engine *e, const sched_plan *p) {
    int nt = 0, nl = 0, ne = 0;
    model_batch b = {.resume_rows = e->b_resume_rows,
                     .resume_layer = spec_drafter_is_self(e->drafter) ? spec_drafter_layers(e->drafter) : 0};
    for (int i = 0; i < p->n_items; i++) {
        const sched_item *it = &p->items[i];
        const sched_req *r = it->r;
        e->b_tables[i] = r->kv.blocks;
        e->b_tables_swa[i] = r->kv_swa.blocks;
        if (e->hybrid) e->b_rs_slots[i] = eng_rs_item(e, it), e->b_rs_ckpt[i] = it->n_draft > 0;
        const eng_req *er = r->owner;
        int embed = er->embed || (er->plp && it->start < r->n_prompt - 1);
        add_resumed(e, it, nt, &b);
        for (int k = 0; k < it->n; k++, nt++) {
            e->b_tokens[nt] = r->tokens[it->start + k];
            e->b_pos[nt] = it->start + k;
            e->b_seq[nt] = i;
            if (embed) e->b_embd_rows[ne++] = nt;
        }
        if (it->sample) // the last row, and every drafted row before it: each row's logits verify the next
            for (int k = it->n_draft; k >= 0; k--) e->b_logit_rows[nl++] = nt - 1 - k;
    }
    b.n_tokens = nt;
    b.tokens = e->b_tokens;
    b.pos = e->b_pos;
    b.seq = e->b_seq;
    b.n_seqs = p->n_items;
    b.block_tables = e->b_tables;
    b.block_tables_swa = e->pool_swa ? e->b_tables_swa : NULL;
    b.rs_slots = e->hybrid ? e->b_rs_slots : NULL;
    b.rs_ckpt = e->hybrid ? e->b_rs_ckpt : NULL;
    b.n_logits = nl;
    b.logits_rows = e->b_logit_rows;
    b.n_embd = ne;
    b.embd_rows = e->b_embd_rows;
    b.embd = e->embd_out;
    return b;
}

// --- speculation

// Requests that never draft: the grammar's mask is applied by samp_sample_grammar one row at a time,
// embeddings generate nothing, prompt logprobs keep one row per step.
static int never_drafts(const eng_req *er) { return er->grammar || er->embed || er->plp; }

// Whether r's drafts may come from the drafter (draft model or self): always in --spec draft/self; in auto
// only without a prediction (a given prediction is the draft source).
static int may_draft_with_model(const engine *e, const eng_req *er) {
    return er->drafter && !(e->o.spec == SPEC_AUTO && er->pred.tokens);
}

// The token prompt lookup would draft at offset i of its match (of len tokens from `from`), -1: none (also
// where the match was not looked up, len < 0: a step on which auto does not consider drafting is not scanned
// for a verdict).
static int32_t ngram_shadow(const sched_req *r, int len, int from, int i) {
    return len >= 1 && from + i < r->n_tokens ? r->tokens[from + i] : -1;
}

int eng_draft(void *ctx, sched_req *r, const sched_draft_info *info) {
    engine *e = ctx;
    eng_req *er = r->owner;
    er->ng_shadow = -1;
    int k = e->o.spec_k < info->max_draft ? e->o.spec_k : info->max_draft;
    if (k > e->spec_rows_left) k = e->spec_rows_left;
    if (k <= 0) return 0;
    if (never_drafts(er)) return 0;
    int32_t *out = r->tokens + r->n_tokens;
    spec_step *st = &e->spec_plan;
    st->n_waiting = info->n_waiting, st->n_catching = info->n_catching, st->n_decoding = info->n_decoding;
    if (e->o.spec == SPEC_AUTO && !st->have_fit) st->have_fit = sched_step_cost_fit(e->s, &st->ga, &st->gb);
    int auto_pred = e->o.spec == SPEC_AUTO && er->pred.tokens; // the prediction is a draft source
    if (auto_pred) spec_pred_follow(&er->pred, r->tokens + r->n_prompt, sched_req_n_generated(r));
    spec_ask q = {.k = k, .may_model = may_draft_with_model(e, er), .pred = auto_pred ? &er->pred : NULL,
                  .pacc = &er->pacc, .tokens = r->tokens, .n_tokens = r->n_tokens};
    int src = SPEC_M_NGRAM, ng_len = -1, ng_from = 0; // prompt lookup's match, once looked up
    const int k_allowed = k;
    // where er->acc records prompt lookup alone, the target's next token judges the position after its draft
    // for free (spec_observe_step)
    const int shadow = e->o.spec == SPEC_AUTO && !q.pred && !q.may_model;
    if ((k = spec_policy_k(&e->spec_costs, st, &er->acc, &q, &src, &ng_len, &ng_from)) <= 0) {
        if (shadow) er->ng_shadow = ngram_shadow(r, ng_len, ng_from, 0);
        return 0;
    }
    int d = 0;
    er->draft_method = SPEC_M_NGRAM;
    er->arb.pending = 0;
    if (src == SPEC_M_PRED) {
        d = spec_pred_propose(&er->pred, r->tokens + r->n_prompt, sched_req_n_generated(r), k, out);
        er->draft_method = SPEC_M_PRED;
        if (d > 0 && ng_len < 0) ng_len = spec_ngram_match(r->tokens, r->n_tokens, &ng_from);
        // a long prompt-lookup match beside it: the arbiter settles where the two drafts differ, and a match
        // that agrees with the prediction's draft and runs further (a rejoined prediction drafts short) drafts
        int at = 0;
        const int n_ng = ng_len >= SPEC_NGRAM_LONG ? r->n_tokens - ng_from : 0, n_cmp = n_ng < d ? n_ng : d;
        while (at < n_cmp && out[at] == r->tokens[ng_from + at]) at++;
        const int k_ng = n_ng > 0 ? spec_policy_long_k(&e->spec_costs, st, &er->acc, k_allowed) : 0;
        const int pick = at < n_cmp ? spec_arbiter_pick(&er->arb, at, out[at], r->tokens[ng_from + at])
                                    : SPEC_ARB_PRED;
        if (pick == SPEC_ARB_COMMON) { // the common part only; the target's token at `at` settles it
            if (at == 0) {
                er->pred.drafting = 0; // no draft: the output will tell what its draft would have got
                return 0;
            }
            d = at;
        }
        if (pick == SPEC_ARB_NGRAM || (pick == SPEC_ARB_PRED && at == d && n_ng > d && k_ng > d)) {
            er->pred.drafting = 0; // its draft is not taken: the output will tell what it would have got
            d = spec_ngram_draft(r->tokens, r->n_tokens, ng_len, ng_from, k_ng > k ? k_ng : k, 1, out);
            er->acc.long_match = 1; // its verdict goes to the long matches' record, as spec_accept_pick_match's
            er->draft_method = SPEC_M_NGRAM;
        }
    }
    if (d == 0 && src == SPEC_M_DRAFT && spec_dseq_reserve(er->drafter, &er->ds, r->n_tokens, k) == 0) {
        // A model draft: k rows now, the tokens after planning (eng_step runs the drafter over every such
        // request in one batch per position). Until then the rows hold the last token, itself a valid guess.
        for (int i = 0; i < k; i++) out[i] = r->tokens[r->n_tokens - 1];
        d = k;
        er->draft_method = e->drafter_method;
    }
    if (d == 0 && (e->o.spec == SPEC_AUTO || e->o.spec == SPEC_NGRAM)) { // prompt lookup
        if (ng_len < 0) ng_len = spec_ngram_match(r->tokens, r->n_tokens, &ng_from);
        d = spec_ngram_draft(r->tokens, r->n_tokens, ng_len, ng_from, k, er->acc.probing ? 2 : 1, out);
        er->draft_method = SPEC_M_NGRAM;
    }
    spec_accept *acc = er->draft_method == SPEC_M_PRED ? &er->pacc : &er->acc;
    if (d == 0) acc->probing = acc->long_match = 0; // nothing to probe with: no lesson either way
    if (shadow && er->draft_method == SPEC_M_NGRAM) er->ng_shadow = ngram_shadow(r, ng_len, ng_from, d);
    e->spec_rows_left -= d;
    spec_step_add(st, &e->spec_costs, acc, d, er->draft_method >= SPEC_M_DRAFT ? SPEC_M_DRAFT : er->draft_method);
    return d;
}

// A draft model prefills beside the target: each prompt chunk of a request that may draft with the model runs
// through the drafter in the step that prefills it (time to first token), instead of the whole prompt at its
// first draft, inside a decode step (an inter-token gap as long as a draft-model prefill of the prompt).
// A full draft pool or a failed run leaves the catch-up to the first draft.
static void prefill_drafter(engine *e, const sched_plan *p) {
    if (!e->drafter || spec_drafter_is_self(e->drafter)) return;
    int n = 0, rows = 0;
    for (int i = 0; i < p->n_items; i++) {
        const sched_item *it = &p->items[i];
        sched_req *r = it->r;
        eng_req *er = r->owner;
        int end = it->start + it->n;
        if (it->n_draft > 0 || end > r->n_prompt || never_drafts(er) || !may_draft_with_model(e, er)) continue;
        if (spec_dseq_reserve(e->drafter, &er->ds, end, 1)) continue;
        rows += end - er->ds.n_computed;
        e->dreqs[n++] = (spec_draft_req){.ds = &er->ds, .tokens = r->tokens, .n_tokens = end, .k = 1};
    }
    tc_err err = {0};
    if (n && spec_drafter_prefill(e->drafter, e->dreqs, n, &err) == 0) e->spec_draft_prefill += (uint64_t)rows;
}

// Fills the model drafts reserved by eng_draft: one drafter run over every request of the plan that drafts
// with the model. On failure the placeholder rows stay (the last token repeated: verified like any guess, so
// output stays exact) and their draft KV is recomputed next time. Self-speculation drafts in the target's KV
// through the plan's block tables (the scheduler reserved the item's positions n_tokens-1 .. n_tokens+k-1
// when it planned it) and leaves the drafted rows' residuals (er->dx) for build_batch's resumed rows.
static void run_drafter(engine *e, const sched_plan *p) {
    if (!e->drafter) return;
    int n = 0;
    for (int i = 0; i < p->n_items; i++) {
        const sched_item *it = &p->items[i];
        eng_req *er = it->r->owner;
        er->dq = NULL;
        er->dx = NULL;
        if (it->n_draft <= 0 || er->draft_method < SPEC_M_DRAFT) continue;
        e->dreqs[n++] = (spec_draft_req){.ds = &er->ds, .tokens = it->r->tokens, .n_tokens = it->r->n_tokens,
                                         .k = it->n_draft,
                                         .temperature = samp_is_greedy(er->samp) ? 0.0f : er->draft_temp,
                                         .rng = &er->drng, .blocks = it->r->kv.blocks,
                                         .blocks_swa = e->pool_swa ? it->r->kv_swa.blocks : NULL};
    }
    if (n == 0) return;
    tc_err err = {0};
    int k_max = 0, catch_up = 0; // catch_up: most rows a request runs before its draft 0 (1-2 in steady state)
    for (int i = 0; i < n; i++) {
        k_max = e->dreqs[i].k > k_max ? e->dreqs[i].k : k_max;
        int c = spec_drafter_catch_up(e->drafter, &e->dreqs[i]);
        catch_up = c > catch_up ? c : catch_up;
    }
    double t0 = tc_now();
    if (spec_drafter_run(e->drafter, e->dreqs, n, &err)) return;
    spec_costs_observe_draft(&e->spec_costs, tc_now() - t0, k_max, catch_up);
    for (int i = 0, j = 0; i < p->n_items && j < n; i++) {
        const sched_item *it = &p->items[i];
        eng_req *er = it->r->owner;
        if (it->n_draft > 0 && er->draft_method >= SPEC_M_DRAFT) {
            er->dq = e->dreqs[j].q;
            er->dx = e->dreqs[j++].x;
        }
    }
}

// Appends token tok (sampled with result res) to r, emits TOKEN (not for an end-of-generation token) and,
// when it ends, FINISH. Returns 1 when r ended (and was freed).
static int emit_token(engine *e, sched_req *r, int32_t tok, const samp_result *res, double now) {
    eng_req *er = r->owner;
    r->tokens[r->n_tokens++] = tok;
    e->generated_tokens++;
    if (r->t_first_token == 0) r->t_first_token = now;
    r->t_last_token = now;
    sched_end end = SCHED_END_NONE;
    if (!er->ignore_eos && is_eog(e, tok)) end = SCHED_END_STOP;
    else {
        engine_event *ev = ev_next(e);
        ev->type = ENGINE_EV_TOKEN;
        ev->id = r->id;
        ev->user = er->user;
        ev->tok = *res;
        if (sched_req_n_generated(r) >= r->max_tokens) end = SCHED_END_LENGTH;
        else if (er->grammar && gram_matcher_done(er->grammar)) end = SCHED_END_STOP; // nothing can follow
    }
    if (end == SCHED_END_NONE) return 0;
    sched_finish(e->s, r, end);
    finish_event(e, r, NULL);
    return 1;
}

// TACHYON_SPEC_TRACE: one line per decode step of r: where its draft came from, its length, how many the
// target accepted, the step's rows, and the prediction's cursor and records (counts to read, not times).
static void spec_trace_line(const engine *e, const sched_req *r, int n_draft, int n_acc) {
    const eng_req *er = r->owner;
    const char *src = n_draft > 0 ? spec_method_name((spec_method)er->draft_method) : "none";
    fprintf(stderr, "spec_trace req=%llu gen=%d src=%s draft=%d accepted=%d rows=%d pred=%d/%d left=%d "
            "pacc=%.2f/%.2f acc=%.2f/%.2f\n", (unsigned long long)r->id, sched_req_n_generated(r), src, n_draft,
            n_acc, e->last_batch_tokens, er->pred.pos, er->pred.n, er->pred.left, er->pacc.p1, er->pacc.pc,
            er->acc.p1, er->acc.pc);
}

// Samples the next token(s) of r from its logits rows (1 + n_draft): the verifier keeps the drafted tokens
// the target agrees with plus the target's own next one; they go out in order and stop at an end (tokens
// after an end-of-generation token are discarded). Rejected drafts' KV is rolled back.
static void take_tokens(engine *e, sched_req *r, float *logits, int n_rows, int n_draft, double now) {
    eng_req *er = r->owner;
    if (er->grammar) { // never drafted (eng_draft): one row; the logits row is scratch the mask may overwrite
        samp_result res;
        int32_t tok = samp_sample_grammar(er->samp, logits, e->n_vocab, er->grammar, &res);
        if (tok < 0 || gram_matcher_accept_token(er->grammar, tok)) {
            sched_finish(e->s, r, SCHED_END_ERROR);
            const char *why = gram_matcher_error(er->grammar); // a work bound, or no token fits
            finish_event(e, r, why ? why : "grammar: no token of the vocabulary can continue the output");
            return;
        }
        samp_accept(er->samp, tok);
        emit_token(e, r, tok, &res, now); // ends with STOP when the grammar is complete
        return;
    }
    const float *q = n_draft > 0 && er->draft_method >= SPEC_M_DRAFT ? er->dq : NULL;
    int n_out = spec_verify_q(er->samp, logits, e->n_vocab, r->tokens + r->n_tokens, q, n_draft, e->spec_tok,
                              e->spec_res, e->probs);
    if (er->drafter) spec_dseq_keep(er->drafter, &er->ds, r->n_tokens + n_out - 1); // its KV follows the verdict
    if (n_draft > 0) {
        int acc = n_out - 1, m = er->draft_method;
        er->n_drafted += n_draft;
        er->n_accepted += acc;
        e->spec_draft[m] += (uint64_t)n_draft;
        e->spec_accepted[m] += (uint64_t)acc;
        e->spec_verify_steps++;
        spec_observe_step(m == SPEC_M_PRED ? &er->pacc : &er->acc, n_draft, acc, e->spec_tok[acc], er->ng_shadow);
    } else if (er->ng_shadow >= 0) spec_observe_step(&er->acc, 0, 0, e->spec_tok[0], er->ng_shadow);
    er->ng_shadow = -1;
    if (e->spec_trace) spec_trace_line(e, r, n_draft, n_out - 1);
    spec_arbiter_observe(&er->arb, n_out - 1, e->spec_tok[n_out - 1]); // (a step without a draft too)
    // hybrid models: the recurrent state has taken every verify row; back to the one after the last accepted
    // draft (the item's rows: the rows before the drafts, then the drafts; a verify item is one decode row and
    // its drafts, so the row is at most spec_k: engine_new reserved 1 + spec_k rows)
    if (e->hybrid && n_draft > 0 && n_out - 1 < n_draft) {
        const int keep = n_rows - n_draft - 1 + n_out - 1;
        assert(keep >= 0 && keep <= e->o.spec_k);
        backend_kv_rs_restore(e->kv, er->rs_slot, keep);
        er->rs_pos -= n_draft - (n_out - 1);
    }
    for (int i = 0; i < n_out; i++)
        if (emit_token(e, r, e->spec_tok[i], &e->spec_res[i], now)) return;
    sched_rollback(e->s, r);
}

// Pools the hidden states of an embedding request's rows computed this step (rows: its item's rows of
// embd_out). A chunk starting at position 0 starts over (first chunk, or a recompute after preemption).
static void embed_accumulate(engine *e, const sched_item *it, const float *rows) {
    eng_req *er = it->r->owner;
    int dim = e->dim;
    if (it->start == 0) memset(er->embd_acc, 0, (size_t)dim * sizeof(float));
    for (int k = 0; k < it->n; k++) {
        const float *h = rows + (size_t)k * dim;
        if (er->embed == ENGINE_EMBED_MEAN)
            for (int d = 0; d < dim; d++) er->embd_acc[d] += h[d];
        else if (it->start + k == it->r->n_prompt - 1)
            memcpy(er->embd_acc, h, (size_t)dim * sizeof(float));
    }
}

// Scores the prompt tokens whose preceding row was computed this step: the row at position p gives the
// logprob of token p+1. Emits one PROMPT_LP event per token, in order; rows already reported (a recompute
// after preemption) are skipped.
static void prompt_logprobs(engine *e, const sched_item *it, const float *rows) {
    sched_req *r = it->r;
    eng_req *er = r->owner;
    int k = 0;
    while (k < it->n) {
        int pos0 = it->start + k, m = 0;
        while (k + m < it->n && m < ENG_PLP_ROWS && it->start + k + m < r->n_prompt - 1) m++;
        if (m == 0) break;
        tc_err err = {0};
        if (pos0 + m >= er->plp_next &&
            backend_logits_rows(e->mctx, rows + (size_t)k * e->dim, m, e->plp_logits, &err) == 0) {
            for (int j = 0; j < m; j++) {
                int pos = pos0 + j + 1; // the scored prompt token
                if (pos < er->plp_next) continue;
                engine_event *ev = ev_next(e);
                ev->type = ENGINE_EV_PROMPT_LP;
                ev->id = r->id;
                ev->user = er->user;
                samp_logprobs(e->plp_logits + (size_t)j * e->n_vocab, e->n_vocab, r->tokens[pos], er->plp - 1, &ev->tok);
                er->plp_next = pos + 1;
            }
        }
        k += m;
    }
}

// The prompt has been run: mean (if so), L2-normalise, and finish with the vector in the FINISH event.
static void embed_finish(engine *e, sched_req *r) {
    eng_req *er = r->owner;
    double ss = 0;
    for (int d = 0; d < e->dim; d++) ss += (double)er->embd_acc[d] * er->embd_acc[d];
    float inv = ss > 0 ? (float)(1.0 / sqrt(ss)) : 0.0f; // the mean's 1/n cancels in the normalisation
    for (int d = 0; d < e->dim; d++) er->embd_acc[d] *= inv;
    sched_finish(e->s, r, SCHED_END_STOP);
    finish_event(e, r, NULL);
}

void eng_step(engine *e, double now) {
    e->spec_rows_left = e->max_logit_rows - e->o.max_seqs;
    spec_step_begin(&e->spec_plan, e->o.spec, e->o.spec_max_streams);
    const sched_plan *p = sched_step(e->s, now);
    for (sched_req *r = p->ended, *next; r; r = next) {
        next = r->next;
        finish_event(e, r, NULL);
    }
    e->last_batch_seqs = p->n_items;
    e->last_batch_tokens = p->n_tokens;
    if (p->n_items == 0) return;
    for (int i = 0; i < p->n_items; i++) {
        sched_req *r = p->items[i].r;
        eng_req *er = r->owner;
        if (!er->counted) e->prompt_tokens += (uint64_t)r->n_prompt;
        dequeue_count(e, r);
    }

    prefill_drafter(e, p);
    run_drafter(e, p);
    model_batch b = build_batch(e, p);
    tc_err err = {0};
    double t_fwd = tc_now();
    int rc = 0;
    for (int i = 0; e->fault_pos >= 0 && i < b.n_tokens && !rc; i++)
        if (b.pos[i] >= e->fault_pos) rc = tc_err_set(&err, TC_ERR, "injected fault (TACHYON_FAULT) at position %d", b.pos[i]);
    if (!rc) rc = backend_forward(e->mctx, e->kv, &b, e->logits, &err);
    if (e->fault_step_ms > 0 || e->fault_token_ms > 0) { // test-only slow engine (TACHYON_FAULT=step_sleep_ms:A:B)
        long ms = e->fault_step_ms + (long)e->fault_token_ms * b.n_tokens;
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (rc == 0) {
        double t_step = tc_now() - t_fwd;
        sched_observe(e->s, b.n_tokens, t_step);
        int n_drafted = 0, decode_only = 1, n_gaps = 0;
        for (int i = 0; i < p->n_items; i++) {
            const sched_item *it = &p->items[i];
            int dec = it->sample && it->n - it->n_draft == 1;
            n_drafted += it->n_draft;
            decode_only &= dec;
            n_gaps += dec && sched_req_n_generated(it->r) > 0; // a gap between two of its tokens
        }
        spec_costs_observe_step(&e->spec_costs, b.n_tokens, n_drafted, n_gaps, decode_only, t_step,
                                e->o.spec == SPEC_AUTO && e->o.spec_max_streams > 1);
    }
    if (rc != 0) { // every request of the batch ends with the error; the others go on
        while (p->n_items > 0) {
            sched_req *r = p->items[0].r;
            sched_finish(e->s, r, SCHED_END_ERROR);
            finish_event(e, r, err.msg[0] ? err.msg : "model forward failed");
        }
        return;
    }
    sched_commit(e->s); // the plan stays readable until the next sched_step
    double t = tc_now();
    int row = 0, erow = 0;
    int n_items = p->n_items;
    for (int i = 0; i < n_items; i++) { // before any request of the plan can finish and be freed
        const sched_item *it = &p->items[i];
        const eng_req *er = it->r->owner;
        if (er->embed) embed_accumulate(e, it, e->embd_out + (size_t)erow * e->dim);
        else if (er->plp && it->start < it->r->n_prompt - 1) prompt_logprobs(e, it, e->embd_out + (size_t)erow * e->dim);
        else continue;
        erow += it->n;
    }
    for (int i = 0; i < n_items; i++) {
        const sched_item *it = &p->items[i];
        if (!it->sample) continue;
        if (((const eng_req *)it->r->owner)->embed) embed_finish(e, it->r); // never drafted (eng_draft)
        else take_tokens(e, it->r, e->logits + (size_t)row * e->n_vocab, it->n, it->n_draft, t);
        row += 1 + it->n_draft;
    }
}
