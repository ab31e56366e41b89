// tachyon perplexity: perplexity of a model over a text file, scored as llama.cpp's llama-perplexity does,
// so that the two numbers can stand side by side:
//   - the whole file is tokenized once (BOS first when the model adds one) and cut into n_chunks chunks of
//     exactly CTX tokens (a tail shorter than CTX is dropped); each chunk is evaluated from position 0 in
//     a fresh context, its first token replaced by BOS when the model adds one;
//   - only the second half is scored: rows first = CTX/2 .. CTX-2 each predict the next token of the chunk,
//     so every scored token sees at least CTX/2 tokens of context (CTX/2 - 1 scored tokens per chunk);
//   - perplexity = exp(mean negative log-likelihood) over all scored tokens; ± is the standard error of
//     that estimate (delta method on the mean NLL, as llama-perplexity prints it).
// --save-logits keeps every scored row's distribution (ppl.h) so that another run — another KV type or
// weight type — can be compared with --kl-base: mean KL(base || this run) with a 95% interval, top-1
// agreement and the ratio of the two perplexities.
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/ppl.h"
#include "model/model.h"
#include "model/kv_center.h"
#include "tokenizer/tokenizer.h"

typedef struct ppl_opts {
    const char *model, *text, *save, *base;
    int ctx, chunks, threads, batch, json;
    tt_type kv_k, kv_v;
} ppl_opts;

static void ppl_usage(void) {
    fprintf(stderr, "usage: tachyon perplexity -m MODEL -f TEXT [-c CTX] [--chunks N] [-t THREADS] [-b BATCH]\n"
                    "                          [--kv-type|--kv-type-k|--kv-type-v f16|q8_0|q4_0] [--kv-rotate auto|off]\n"
                    "                          [--kv-center auto|off]\n"
                    "                          [--save-logits FILE] [--kl-base FILE] [--json]\n"
                    "  scores the second half of each CTX-token chunk (as llama-perplexity); --save-logits keeps\n"
                    "  each scored row's top-%d log-probabilities, --kl-base compares this run with such a file\n",
            PPL_TOPK);
}

static int ppl_parse(int argc, char **argv, ppl_opts *o) {
    static const struct option lo[] = {
        {"model", 1, 0, 'm'}, {"file", 1, 0, 'f'}, {"ctx-size", 1, 0, 'c'}, {"threads", 1, 0, 't'},
        {"batch", 1, 0, 'b'}, {"chunks", 1, 0, 1}, {"kv-type", 1, 0, 2}, {"kv-type-k", 1, 0, 3},
        {"kv-type-v", 1, 0, 4}, {"save-logits", 1, 0, 5}, {"kl-base", 1, 0, 6}, {"json", 0, 0, 7},
        {"kv-rotate", 1, 0, 8}, {"kv-center", 1, 0, 9}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->ctx = 512, o->threads = 2, o->batch = 128, o->chunks = -1;
    o->kv_k = o->kv_v = TT_F16;
    int c, bad = 0;
    double v = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:f:c:t:b:h", lo, NULL)) != -1) {
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'f': o->text = optarg; break;
        case 'c': bad = cli_num("perplexity", "-c/--ctx-size", optarg, 8, 1 << 20, &v), o->ctx = (int)v; break;
        case 't': bad = cli_num("perplexity", "-t/--threads", optarg, 1, 256, &v), o->threads = (int)v; break;
        case 'b': bad = cli_num("perplexity", "-b/--batch", optarg, 1, 4096, &v), o->batch = (int)v; break;
        case 1: bad = cli_num("perplexity", "--chunks", optarg, 1, 1 << 30, &v), o->chunks = (int)v; break;
        case 2: bad = cli_kv_type("perplexity", "--kv-type", optarg, &o->kv_k, &o->kv_v); break;
        case 3: bad = cli_kv_type("perplexity", "--kv-type-k", optarg, &o->kv_k, NULL); break;
        case 4: bad = cli_kv_type("perplexity", "--kv-type-v", optarg, NULL, &o->kv_v); break;
        case 5: o->save = optarg; break;
        case 6: o->base = optarg; break;
        case 7: o->json = 1; break;
        case 8: bad = cli_kv_rotate("perplexity", optarg); break;
        case 9: bad = cli_kv_center("perplexity", optarg); break;
        default: ppl_usage(); return -1;
        }
        if (bad) return -1;
    }
    if (!o->model || !o->text || optind < argc) {
        if (optind < argc) fprintf(stderr, "tachyon perplexity: unexpected argument '%s'\n", argv[optind]);
        ppl_usage();
        return -1;
    }
    return 0;
}

// Reads the whole file; *out malloc'd and NUL-terminated.
static int read_text(const char *path, char **out, size_t *len, tc_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return tc_err_set(err, TC_ERR_IO, "cannot read %s", path);
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            char *nb = realloc(buf, cap = (n + 65536 + 1) * 2);
            if (!nb) {
                free(buf), fclose(f);
                return tc_err_set(err, TC_ERR_NOMEM, "out of memory reading %s", path);
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, 65536, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return tc_err_set(err, TC_ERR_IO, "error reading %s", path);
    }
    buf[n] = '\0';
    *out = buf, *len = n;
    return 0;
}

