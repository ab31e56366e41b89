// The engine: options, lifetime, the public API (any thread) and the engine thread's loop.
#include "engine/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "engine/engine_impl.h"
#include "model/key_center.h"
#include "sched/sched_order.h"

// The smallest context the model's own context is cut to when the KV memory holds less (size_pool).
#define CTX_FIT_MIN 4096

_Static_assert((int)SCHED_END_STOP == (int)ENGINE_FINISH_STOP && (int)SCHED_END_LENGTH == (int)ENGINE_FINISH_LENGTH &&
                   (int)SCHED_END_CANCELLED == (int)ENGINE_FINISH_CANCELLED &&
                   (int)SCHED_END_DEADLINE == (int)ENGINE_FINISH_DEADLINE &&
                   (int)SCHED_END_ERROR == (int)ENGINE_FINISH_ERROR &&
                   (int)SCHED_END_SHUTDOWN == (int)ENGINE_FINISH_SHUTDOWN &&
                   (int)SCHED_END_SLO == (int)ENGINE_FINISH_SLO,
               "sched_end and engine_finish must agree");

void engine_opts_default(engine_opts *o) {
    memset(o, 0, sizeof *o);
    o->max_batch_tokens = 256;
    o->max_seqs = 16;
    o->block_size = 16;
    o->kv_mem_bytes = 0;
    o->kv_type_k = o->kv_type_v = TT_F16;
    o->ctx_size = 0;
    o->max_queue = 256;
    o->max_queued_tokens = 0;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    o->n_threads = n > 0 ? (int)n : 1;
    o->device = BACKEND_CPU;
    o->prefix_cache = 1;
    o->itl_guard = 2.0f;
    o->itl_guard_fair = 1;
    o->itl_guard_floor_ms = 30.0f;
    o->spec = SPEC_AUTO;
    o->spec_k = 8;
    o->spec_max_streams = 1;
}

const char *engine_finish_name(engine_finish f) {
    switch (f) {
    case ENGINE_FINISH_NONE: return "none";
    case ENGINE_FINISH_STOP: return "stop";
    case ENGINE_FINISH_LENGTH: return "length";
    case ENGINE_FINISH_CANCELLED: return "cancelled";
    case ENGINE_FINISH_DEADLINE: return "deadline";
    case ENGINE_FINISH_ERROR: return "error";
    case ENGINE_FINISH_SHUTDOWN: return "shutdown";
    case ENGINE_FINISH_SLO: return "slo";
    }
    return "unknown";
}

