// llama-perplexity's KL-divergence base file and statistics (see kld.h for the format). The arithmetic keeps
// llama-perplexity's types (float logits and log-sum-exp, double sums of float terms) so that the two
// programs print the same figures for the same logits.
#include "cli/kld.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

size_t kld_row_len(int n_vocab) { return 2 * (((size_t)n_vocab + 1) / 2) + 4; }

// --- header and tokens

int kld_read_header(FILE *f, const char *path, int n_vocab_model, int max_ctx, kld_header *h, int32_t **tokens,
                    tc_err *err) {
    char magic[8];
    uint32_t v[3];
    struct stat st;
    *tokens = NULL;
    if (fstat(fileno(f), &st)) return tc_err_set(err, TC_ERR_IO, "cannot stat %s", path);
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, KLD_MAGIC, 8))
        return tc_err_set(err, TC_ERR_FORMAT, "%s is not a KL-divergence base file (no \"_logits_\" magic; "
                          "llama-perplexity --kl-divergence-base writes one)", path);
    if (fread(v, 4, 3, f) != 3) return tc_err_set(err, TC_ERR_FORMAT, "%s: truncated header", path);
    h->n_ctx = (int32_t)v[0], h->n_vocab = (int32_t)v[1], h->n_chunk = (int32_t)v[2];
    if (h->n_vocab != n_vocab_model)
        return tc_err_set(err, TC_ERR_INVALID, "%s was made with a vocabulary of %d tokens; this model has %d "
                          "(use a model with the same vocabulary)", path, h->n_vocab, n_vocab_model);
    if (v[0] < 3 || v[0] > (uint32_t)max_ctx)
        return tc_err_set(err, TC_ERR_INVALID, "%s: context %u is outside 3 .. %d (the model's training context)",
                          path, v[0], max_ctx);
    if (h->n_chunk < 1) return tc_err_set(err, TC_ERR_FORMAT, "%s: bad chunk count %d", path, h->n_chunk);
    // every product below is bounded: n_ctx <= max_ctx (< 2^31), a row < 2^33 bytes, n_chunk checked first
    uint64_t size = (uint64_t)st.st_size, rest = size > KLD_HEADER_BYTES ? size - KLD_HEADER_BYTES : 0;
    uint64_t chunk_bytes = 4 * (uint64_t)h->n_ctx + 2 * (uint64_t)KLD_ROWS(h->n_ctx) * kld_row_len(h->n_vocab);
    if ((uint64_t)h->n_chunk > rest / chunk_bytes || rest != (uint64_t)h->n_chunk * chunk_bytes)
        return tc_err_set(err, TC_ERR_FORMAT, "%s: truncated or damaged: %llu bytes, but the header's %d chunks of "
                          "%d tokens with a vocabulary of %d need %.0f", path, (unsigned long long)size, h->n_chunk,
                          h->n_ctx, h->n_vocab, KLD_HEADER_BYTES + (double)h->n_chunk * (double)chunk_bytes);
    size_t n = (size_t)h->n_chunk * (size_t)h->n_ctx;
    int32_t *t = malloc(n * sizeof *t);
    if (!t) return tc_err_set(err, TC_ERR_NOMEM, "out of memory for %zu tokens of %s", n, path);
    if (fread(t, sizeof *t, n, f) != n) {
        free(t);
        return tc_err_set(err, TC_ERR_IO, "%s: cannot read the tokens", path);
    }
    for (size_t i = 0; i < n; i++)
        if (t[i] < 0 || t[i] >= h->n_vocab) {
            int32_t bad = t[i];
            free(t);
            return tc_err_set(err, TC_ERR_FORMAT, "%s: token %zu is %d, outside the vocabulary of %d", path, i, bad,
                              h->n_vocab);
        }
    *tokens = t;
    return 0;
}

int kld_write_header(FILE *f, const kld_header *h, const int32_t *tokens, tc_err *err) {
    size_t n = (size_t)h->n_chunk * (size_t)h->n_ctx;
    int32_t v[3] = {h->n_ctx, h->n_vocab, h->n_chunk};
    if (fwrite(KLD_MAGIC, 1, 8, f) != 8 || fwrite(v, 4, 3, f) != 3 || fwrite(tokens, 4, n, f) != n)
        return tc_err_set(err, TC_ERR_IO, "cannot write the KL-divergence base file");
    return 0;
}