typedef struct ppl_acc {
    double nll, nll2;  // sum of -log p(target) and of its square over scored tokens
    long n;            // scored tokens
    double kl, kl2;    // sum of per-row KL and its square (with a base)
    long top1;         // rows whose argmax matches the base's
    double base_nll;   // the base run's sum of -log p(target) over the same rows
} ppl_acc;

int cli_perplexity(int argc, char **argv) {
    ppl_opts o;
    if (ppl_parse(argc, argv, &o)) return 2;
    tc_err err = {0};
    model *m = NULL;
    tok_vocab *v = NULL;
    model_ctx *mc = NULL;
    model_kv *kv = NULL;
    char *text = NULL;
    int32_t *ids = NULL, *pos = NULL, *seq = NULL, *rows = NULL, *table = NULL;
    float *logits = NULL;
    FILE *fsave = NULL, *fbase = NULL;
    ppl_row *row = NULL, *brow = NULL;
    ppl_header bh = {0};
    ppl_acc a = {0};
    size_t text_len = 0;
    int n_ids = 0, status = 1;

    if (read_text(o.text, &text, &text_len, &err)) goto fail;
    if (o.base && !(fbase = fopen(o.base, "rb"))) {
        tc_err_set(&err, TC_ERR_IO, "cannot read the --kl-base file %s", o.base);
        goto fail;
    }
    if (fbase && ppl_read_header(fbase, o.base, &bh, &err)) goto fail;
    if (model_load(o.model, &m, &err) || tok_load(model_gguf(m), &v, &err)) goto fail;
    const model_hparams *hp = model_get_hparams(m);
    int n_vocab = hp->n_vocab, add_bos = tok_add_bos(v) && tok_bos(v) >= 0;
    if (o.ctx > hp->ctx_train) {
        tc_err_set(&err, TC_ERR_INVALID, "-c %d exceeds the model's training context of %d", o.ctx, hp->ctx_train);
        goto fail;
    }
    if (tok_encode(v, text, text_len, add_bos ? TOK_ENC_ADD_BOS : 0, &ids, &n_ids, &err)) goto fail;
    int n_chunk_max = n_ids / o.ctx, n_chunks = o.chunks > 0 && o.chunks < n_chunk_max ? o.chunks : n_chunk_max;
    if (n_chunks < 1) {
        tc_err_set(&err, TC_ERR_INVALID, "%s has %d tokens, fewer than one chunk of -c %d; use a longer text or a "
                   "smaller -c", o.text, n_ids, o.ctx);
        goto fail;
    }
    int first = o.ctx / 2, per_chunk = o.ctx - 1 - first;
    if (fbase && (bh.n_vocab != (uint32_t)n_vocab || bh.n_ctx != (uint32_t)o.ctx ||
                  bh.n_rows != (uint32_t)n_chunks * per_chunk)) {
        tc_err_set(&err, TC_ERR_INVALID, "--kl-base %s was made with n_vocab %u, -c %u, %u scored rows; this run "
                   "has n_vocab %d, -c %d, %d rows (use the same model vocabulary, text, -c and --chunks)", o.base,
                   bh.n_vocab, bh.n_ctx, bh.n_rows, n_vocab, o.ctx, n_chunks * per_chunk);
        goto fail;
    }
    int batch = o.batch < o.ctx ? o.batch : o.ctx, bs = 16, n_blocks = (o.ctx + bs - 1) / bs;
    if (model_kv_center_init(m, o.kv_k, o.threads, &err) || model_ctx_new(m, batch, o.threads, &mc, &err) ||
        model_kv_new(m, n_blocks, bs, o.kv_k, o.kv_v, &kv, &err))
        goto fail;
    pos = malloc(sizeof *pos * (size_t)batch), seq = calloc((size_t)batch, sizeof *seq);
    rows = malloc(sizeof *rows * (size_t)batch), table = malloc(sizeof *table * (size_t)n_blocks);
    logits = malloc(sizeof *logits * (size_t)batch * n_vocab);
    row = malloc(sizeof *row), brow = malloc(sizeof *brow);
    if (!pos || !seq || !rows || !table || !logits || !row || !brow) {
        tc_err_set(&err, TC_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < n_blocks; i++) table[i] = i;
    if (o.save) {
        ppl_header h = {(uint32_t)n_vocab, (uint32_t)o.ctx, PPL_TOPK, (uint32_t)(n_chunks * per_chunk),
                        (uint32_t)n_chunks};
        if (!(fsave = fopen(o.save, "wb"))) {
            tc_err_set(&err, TC_ERR_IO, "cannot write %s", o.save);
            goto fail;
        }
        if (ppl_write_header(fsave, &h, &err)) goto fail;
    }
    if (!o.json)
        fprintf(stderr, "perplexity: %d tokens, %d chunks of %d, scoring %d tokens per chunk, kv %s/%s\n", n_ids,
                n_chunks, o.ctx, per_chunk, tt_name(o.kv_k), tt_name(o.kv_v));

    const int32_t *tables[1] = {table};
    for (int c = 0; c < n_chunks; c++) {
        int32_t *chunk = ids + (size_t)c * o.ctx, saved = chunk[0];
        if (add_bos) chunk[0] = tok_bos(v);
        for (int done = 0; done < o.ctx; done += batch) {
            int nb = o.ctx - done < batch ? o.ctx - done : batch, nl = 0;
            for (int i = 0; i < nb; i++) {
                pos[i] = done + i;
                if (done + i >= first && done + i < o.ctx - 1) rows[nl++] = i;
            }
            model_batch b = {.n_tokens = nb, .tokens = chunk + done, .pos = pos, .seq = seq, .n_seqs = 1,
                             .block_tables = tables, .n_logits = nl, .logits_rows = rows};
            if (model_forward(mc, kv, &b, logits, &err)) {
                chunk[0] = saved;
                goto fail;
            }
            for (int r = 0; r < nl; r++) {
                float *lr = logits + (size_t)r * n_vocab;
                int p = done + rows[r];
                ppl_score_row(lr, n_vocab, chunk[p + 1], row);
                a.nll -= row->logp_target, a.nll2 += (double)row->logp_target * row->logp_target, a.n++;
                if (fsave && ppl_write_row(fsave, row, &err)) goto fail;
                if (fbase) {
                    if (ppl_read_row(fbase, &bh, brow, &err)) goto fail;
                    if (brow->target != row->target) {
                        tc_err_set(&err, TC_ERR_INVALID, "--kl-base %s scored other tokens (row %ld: token %d, "
                                   "here %d): it was made from another text or tokenizer", o.base, a.n - 1,
                                   brow->target, row->target);
                        goto fail;
                    }
                    int same = 0;
                    double kl = ppl_row_kl(brow, lr, n_vocab, row->top_id[0], &same);
                    a.kl += kl, a.kl2 += kl * kl, a.top1 += same, a.base_nll -= brow->logp_target;
                }
            }
        }
        chunk[0] = saved;
        if (!o.json) fprintf(stderr, "[%d]%.4f%s", c + 1, exp(a.nll / a.n), c + 1 == n_chunks ? "\n" : ",");
    }
    double mean = a.nll / a.n, var = a.nll2 / a.n - mean * mean, ppl = exp(mean);
    double ppl_se = a.n > 1 && var > 0 ? ppl * sqrt(var / (a.n - 1)) : 0;
    if (o.json) {
        printf("{\"tokens\":%d,\"chunks\":%d,\"ctx\":%d,\"scored\":%ld,\"kv_k\":\"%s\",\"kv_v\":\"%s\","
               "\"ppl\":%.6f,\"ppl_stderr\":%.6f,\"mean_nll\":%.8f",
               n_ids, n_chunks, o.ctx, a.n, tt_name(o.kv_k), tt_name(o.kv_v), ppl, ppl_se, mean);
    } else {
        printf("perplexity: %.4f +/- %.4f over %ld tokens (%d chunks of %d)\n", ppl, ppl_se, a.n, n_chunks, o.ctx);
    }
    if (fbase) {
        double klm = a.kl / a.n, klv = a.kl2 / a.n - klm * klm;
        double kl_se = a.n > 1 && klv > 0 ? sqrt(klv / (a.n - 1)) : 0, base_ppl = exp(a.base_nll / a.n);
        double top1 = (double)a.top1 / a.n;
        if (o.json)
            printf(",\"kl\":%.8f,\"kl_stderr\":%.8f,\"kl_lo\":%.8f,\"kl_hi\":%.8f,\"top1\":%.6f,\"base_ppl\":%.6f,"
                   "\"ppl_ratio\":%.6f", klm, kl_se, klm - 1.96 * kl_se, klm + 1.96 * kl_se, top1, base_ppl,
                   ppl / base_ppl);
        else
            printf("vs %s: mean KL %.6f +/- %.6f (95%%: %.6f .. %.6f), top-1 agreement %.2f%%, "
                   "ppl ratio %.5f (base %.4f)\n", o.base, klm, kl_se, klm - 1.96 * kl_se, klm + 1.96 * kl_se,
                   100 * top1, ppl / base_ppl, base_ppl);
    }
    if (o.json) printf("}\n");
    if (fsave) {
        int bad = fclose(fsave) != 0;
        fsave = NULL;
        if (bad) {
            tc_err_set(&err, TC_ERR_IO, "cannot write %s", o.save);
            goto fail;
        }
    }
    status = 0;
    goto done;
fail:
    fprintf(stderr, "tachyon perplexity: %s\n", err.msg[0] ? err.msg : "out of memory");
    if (fsave) fclose(fsave), fsave = NULL, remove(o.save); // no half-written base file left behind
done:
    if (fsave) fclose(fsave);
    if (fbase) fclose(fbase);
    free(text), free(ids), free(pos), free(seq), free(rows), free(table), free(logits), free(row), free(brow);
    model_kv_free(kv);
    model_ctx_free(mc);
    tok_free(v);
    model_free(m);
    return status;
}
