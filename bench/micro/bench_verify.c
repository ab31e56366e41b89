// Micro-benchmark for speculative verification (not a test): wall time of one forward of n rows with logits
// for EVERY row (a verify step of 1 + k rows) against one row (a plain decode step), after a context of
// 300 tokens, the row counts interleaved within each repetition so that machine load drifts hit all alike.
// Prints, per n, ms per forward, x one row, and the marginal cost of a row (x one row): speculation with k
// drafts pays only when the accepted tokens per step exceed 1 + k * marginal.
// usage: bench_verify MODEL [threads, default 2] [repetitions, default 20]
#include "backend/backend.h"
#include "common/timeutil.h"

#include <stdio.h>
#include <stdlib.h>

enum { CTX = 300, NN = 7, MAX_ROWS = 17, BS = 16, N_BLOCKS = 1024 / BS };

// One forward of n tokens at positions pos0.. of one sequence (identity block table), logits (n_vocab each) of
// every row when all_rows, else of the last one.
static int forward_rows(backend_ctx *ctx, backend_kv *kv, const int32_t *toks, int n, int pos0, int all_rows,
                        float *logits, tc_err *err) {
    static int32_t table[N_BLOCKS], pos[CTX], seq[CTX], rows[CTX];
    for (int i = 0; i < N_BLOCKS; i++) table[i] = i;
    for (int i = 0; i < n; i++) pos[i] = pos0 + i, seq[i] = 0, rows[i] = i;
    const int32_t *tables[1] = {table};
    model_batch b = {.n_tokens = n, .tokens = toks, .pos = pos, .seq = seq, .n_seqs = 1, .block_tables = tables,
                     .n_logits = all_rows ? n : 1, .logits_rows = all_rows ? rows : &rows[n - 1]};
    return backend_forward(ctx, kv, &b, logits, err);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_verify MODEL [threads] [repetitions]\n");
        return 2;
    }
    const int threads = argc > 2 ? atoi(argv[2]) : 2, reps = argc > 3 ? atoi(argv[3]) : 20;
    static const int ns[NN] = {1, 2, 3, 5, 9, 13, MAX_ROWS};
    tc_err err = {0};
    model *m = NULL;
    backend *be = NULL;
    backend_ctx *ctx = NULL;
    backend_kv *kv = NULL;
    float *logits = NULL;
    int rc = 1;
    if (threads < 1 || reps < 1) return 2;
    if (model_load(argv[1], &m, &err) || backend_new(m, BACKEND_CPU, &be, &err) ||
        backend_ctx_new(be, CTX, threads, &ctx, &err) || backend_kv_new(be, N_BLOCKS, 0, BS, TT_F16, TT_F16, &kv, &err))
        goto done;
    int32_t toks[CTX + MAX_ROWS];
    for (int i = 0; i < CTX + MAX_ROWS; i++) toks[i] = 100 + i * 7; // any ids: the cost does not depend on them
    logits = malloc(sizeof(float) * MAX_ROWS * (size_t)model_get_hparams(m)->n_vocab); // (MAX_ROWS, n_vocab)
    if (!logits || forward_rows(ctx, kv, toks, CTX, 0, 0, logits, &err)) goto done;
    double tot[NN] = {0}; // seconds
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < NN; i++) {
            double t = tc_now();
            if (forward_rows(ctx, kv, toks + CTX, ns[i], CTX, 1, logits, &err)) goto done;
            tot[i] += tc_now() - t;
        }
    printf("rows | ms per forward | x 1 row | marginal per row (x 1 row)\n");
    for (int i = 0; i < NN; i++)
        printf("%4d | %14.2f | %7.2f | %.3f\n", ns[i], tot[i] / reps * 1e3, tot[i] / tot[0],
               ns[i] > 1 ? (tot[i] / tot[0] - 1) / (ns[i] - 1) : 0.0);
    rc = 0;
done:
    if (rc) fprintf(stderr, "bench_verify: %s\n", err.msg[0] ? err.msg : "failed");
    free(logits);
    backend_ctx_free(ctx);
    backend_kv_free(kv);
    backend_free(be);
    if (m) model_free(m);
    return rc;
}
