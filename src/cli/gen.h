// A single-sequence generation session for the CLI (run, bench): one block table over the paged KV cache,
// prefill in chunks, decode one token per forward. It drives the same ragged-batch forward (backend_forward) the
// engine uses; it exists so the CLI does not need the engine thread.
#ifndef TACHYON_CLI_GEN_H
#define TACHYON_CLI_GEN_H

#include <stdint.h>

#include "backend/backend.h"
#include "model/model.h"

typedef struct gen_session {
    model *m;          // borrowed
    backend *be;       // owned: the weights on the session's device
    backend_ctx *ctx;  // owned
    backend_kv *kv;    // owned
    int32_t *blocks;   // (n_blocks) identity block table
    int n_blocks, block_size, max_ctx, max_batch;
    int32_t *pos_buf, *seq_buf; // (max_batch)
    float *logits;     // (n_vocab) logits of the last forward's last row
} gen_session;

// Allocates a session for up to max_ctx positions on device dev (--device). Free with gen_close.
// k_type / v_type: the KV cache types (model_kv_new).
int gen_open(gen_session *g, model *m, backend_device dev, int max_ctx, int max_batch, int n_threads, tt_type k_type,
             tt_type v_type, tc_err *err);
void gen_close(gen_session *g);
// Runs tokens[0..n) at positions pos0.. in chunks of max_batch; logits of the last token land in g->logits.
int gen_eval(gen_session *g, const int32_t *tokens, int n, int pos0, tc_err *err);
// Runs n <= max_batch tokens at positions pos0.. in one forward and writes every row's logits into
// logits (n, n_vocab): a speculative verify step.
int gen_eval_rows(gen_session *g, const int32_t *tokens, int n, int pos0, float *logits, tc_err *err);
// The same with the first n_resume rows resumed at layer resume_layer from their residuals x (n_resume, dim),
// their KV of the layers below already in the cache (self-speculation's drafted rows: model.h n_resume).
int gen_eval_rows_resumed(gen_session *g, const int32_t *tokens, int n, int pos0, int n_resume, const float *x,
                          int resume_layer, float *logits, tc_err *err);

#endif
