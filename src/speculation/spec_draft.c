// Model-based drafting: a draft model (its own KV pool, lazy catch-up) or the target's first L layers (in the
// target's runner and KV, no catch-up, residuals kept for the verify forward); one batched forward per draft
// position. See spec_draft.h.
#include "speculation/spec_draft.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "speculation/spec.h"

struct spec_drafter {
    model *m;          // borrowed
    int n_layers;      // layers a draft forward runs
    int n_vocab, dim;
    kv_store *kv;      // owned (draft model)
    model_ctx *ctx;    // owned (draft model)
    kv_pool *pool;     // owned (draft model)
    int self;          // 1: self-speculation, in the target's tctx / tkv
    backend_ctx *tctx; // borrowed (self)
    backend_kv *tkv;   // borrowed (self)
    const int32_t **b_tables_swa;      // (max_reqs) (self)
    float *x_step;                     // (max_reqs, dim) (self) one draft forward's residuals
    float *x;                          // (max_reqs * k_max, dim) (self) every drafted row's, spec_draft_req.x
    int max_tokens;    // rows per forward
    int max_reqs, k_max, q_reqs;
    int32_t *b_tokens, *b_pos, *b_seq; // (max_tokens)
    const int32_t **b_tables;          // (max_reqs)
    int32_t *b_logit_rows;             // (max_reqs)
    int *row_req;                      // (max_reqs) request of each logits row
    float *logits;                     // (max_reqs, n_vocab)
    float *q;                          // (q_reqs, k_max, n_vocab) distributions of sampled drafts
};

// --- vocabulary

static int64_t tokens_key(const model *m) { return gguf_find_key(model_gguf(m), "tokenizer.ggml.tokens"); }

