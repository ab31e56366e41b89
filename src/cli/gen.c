#include "cli/gen.h"

#include "model/kv_center.h"

#include <stdlib.h>
#include <string.h>

int gen_open(gen_session *g, model *m, backend_device dev, int max_ctx, int max_batch, int n_threads, tt_type k_type,
             tt_type v_type, tc_err *err) {
    memset(g, 0, sizeof *g);
    g->m = m;
    g->block_size = 16;
    g->max_ctx = max_ctx;
    g->max_batch = max_batch;
    g->n_blocks = (max_ctx + g->block_size - 1) / g->block_size;
    int rc = backend_new(m, dev, &g->be, err);
    if (rc) return rc;
    if ((rc = backend_ctx_new(g->be, max_batch, n_threads, &g->ctx, err))) goto fail;
    if ((rc = backend_kv_new(g->be, g->n_blocks, 0, g->block_size, k_type, v_type, &g->kv, err))) goto fail;
    // before the first forward, once the device has accepted the cache (a refused one costs no calibration)
    if ((rc = model_kv_center_init(m, k_type, n_threads, err))) goto fail;
    g->blocks = malloc(sizeof(int32_t) * (size_t)g->n_blocks);
    g->pos_buf = malloc(sizeof(int32_t) * (size_t)max_batch);
    g->seq_buf = calloc((size_t)max_batch, sizeof(int32_t));
    g->logits = malloc(sizeof(float) * (size_t)model_get_hparams(m)->n_vocab);
    if (!g->blocks || !g->pos_buf || !g->seq_buf || !g->logits) {
        rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < g->n_blocks; i++) g->blocks[i] = i;
    return 0;
fail:
    gen_close(g);
    return rc;
}

void gen_close(gen_session *g) {
    backend_ctx_free(g->ctx);
    backend_kv_free(g->kv);
    backend_free(g->be);
    free(g->blocks), free(g->pos_buf), free(g->seq_buf), free(g->logits);
    memset(g, 0, sizeof *g);
}

int gen_eval(gen_session *g, const int32_t *tokens, int n, int pos0, tc_err *err) {
    if (n <= 0 || pos0 < 0 || pos0 + n > g->max_ctx)
        return tc_err_set(err, TC_ERR_INVALID, "positions %d..%d exceed the context of %d", pos0, pos0 + n, g->max_ctx);
    const int32_t *table = g->blocks;
    for (int done = 0; done < n;) {
        int chunk = n - done < g->max_batch ? n - done : g->max_batch;
        for (int i = 0; i < chunk; i++) g->pos_buf[i] = pos0 + done + i;
        int32_t last = chunk - 1;
        int want = done + chunk == n;
        model_batch b = {.n_tokens = chunk, .tokens = tokens + done, .pos = g->pos_buf, .seq = g->seq_buf,
                         .n_seqs = 1, .block_tables = &table, .n_logits = want, .logits_rows = &last};
        int rc = backend_forward(g->ctx, g->kv, &b, g->logits, err);
        if (rc) return rc;
        done += chunk;
    }
    return 0;
}

int gen_eval_rows(gen_session *g, const int32_t *tokens, int n, int pos0, float *logits, tc_err *err) {
    return gen_eval_rows_resumed(g, tokens, n, pos0, 0, NULL, 0, logits, err);
}

int gen_eval_rows_resumed(gen_session *g, const int32_t *tokens, int n, int pos0, int n_resume, const float *x,
                          int resume_layer, float *logits, tc_err *err) {
    if (n <= 0 || n > g->max_batch || pos0 < 0 || pos0 + n > g->max_ctx)
        return tc_err_set(err, TC_ERR_INVALID, "positions %d..%d exceed the context of %d (or batch %d)", pos0,
                          pos0 + n, g->max_ctx, g->max_batch);
    const int32_t *table = g->blocks;
    int32_t rows[64];
    if (n > 64) return tc_err_set(err, TC_ERR_INVALID, "at most 64 rows with logits");
    for (int i = 0; i < n; i++) g->pos_buf[i] = pos0 + i, rows[i] = i;
    model_batch b = {.n_tokens = n, .tokens = tokens, .pos = g->pos_buf, .seq = g->seq_buf, .n_seqs = 1,
                     .block_tables = &table, .n_logits = n, .logits_rows = rows,
                     .n_resume = n_resume, .resume_rows = rows, .resume_x = x, .resume_layer = resume_layer};
    return backend_forward(g->ctx, g->kv, &b, logits, err);
}
