// tachyon logits: run token ids through the forward pass and write every row's logits as raw float32
// (n_tokens, n_vocab) — the hook that reference tests use to compare against an independent implementation.
// Rows are computed in chunks of --batch tokens, so the same ids with different chunking must agree.
// --device cuda runs the same through the CUDA backend (the CPU-vs-CUDA comparison of tests/ref/test_cuda_ref.py).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "backend/backend.h"
#include "model/key_center.h"
#include "model/model.h"

int cli_logits(int argc, char **argv) {
    const char *path = NULL, *ids_arg = NULL, *out_path = NULL, *kt_arg = "f16", *vt_arg = "f16", *dev_arg = "cpu";
    int batch = 512, threads = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-m")) path = argv[i + 1];
        else if (!strcmp(argv[i], "--ids")) ids_arg = argv[i + 1];
        else if (!strcmp(argv[i], "-o")) out_path = argv[i + 1];
        else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--kv-type")) kt_arg = vt_arg = argv[i + 1];
        else if (!strcmp(argv[i], "--kv-type-k")) kt_arg = argv[i + 1];
        else if (!strcmp(argv[i], "--kv-type-v")) vt_arg = argv[i + 1];
        else if (!strcmp(argv[i], "--device")) dev_arg = argv[i + 1];
        else path = NULL, i = argc;
    }
    if (!path || !ids_arg || !out_path || batch < 1 || threads < 1) {
        fprintf(stderr, "usage: tachyon logits -m MODEL --ids 1,2,3 -o OUT.f32 [--batch N] [-t THREADS]\n"
                        "       [--kv-type|--kv-type-k|--kv-type-v f16|q8_0|q4_0] [--device cpu|cuda]\n");
        return 2;
    }
    int cap = 1, n = 0;
    for (const char *p = ids_arg; *p; p++) cap += *p == ',';
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)cap), *pos = malloc(sizeof(int32_t) * (size_t)cap);
    int32_t *seq = calloc((size_t)cap, sizeof(int32_t)), *rows = malloc(sizeof(int32_t) * (size_t)cap);
    tc_err err = {0};
    model *m = NULL;
    backend_device dev = BACKEND_CPU;
    backend *be = NULL;
    backend_ctx *ctx = NULL;
    backend_kv *kv = NULL;
    float *logits = NULL;
    FILE *f = NULL;
    int status = 1;
    tt_type kt = TT_F16, kvt = TT_F16;
    if (!ids || !pos || !seq || !rows) goto fail;
    if (kv_type_parse(kt_arg, &kt, &err) || kv_type_parse(vt_arg, &kvt, &err) ||
        backend_device_parse(dev_arg, &dev, &err))
        goto fail;
    for (char *p = (char *)ids_arg, *end; *p; p = *end ? end + 1 : end) {
        long v = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',')) {
            tc_err_set(&err, TC_ERR_INVALID, "--ids must be comma-separated integers");
            goto fail;
        }
        ids[n] = (int32_t)v, pos[n] = n, n++;
    }
    if (model_load(path, &m, &err)) goto fail;
    int vocab = model_get_hparams(m)->n_vocab, bs = 16, n_blocks = (n + bs - 1) / bs;
    if (backend_new(m, dev, &be, &err) || backend_ctx_new(be, batch, threads, &ctx, &err) ||
        backend_kv_new(be, n_blocks, 0, bs, kt, kvt, &kv, &err) || model_kv_center_init(m, kt, threads, &err))
        goto fail;
    int32_t *table = malloc(sizeof(int32_t) * (size_t)n_blocks);
    logits = malloc(sizeof(float) * (size_t)batch * vocab);
    if (!table || !logits) goto fail;
    for (int i = 0; i < n_blocks; i++) table[i] = n_blocks - 1 - i; // non-identity table: exercises paging
    if (!(f = fopen(out_path, "wb"))) {
        tc_err_set(&err, TC_ERR_IO, "cannot write %s", out_path);
        free(table);
        goto fail;
    }
    const int32_t *tables[1] = {table};
    for (int done = 0; done < n; done += batch) {
        int chunk = n - done < batch ? n - done : batch;
        for (int i = 0; i < chunk; i++) rows[i] = i;
        model_batch b = {.n_tokens = chunk, .tokens = ids + done, .pos = pos + done, .seq = seq, .n_seqs = 1,
                         .block_tables = tables, .n_logits = chunk, .logits_rows = rows};
        if (backend_forward(ctx, kv, &b, logits, &err)) {
            free(table);
            goto fail;
        }
        fwrite(logits, sizeof(float), (size_t)chunk * vocab, f);
    }
    free(table);
    status = 0;
    goto done;
fail:
    fprintf(stderr, "logits: %s\n", err.msg[0] ? err.msg : "out of memory");
done:
    if (f) fclose(f);
    free(ids), free(pos), free(seq), free(rows), free(logits);
    backend_kv_free(kv);
    backend_ctx_free(ctx);
    backend_free(be);
    model_free(m);
    return status;
}
