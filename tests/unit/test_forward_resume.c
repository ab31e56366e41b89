// Resumed rows (model_batch.n_resume): a forward that takes some rows' residual stream after layer L-1 from an
// earlier early-exit forward (model_forward_layers(L) with x_out, which wrote those rows' KV of layers 0..L-1)
// must give the logits of the one-pass forward over the same batch. The CPU kernels are row-independent (a
// row's arithmetic does not depend on the other rows of the batch), so the match is bit-exact.
#include <stdint.h>
#include <string.h>

#include "model/model.h"
#include "test_util.h"

#define N_SEQS 3
#define MAX_ROWS 64
#define BS 16

// (the tiny random Llama has one layer: nothing to resume at; it is skipped) and, when present, Gemma 3
// (sliding-window layers in a storage of their own: the sub-batch keeps block_tables_swa)
static const char *const MODELS[] = {"../shared/testdata/models/stories260K.gguf",
                                     "../shared/testdata/models/llama-2-tiny-random.gguf"};
static const char *const GEMMA = "models/gemma-3-270m-q4_k_m.gguf";

// Every sequence: a prompt already in the cache, then `rows` new rows of which the first `drafted` were run
// by the early-exit forward (self-speculation: the last token and the drafts, the last draft excluded).
static const int PROMPT[N_SEQS] = {5, 17, 3};
static const int ROWS[N_SEQS] = {4, 3, 1};

typedef struct fixture {
    model *m;
    const model_hparams *hp;
    model_ctx *ctx;
    kv_store *kv;
    int32_t blocks[N_SEQS][4];
    const int32_t *tables[N_SEQS];
} fixture;

static int32_t tok_at(int s, int p, int n_vocab) { return (int32_t)((s * 131 + p * 37 + 11) % n_vocab); }