int spec_vocab_check(const model *target, const model *draft, tc_err *err) {
    int nt = model_get_hparams(target)->n_vocab, nd = model_get_hparams(draft)->n_vocab;
    if (nt != nd)
        return tc_err_set(err, TC_ERR_INVALID, "draft model vocabulary has %d tokens, the target's has %d: a draft "
                          "must share the target's vocabulary", nd, nt);
    int64_t kt = tokens_key(target), kd = tokens_key(draft);
    if (kt < 0 || kd < 0) return tc_err_set(err, TC_ERR_INVALID, "draft model check: tokenizer.ggml.tokens missing");
    const gguf_ctx *gt = model_gguf(target), *gd = model_gguf(draft);
    uint64_t n = gguf_arr_n(gt, kt);
    if (gguf_arr_n(gd, kd) != n)
        return tc_err_set(err, TC_ERR_INVALID, "draft model vocabulary lists %llu token strings, the target's %llu",
                          (unsigned long long)gguf_arr_n(gd, kd), (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) {
        gguf_str a = gguf_arr_str(gt, kt, i), b = gguf_arr_str(gd, kd, i);
        if (a.len != b.len || memcmp(a.ptr, b.ptr, a.len)) {
            int la = a.len > 40 ? 40 : (int)a.len, lb = b.len > 40 ? 40 : (int)b.len;
            return tc_err_set(err, TC_ERR_INVALID, "draft model vocabulary differs from the target's at token %llu: "
                              "'%.*s' (target) vs '%.*s' (draft)", (unsigned long long)i, la, a.ptr, lb, b.ptr);
        }
    }
    return 0;
}

int spec_drafter_choice(int mode, int have_draft_model, int self_layers) {
    if (have_draft_model && (mode == SPEC_DRAFT || mode == SPEC_AUTO)) return SPEC_M_DRAFT;
    return mode == SPEC_SELF || (mode == SPEC_AUTO && self_layers > 0) ? SPEC_M_SELF : -1;
}

int spec_self_device_check(int choice, int on_cpu, tc_err *err) {
    if (choice != SPEC_M_SELF || on_cpu) return 0;
    return tc_err_set(err, TC_ERR_UNSUPPORTED, "self-speculation (--spec self, or auto with --self-spec-layers) "
                      "reuses the target's KV through resumed verify rows, which only the CPU forward runs: "
                      "use --device cpu");
}

// --- lifetime

size_t spec_drafter_block_bytes(const model *m, int block_size, tt_type kv_type) {
    return model_kv_block_bytes(m, block_size, kv_type, kv_type);
}

// The fields and buffers both kinds share; max_tokens rows per forward.
static int drafter_alloc(model *m, int n_layers, int max_tokens, int max_reqs, int k_max, int q_reqs,
                         spec_drafter **out, tc_err *err) {
    *out = NULL;
    const model_hparams *hp = model_get_hparams(m);
    if (n_layers < 1 || n_layers > hp->n_layers || max_reqs < 1 || k_max < 1 || q_reqs < 0)
        return tc_err_set(err, TC_ERR_INVALID, "drafter: %d layers of %d, %d requests, k %d", n_layers, hp->n_layers,
                          max_reqs, k_max);
    spec_drafter *d = calloc(1, sizeof *d);
    if (!d) return tc_err_set(err, TC_ERR_NOMEM, "drafter: out of memory");
    d->m = m;
    d->n_layers = n_layers;
    d->n_vocab = hp->n_vocab;
    d->dim = hp->dim;
    d->max_tokens = max_tokens > max_reqs ? max_tokens : max_reqs;
    d->max_reqs = max_reqs;
    d->k_max = k_max;
    d->q_reqs = q_reqs;
    size_t nt = (size_t)d->max_tokens, nr = (size_t)max_reqs, nv = (size_t)d->n_vocab;
    d->b_tokens = malloc(nt * sizeof(int32_t));
    d->b_pos = malloc(nt * sizeof(int32_t));
    d->b_seq = malloc(nt * sizeof(int32_t));
    d->b_tables = malloc(nr * sizeof *d->b_tables);
    d->b_logit_rows = malloc(nr * sizeof(int32_t));
    d->row_req = malloc(nr * sizeof(int));
    d->logits = malloc(nr * nv * sizeof(float));
    d->q = q_reqs ? malloc((size_t)q_reqs * (size_t)k_max * nv * sizeof(float)) : NULL;
    if (!d->b_tokens || !d->b_pos || !d->b_seq || !d->b_tables || !d->b_logit_rows || !d->row_req || !d->logits ||
        (q_reqs && !d->q)) {
        spec_drafter_free(d);
        return tc_err_set(err, TC_ERR_NOMEM, "drafter: out of memory");
    }
    *out = d;
    return 0;
}

int spec_drafter_new(model *m, int n_layers, int n_blocks, int block_size, tt_type kv_type, int max_batch_tokens,
                     int n_threads, int max_reqs, int k_max, int q_reqs, spec_drafter **out, tc_err *err) {
    spec_drafter *d;
    int rc = drafter_alloc(m, n_layers, max_batch_tokens, max_reqs, k_max, q_reqs, &d, err);
    if (rc) return rc;
    if ((rc = model_kv_new(m, n_blocks, block_size, kv_type, kv_type, &d->kv, err))) goto fail;
    if ((rc = model_ctx_new(m, d->max_tokens, n_threads, &d->ctx, err))) goto fail;
    if ((rc = kv_pool_new(n_blocks, block_size, &d->pool, err))) goto fail;
    *out = d;
    return 0;
fail:
    spec_drafter_free(d);
    return rc;
}

int spec_drafter_new_self(model *m, int n_layers, backend_ctx *ctx, backend_kv *kv, int max_reqs, int k_max,
                          int q_reqs, spec_drafter **out, tc_err *err) {
    *out = NULL;
    if (n_layers >= model_get_hparams(m)->n_layers || !ctx || !kv)
        return tc_err_set(err, TC_ERR_INVALID, "self-speculation: %d layers must be below the model's %d", n_layers,
                          model_get_hparams(m)->n_layers);
    spec_drafter *d;
    int rc = drafter_alloc(m, n_layers, max_reqs, max_reqs, k_max, q_reqs, &d, err);
    if (rc) return rc;
    d->self = 1, d->tctx = ctx, d->tkv = kv;
    size_t nr = (size_t)max_reqs, dim = (size_t)d->dim;
    d->b_tables_swa = malloc(nr * sizeof *d->b_tables_swa);
    d->x_step = malloc(nr * dim * sizeof(float));
    d->x = malloc(nr * (size_t)k_max * dim * sizeof(float));
    if (!d->b_tables_swa || !d->x_step || !d->x) {
        spec_drafter_free(d);
        return tc_err_set(err, TC_ERR_NOMEM, "drafter: out of memory");
    }
    *out = d;
    return 0;
}

int spec_drafter_is_self(const spec_drafter *d) { return d && d->self; }

int spec_drafter_layers(const spec_drafter *d) { return d->n_layers; }

void spec_drafter_free(spec_drafter *d) {
    if (!d) return;
    kv_pool_free(d->pool);
    model_ctx_free(d->ctx);
    kv_store_free(d->kv);
    free(d->b_tokens);
    free(d->b_pos);
    free(d->b_seq);
    free(d->b_tables);
    free(d->b_logit_rows);
    free(d->row_req);
    free(d->logits);
    free(d->q);
    free(d->b_tables_swa);
    free(d->x_step);
    free(d->x);
    free(d);
}

// --- per-request KV

int spec_dseq_init(spec_dseq *ds, int max_tokens, int block_size, tc_err *err) {
    memset(ds, 0, sizeof *ds);
    int rc = kv_seq_init(&ds->kv, max_tokens, block_size, err);
    ds->inited = rc == 0;
    return rc;
}

void spec_dseq_free(spec_drafter *d, spec_dseq *ds) {
    if (!ds->inited) return;
    if (d && d->pool) kv_seq_free(d->pool, &ds->kv);
    kv_seq_destroy(&ds->kv);
    ds->inited = 0;
}

int spec_dseq_reserve(spec_drafter *d, spec_dseq *ds, int n_tokens, int k) {
    if (d->self) return 0; // the target's blocks: its plan reserves them
    if (!ds->inited) return TC_ERR_INVALID;
    if (ds->n_computed > n_tokens - 1) spec_dseq_keep(d, ds, n_tokens - 1); // never past the known tokens
    int rc = kv_seq_alloc_to(d->pool, &ds->kv, n_tokens + k - 1);
    if (rc == TC_ERR_FULL) { // let go of everything: a request must not hold the draft pool it cannot use
        kv_seq_free(d->pool, &ds->kv);
        ds->n_computed = 0;
    }
    return rc;
}

void spec_dseq_keep(spec_drafter *d, spec_dseq *ds, int n_valid) {
    if (!ds->inited || d->self) return;
    if (n_valid < 0) n_valid = 0;
    if (ds->n_computed > n_valid) ds->n_computed = n_valid;
    kv_seq_truncate(d->pool, &ds->kv, ds->n_computed);
}

// --- drafting

// Next uniform in [0, 1) from a splitmix64 stream (the draft's own RNG: the target's stays untouched).
static double draft_uniform(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

// The draft token from one logits row: argmax (ties → lowest id), or x ~ q = softmax(l / T) with q written out.
static int32_t draft_pick(const float *l, int n, float temperature, uint64_t *rng, float *q) {
    int best = 0;
    for (int v = 1; v < n; v++)
        if (l[v] > l[best]) best = v;
    if (!q) return best;
    double z = 0, inv_t = 1.0 / temperature;
    for (int v = 0; v < n; v++) z += (q[v] = (float)exp((double)(l[v] - l[best]) * inv_t));
    float iz = (float)(1.0 / z);
    double u = draft_uniform(rng), acc = 0;
    int32_t x = -1;
    for (int v = 0; v < n; v++) {
        q[v] *= iz;
        acc += q[v];
        if (x < 0 && u < acc) x = v;
    }
    return x < 0 ? best : x; // rounding left u past the total: the mode has q > 0
}

static int draft_forward(spec_drafter *d, int nt, int n_seqs, int nl, tc_err *err) {
    model_batch b = {
        .n_tokens = nt, .tokens = d->b_tokens, .pos = d->b_pos, .seq = d->b_seq, .n_seqs = n_seqs,
        .block_tables = d->b_tables, .n_logits = nl, .logits_rows = d->b_logit_rows,
    };
    return model_forward_layers(d->ctx, d->kv, &b, d->n_layers, d->logits, err);
}

// Takes draft token j of every request with a logits row in the last forward.
static void take_drafts(spec_drafter *d, spec_draft_req *reqs, int nl, int j) {
    for (int i = 0; i < nl; i++) {
        spec_draft_req *q = &reqs[d->row_req[i]];
        float *qrow = q->q ? (float *)q->q + (size_t)j * d->n_vocab : NULL;
        q->tokens[q->n_tokens + j] = draft_pick(d->logits + (size_t)i * d->n_vocab, d->n_vocab, q->temperature,
                                                q->rng, qrow);
    }
}

int spec_drafter_catch_up(const spec_drafter *d, const spec_draft_req *q) {
    return d->self ? 1 : q->n_tokens - q->ds->n_computed;
}

// The rows of draft position j: one per request still drafting (k > j), the token at n_tokens - 1 + j (the
// last token, then the drafts), each its own sequence, with logits; in the target's tables (self) or the
// request's draft-pool table. Returns the row count.
static int position_rows(spec_drafter *d, spec_draft_req *reqs, int n, int j) {
    int nt = 0;
    for (int i = 0; i < n; i++) {
        spec_draft_req *q = &reqs[i];
        if (q->k <= j) continue;
        int pos = q->n_tokens - 1 + j;
        d->b_tables[nt] = d->self ? q->blocks : q->ds->kv.blocks;
        if (d->self) d->b_tables_swa[nt] = q->blocks_swa;
        d->b_tokens[nt] = q->tokens[pos];
        d->b_pos[nt] = pos;
        d->b_seq[nt] = nt;
        d->row_req[nt] = i;
        d->b_logit_rows[nt] = nt;
        nt++;
    }
    return nt;
}

// Self-speculation: one early-exit forward per draft position j over the requests still drafting, in the
// target's KV: row j of a request is position n_tokens - 1 + j (the last token, then the drafts), which gives
// draft j; its residual after layer L-1 goes to the request's x row j.
static int run_self(spec_drafter *d, spec_draft_req *reqs, int n, int k_max, tc_err *err) {
    const size_t dim = (size_t)d->dim;
    int swa = n > 0 && reqs[0].blocks_swa != NULL;
    for (int j = 0; j < k_max; j++) {
        int nt = position_rows(d, reqs, n, j);
        model_batch b = {.n_tokens = nt, .tokens = d->b_tokens, .pos = d->b_pos, .seq = d->b_seq, .n_seqs = nt,
                         .block_tables = d->b_tables, .block_tables_swa = swa ? d->b_tables_swa : NULL,
                         .n_logits = nt, .logits_rows = d->b_logit_rows, .x_out = d->x_step};
        int rc = backend_forward_layers(d->tctx, d->tkv, &b, d->n_layers, d->logits, err);
        if (rc) return rc;
        for (int r = 0; r < nt; r++)
            memcpy((float *)reqs[d->row_req[r]].x + (size_t)j * dim, d->x_step + (size_t)r * dim, dim * sizeof(float));
        take_drafts(d, reqs, nt, j);
    }
    return 0;
}

// Catch-up: every request's rows from its draft KV up to its last known token, in chunks of at most
// max_tokens rows; with logits, the last known token's row gives draft 0.
static int catch_up(spec_drafter *d, spec_draft_req *reqs, int n, int logits, tc_err *err) {
    int next = 0, rc;
    while (next < n) {
        int nt = 0, ns = 0, nl = 0;
        while (next < n && nt < d->max_tokens) {
            spec_draft_req *q = &reqs[next];
            spec_dseq *ds = q->ds;
            int m = q->n_tokens - ds->n_computed, room = d->max_tokens - nt;
            if (m > room) m = room;
            d->b_tables[ns] = ds->kv.blocks;
            for (int t = 0; t < m; t++, nt++) {
                d->b_tokens[nt] = q->tokens[ds->n_computed + t];
                d->b_pos[nt] = ds->n_computed + t;
                d->b_seq[nt] = ns;
            }
            ns++;
            ds->n_computed += m; // undone by the caller if a forward fails
            if (ds->n_computed == q->n_tokens) {
                if (logits) {
                    d->row_req[nl] = next;
                    d->b_logit_rows[nl++] = nt - 1;
                }
                next++;
            }
        }
        if (nt > 0 && (rc = draft_forward(d, nt, ns, nl, err))) return rc;
        take_drafts(d, reqs, nl, 0);
    }
    return 0;
}

int spec_drafter_prefill(spec_drafter *d, spec_draft_req *reqs, int n, tc_err *err) {
    if (d->self || n <= 0) return 0;
    if (n > d->max_reqs) n = d->max_reqs;
    int rc = catch_up(d, reqs, n, 0, err);
    if (rc) // the draft KV of this step is suspect: recompute it at the first draft
        for (int i = 0; i < n; i++) spec_dseq_keep(d, reqs[i].ds, 0);
    return rc;
}

int spec_drafter_run(spec_drafter *d, spec_draft_req *reqs, int n, tc_err *err) {
    if (n > d->max_reqs) n = d->max_reqs;
    int q_used = 0, k_max = 0;
    float *x = d->x;
    for (int i = 0; i < n; i++)
        if (reqs[i].k < 1 || reqs[i].k > d->k_max)
            return tc_err_set(err, TC_ERR_INVALID, "drafter: %d drafts (1..%d)", reqs[i].k, d->k_max);
    for (int i = 0; i < n; i++) {
        spec_draft_req *q = &reqs[i];
        q->q = NULL;
        q->x = NULL;
        if (d->self) { // contiguous rows in reqs order (spec_draft_req.x)
            q->x = x;
            x += (size_t)q->k * d->dim;
        }
        if (q->temperature > 0 && q_used < d->q_reqs)
            q->q = d->q + (size_t)q_used++ * (size_t)d->k_max * d->n_vocab;
        else q->temperature = 0; // no buffer for q: greedy (one-hot q), still exact
        if (q->k > k_max) k_max = q->k;
    }
    if (d->self) {
        int rc = run_self(d, reqs, n, k_max, err);
        if (rc) // no residuals: the verify forward computes every layer (the drafts stay, verified as any guess)
            for (int i = 0; i < n; i++) reqs[i].x = NULL;
        return rc;
    }
    int rc = catch_up(d, reqs, n, 1, err);
    if (rc) goto fail;
    // One forward per further draft position over the requests still drafting.
    for (int j = 1; j < k_max; j++) {
        int nt = position_rows(d, reqs, n, j);
        if ((rc = draft_forward(d, nt, nt, nt, err))) goto fail;
        for (int i = 0; i < n; i++)
            if (reqs[i].k > j) reqs[i].ds->n_computed = reqs[i].n_tokens + j;
        take_drafts(d, reqs, nt, j);
    }
    return 0;
fail: // the draft KV of this step is suspect: recompute it next time
    for (int i = 0; i < n; i++) spec_dseq_keep(d, reqs[i].ds, 0);
    return rc;
}
