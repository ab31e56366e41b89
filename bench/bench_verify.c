// Micro-benchmark for speculative verification (not a test): wall time of one forward of n rows with logits
// for EVERY row (a verify step of 1 + k rows) against one row (a plain decode step), after a context of
// 300 tokens, the row counts interleaved within each repetition so that machine load drifts hit all alike.
// Prints, per n, ms per forward, x one row, and the marginal cost of a row (x one row): speculation with k
// drafts pays only when the accepted tokens per step exceed 1 + k * marginal.
// usage: bench_verify MODEL [threads, default 2] [repetitions, default 20]
#include "cli/gen.h"
#include "common/timeutil.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_verify MODEL [threads] [repetitions]\n");
        return 2;
    }
    const int threads = argc > 2 ? atoi(argv[2]) : 2, reps = argc > 3 ? atoi(argv[3]) : 20;
    enum { CTX = 300, NN = 7 };
    static const int ns[NN] = {1, 2, 3, 5, 9, 13, 17};
    tc_err err = {0};
    model *m = NULL;
    gen_session g = {0};
    float *logits = NULL;
    int rc = 1;
    if (threads < 1 || reps < 1) return 2;
    if (model_load(argv[1], &m, &err) || gen_open(&g, m, BACKEND_CPU, 1024, 64, threads, TT_F16, TT_F16, &err)) goto done;
    int32_t toks[CTX + 17];
    for (int i = 0; i < CTX + 17; i++) toks[i] = 100 + i * 7; // any ids: the cost does not depend on them
    if (gen_eval(&g, toks, CTX, 0, &err)) goto done;
    logits = malloc(sizeof(float) * 17 * (size_t)model_get_hparams(m)->n_vocab); // (17, n_vocab)
    if (!logits) goto done;
    double tot[NN] = {0}; // seconds
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < NN; i++) {
            double t = tc_now();
            if (gen_eval_rows(&g, toks + CTX, ns[i], CTX, logits, &err)) goto done;
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
    gen_close(&g);
    if (m) model_free(m);
    return rc;
}
