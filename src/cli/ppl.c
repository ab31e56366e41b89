// Row scoring and the saved-logits format of `tachyon perplexity` (see ppl.h for the format).
#include "cli/ppl.h"

#include <math.h>
#include <string.h>
#include <sys/stat.h>

void ppl_score_row(float *logits, int n_vocab, int32_t target, ppl_row *r) {
    float mx = logits[0];
    for (int i = 1; i < n_vocab; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (int i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - mx);
    double lse = mx + log(sum);
    for (int i = 0; i < n_vocab; i++) logits[i] = (float)((double)logits[i] - lse);
    // top k by insertion into a sorted array: almost every entry fails the threshold test at once
    int n = 0;
    for (int i = 0; i < n_vocab; i++) {
        float v = logits[i];
        if (n == PPL_TOPK && v <= r->top_logp[n - 1]) continue;
        int j = n < PPL_TOPK ? n++ : n - 1;
        while (j > 0 && r->top_logp[j - 1] < v) {
            r->top_logp[j] = r->top_logp[j - 1], r->top_id[j] = r->top_id[j - 1];
            j--;
        }
        r->top_logp[j] = v, r->top_id[j] = i;
    }
    for (int j = n; j < PPL_TOPK; j++) r->top_logp[j] = -INFINITY, r->top_id[j] = -1;
    double top = 0;
    for (int j = 0; j < n; j++) top += exp((double)r->top_logp[j]);
    double rest = 1.0 - top;
    r->log_rest = rest > 1e-30 ? (float)log(rest) : -1e30f;
    r->target = target;
    r->logp_target = logits[target];
}

double ppl_row_kl(const ppl_row *base, const float *cur_logp, int n_vocab, int32_t cur_argmax, int *top1_same) {
    double kl = 0, q_top = 0, p_top = 0;
    for (int j = 0; j < PPL_TOPK; j++) {
        int32_t id = base->top_id[j];
        if (id < 0 || id >= n_vocab) continue;
        double lp = base->top_logp[j], lq = cur_logp[id], p = exp(lp);
        kl += p * (lp - lq);
        p_top += p, q_top += exp(lq);
    }
    double p_rest = 1.0 - p_top, q_rest = 1.0 - q_top;
    // both sides' rest masses are tiny differences of sums near 1: clamp so that rounding cannot produce
    // log(0) or a negative mass
    if (p_rest > 1e-12) kl += p_rest * (log(p_rest) - log(q_rest > 1e-12 ? q_rest : 1e-12));
    *top1_same = base->top_id[0] == cur_argmax;
    return kl;
}

// --- file I/O

int ppl_write_header(FILE *f, const ppl_header *h, tc_err *err) {
    uint32_t v[6] = {h->n_vocab, h->n_ctx, h->k, h->n_rows, h->n_chunks, 0};
    if (fwrite(PPL_MAGIC, 1, 8, f) != 8 || fwrite(v, sizeof v, 1, f) != 1)
        return tc_err_set(err, TC_ERR_IO, "cannot write the logits file");
    return 0;
}

int ppl_write_row(FILE *f, const ppl_row *r, tc_err *err) {
    int ok = fwrite(&r->target, 4, 1, f) == 1 && fwrite(&r->logp_target, 4, 1, f) == 1 &&
             fwrite(&r->log_rest, 4, 1, f) == 1;
    for (int j = 0; ok && j < PPL_TOPK; j++)
        ok = fwrite(&r->top_id[j], 4, 1, f) == 1 && fwrite(&r->top_logp[j], 4, 1, f) == 1;
    return ok ? 0 : tc_err_set(err, TC_ERR_IO, "cannot write the logits file");
}

int ppl_read_header(FILE *f, const char *path, ppl_header *h, tc_err *err) {
    char magic[8];
    uint32_t v[6];
    struct stat st;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, PPL_MAGIC, 8) || fread(v, sizeof v, 1, f) != 1)
        return tc_err_set(err, TC_ERR_FORMAT, "%s is not a tachyon logits file (written by --save-logits)", path);
    h->n_vocab = v[0], h->n_ctx = v[1], h->k = v[2], h->n_rows = v[3], h->n_chunks = v[4];
    if (h->k < 1 || h->k > PPL_TOPK || h->n_vocab < 1)
        return tc_err_set(err, TC_ERR_FORMAT, "%s: bad header (k %u, n_vocab %u)", path, h->k, h->n_vocab);
    uint64_t need = 32 + (uint64_t)h->n_rows * (12 + 8 * (uint64_t)h->k);
    if (fstat(fileno(f), &st) || (uint64_t)st.st_size != need)
        return tc_err_set(err, TC_ERR_FORMAT, "%s: truncated or damaged (%lld bytes, header says %llu)", path,
                          (long long)st.st_size, (unsigned long long)need);
    return 0;
}

int ppl_read_row(FILE *f, const ppl_header *h, ppl_row *r, tc_err *err) {
    int ok = fread(&r->target, 4, 1, f) == 1 && fread(&r->logp_target, 4, 1, f) == 1 &&
             fread(&r->log_rest, 4, 1, f) == 1;
    for (uint32_t j = 0; ok && j < h->k; j++)
        ok = fread(&r->top_id[j], 4, 1, f) == 1 && fread(&r->top_logp[j], 4, 1, f) == 1;
    for (uint32_t j = h->k; j < PPL_TOPK; j++) r->top_id[j] = -1, r->top_logp[j] = -INFINITY;
    return ok ? 0 : tc_err_set(err, TC_ERR_FORMAT, "the logits file ended early");
}
