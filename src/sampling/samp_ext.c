// Scalar filters of the llama-server sampler chain (see samp_ext.h). Lists are short-lived scratch owned by
// the caller; nothing here allocates.
#include "sampling/samp_ext.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

static int td_cmp(const void *a, const void *b) {
    const samp_td *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

void samp_td_softmax(samp_td *c, int n) {
    if (n <= 0) return;
    qsort(c, (size_t)n, sizeof *c, td_cmp);
    float mx = c[0].logit;
    double z = 0.0;
    for (int i = 0; i < n; i++) {
        c[i].p = c[i].logit == -INFINITY ? 0.0f : expf(c[i].logit - mx);
        z += c[i].p;
    }
    for (int i = 0; i < n; i++) c[i].p = (float)(c[i].p / z);
}

void samp_td_top_k(samp_td *c, int *n, int k) {
    qsort(c, (size_t)*n, sizeof *c, td_cmp);
    if (k > 0 && k < *n) *n = k;
}

void samp_td_top_n_sigma(samp_td *c, int n, float nsig) {
    if (nsig <= 0.0f || n <= 1) return;
    float mx = -INFINITY;
    double sum = 0.0;
    int cnt = 0;
    for (int i = 0; i < n; i++) {
        if (c[i].logit == -INFINITY) continue;
        mx = c[i].logit > mx ? c[i].logit : mx;
        sum += c[i].logit;
        cnt++;
    }
    if (!cnt) return;
    double mean = sum / cnt, acc = 0.0;
    for (int i = 0; i < n; i++)
        if (c[i].logit != -INFINITY) acc += (c[i].logit - mean) * (c[i].logit - mean);
    float sd = (float)sqrt(acc / cnt);
    for (int i = 0; i < n; i++)
        if (c[i].logit < mx - nsig * sd) c[i].logit = -INFINITY;
}

// Keys of typical sampling in a samp_td: logit = |surprise - entropy|, id = index in the list.
static int typ_cmp(const void *a, const void *b) {
    const samp_td *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

void samp_td_typical(samp_td *c, int *n, float p, samp_td *scratch) {
    if (p >= 1.0f || *n <= 1) return;
    samp_td_softmax(c, *n);
    double h = 0.0;
    for (int i = 0; i < *n; i++)
        if (c[i].p > 0.0f) h -= c[i].p * log(c[i].p);
    samp_td *k = scratch, *cp = scratch + *n;
    for (int i = 0; i < *n; i++) {
        k[i] = (samp_td){.id = i, .logit = fabsf(-logf(c[i].p) - (float)h)};
        cp[i] = c[i];
    }
    qsort(k, (size_t)*n, sizeof *k, typ_cmp);
    double cum = 0.0;
    int last = *n;
    for (int i = 0; i < *n; i++) {
        cum += cp[k[i].id].p;
        if (cum > p) {
            last = i + 1;
            break;
        }
    }
    for (int i = 0; i < last; i++) c[i] = cp[k[i].id];
    *n = last;
}

void samp_td_top_p(samp_td *c, int *n, float p) {
    if (p >= 1.0f) return;
    samp_td_softmax(c, *n);
    double cum = 0.0;
    for (int i = 0; i < *n; i++) {
        cum += c[i].p;
        if (cum >= p) {
            *n = i + 1;
            return;
        }
    }
}

void samp_td_min_p(samp_td *c, int *n, float p) {
    if (p <= 0.0f || *n <= 0) return;
    float mx = -INFINITY;
    for (int i = 0; i < *n; i++) mx = c[i].logit > mx ? c[i].logit : mx;
    float lo = mx + logf(p);
    int j = 0;
    for (int i = 0; i < *n; i++)
        if (c[i].logit >= lo) c[j++] = c[i];
    if (j >= 1) *n = j;
}

int samp_td_xtc_applies(float prob, float thr, int n) { return prob > 0.0f && thr <= 0.5f && n >= 2; }

int samp_td_xtc(samp_td *c, int *n, float thr) {
    samp_td_softmax(c, *n);
    int last = 0; // index of the least likely token at or above the threshold
    for (int i = 0; i < *n; i++) {
        if (c[i].p >= thr) last = i;
        else break;
    }
    if (last == 0 || *n - last < 1) return 0;
    for (int i = last; i < *n; i++) c[i - last] = c[i];
    *n -= last;
    return 1;
}

static void keep_max_only(samp_td *c, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (c[i].logit > c[best].logit || (c[i].logit == c[best].logit && c[i].id < c[best].id)) best = i;
    for (int i = 0; i < n; i++)
        if (i != best) c[i].logit = -INFINITY;
}

void samp_td_temp(samp_td *c, int n, float t, float delta, float exponent) {
    if (delta > 0.0f) {
        if (n <= 1) return;
        float lo = t - delta > 0.0f ? t - delta : 0.0f, hi = t + delta;
        float max_h = -logf(1.0f / (float)n);
        samp_td_softmax(c, n);
        double h = 0.0;
        for (int i = 0; i < n; i++)
            if (c[i].p > 0.0f) h -= c[i].p * log(c[i].p);
        float norm = (float)h / max_h;
        t = lo + (hi - lo) * powf(norm, exponent);
    }
    if (t <= 0.0f) {
        keep_max_only(c, n);
        return;
    }
    for (int i = 0; i < n; i++) c[i].logit /= t;
}

void samp_td_mirostat_v1(samp_td *c, int *n, float mu, int n_vocab, int m) {
    samp_td_softmax(c, *n);
    double sum_tb = 0.0, sum_t2 = 0.0;
    for (int i = 0; i < m - 1 && i < *n - 1; i++) {
        double ti = log((double)(i + 2) / (i + 1)), bi = log((double)c[i].p / c[i + 1].p);
        sum_tb += ti * bi;
        sum_t2 += ti * ti;
    }
    double s_hat = sum_tb / sum_t2, eps = s_hat - 1.0;
    double k = pow(eps * pow(2.0, mu) / (1.0 - pow((double)n_vocab, -eps)), 1.0 / s_hat);
    int ki = isfinite(k) && k < (double)*n ? (int)k : *n; // NaN / inf (zero probabilities): keep all
    if (ki < 1) ki = 1;
    *n = ki;
    samp_td_softmax(c, *n);
}

void samp_td_mirostat_v2(samp_td *c, int *n, float mu) {
    samp_td_softmax(c, *n);
    int keep = 0;
    while (keep < *n && !(-log2f(c[keep].p) > mu)) keep++;
    *n = keep ? keep : 1;
    samp_td_softmax(c, *n);
}

float samp_mirostat_update(float mu, float p_chosen, float tau, float eta) {
    return mu - eta * (-log2f(p_chosen) - tau);
}

int samp_dry_apply(samp_td *by_id, const int32_t *h, int len, const uint8_t *is_breaker, float mult, float base,
                   int allowed, int *scratch, int *best) {
    if (len <= allowed) return 0;
    int limit = len; // a repeat of the suffix reaches back no further than the last breaker
    for (int i = 0; i < len; i++)
        if (is_breaker && is_breaker[h[len - 1 - i]]) {
            limit = i;
            break;
        }
    if (limit < allowed) return 0;
    // z[k]: the longest common prefix of the reversed history and its k-th suffix (Z-algorithm), i.e.
    // how far the history ending at h[len-1-k] agrees with the history's end
    int *z = scratch, *touched = scratch + len, nt = 0;
    z[0] = len;
    int l = 0, r = 0;
    for (int k = 1; k < len; k++) {
        int zk = k < r ? (r - k < z[k - l] ? r - k : z[k - l]) : 0;
        while (k + zk < len && h[len - 1 - zk] == h[len - 1 - k - zk]) zk++;
        z[k] = zk;
        if (k + zk > r) l = k, r = k + zk;
    }
    for (int k = 1; k < len; k++) {
        int m = z[k] < limit ? z[k] : limit;
        if (m < allowed) continue;
        int32_t t = h[len - k]; // the token that followed that occurrence
        if (!best[t]) touched[nt++] = t;
        if (m + 1 > best[t]) best[t] = m + 1; // stored + 1 so 0 means "not seen"
    }
    int max_exp = base > 1.000001f ? (int)(88.7228391f / logf(base)) : 0;
    for (int i = 0; i < nt; i++) {
        int32_t t = touched[i];
        int e = best[t] - 1 - allowed;
        if (max_exp > 0 && e > max_exp) e = max_exp;
        by_id[t].logit -= mult * powf(base, (float)e);
        best[t] = 0;
    }
    return nt;
}
