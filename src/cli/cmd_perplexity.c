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
// --kl-divergence-base FILE writes llama-perplexity's base file (kld.h) as llama-perplexity would; with
// --kl-divergence it reads one (written by llama-perplexity or by tachyon), evaluates the file's own tokens and
// chunks, and prints llama-perplexity's per-chunk table and KL summary, so the two engines can be compared.
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/kld.h"
#include "cli/ppl.h"
#include "model/key_center.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

typedef struct ppl_opts {
    const char *model, *text, *save, *base;
    const char *kld_base; // --kl-divergence-base: written, or read with --kl-divergence (kld_read)
    int ctx, chunks, threads, batch, json, kld_read;
    tt_type kv_k, kv_v;
} ppl_opts;

static void ppl_usage(void) {
    fprintf(stderr, "usage: tachyon perplexity -m MODEL -f TEXT [-c CTX] [--chunks N] [-t THREADS] [-b BATCH]\n"
                    "                          [--kv-type|--kv-type-k|--kv-type-v f16|q8_0|q4_0] [--kv-rotate auto|off]\n"
                    "                          [--kv-center auto|off]\n"
                    "                          [--save-logits FILE] [--kl-base FILE] [--json]\n"
                    "                          [--kl-divergence-base FILE [--kl-divergence]]\n"
                    "  scores the second half of each CTX-token chunk (as llama-perplexity); --save-logits keeps\n"
                    "  each scored row's top-%d log-probabilities, --kl-base compares this run with such a file;\n"
                    "  --kl-divergence-base writes llama-perplexity's base file, and with --kl-divergence reads one\n"
                    "  (from llama-perplexity or tachyon: its tokens and -c, no -f) and prints llama-perplexity's KL\n"
                    "  statistics\n",
            PPL_TOPK);
}