// --- rows

double kld_encode_row(const float *logits, int n_vocab, int32_t tok, uint16_t *row) {
    float mx = logits[0], mn = logits[0];
    for (int i = 1; i < n_vocab; i++) {
        if (logits[i] > mx) mx = logits[i];
        if (logits[i] < mn) mn = logits[i];
    }
    if (mn < mx - 16) mn = mx - 16; // log-probabilities more than 16 below the top are stored as the floor
    double sum_exp = 0;
    for (int i = 0; i < n_vocab; i++) sum_exp += expf(logits[i] - mx);
    const float lse = (float)log(sum_exp), min_lp = mn - mx - lse, scale = (mx - mn) / 65535.f;
    memcpy(row, &scale, 4);
    memcpy(row + 2, &min_lp, 4);
    uint16_t *q = row + 4;
    memset(q, 0, (kld_row_len(n_vocab) - 4) * sizeof *q);
    if (scale != 0) {
        const float inv = 1 / scale;
        for (int i = 0; i < n_vocab; i++) {
            if (!(logits[i] > mn)) continue;
            long k = lrintf(inv * (logits[i] - mn)); // nearest, ties to even
            q[i] = (uint16_t)(k > 65535 ? 65535 : k);
        }
    }
    return mx + lse - logits[tok];
}

int kld_acc_init(kld_acc *a, size_t n_rows, tc_err *err) {
    memset(a, 0, sizeof *a);
    a->kld_values = malloc((n_rows ? n_rows : 1) * sizeof *a->kld_values);
    a->p_diff_values = malloc((n_rows ? n_rows : 1) * sizeof *a->p_diff_values);
    if (!a->kld_values || !a->p_diff_values) {
        kld_acc_free(a);
        return tc_err_set(err, TC_ERR_NOMEM, "out of memory for %zu rows of statistics", n_rows);
    }
    a->cap = n_rows;
    return 0;
}

void kld_acc_free(kld_acc *a) {
    free(a->kld_values), free(a->p_diff_values);
    a->kld_values = a->p_diff_values = NULL;
    a->cap = 0;
}

void kld_row_compare(const float *logits, int n_vocab, const uint16_t *row, int32_t tok, kld_acc *a) {
    if (a->count >= a->cap) return;
    float mx = logits[0];
    int imax = 0;
    for (int i = 1; i < n_vocab; i++)
        if (logits[i] > mx) mx = logits[i], imax = i;
    double sum_exp = 0;
    for (int i = 0; i < n_vocab; i++) sum_exp += expf(logits[i] - mx);
    const float lse = (float)log(sum_exp);
    float scale, min_lp;
    memcpy(&scale, row, 4);
    memcpy(&min_lp, row + 2, 4);
    const uint16_t *q = row + 4;

    const float nll = mx + lse - logits[tok], nll_base = -(scale * q[tok] + min_lp);
    a->sum_nll += nll, a->sum_nll2 += nll * nll;
    a->sum_nll_base += nll_base, a->sum_nll_base2 += nll_base * nll_base;
    a->sum_nll_nll_base += nll * nll_base;

    const float log_z = mx + lse; // log p(i) = logits[i] - log_z
    double kl = 0;
    int imax_base = 0;
    float lp_base_max = 0;
    for (int i = 0; i < n_vocab; i++) {
        const float lpb = scale * q[i] + min_lp;
        if (i == 0 || lpb > lp_base_max) lp_base_max = lpb, imax_base = i;
        if (lpb > -16.f) kl += expf(lpb) * (lpb - logits[i] + log_z); // terms below e^-16 are dropped
    }
    a->sum_kld += kl, a->sum_kld2 += kl * kl;
    a->n_same_top += imax == imax_base;

    const float p_diff = expf(-nll) - expf(-nll_base);
    const double p_diff2 = p_diff * p_diff;
    a->sum_p_diff += p_diff, a->sum_p_diff2 += p_diff2, a->sum_p_diff4 += p_diff2 * p_diff2;
    if (fabsf(p_diff) > a->max_p_diff) a->max_p_diff = fabsf(p_diff);
    a->kld_values[a->count] = (float)kl, a->p_diff_values[a->count] = p_diff;
    a->count++;
}