static int fx_open(fixture *f, model *m) {
    tc_err err = {0};
    memset(f, 0, sizeof *f);
    f->m = m;
    f->hp = model_get_hparams(m);
    int swa = f->hp->swa_window > 0; // the local layers in their own storage, addressed by the same tables
    if (model_ctx_new(m, MAX_ROWS, 2, &f->ctx, &err) ||
        model_kv_new_swa(m, N_SEQS * 4, swa ? N_SEQS * 4 : 0, BS, TT_F16, TT_F16, &f->kv, &err)) {
        fprintf(stderr, "fixture: %s\n", err.msg);
        return -1;
    }
    for (int s = 0; s < N_SEQS; s++) {
        for (int b = 0; b < 4; b++) f->blocks[s][b] = s * 4 + b;
        f->tables[s] = f->blocks[s];
    }
    // the prompts, one batch
    int32_t tok[MAX_ROWS], pos[MAX_ROWS], seq[MAX_ROWS], n = 0;
    for (int s = 0; s < N_SEQS; s++)
        for (int p = 0; p < PROMPT[s]; p++) tok[n] = tok_at(s, p, f->hp->n_vocab), pos[n] = p, seq[n++] = s;
    model_batch b = {.n_tokens = n, .tokens = tok, .pos = pos, .seq = seq, .n_seqs = N_SEQS, .block_tables = f->tables,
                     .block_tables_swa = swa ? f->tables : NULL};
    if (model_forward(f->ctx, f->kv, &b, NULL, &err)) {
        fprintf(stderr, "prompt forward: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static void fx_close(fixture *f) {
    model_ctx_free(f->ctx);
    kv_store_free(f->kv);
}

// The step's batch: every sequence's new rows after its prompt, logits for every row.
typedef struct step {
    int n;
    int32_t tok[MAX_ROWS], pos[MAX_ROWS], seq[MAX_ROWS], lrows[MAX_ROWS];
    int32_t resume_rows[MAX_ROWS];
    int n_resume;
} step;

static void step_build(step *st, int n_vocab, int all_resumed) {
    memset(st, 0, sizeof *st);
    for (int s = 0; s < N_SEQS; s++)
        for (int k = 0; k < ROWS[s]; k++) {
            int n = st->n++;
            st->pos[n] = PROMPT[s] + k, st->seq[n] = s, st->tok[n] = tok_at(s, PROMPT[s] + k, n_vocab);
            st->lrows[n] = n;
            if (all_resumed || k < ROWS[s] - 1) st->resume_rows[st->n_resume++] = n;
        }
}

static model_batch step_batch(const fixture *f, step *st) {
    return (model_batch){.n_tokens = st->n, .tokens = st->tok, .pos = st->pos, .seq = st->seq, .n_seqs = N_SEQS,
                         .block_tables = f->tables, .block_tables_swa = f->hp->swa_window > 0 ? f->tables : NULL,
                         .n_logits = st->n, .logits_rows = st->lrows};
}

// The early exit over the resumed rows as the drafter runs them: one forward per draft position j over every
// sequence with a row there; their residuals after layer L-1 gathered in batch-row order into x (n_resume, dim).
static int draft_rows(fixture *f, const step *st, int L, float *x, float *logits) {
    const int dim = f->hp->dim;
    float *xo = malloc((size_t)MAX_ROWS * dim * sizeof(float));
    tc_err err = {0};
    int rc = 0;
    for (int j = 0; j < MAX_ROWS; j++) {
        int32_t tok[N_SEQS], pos[N_SEQS], seq[N_SEQS], lr[N_SEQS], idx[N_SEQS], n = 0;
        for (int i = 0; i < st->n_resume; i++) {
            int r = st->resume_rows[i];
            if (st->pos[r] - PROMPT[st->seq[r]] != j) continue;
            tok[n] = st->tok[r], pos[n] = st->pos[r], seq[n] = st->seq[r], lr[n] = n, idx[n++] = i;
        }
        if (n == 0) break;
        model_batch b = {.n_tokens = n, .tokens = tok, .pos = pos, .seq = seq, .n_seqs = N_SEQS,
                         .block_tables = f->tables, .block_tables_swa = f->hp->swa_window > 0 ? f->tables : NULL,
                         .n_logits = n, .logits_rows = lr, .x_out = xo};
        if ((rc = model_forward_layers(f->ctx, f->kv, &b, L, logits, &err))) {
            fprintf(stderr, "early exit: %s\n", err.msg);
            break;
        }
        for (int i = 0; i < n; i++) memcpy(x + (size_t)idx[i] * dim, xo + (size_t)i * dim, (size_t)dim * sizeof(float));
    }
    free(xo);
    return rc;
}

// Bit-exact comparison; prints the first difference.
static int same_logits(const float *a, const float *b, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float))) {
            fprintf(stderr, "%s: logit %zu differs: %.9g vs %.9g\n", what, i, a[i], b[i]);
            return 0;
        }
    return 1;
}

// One model, one resume layer: one-pass logits vs early exit + resumed forward (and a perturbed residual must
// change them: the test sees resume_x).
static void check_resume(model *m, int L, int all_resumed) {
    fixture fa, fb;
    if (fx_open(&fa, m) || fx_open(&fb, m)) {
        CHECK(0);
        return;
    }
    const int nv = fa.hp->n_vocab, dim = fa.hp->dim;
    step st;
    step_build(&st, nv, all_resumed);
    float *la = malloc((size_t)MAX_ROWS * nv * sizeof(float)), *lb = malloc((size_t)MAX_ROWS * nv * sizeof(float));
    float *x = malloc((size_t)MAX_ROWS * dim * sizeof(float));
    tc_err err = {0};
    model_batch ba = step_batch(&fa, &st);
    CHECK(model_forward(fa.ctx, fa.kv, &ba, la, &err) == 0);
    CHECK(draft_rows(&fb, &st, L, x, lb) == 0);
    model_batch bb = step_batch(&fb, &st);
    bb.n_resume = st.n_resume, bb.resume_rows = st.resume_rows, bb.resume_x = x, bb.resume_layer = L;
    CHECK_MSG(model_forward(fb.ctx, fb.kv, &bb, lb, &err) == 0, "%s", err.msg);
    char what[64];
    snprintf(what, sizeof what, "L=%d%s", L, all_resumed ? " all rows resumed" : "");
    CHECK_MSG(same_logits(la, lb, (size_t)st.n * nv, what), "%s: resumed forward != one-pass forward", what);
    // a wrong residual (another row's) must show
    memcpy(x, x + (size_t)(st.n_resume - 1) * dim, (size_t)dim * sizeof(float));
    CHECK(model_forward(fb.ctx, fb.kv, &bb, lb, &err) == 0);
    CHECK_MSG(memcmp(la, lb, (size_t)st.n * nv * sizeof(float)) != 0, "%s: a wrong residual left the logits unchanged",
              what);
    free(la), free(lb), free(x);
    fx_close(&fa), fx_close(&fb);
}