static int ppl_parse(int argc, char **argv, ppl_opts *o) {
    static const struct option lo[] = {
        {"model", 1, 0, 'm'}, {"file", 1, 0, 'f'}, {"ctx-size", 1, 0, 'c'}, {"threads", 1, 0, 't'},
        {"batch", 1, 0, 'b'}, {"chunks", 1, 0, 1}, {"kv-type", 1, 0, 2}, {"kv-type-k", 1, 0, 3},
        {"kv-type-v", 1, 0, 4}, {"save-logits", 1, 0, 5}, {"kl-base", 1, 0, 6}, {"json", 0, 0, 7},
        {"kv-rotate", 1, 0, 8}, {"kv-center", 1, 0, 9}, {"kl-divergence-base", 1, 0, 10},
        {"kl-divergence", 0, 0, 11}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
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
        case 10: o->kld_base = optarg; break;
        case 11: o->kld_read = 1; break;
        default: ppl_usage(); return -1;
        }
        if (bad) return -1;
    }
    if (o->kld_read && (!o->kld_base || o->save || o->base || o->json)) {
        fprintf(stderr, "tachyon perplexity: --kl-divergence needs --kl-divergence-base FILE and takes no "
                        "--save-logits, --kl-base or --json\n");
        return -1;
    }
    if (!o->model || (!o->text && !o->kld_read) || optind < argc) {
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


// One run: the model and its context, the tokenized text cut into chunks, one batch's scratch, the files.
// Everything is owned (ppl_close frees it).
typedef struct ppl_run {
    model *m;
    tok_vocab *v;
    model_ctx *mc;
    kv_store *kv;
    char *text;              // the whole file, NUL-terminated, (text_len + 1,)
    size_t text_len;
    int32_t *ids;            // the text's tokens, (n_ids,)
    int32_t *pos, *seq, *rows; // one batch's positions, sequence ids and rows to score, (batch,)
    int32_t *table;          // the one sequence's block table, (n_blocks,)
    float *logits;           // (batch, n_vocab)
    FILE *fsave, *fbase;     // --save-logits (written), --kl-base (read); NULL when not given
    FILE *fkld;              // --kl-divergence-base (read with --kl-divergence, else written); NULL when not given
    uint16_t *krow;          // one row of that file, (kld_row_len(n_vocab),)
    kld_acc ka;              // the comparison with it (--kl-divergence)
    ppl_row *row, *brow;     // this run's scored row, the base's
    ppl_header bh;           // the base file's header
    ppl_acc a;
    int n_ids, n_vocab, add_bos;
    int n_chunks, first, per_chunk; // chunks of o.ctx tokens; rows first .. ctx-2 scored, per_chunk of them
    int batch, n_blocks;
} ppl_run;

// --kl-divergence: the base file's header and tokens are the run's chunks, and its context is -c.
static int ppl_load_kld(ppl_opts *o, ppl_run *r, tc_err *err) {
    if (!(r->fkld = fopen(o->kld_base, "rb")))
        return tc_err_set(err, TC_ERR_IO, "cannot read the --kl-divergence-base file %s", o->kld_base);
    if (model_load(o->model, &r->m, err) || tok_load(model_gguf(r->m), &r->v, err)) return -1;
    const model_hparams *hp = model_get_hparams(r->m);
    r->n_vocab = hp->n_vocab, r->add_bos = tok_add_bos(r->v) && tok_bos(r->v) >= 0;
    kld_header h;
    if (kld_read_header(r->fkld, o->kld_base, r->n_vocab, hp->ctx_train, &h, &r->ids, err)) return -1;
    o->ctx = h.n_ctx, r->n_chunks = h.n_chunk, r->n_ids = h.n_ctx * h.n_chunk;
    r->first = o->ctx / 2, r->per_chunk = o->ctx - 1 - r->first;
    return kld_acc_init(&r->ka, (size_t)r->n_chunks * (size_t)r->per_chunk, err);
}

// Reads the text and the base file's header, loads the model and tokenizes; checks that the text holds a chunk
// and that the base file matches this run. 0, or a TC_ERR_* with err set.
static int ppl_load(ppl_opts *o, ppl_run *r, tc_err *err) {
    if (o->kld_read) return ppl_load_kld(o, r, err);
    if (read_text(o->text, &r->text, &r->text_len, err)) return -1;
    if (o->base && !(r->fbase = fopen(o->base, "rb")))
        return tc_err_set(err, TC_ERR_IO, "cannot read the --kl-base file %s", o->base);
    if (r->fbase && ppl_read_header(r->fbase, o->base, &r->bh, err)) return -1;
    if (model_load(o->model, &r->m, err) || tok_load(model_gguf(r->m), &r->v, err)) return -1;
    const model_hparams *hp = model_get_hparams(r->m);
    r->n_vocab = hp->n_vocab, r->add_bos = tok_add_bos(r->v) && tok_bos(r->v) >= 0;
    if (o->ctx > hp->ctx_train)
        return tc_err_set(err, TC_ERR_INVALID, "-c %d exceeds the model's training context of %d", o->ctx,
                          hp->ctx_train);
    if (tok_encode(r->v, r->text, r->text_len, r->add_bos ? TOK_ENC_ADD_BOS : 0, &r->ids, &r->n_ids, err))
        return -1;
    int n_chunk_max = r->n_ids / o->ctx;
    r->n_chunks = o->chunks > 0 && o->chunks < n_chunk_max ? o->chunks : n_chunk_max;
    if (r->n_chunks < 1)
        return tc_err_set(err, TC_ERR_INVALID, "%s has %d tokens, fewer than one chunk of -c %d; use a longer text "
                          "or a smaller -c", o->text, r->n_ids, o->ctx);
    r->first = o->ctx / 2, r->per_chunk = o->ctx - 1 - r->first;
    if (o->kld_base && r->n_ids < 2 * o->ctx) // llama-perplexity refuses such a text too
        return tc_err_set(err, TC_ERR_INVALID, "%s has %d tokens; writing a KL-divergence base file with -c %d "
                          "needs at least %d (as llama-perplexity)", o->text, r->n_ids, o->ctx, 2 * o->ctx);
    const ppl_header *bh = &r->bh;
    if (r->fbase && (bh->n_vocab != (uint32_t)r->n_vocab || bh->n_ctx != (uint32_t)o->ctx ||
                     bh->n_rows != (uint32_t)r->n_chunks * r->per_chunk))
        return tc_err_set(err, TC_ERR_INVALID, "--kl-base %s was made with n_vocab %u, -c %u, %u scored rows; this "
                          "run has n_vocab %d, -c %d, %d rows (use the same model vocabulary, text, -c and --chunks)",
                          o->base, bh->n_vocab, bh->n_ctx, bh->n_rows, r->n_vocab, o->ctx,
                          r->n_chunks * r->per_chunk);
    return 0;
}

// The model context and KV of one chunk, the batch scratch, and the --save-logits file with its header.
static int ppl_alloc(const ppl_opts *o, ppl_run *r, tc_err *err) {
    int bs = 16;
    r->batch = o->batch < o->ctx ? o->batch : o->ctx, r->n_blocks = (o->ctx + bs - 1) / bs;
    if (model_kv_center_init(r->m, o->kv_k, o->threads, err) ||
        model_ctx_new(r->m, r->batch, o->threads, &r->mc, err) ||
        model_kv_new(r->m, r->n_blocks, bs, o->kv_k, o->kv_v, &r->kv, err))
        return -1;
    size_t batch = (size_t)r->batch;
    r->pos = malloc(sizeof *r->pos * batch), r->seq = calloc(batch, sizeof *r->seq);
    r->rows = malloc(sizeof *r->rows * batch), r->table = malloc(sizeof *r->table * (size_t)r->n_blocks);
    r->logits = malloc(sizeof *r->logits * batch * r->n_vocab);
    r->row = malloc(sizeof *r->row), r->brow = malloc(sizeof *r->brow);
    if (!r->pos || !r->seq || !r->rows || !r->table || !r->logits || !r->row || !r->brow)
        return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < r->n_blocks; i++) r->table[i] = i;
    if (o->kld_base && !(r->krow = malloc(kld_row_len(r->n_vocab) * sizeof *r->krow)))
        return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    if (o->kld_base && !o->kld_read) {
        kld_header h = {o->ctx, r->n_vocab, r->n_chunks};
        if (!(r->fkld = fopen(o->kld_base, "wb"))) return tc_err_set(err, TC_ERR_IO, "cannot write %s", o->kld_base);
        if (kld_write_header(r->fkld, &h, r->ids, err)) return -1;
    }
    if (o->save) {
        ppl_header h = {(uint32_t)r->n_vocab, (uint32_t)o->ctx, PPL_TOPK, (uint32_t)(r->n_chunks * r->per_chunk),
                        (uint32_t)r->n_chunks};
        if (!(r->fsave = fopen(o->save, "wb"))) return tc_err_set(err, TC_ERR_IO, "cannot write %s", o->save);
        if (ppl_write_header(r->fsave, &h, err)) return -1;
    }
    return 0;
}