// --- statistics as llama-perplexity prints them

typedef struct {
    double mean, unc; // the mean and its standard error (0 with 10 values or fewer)
} kld_mu;

static kld_mu mean_unc(double sum, double sum2, size_t n) {
    kld_mu r = {0, 0};
    if (n < 1) return r;
    r.mean = sum / n;
    double var = sum2 / n - r.mean * r.mean;
    r.unc = var > 0 && n > 10 ? sqrt(var / (n - 1)) : 0.;
    return r;
}

static double covariance(double sa, double sb, double sab, size_t n) {
    if (n < 10) return 0.0;
    return (sab / n - (sa / n) * (sb / n)) / (n - 1);
}

// Linear interpolation between the sorted values around fraction * (n - 1).
static float percentile(const float *v, size_t n, float fraction) {
    if (fraction <= 0) return v[0];
    if (fraction >= 1) return v[n - 1];
    float p = fraction * (float)(n - 1);
    size_t ip = (size_t)p;
    p -= (float)ip;
    return (1 - p) * v[ip] + p * v[ip + 1 < n ? ip + 1 : n - 1];
}

static float median(const float *v, size_t n) { return n % 2 == 0 ? 0.5f * (v[n / 2] + v[n / 2 - 1]) : v[n / 2]; }

static int cmp_float(const void *x, const void *y) {
    float a = *(const float *)x, b = *(const float *)y;
    return (a > b) - (a < b);
}

void kld_print_chunk_header(FILE *out) {
    fprintf(out, "chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              "
                 "\xce\x94p RMS            Same top p\n");
}

void kld_print_chunk(FILE *out, const kld_acc *a, int chunk) {
    kld_mu lp = mean_unc(a->sum_nll, a->sum_nll2, a->count), lb = mean_unc(a->sum_nll_base, a->sum_nll_base2, a->count);
    double cov = covariance(a->sum_nll, a->sum_nll_base, a->sum_nll_nll_base, a->count), ppl = exp(lp.mean);
    kld_mu kl = mean_unc(a->sum_kld, a->sum_kld2, a->count), mse = mean_unc(a->sum_p_diff2, a->sum_p_diff4, a->count);
    double rms = sqrt(mse.mean), top = (double)a->n_same_top / a->count;
    fprintf(out, "%4d    %9.4lf \xc2\xb1 %9.4lf    %10.5lf \xc2\xb1 %10.5lf    %10.5lf \xc2\xb1 %10.5lf", chunk, ppl,
            ppl * lp.unc, lp.mean - lb.mean, sqrt(lp.unc * lp.unc + lb.unc * lb.unc - 2.0 * cov), kl.mean, kl.unc);
    fprintf(out, "    %6.3lf \xc2\xb1 %6.3lf %%    %6.3lf \xc2\xb1 %6.3lf %%\n", 100.0 * rms, 100.0 * 0.5 / rms * mse.unc,
            100.0 * top, 100.0 * sqrt(top * (1 - top) / (a->count - 1)));
}

static void print_ppl_stats(FILE *out, const kld_acc *a) {
    kld_mu lp = mean_unc(a->sum_nll, a->sum_nll2, a->count), lb = mean_unc(a->sum_nll_base, a->sum_nll_base2, a->count);
    double ppl = exp(lp.mean), ppl_unc = ppl * lp.unc, base = exp(lb.mean), base_unc = base * lb.unc;
    double cov = covariance(a->sum_nll, a->sum_nll_base, a->sum_nll_nll_base, a->count);
    double ratio = lp.mean - lb.mean, ratio_unc = sqrt(lp.unc * lp.unc + lb.unc * lb.unc - 2.0 * cov);
    double pcov = ppl * base * cov;
    fprintf(out, "====== Perplexity statistics ======\n");
    fprintf(out, "Mean PPL(Q)                   : %10.6lf \xc2\xb1 %10.6lf\n", ppl, ppl_unc);
    fprintf(out, "Mean PPL(base)                : %10.6lf \xc2\xb1 %10.6lf\n", base, base_unc);
    fprintf(out, "Cor(ln(PPL(Q)), ln(PPL(base))): %6.2lf%%\n", 100.0 * cov / (lp.unc * lb.unc));
    fprintf(out, "Mean ln(PPL(Q)/PPL(base))     : %10.6lf \xc2\xb1 %10.6lf\n", ratio, ratio_unc);
    fprintf(out, "Mean PPL(Q)/PPL(base)         : %10.6lf \xc2\xb1 %10.6lf\n", exp(ratio), exp(ratio) * ratio_unc);
    fprintf(out, "Mean PPL(Q)-PPL(base)         : %10.6lf \xc2\xb1 %10.6lf\n", ppl - base,
            sqrt(ppl_unc * ppl_unc + base_unc * base_unc - 2.0 * pcov));
    fprintf(out, "\n");
}