// --- the engine thread
static void *engine_main(void *arg) {
    engine *e = arg;
    eng_inbox *in = &e->in;
    for (;;) {
        pthread_mutex_lock(&in->mu);
        while (!in->stop && !in->new_head && !in->cancels && !sched_has_work(e->s))
            pthread_cond_wait(&in->cv, &in->mu); // idle: sleep until submit, cancel or stop
        sched_req *nw = in->new_head;
        in->new_head = in->new_tail = NULL;
        eng_cancel *cc = in->cancels;
        in->cancels = NULL;
        int stop = in->stop;
        double grace_until = in->grace_until;
        pthread_mutex_unlock(&in->mu);

        while (nw) {
            sched_req *next = nw->next;
            sched_add(e->s, nw);
            nw = next;
        }
        while (cc) {
            eng_cancel *next = cc->next;
            sched_req *r = sched_find(e->s, cc->id);
            if (r && r->cancel == SCHED_END_NONE) r->cancel = (sched_end)cc->reason;
            free(cc);
            cc = next;
        }
        double now = tc_now();
        if (stop && (now >= grace_until || !sched_has_work(e->s))) {
            eng_cut_all(e, SCHED_END_SHUTDOWN);
            eng_flush(e);
            break;
        }
        eng_step(e, now);
        eng_flush(e);
        if (e->last_batch_seqs == 0 && sched_has_work(e->s)) {
            // Work that cannot run (should not happen: a lone request always fits) — do not spin.
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

// --- lifetime
// Sliding-window models: the local layers' blocks in a pool of their own, sized for max_seqs requests that
// each hold their window plus one step's rows (kv/ releases the rest), so the KV memory buys global-layer
// context. 0: no separate pool (no window, or contexts no longer than the window).
static int size_swa_pool(engine *e, const model_hparams *hp) {
    int bs = e->o.block_size, w = hp->swa_window;
    if (w <= 0 || !model_kv_group_block_bytes(e->m, 1, bs, e->o.kv_type_k, e->o.kv_type_v)) return 0;
    long long rows = w + (long long)e->o.max_batch_tokens + (e->o.spec != SPEC_OFF ? e->o.spec_k : 0);
    long long per = (rows + bs - 1) / bs + 1, per_ctx = (e->ctx_limit + bs - 1) / bs;
    if (per >= per_ctx) return 0;
    long long n = per * e->o.max_seqs;
    return n > (1 << 30) / bs ? 0 : (int)n;
}

// Blocks of the (global) pool, and e->n_blocks_swa. With a separate local pool a global block costs the
// global layers' bytes only; the local pool gets its bound (size_swa_pool) when the memory allows more global
// blocks than that, else as many blocks as the global pool (never fewer tokens than one shared pool held).
static int size_pool(engine *e, const model_hparams *hp, tc_err *err) {
    size_t bb = model_kv_block_bytes(e->m, e->o.block_size, e->o.kv_type_k, e->o.kv_type_v);
    if (!bb)
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "engine: KV cache types %s/%s do not fit head dim %d (quantized "
                          "types need a multiple of 32)", tt_name(e->o.kv_type_k), tt_name(e->o.kv_type_v), hp->head_dim);
    int bs = e->o.block_size;
    long long cap_l = size_swa_pool(e, hp), nl = 0, n;
    long long bb_g = (long long)bb, bb_l = 0;
    if (cap_l) {
        bb_g = (long long)model_kv_group_block_bytes(e->m, 0, bs, e->o.kv_type_k, e->o.kv_type_v);
        bb_l = (long long)model_kv_group_block_bytes(e->m, 1, bs, e->o.kv_type_k, e->o.kv_type_v);
    }
    long long per_seq = (e->ctx_limit + bs - 1) / bs, want = per_seq * e->o.max_seqs;
    if (e->o.kv_mem_bytes) {
        long long mem = (long long)e->o.kv_mem_bytes, eq = mem / (bb_g + bb_l);
        if (!cap_l) n = eq;
        else if (cap_l >= eq) n = nl = eq;
        else nl = cap_l, n = bb_g ? (mem - nl * bb_l) / bb_g : want;
    } else {
        // The default budget is a quarter of the device's free memory. One sequence of the whole context may
        // take up to three quarters when --ctx-size asks for it; the model's own context (often 128k-1M
        // tokens, more than the memory holds) is cut to what the budget holds, as llama.cpp's --fit does.
        long long avail = (long long)backend_kv_mem_default(e->be), most = 3 * avail;
        nl = cap_l < want ? cap_l : want;
        long long fit = bb_g ? (avail - nl * bb_l) / bb_g : want;
        n = want < fit ? want : fit;
        if (n < per_seq) {
            long long need = e->o.ctx_size > 0 ? per_seq : (CTX_FIT_MIN + bs - 1) / bs;
            if (need > per_seq) need = per_seq;
            if (n < need) n = need;
            if (bb_g && (long long)n * bb_g + nl * bb_l > most)
                return tc_err_set(err, TC_ERR_NOMEM, "engine: a context of %lld tokens needs %.1f GiB of KV cache, "
                                  "more than three quarters of the %.1f GiB of free memory: lower --ctx-size, or use "
                                  "--kv-type q8_0", n * bs, ((double)n * bb_g + (double)nl * bb_l) / 1073741824.0,
                                  4.0 * (double)avail / 1073741824.0);
        }
    }
    if (n > (1 << 30) / bs) n = (1 << 30) / bs;
    if (nl > (1 << 30) / bs) nl = (1 << 30) / bs;
    if (n < 1) return tc_err_set(err, TC_ERR_INVALID, "engine: KV memory %zu bytes holds no block", e->o.kv_mem_bytes);
    if (n * bs < e->ctx_limit) e->ctx_limit = (int)(n * bs);
    e->n_blocks_swa = (int)nl;
    return (int)n;
}

static int alloc_scratch(engine *e, tc_err *err) {
    size_t nbt = (size_t)e->o.max_batch_tokens, ns = (size_t)e->o.max_seqs;
    e->b_tokens = malloc(nbt * sizeof(int32_t));
    e->b_pos = malloc(nbt * sizeof(int32_t));
    e->b_seq = malloc(nbt * sizeof(int32_t));
    e->b_tables = malloc(ns * sizeof *e->b_tables);
    e->b_tables_swa = malloc(ns * sizeof *e->b_tables_swa);
    e->b_rs_slots = malloc(ns * sizeof *e->b_rs_slots);
    e->b_rs_ckpt = malloc(ns);
    // speculation needs logits for every drafted row too; spec off keeps one row per sequence
    size_t rows = e->o.spec != SPEC_OFF ? ns * (size_t)(1 + e->o.spec_k) : ns;
    if (rows > nbt) rows = nbt;
    if (rows < ns) rows = ns;
    e->max_logit_rows = (int)rows;
    e->b_logit_rows = malloc(rows * sizeof(int32_t));
    e->b_resume_rows = malloc(rows * sizeof(int32_t));
    e->logits = malloc(rows * (size_t)e->n_vocab * sizeof(float));
    e->b_embd_rows = malloc(nbt * sizeof(int32_t));
    e->embd_out = malloc(nbt * (size_t)e->dim * sizeof(float));
    e->plp_logits = malloc(ENG_PLP_ROWS * (size_t)e->n_vocab * sizeof(float));
    e->probs = malloc((size_t)e->n_vocab * sizeof(float));
    e->dreqs = calloc(ns, sizeof *e->dreqs);
    spec_costs_init(&e->spec_costs);
    e->ev_cap = (int)ns * 2 + 16;
    e->evs = malloc((size_t)e->ev_cap * sizeof *e->evs);
    e->load.cap_wait = (int)ns + e->o.max_queue; // every request in flight at most
    e->load.wait = e->load_keys = malloc((size_t)e->load.cap_wait * sizeof *e->load_keys);
    if (!e->b_tokens || !e->b_pos || !e->b_seq || !e->b_tables || !e->b_tables_swa || !e->b_logit_rows || !e->logits ||
        !e->evs || !e->b_rs_slots || !e->b_rs_ckpt || !e->b_resume_rows ||
        !e->b_embd_rows || !e->embd_out || !e->plp_logits || !e->load_keys || !e->probs ||
        !e->dreqs)
        return tc_err_set(err, TC_ERR_NOMEM, "engine: out of memory for step buffers");
    return 0;
}

static void engine_destroy(engine *e) {
    if (!e) return;
    if (e->s) { // empty after a joined thread (it cuts everything before it exits)
        for (sched_req *r = sched_take_all(e->s, SCHED_END_SHUTDOWN), *n; r; r = n) {
            n = r->next;
            eng_req_release(r);
        }
        sched_free(e->s);
    }
    for (sched_req *r = e->in.new_head, *n; r; r = n) {
        n = r->next;
        eng_req_release(r);
    }
    e->in.new_head = NULL;
    spec_drafter_free(e->drafter);
    free(e->probs);
    free(e->dreqs);
    kv_pool_free(e->pool);
    kv_pool_free(e->pool_swa);
    backend_ctx_free(e->mctx);
    backend_kv_free(e->kv);
    backend_free(e->be);
    free(e->b_tokens);
    free(e->b_pos);
    free(e->b_seq);
    free(e->b_tables);
    free(e->b_tables_swa);
    free(e->b_rs_slots);
    free(e->b_rs_ckpt);
    free(e->b_logit_rows);
    free(e->b_resume_rows);
    free(e->logits);
    free(e->b_embd_rows);
    free(e->embd_out);
    free(e->plp_logits);
    free(e->evs);
    free(e->load_keys);
    free(e->eog);
    free(e);
}

// Runs a few forward passes before the first request: pages the weights in (the first request's TTFT does
// not pay for it) and seeds the scheduler's step-cost model with a 1-token and a many-token step. Uses KV
// blocks no request owns yet; nothing is registered in the prefix cache, so what it writes is never read.
static int warm_up(engine *e, int n_blocks, tc_err *err) {
    int n = e->o.max_batch_tokens < 32 ? e->o.max_batch_tokens : 32;
    int bs = e->o.block_size, need = (n + bs - 1) / bs;
    if (e->n_blocks_swa && e->n_blocks_swa < n_blocks) n_blocks = e->n_blocks_swa; // the same ids in both storages
    if (need > n_blocks) n = n_blocks * bs, need = n_blocks;
    int32_t *buf = calloc((size_t)(3 * n + need), sizeof(int32_t));
    if (!buf) return tc_err_set(err, TC_ERR_NOMEM, "engine: out of memory");
    int32_t *tok = buf, *pos = buf + n, *seq = buf + 2 * n, *table = buf + 3 * n;
    for (int i = 0; i < n; i++) tok[i] = i % e->n_vocab, pos[i] = i;
    for (int i = 0; i < need; i++) table[i] = i;
    const int32_t *tables[1] = {table};
    int rc = 0;
    for (int rep = 0; rep < 2 && !rc; rep++) {
        int sizes[2] = {1, n};
        for (int k = 0; k < 2 && !rc; k++) {
            int32_t last = sizes[k] - 1;
            model_batch b = {.n_tokens = sizes[k], .tokens = tok, .pos = pos, .seq = seq, .n_seqs = 1,
                             .block_tables = tables, .block_tables_swa = e->pool_swa ? tables : NULL,
                             .n_logits = 1, .logits_rows = &last};
            double t0 = tc_now();
            rc = backend_forward(e->mctx, e->kv, &b, e->logits, err);
            if (!rc && rep > 0) sched_observe(e->s, sizes[k], tc_now() - t0); // rep 0 pays page faults
        }
    }
    free(buf);
    return rc;
}

_Static_assert(ENGINE_SPEC_METHODS == SPEC_N_METHODS, "engine_stats.spec_draft is indexed by spec_method");

// The drafter the options ask for: SPEC_M_DRAFT, SPEC_M_SELF or -1 (spec_drafter_choice).
static int drafter_kind(const engine_opts *o) {
    return spec_drafter_choice(o->spec, o->draft_model != NULL, o->self_spec_layers);
}

// The draft model or self-speculation drafter, when the options ask for one. A draft model's pool:
// draft_kv_mem_bytes, else a quarter of kv_mem_bytes, else the target's block count (the same token capacity).
// Self-speculation has no pool: it runs in the target's runner and writes the target's KV of layers 0..L-1,
// which the verify forward then resumes from (spec_draft.h); the CPU forward only.
static int new_drafter(engine *e, int n_target_blocks, tc_err *err) {
    const engine_opts *o = &e->o;
    const model_hparams *hp = model_get_hparams(e->m);
    model *dm = NULL;
    int layers = 0;
    if (o->spec == SPEC_DRAFT && !o->draft_model)
        return tc_err_set(err, TC_ERR_INVALID, "engine: --spec draft needs a draft model (--draft-model)");
    if (drafter_kind(o) == SPEC_M_DRAFT) {
        if (model_get_hparams(o->draft_model)->ssm_state > 0) // its drafts would have to leave its own state
            return tc_err_set(err, TC_ERR_UNSUPPORTED, "engine: the draft model (%s) has recurrent layers, which a "
                              "drafter cannot roll back; use an attention-only draft model",
                              model_get_hparams(o->draft_model)->arch);
        int rc = spec_vocab_check(e->m, o->draft_model, err);
        if (rc) return rc;
        dm = o->draft_model;
        layers = model_get_hparams(dm)->n_layers;
        e->drafter_method = SPEC_M_DRAFT;
    } else if (drafter_kind(o) == SPEC_M_SELF) {
        layers = o->self_spec_layers > 0 ? o->self_spec_layers : (hp->n_layers / 4 > 0 ? hp->n_layers / 4 : 1);
        if (layers >= hp->n_layers)
            return tc_err_set(err, TC_ERR_INVALID, "engine: --self-spec-layers %d must be below the model's %d layers",
                              layers, hp->n_layers);
        e->drafter_method = SPEC_M_SELF;
        int q_reqs = o->max_seqs < 16 ? o->max_seqs : 16;
        int max_reqs = o->max_seqs < o->max_batch_tokens ? o->max_seqs : o->max_batch_tokens; // rows per forward
        return spec_drafter_new_self(e->m, layers, e->mctx, e->kv, max_reqs, o->spec_k, q_reqs, &e->drafter, err);
    } else return 0;
    size_t bb = spec_drafter_block_bytes(dm, o->block_size, TT_F16);
    long long nb = n_target_blocks;
    size_t mem = o->draft_kv_mem_bytes ? o->draft_kv_mem_bytes : o->kv_mem_bytes / 4;
    if (mem && bb) nb = (long long)(mem / bb);
    if (nb < 1) return tc_err_set(err, TC_ERR_INVALID, "engine: draft KV memory holds no block");
    if (nb > (1 << 30) / o->block_size) nb = (1 << 30) / o->block_size;
    int q_reqs = o->max_seqs < 16 ? o->max_seqs : 16; // sampled drafts beyond these draft greedily (exact too)
    return spec_drafter_new(dm, layers, (int)nb, o->block_size, TT_F16, o->max_batch_tokens, o->n_threads,
                            o->max_seqs, o->spec_k, q_reqs, &e->drafter, err);
}

// Hybrid models (recurrent DeltaNet layers): at most MODEL_RS_SLOTS running sequences (one state slot each);
// no self-speculation, whose early-exit drafts would run the DeltaNet layers below L ahead of the verify step
// (said on stderr). Prefix-cache hits need the KV storage's block states (engine_new: a cached prefix's KV does
// not bring the recurrent state after it). Drafts of prompt lookup, predictions and a draft model are verified
// with the verify rows' states kept; a rejection restores the state after the last accepted row (take_tokens).
static int hybrid_opts(engine *e, const model_hparams *hp, tc_err *err) {
    if (hp->ssm_state <= 0) return 0;
    e->hybrid = 1;
    if (e->o.max_seqs > MODEL_RS_SLOTS)
        return tc_err_set(err, TC_ERR_INVALID, "engine: %s keeps a recurrent state per sequence: --max-seqs %d is "
                          "above its %d state slots", hp->arch, e->o.max_seqs, MODEL_RS_SLOTS);
    if (e->o.spec != SPEC_OFF && drafter_kind(&e->o) == SPEC_M_SELF)
        fprintf(stderr, "engine: %s has recurrent (gated DeltaNet) layers: self-speculation off (its early-exit "
                        "drafts would advance the recurrent state of the layers below L)\n", hp->arch);
    if (e->o.spec == SPEC_SELF) e->o.spec = SPEC_OFF;
    e->o.self_spec_layers = 0;
    return 0;
}

int engine_new(model *m, const engine_opts *o, engine **out, tc_err *err) {
    *out = NULL;
    const model_hparams *hp = model_get_hparams(m);
    if (o->max_batch_tokens < 1 || o->max_seqs < 1 || o->block_size < 1 || o->max_queue < 0 || o->n_eog < 0 ||
        o->ctx_size < 0 || (o->n_eog > 0 && !o->eog_ids) || o->spec < SPEC_OFF || o->spec > SPEC_SELF ||
        o->sched_policy < SCHED_POL_FIFO || o->sched_policy > SCHED_POL_SLO || !(o->ttft_slo >= 0) ||
        (o->spec != SPEC_OFF && (o->spec_k < 1 || o->spec_k > SPEC_MAX_K || o->spec_max_streams < 1)))
        return tc_err_set(err, TC_ERR_INVALID,
                          "engine: bad options (max_batch_tokens %d, max_seqs %d, block_size %d, max_queue %d, "
                          "spec %d, spec_k %d: 1..%d)",
                          o->max_batch_tokens, o->max_seqs, o->block_size, o->max_queue, o->spec, o->spec_k,
                          SPEC_MAX_K);
    int rc0 = spec_self_device_check(drafter_kind(o), o->device == BACKEND_CPU, err); // before the device opens
    if (rc0) return rc0;
    engine *e = calloc(1, sizeof *e);
    if (!e) return tc_err_set(err, TC_ERR_NOMEM, "engine: out of memory");
    e->m = m;
    e->o = *o;
    e->n_vocab = hp->n_vocab;
    e->dim = hp->dim;
    e->ctx_limit = o->ctx_size > 0 ? o->ctx_size : hp->ctx_train;
    // Test-only fault injection, read once: the integration tests need a way to make the forward pass fail
    // mid-generation to check that engine errors reach clients as HTTP 500 / an SSE error event.
    const char *fault = getenv("TACHYON_FAULT");
    e->fault_pos = -1;
    if (fault && !strncmp(fault, "forward_pos:", 12)) e->fault_pos = atoi(fault + 12);
    const char *trace = getenv("TACHYON_SPEC_TRACE"); // debug: counts of every verify step on stderr
    e->spec_trace = trace && atoi(trace) > 0;
    // ...and a deterministically slow engine, so that scheduling tests (queueing, SLO refusals, priority
    // overtaking) do not depend on how fast this machine is.
    // step_sleep_ms:A:B makes every step take A ms + B ms per batch token longer (a step cost the online
    // model fits with a clear slope).
    if (fault && !strncmp(fault, "step_sleep_ms:", 14)) {
        e->fault_step_ms = atoi(fault + 14);
        const char *c = strchr(fault + 14, ':');
        e->fault_token_ms = c ? atoi(c + 1) : 0;
    }
    if (e->ctx_limit < 2) e->ctx_limit = 2;
    int rc = 0, n_blocks = 0;
    if ((rc = hybrid_opts(e, hp, err))) goto fail;
    e->eog = malloc(((size_t)o->n_eog + 1) * sizeof(int32_t));
    if (!e->eog) {
        rc = tc_err_set(err, TC_ERR_NOMEM, "engine: out of memory");
        goto fail;
    }
    if (o->n_eog) memcpy(e->eog, o->eog_ids, (size_t)o->n_eog * sizeof(int32_t));
    e->o.eog_ids = e->eog;
    if ((rc = alloc_scratch(e, err))) goto fail;
    if ((rc = backend_new(m, o->device, &e->be, err))) goto fail;
    if ((n_blocks = size_pool(e, hp, err)) < 0) {
        rc = n_blocks;
        goto fail;
    }
    if ((rc = backend_kv_new(e->be, n_blocks, e->n_blocks_swa, o->block_size, o->kv_type_k, o->kv_type_v, &e->kv,
                             err)))
        goto fail;
    // A quantized K cache stores keys minus the model's per-layer mean key (key_center.h): calibrated once, after
    // the device accepted the cache and before the warm-up's first forward.
    if ((rc = model_kv_center_init(m, o->kv_type_k, o->n_threads, err))) goto fail;
    // speculation on a hybrid model: each running sequence keeps the state after each of its 1 + spec_k verify rows
    if (e->hybrid && e->o.spec != SPEC_OFF &&
        (rc = backend_kv_rs_reserve_ckpt(e->kv, e->o.max_seqs, e->o.spec_k + 1, err)))
        goto fail;
    if (e->hybrid && e->o.prefix_cache && !backend_kv_rs_has_blocks(e->kv)) {
        fprintf(stderr, "engine: %s has recurrent (gated DeltaNet) layers and its states at every KV block would "
                        "take over %llu GiB: prefix-cache hits off (prompts are recomputed)\n", hp->arch,
                MODEL_RS_BLK_MAX >> 30);
        e->o.prefix_cache = 0;
    }
    if ((rc = backend_ctx_new(e->be, o->max_batch_tokens, o->n_threads, &e->mctx, err))) goto fail;
    if ((rc = kv_pool_new(n_blocks, o->block_size, &e->pool, err))) goto fail;
    if (e->n_blocks_swa && (rc = kv_pool_new(e->n_blocks_swa, o->block_size, &e->pool_swa, err))) goto fail;
    sched_opts so = {.max_batch_tokens = o->max_batch_tokens, .max_seqs = o->max_seqs,
                     .prefix_cache = e->o.prefix_cache, .itl_guard = o->itl_guard,
                     .itl_guard_floor_s = o->itl_guard_floor_ms / 1000.0,
                     .itl_guard_fair = o->itl_guard_fair, .policy = o->sched_policy,
                     .aging_s = o->sched_aging};
    if ((rc = sched_new(&so, e->pool, &e->s, err))) goto fail;
    if (e->pool_swa) sched_set_swa(e->s, e->pool_swa, hp->swa_window);
    if ((rc = new_drafter(e, n_blocks, err))) goto fail;
    if (e->o.spec != SPEC_OFF) sched_set_draft_fn(e->s, eng_draft, e);
    if ((rc = warm_up(e, n_blocks, err))) goto fail;
    sched_load_fill(e->s, &e->load); // predictions work before the first step (the thread is not running yet)
    if ((rc = pthread_mutex_init(&e->stats_mu, NULL))) {
        rc = tc_err_set(err, TC_ERR, "engine: mutex init failed");
        goto fail;
    }
    if ((rc = eng_inbox_init(&e->in, err))) goto fail_stats;
    if ((rc = eng_outbox_init(&e->out, e->ev_cap * 4, err))) goto fail_in;
    e->stats.kv_blocks_total = n_blocks;
    e->stats.kv_capacity_tokens = n_blocks * o->block_size;
    // with a bounded local pool a context token costs the global layers' bytes (the local pool is fixed); when
    // memory only allowed an equal split, every layer's
    e->stats.kv_bytes_per_token = (e->pool_swa && e->n_blocks_swa < n_blocks ? model_kv_group_block_bytes(m, 0, o->block_size, o->kv_type_k, o->kv_type_v)
                                               : model_kv_block_bytes(m, o->block_size, o->kv_type_k, o->kv_type_v)) /
                                  (size_t)o->block_size;
    e->stats.kv_swa_blocks_total = e->n_blocks_swa;
    e->stats.kv_type_k = o->kv_type_k;
    e->stats.kv_type_v = o->kv_type_v;
    if (pthread_create(&e->thread, NULL, engine_main, e)) {
        rc = tc_err_set(err, TC_ERR, "engine: cannot start the engine thread");
        goto fail_out;
    }
    e->thread_started = 1;
    *out = e;
    return 0;
fail_out:
    eng_outbox_destroy(&e->out);
fail_in:
    eng_inbox_destroy(&e->in);
fail_stats:
    pthread_mutex_destroy(&e->stats_mu);
fail:
    engine_destroy(e);
    return rc;
}

void engine_stop(engine *e, double grace) {
    pthread_mutex_lock(&e->in.mu);
    if (!e->in.stop) {
        e->in.stop = 1;
        e->in.grace_until = tc_now() + (grace > 0 ? grace : 0);
    }
    pthread_cond_signal(&e->in.cv);
    pthread_mutex_unlock(&e->in.mu);
}

void engine_free(engine *e, double grace) {
    if (!e) return;
    engine_stop(e, grace);
    if (e->thread_started) pthread_join(e->thread, NULL);
    eng_outbox_destroy(&e->out);
    eng_inbox_destroy(&e->in);
    pthread_mutex_destroy(&e->stats_mu);
    engine_destroy(e);
}

// --- SLO admission
// Prompt tokens submitted but not yet taken by the engine thread (ahead of any new request).
static long long inbox_tokens(engine *e) {
    long long n = 0;
    pthread_mutex_lock(&e->in.mu);
    for (sched_req *r = e->in.new_head; r; r = r->next) n += r->n_prompt;
    pthread_mutex_unlock(&e->in.mu);
    return n;
}

static double predict(engine *e, const sched_key *k, double now, double *drain) {
    long long extra = inbox_tokens(e);
    pthread_mutex_lock(&e->stats_mu);
    double t = sched_predict_ttft(&e->load, k, now, extra, drain);
    pthread_mutex_unlock(&e->stats_mu);
    return t;
}

double engine_predict_ttft(engine *e, int n_prompt) {
    sched_key k = {0, n_prompt, tc_now(), UINT64_MAX, 0, 0};
    return predict(e, &k, k.t_arrival, NULL);
}

// Refuses r (TC_ERR_FULL, q->retry_after set) when its predicted TTFT misses its target, or its deadline.
static int slo_admit(engine *e, const sched_req *r, engine_req *q, tc_err *err) {
    double limit = r->ttft_slo;
    if (r->deadline > 0 && (limit <= 0 || r->deadline - r->t_arrival < limit)) limit = r->deadline - r->t_arrival;
    if (limit <= 0) return 0;
    sched_key k = {r->priority, r->n_prompt, r->t_arrival, UINT64_MAX, 0, 0};
    double drain = 0, t = predict(e, &k, r->t_arrival, &drain);
    if (t <= limit) return 0;
    q->retry_after = drain > 0 ? drain : t;
    pthread_mutex_lock(&e->stats_mu);
    sched_stats_outcome(&e->refused, r->priority, SCHED_OUT_REFUSED);
    pthread_mutex_unlock(&e->stats_mu);
    return tc_err_set(err, TC_ERR_FULL, "predicted time to first token %.2f s exceeds the target %.2f s (queue "
                      "drains in about %.1f s)", t, limit, q->retry_after);
}

// --- API
int engine_submit(engine *e, engine_req *q, uint64_t *id, tc_err *err) {
    if (!q->prompt || q->n_prompt < 1) return tc_err_set(err, TC_ERR_INVALID, "empty prompt");
    if (q->n_prompt + 1 > e->ctx_limit)
        return tc_err_set(err, TC_ERR_INVALID, "prompt has %d tokens; the context holds %d (prompt + at least 1)",
                          q->n_prompt, e->ctx_limit);
    if (q->max_tokens < 1) return tc_err_set(err, TC_ERR_INVALID, "max_tokens must be >= 1 (got %d)", q->max_tokens);
    for (int i = 0; i < q->n_prompt; i++)
        if (q->prompt[i] < 0 || q->prompt[i] >= e->n_vocab)
            return tc_err_set(err, TC_ERR_INVALID, "prompt token %d at %d is outside the vocabulary (%d)",
                              q->prompt[i], i, e->n_vocab);
    int max_tokens = q->max_tokens;
    if (max_tokens > e->ctx_limit - q->n_prompt) max_tokens = e->ctx_limit - q->n_prompt; // → "length" there
    eng_req *er = calloc(1, sizeof *er);
    if (er) er->rs_slot = -1;
    if (!er) return tc_err_set(err, TC_ERR_NOMEM, "engine: out of memory");
    int rc = samp_new(&q->sp, e->n_vocab, &er->samp, err);
    if (rc) {
        free(er);
        return rc;
    }
    samp_set_eog(er->samp, e->eog, e->o.n_eog); // banned until the request's min_tokens
    samp_accept_prompt(er->samp, q->prompt, q->n_prompt);
    spec_accept_init(&er->acc);
    er->ng_shadow = -1;
    spec_accept_init(&er->pacc);
    if (e->drafter && !q->embed) { // (self-speculation keeps no draft-side KV: no table)
        if (!spec_drafter_is_self(e->drafter) && (rc = spec_dseq_init(&er->ds, e->ctx_limit, e->o.block_size, err))) {
            samp_free(er->samp);
            free(er);
            return rc;
        }
        er->drafter = e->drafter;
        er->draft_temp = q->sp.temperature;
        er->drng = q->sp.seed ^ 0x5DEECE66Dull;
    }
    er->user = q->user;
    er->ignore_eos = q->ignore_eos;
    er->grammar = q->grammar;
    if (q->embed) {
        er->embed = q->embed;
        max_tokens = 1;
        if (!(er->embd_acc = calloc((size_t)e->dim, sizeof(float)))) {
            samp_free(er->samp);
            free(er);
            return tc_err_set(err, TC_ERR_NOMEM, "engine: out of memory");
        }
    }
    sched_req *r;
    if ((rc = sched_req_new(q->prompt, q->n_prompt, max_tokens, e->o.block_size, &r, err))) {
        samp_free(er->samp); // er->grammar stays the caller's
        spec_dseq_free(er->drafter, &er->ds);
        free(er->embd_acc);
        free(er);
        return rc;
    }
    r->owner = er;
    if (q->prediction && q->n_prediction > 0) { // taken on success only (the caller frees it on an error)
        er->pred.tokens = q->prediction;
        er->pred.n = q->n_prediction;
    }
    if (q->prompt_logprobs > 0 && q->prompt_logprobs <= SAMP_MAX_LOGPROBS + 1) er->plp = q->prompt_logprobs;
    er->plp_next = 1;
    r->no_prefix = er->embed || er->plp; // every prompt row's hidden state is needed
    r->tenant = q->tenant;
    r->share = q->share;
    kv_seq_set_salt(&r->kv, q->cache_salt);
    kv_seq_set_salt(&r->kv_swa, q->cache_salt);
    r->deadline = q->deadline;
    r->t_arrival = tc_now();
    r->priority = q->priority;
    r->ttft_slo = q->ttft_slo > 0 ? q->ttft_slo : e->o.ttft_slo;
    q->retry_after = 0;
    if (e->o.sched_policy == SCHED_POL_SLO && (rc = slo_admit(e, r, q, err))) {
        er->pred.tokens = NULL; // prediction and grammar stay the caller's on an error
        er->grammar = NULL;
        eng_req_release(r);
        return rc;
    }

    eng_inbox *in = &e->in;
    pthread_mutex_lock(&in->mu);
    // The queue bounds count waiting work only: a request that finds one of the max_seqs running slots
    // free is always admitted (a burst into an idle server must not be refused while slots are free). The
    // others wait, at most max_queue of them (and max_queued_tokens of not-yet-scheduled prompt tokens).
    int waiting = in->n_active - e->o.max_seqs; // beyond the running slots, this request not counted
    if (in->stop) rc = tc_err_set(err, TC_ERR_FULL, "engine is shutting down");
    else if (waiting >= e->o.max_queue)
        rc = tc_err_set(err, TC_ERR_FULL, "queue full (%d requests waiting, %d running)", waiting, e->o.max_seqs);
    else if (waiting >= 0 && e->o.max_queued_tokens > 0 &&
             in->n_queued_tokens + q->n_prompt > e->o.max_queued_tokens)
        rc = tc_err_set(err, TC_ERR_FULL, "queue full (%lld prompt tokens waiting)", in->n_queued_tokens);
    uint64_t new_id = 0;
    if (rc == 0) {
        r->id = new_id = ++in->next_id;
        r->next = NULL;
        if (in->new_tail) in->new_tail->next = r;
        else in->new_head = r;
        in->new_tail = r;
        in->n_queued++;
        in->n_queued_tokens += q->n_prompt;
        in->n_active++;
        pthread_cond_signal(&in->cv);
    }
    pthread_mutex_unlock(&in->mu);
    if (rc) {
        er->pred.tokens = NULL; // still the caller's
        er->grammar = NULL; // still the caller's
        eng_req_release(r);
        return rc;
    }
    q->prediction = NULL;
    if (id) *id = new_id; // not r->id: the engine thread may have finished and freed r already
    free(q->prompt);
    q->prompt = NULL;
    q->grammar = NULL;
    return 0;
}

void engine_cancel(engine *e, uint64_t id, engine_finish reason) {
    eng_cancel *c = malloc(sizeof *c);
    if (!c) return; // out of memory: the request runs to its own end
    c->id = id;
    c->reason = reason == ENGINE_FINISH_NONE ? ENGINE_FINISH_CANCELLED : reason;
    pthread_mutex_lock(&e->in.mu);
    c->next = e->in.cancels;
    e->in.cancels = c;
    pthread_cond_signal(&e->in.cv);
    pthread_mutex_unlock(&e->in.mu);
}

int engine_event_fd(engine *e) { return e->out.efd; }

int engine_ctx_limit(const engine *e) { return e->ctx_limit; }

int engine_poll(engine *e, engine_event *evs, int cap) { return cap > 0 ? eng_outbox_pop(&e->out, evs, cap) : 0; }

void engine_get_stats(engine *e, engine_stats *s) {
    pthread_mutex_lock(&e->stats_mu);
    *s = e->stats;
    sched_stats_add(&s->sched, &e->refused);
    pthread_mutex_unlock(&e->stats_mu);
    pthread_mutex_lock(&e->in.mu);
    for (sched_req *r = e->in.new_head; r; r = r->next) s->waiting++;
    pthread_mutex_unlock(&e->in.mu);
}