// One row of the --kl-divergence-base file: compared with this run's logits (n_vocab,), or written from them.
static int ppl_kld_row(const ppl_opts *o, ppl_run *r, const float *logits, int32_t target, tc_err *err) {
    size_t n = kld_row_len(r->n_vocab);
    if (o->kld_read) {
        if (fread(r->krow, sizeof *r->krow, n, r->fkld) != n)
            return tc_err_set(err, TC_ERR_IO, "%s: cannot read row %zu", o->kld_base, r->ka.count);
        kld_row_compare(logits, r->n_vocab, r->krow, target, &r->ka);
        return 0;
    }
    kld_encode_row(logits, r->n_vocab, target, r->krow);
    if (fwrite(r->krow, sizeof *r->krow, n, r->fkld) != n)
        return tc_err_set(err, TC_ERR_IO, "cannot write %s", o->kld_base);
    return 0;
}

// Scores the nl rows of one batch's logits (rows[r]: the row's index in the batch that starts at position done
// of chunk): accumulates the NLL, writes the rows to --save-logits, compares them with --kl-base.
static int ppl_score_batch(const ppl_opts *o, ppl_run *r, const int32_t *chunk, int done, int nl, tc_err *err) {
    ppl_acc *a = &r->a;
    ppl_row *row = r->row, *brow = r->brow;
    for (int i = 0; i < nl; i++) {
        float *lr = r->logits + (size_t)i * r->n_vocab;
        int p = done + r->rows[i];
        if (r->fkld && ppl_kld_row(o, r, lr, chunk[p + 1], err)) return -1;
        ppl_score_row(lr, r->n_vocab, chunk[p + 1], row);
        a->nll -= row->logp_target, a->nll2 += (double)row->logp_target * row->logp_target, a->n++;
        if (r->fsave && ppl_write_row(r->fsave, row, err)) return -1;
        if (!r->fbase) continue;
        if (ppl_read_row(r->fbase, &r->bh, brow, err)) return -1;
        if (brow->target != row->target)
            return tc_err_set(err, TC_ERR_INVALID, "--kl-base %s scored other tokens (row %ld: token %d, here %d): "
                              "it was made from another text or tokenizer", o->base, a->n - 1, brow->target,
                              row->target);
        int same = 0;
        double kl = ppl_row_kl(brow, lr, r->n_vocab, row->top_id[0], &same);
        a->kl += kl, a->kl2 += kl * kl, a->top1 += same, a->base_nll -= brow->logp_target;
    }
    return 0;
}