int kld_print_summary(FILE *out, kld_acc *a) {
    size_t n = a->count;
    if (n < 100) return -1; // too few values for percentiles, as llama-perplexity decides
    float *kv = a->kld_values, *pv = a->p_diff_values;
    qsort(kv, n, sizeof *kv, cmp_float);
    qsort(pv, n, sizeof *pv, cmp_float);
    print_ppl_stats(out, a);
    kld_mu kl = mean_unc(a->sum_kld, a->sum_kld2, n);
    fprintf(out, "====== KL divergence statistics ======\n");
    fprintf(out, "Mean    KLD: %10.6lf \xc2\xb1 %10.6lf\n", kl.mean, kl.unc);
    fprintf(out, "Maximum KLD: %10.6f\n", kv[n - 1]);
    static const struct {
        const char *label;
        float fraction;
    } kp[] = {{"99.9%", 0.999f}, {"99.0%", 0.990f}, {"95.0%", 0.950f}, {"90.0%", 0.900f}, {NULL, 0.5f},
              {"10.0%", 0.100f}, {" 5.0%", 0.050f}, {" 1.0%", 0.010f}, {" 0.1%", 0.001f}};
    for (size_t i = 0; i < sizeof kp / sizeof kp[0]; i++) {
        if (kp[i].label) fprintf(out, "%s   KLD: %10.6f\n", kp[i].label, percentile(kv, n, kp[i].fraction));
        else fprintf(out, "Median  KLD: %10.6f\n", median(kv, n));
    }
    fprintf(out, "Minimum KLD: %10.6f\n", kv[0]);
    fprintf(out, "\n====== Token probability statistics ======\n");
    kld_mu pd = mean_unc(a->sum_p_diff, a->sum_p_diff2, n);
    fprintf(out, "Mean    \xce\x94p: %6.3lf \xc2\xb1 %5.3lf %%\n", 100.0 * pd.mean, 100.0 * pd.unc);
    fprintf(out, "Maximum \xce\x94p: %6.3lf%%\n", 100.0 * pv[n - 1]);
    static const struct {
        const char *label;
        float fraction;
    } pp[] = {{"99.9%", 0.999f}, {"99.0%", 0.990f}, {"95.0%", 0.950f}, {"90.0%", 0.900f}, {"75.0%", 0.750f},
              {NULL, 0.5f},      {"25.0%", 0.250f}, {"10.0%", 0.100f}, {" 5.0%", 0.050f}, {" 1.0%", 0.010f},
              {" 0.1%", 0.001f}};
    for (size_t i = 0; i < sizeof pp / sizeof pp[0]; i++) {
        if (pp[i].label) fprintf(out, "%s   \xce\x94p: %6.3lf%%\n", pp[i].label, 100.0 * percentile(pv, n, pp[i].fraction));
        else fprintf(out, "Median  \xce\x94p: %6.3lf%%\n", 100.0 * median(pv, n));
    }
    fprintf(out, "Minimum \xce\x94p: %6.3lf%%\n", 100.0 * pv[0]);
    kld_mu mse = mean_unc(a->sum_p_diff2, a->sum_p_diff4, n);
    double rms = sqrt(mse.mean), top = (double)a->n_same_top / n;
    fprintf(out, "RMS \xce\x94p    : %6.3lf \xc2\xb1 %5.3lf %%\n", 100.0 * rms, 100.0 * 0.5 / rms * mse.unc);
    fprintf(out, "Same top p: %6.3lf \xc2\xb1 %5.3lf %%\n", 100.0 * top, 100.0 * sqrt(top * (1.0 - top) / (n - 1)));
    return 0;
}