static void check_batch_rules(model *m) {
    fixture f;
    if (fx_open(&f, m)) {
        CHECK(0);
        return;
    }
    const int nl = f.hp->n_layers;
    step st;
    step_build(&st, f.hp->n_vocab, 0);
    float *x = calloc((size_t)MAX_ROWS * f.hp->dim, sizeof(float));
    tc_err err = {0};
    model_batch b = step_batch(&f, &st);
    b.n_resume = st.n_resume, b.resume_rows = st.resume_rows, b.resume_x = x;
    b.resume_layer = 0;
    CHECK(model_batch_check(&b, MAX_ROWS, f.hp->n_vocab, nl, &err) == TC_ERR_INVALID);
    b.resume_layer = nl;
    CHECK(model_batch_check(&b, MAX_ROWS, f.hp->n_vocab, nl, &err) == TC_ERR_INVALID);
    b.resume_layer = 1;
    CHECK(model_batch_check(&b, MAX_ROWS, f.hp->n_vocab, nl, &err) == 0);
    b.resume_x = NULL;
    CHECK(model_batch_check(&b, MAX_ROWS, f.hp->n_vocab, nl, &err) == TC_ERR_INVALID);
    b.resume_x = x;
    int32_t bad[2] = {1, 0};
    b.n_resume = 2, b.resume_rows = bad;
    CHECK(model_batch_check(&b, MAX_ROWS, f.hp->n_vocab, nl, &err) == TC_ERR_INVALID);
    bad[0] = 0, bad[1] = st.n;
    CHECK(model_batch_check(&b, MAX_ROWS, f.hp->n_vocab, nl, &err) == TC_ERR_INVALID);
    // an early exit cannot resume at or past its own last layer
    b.resume_rows = st.resume_rows, b.n_resume = st.n_resume, b.resume_layer = 1, b.n_logits = 0;
    CHECK(model_forward_layers(f.ctx, f.kv, &b, 1, NULL, &err) == TC_ERR_INVALID);
    free(x);
    fx_close(&f);
}

static void check_model(const char *path, int all_layers) {
    model *m = NULL;
    tc_err err = {0};
    if (model_load(path, &m, &err)) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        CHECK(0);
        return;
    }
    const model_hparams *hp = model_get_hparams(m);
    printf("%s: %d layers, dim %d, window %d\n", path, hp->n_layers, hp->dim, hp->swa_window);
    if (hp->n_layers >= 2) { // else nothing to resume at
        if (all_layers)
            for (int L = 1; L < hp->n_layers; L++) check_resume(m, L, 0);
        else // a local layer's, a global layer's (Gemma 3: every 6th) boundary, and the last
            for (int L = 1; L < hp->n_layers; L += 5) check_resume(m, L, 0);
        check_resume(m, hp->n_layers - 1, 0);
        check_resume(m, hp->n_layers / 2 > 0 ? hp->n_layers / 2 : 1, 1);
        check_batch_rules(m);
    }
    model_free(m);
}

int main(void) {
    for (size_t i = 0; i < sizeof MODELS / sizeof *MODELS; i++) check_model(MODELS[i], 1);
    FILE *g = fopen(GEMMA, "rb");
    if (g) {
        fclose(g);
        check_model(GEMMA, 0);
    } else printf("%s not present: the sliding-window case is not checked\n", GEMMA);
    TEST_MAIN_END();
}