// Evaluates chunk c from position 0 in batches (its first token BOS when the model adds one) and scores it.
static int ppl_chunk(const ppl_opts *o, ppl_run *r, int c, tc_err *err) {
    int32_t *chunk = r->ids + (size_t)c * o->ctx, saved = chunk[0];
    if (r->add_bos) chunk[0] = tok_bos(r->v);
    const int32_t *tables[1] = {r->table};
    int rc = 0;
    for (int done = 0; !rc && done < o->ctx; done += r->batch) {
        int nb = o->ctx - done < r->batch ? o->ctx - done : r->batch, nl = 0;
        for (int i = 0; i < nb; i++) {
            r->pos[i] = done + i;
            if (done + i >= r->first && done + i < o->ctx - 1) r->rows[nl++] = i;
        }
        model_batch b = {.n_tokens = nb, .tokens = chunk + done, .pos = r->pos, .seq = r->seq, .n_seqs = 1,
                         .block_tables = tables, .n_logits = nl, .logits_rows = r->rows};
        rc = model_forward(r->mc, r->kv, &b, r->logits, err);
        if (!rc) rc = ppl_score_batch(o, r, chunk, done, nl, err);
    }
    chunk[0] = saved;
    return rc;
}

// The result on stdout: perplexity ± its standard error, and with --kl-base the comparison (text or --json).
static void ppl_print(const ppl_opts *o, ppl_run *r) {
    const ppl_acc *a = &r->a;
    if (o->kld_read) {
        printf("\n");
        if (kld_print_summary(stdout, &r->ka))
            fprintf(stderr, "perplexity: %zu rows compared; the KL statistics need at least 100\n", r->ka.count);
        return;
    }
    double mean = a->nll / a->n, var = a->nll2 / a->n - mean * mean, ppl = exp(mean);
    double ppl_se = a->n > 1 && var > 0 ? ppl * sqrt(var / (a->n - 1)) : 0;
    if (o->json) {
        printf("{\"tokens\":%d,\"chunks\":%d,\"ctx\":%d,\"scored\":%ld,\"kv_k\":\"%s\",\"kv_v\":\"%s\","
               "\"ppl\":%.6f,\"ppl_stderr\":%.6f,\"mean_nll\":%.8f",
               r->n_ids, r->n_chunks, o->ctx, a->n, tt_name(o->kv_k), tt_name(o->kv_v), ppl, ppl_se, mean);
    } else {
        printf("perplexity: %.4f +/- %.4f over %ld tokens (%d chunks of %d)\n", ppl, ppl_se, a->n, r->n_chunks,
               o->ctx);
    }
    if (r->fbase) {
        double klm = a->kl / a->n, klv = a->kl2 / a->n - klm * klm;
        double kl_se = a->n > 1 && klv > 0 ? sqrt(klv / (a->n - 1)) : 0, base_ppl = exp(a->base_nll / a->n);
        double top1 = (double)a->top1 / a->n;
        if (o->json)
            printf(",\"kl\":%.8f,\"kl_stderr\":%.8f,\"kl_lo\":%.8f,\"kl_hi\":%.8f,\"top1\":%.6f,\"base_ppl\":%.6f,"
                   "\"ppl_ratio\":%.6f", klm, kl_se, klm - 1.96 * kl_se, klm + 1.96 * kl_se, top1, base_ppl,
                   ppl / base_ppl);
        else
            printf("vs %s: mean KL %.6f +/- %.6f (95%%: %.6f .. %.6f), top-1 agreement %.2f%%, "
                   "ppl ratio %.5f (base %.4f)\n", o->base, klm, kl_se, klm - 1.96 * kl_se, klm + 1.96 * kl_se,
                   100 * top1, ppl / base_ppl, base_ppl);
    }
    if (o->json) printf("}\n");
}

static void ppl_close(ppl_run *r) {
    if (r->fsave) fclose(r->fsave);
    if (r->fbase) fclose(r->fbase);
    if (r->fkld) fclose(r->fkld);
    free(r->krow);
    kld_acc_free(&r->ka);
    free(r->text), free(r->ids), free(r->pos), free(r->seq), free(r->rows), free(r->table), free(r->logits);
    free(r->row), free(r->brow);
    kv_store_free(r->kv);
    model_ctx_free(r->mc);
    tok_free(r->v);
    model_free(r->m);
}

int cli_perplexity(int argc, char **argv) {
    ppl_opts o;
    if (ppl_parse(argc, argv, &o)) return 2;
    tc_err err = {0};
    ppl_run r;
    memset(&r, 0, sizeof r);
    int status = 1;
    if (ppl_load(&o, &r, &err) || ppl_alloc(&o, &r, &err)) goto fail;
    if (!o.json)
        fprintf(stderr, "perplexity: %d tokens, %d chunks of %d, scoring %d tokens per chunk, kv %s/%s\n", r.n_ids,
                r.n_chunks, o.ctx, r.per_chunk, tt_name(o.kv_k), tt_name(o.kv_v));
    if (o.kld_read) kld_print_chunk_header(stdout);
    for (int c = 0; c < r.n_chunks; c++) {
        if (ppl_chunk(&o, &r, c, &err)) goto fail;
        if (o.kld_read) kld_print_chunk(stdout, &r.ka, c + 1);
        else if (!o.json)
            fprintf(stderr, "[%d]%.4f%s", c + 1, exp(r.a.nll / r.a.n), c + 1 == r.n_chunks ? "\n" : ",");
    }
    ppl_print(&o, &r);
    if (r.fkld && !o.kld_read) {
        int bad = fclose(r.fkld) != 0;
        r.fkld = NULL;
        if (bad) {
            tc_err_set(&err, TC_ERR_IO, "cannot write %s", o.kld_base);
            goto fail;
        }
    }
    if (r.fsave) {
        int bad = fclose(r.fsave) != 0;
        r.fsave = NULL;
        if (bad) {
            tc_err_set(&err, TC_ERR_IO, "cannot write %s", o.save);
            goto fail;
        }
    }
    status = 0;
    goto done;
fail:
    fprintf(stderr, "tachyon perplexity: %s\n", err.msg[0] ? err.msg : "out of memory");
    if (r.fsave) fclose(r.fsave), r.fsave = NULL, remove(o.save); // no half-written base file left behind
    if (r.fkld && !o.kld_read) fclose(r.fkld), r.fkld = NULL, remove(o.kld_base);
done:
    ppl_close(&r);
    return status;
}
