// llama-server's samplers (DRY, top-n-sigma, typical-p, XTC, dynamic temperature, mirostat v1/v2) and
// min_tokens, through the public sampler API: samp_probs must equal a straightforward double-precision
// reference written here from the samplers' definitions, tokens drawn with many seeds must follow it
// (chi-square), and state carried across steps (mirostat's mu, DRY's history, min_tokens' count) must
// evolve as the reference's.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampling/sampling.h"
#include "test_util.h"

#define NV 12
static const float L0[NV] = {2.0f, 1.6f, 1.5f, 0.9f, 0.8f, 0.3f, 0.0f, -0.4f, -0.9f, -1.5f, -2.2f, -3.0f};

static samp_state *mk(const samp_params *p, int n_vocab) {
    samp_state *s = NULL;
    tc_err err = {0};
    int rc = samp_new(p, n_vocab, &s, &err);
    CHECK_MSG(rc == 0 && s, "samp_new failed: %s", err.msg);
    return s;
}

// --- reference helpers over a dense vector of logits (-inf = removed)

static void ref_softmax(const double *l, int n, double *p) {
    double mx = -INFINITY, z = 0.0;
    for (int i = 0; i < n; i++) mx = l[i] > mx ? l[i] : mx;
    for (int i = 0; i < n; i++) z += p[i] = l[i] == -INFINITY ? 0.0 : exp(l[i] - mx);
    for (int i = 0; i < n; i++) p[i] /= z;
}

// Indices of l sorted by value desc (ids asc on ties).
static void ref_order(const double *v, int n, int *ord) {
    for (int i = 0; i < n; i++) ord[i] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && (v[ord[j]] > v[ord[j - 1]] || (v[ord[j]] == v[ord[j - 1]] && ord[j] < ord[j - 1]));
             j--) {
            int t = ord[j];
            ord[j] = ord[j - 1], ord[j - 1] = t;
        }
}

static int n_alive(const double *l, int n) {
    int k = 0;
    for (int i = 0; i < n; i++) k += l[i] != -INFINITY;
    return k;
}

static void ref_typical(double *l, int n, double tp) {
    double p[64], h = 0.0, score[64];
    int ord[64];
    ref_softmax(l, n, p);
    for (int i = 0; i < n; i++)
        if (p[i] > 0) h -= p[i] * log(p[i]);
    for (int i = 0; i < n; i++) score[i] = p[i] > 0 ? -fabs(-log(p[i]) - h) : -INFINITY; // desc of -score
    ref_order(score, n, ord);
    double cum = 0.0;
    int keep = n;
    for (int i = 0; i < n; i++) {
        cum += p[ord[i]];
        if (cum > tp) {
            keep = i + 1;
            break;
        }
    }
    for (int i = keep; i < n; i++) l[ord[i]] = -INFINITY;
}

static void ref_xtc(double *l, int n, double thr) {
    double p[64];
    int ord[64];
    ref_softmax(l, n, p);
    ref_order(p, n, ord);
    int above = 0;
    while (above < n && p[ord[above]] >= thr) above++;
    if (above < 2) return;
    for (int i = 0; i < above - 1; i++) l[ord[i]] = -INFINITY; // all but the least likely of them
}

static void ref_temp(double *l, int n, double t) {
    for (int i = 0; i < n; i++) l[i] /= t;
}

// Compares samp_probs with the reference distribution; returns the max abs difference.
static double cmp_probs(samp_state *s, const float *logits, int n, const double *ref, const char *what) {
    float probs[64];
    samp_probs(s, logits, probs);
    double md = 0.0;
    int worst = 0;
    for (int i = 0; i < n; i++)
        if (fabs(probs[i] - ref[i]) > md) md = fabs(probs[i] - ref[i]), worst = i;
    CHECK_MSG(md < 2e-5, "%s: p[%d] = %.7f, reference %.7f", what, worst, probs[worst], ref[worst]);
    return md;
}

// One draw per seed for many seeds: the counts must follow ref (chi-square, P(false alarm) ~ 1e-5).
static void chi2_seeds(const samp_params *base, const float *logits, int n, const double *ref, const char *what) {
    enum { DRAWS = 20000 };
    long cnt[64] = {0};
    samp_params p = *base;
    for (int d = 0; d < DRAWS; d++) {
        p.seed = 1000u + (uint64_t)d * 7919u;
        samp_state *s = mk(&p, n);
        cnt[samp_sample(s, logits, NULL)]++;
        samp_free(s);
    }
    double chi2 = 0.0;
    int df = -1, bad = 0;
    for (int i = 0; i < n; i++) {
        if (ref[i] == 0.0) {
            bad += cnt[i] != 0;
            continue;
        }
        double e = DRAWS * ref[i];
        chi2 += (cnt[i] - e) * (cnt[i] - e) / e;
        df++;
    }
    CHECK_MSG(bad == 0, "%s: drew tokens the reference gives probability 0", what);
    double lim = df + 4.5 * sqrt(2.0 * (df > 0 ? df : 1)) + 10.0; // far tail of chi-square(df)
    CHECK_MSG(chi2 < lim, "%s: chi-square %.1f over %d draws (%d dof, bound %.1f)", what, chi2, DRAWS, df, lim);
}

static void dense(const float *l, int n, double *out) {
    for (int i = 0; i < n; i++) out[i] = l[i];
}

static void test_typical(void) {
    samp_params p;
    samp_params_default(&p);
    p.temperature = 0.8f, p.typical_p = 0.5f;
    double l[NV], ref[NV];
    dense(L0, NV, l);
    ref_typical(l, NV, 0.5);
    ref_temp(l, NV, 0.8);
    ref_softmax(l, NV, ref);
    CHECK(n_alive(l, NV) < NV); // the setting does cut something here
    samp_state *s = mk(&p, NV);
    cmp_probs(s, L0, NV, ref, "typical_p 0.5");
    samp_free(s);
    chi2_seeds(&p, L0, NV, ref, "typical_p 0.5");
}

static void test_top_n_sigma(void) {
    samp_params p;
    samp_params_default(&p);
    p.temperature = 1.3f, p.top_n_sigma = 1.0f;
    double l[NV], ref[NV], mean = 0, var = 0, mx = -INFINITY;
    dense(L0, NV, l);
    for (int i = 0; i < NV; i++) mean += l[i] / NV, mx = l[i] > mx ? l[i] : mx;
    for (int i = 0; i < NV; i++) var += (l[i] - mean) * (l[i] - mean) / NV;
    for (int i = 0; i < NV; i++)
        if (l[i] < mx - 1.0 * sqrt(var)) l[i] = -INFINITY;
    CHECK(n_alive(l, NV) < NV && n_alive(l, NV) > 1);
    ref_temp(l, NV, 1.3);
    ref_softmax(l, NV, ref);
    samp_state *s = mk(&p, NV);
    cmp_probs(s, L0, NV, ref, "top_n_sigma 1");
    samp_free(s);
    chi2_seeds(&p, L0, NV, ref, "top_n_sigma 1");
}

static void test_xtc(void) {
    samp_params p;
    samp_params_default(&p);
    p.temperature = 1.0f, p.xtc_threshold = 0.1f, p.xtc_probability = 1.0f;
    double l[NV], on[NV], off[NV], mix[NV];
    dense(L0, NV, l);
    ref_softmax(l, NV, off);
    ref_xtc(l, NV, 0.1);
    CHECK(n_alive(l, NV) < NV);
    ref_softmax(l, NV, on);
    samp_state *s = mk(&p, NV);
    cmp_probs(s, L0, NV, on, "xtc always");
    samp_free(s);
    chi2_seeds(&p, L0, NV, on, "xtc always");
    // applied with probability 0.4: the verifier's distribution is the mixture, and draws follow it
    p.xtc_probability = 0.4f;
    for (int i = 0; i < NV; i++) mix[i] = 0.6 * off[i] + 0.4 * on[i];
    s = mk(&p, NV);
    cmp_probs(s, L0, NV, mix, "xtc 0.4 mixture");
    samp_free(s);
    chi2_seeds(&p, L0, NV, mix, "xtc 0.4");
}

static void test_dynatemp(void) {
    samp_params p;
    samp_params_default(&p);
    p.temperature = 1.0f, p.dynatemp_range = 0.7f, p.dynatemp_exponent = 1.5f, p.top_k = 6;
    double l[NV], pr[NV], ref[NV], h = 0.0;
    int ord[NV];
    dense(L0, NV, l);
    ref_order(l, NV, ord);
    for (int i = 6; i < NV; i++) l[ord[i]] = -INFINITY; // top_k 6 first: the entropy is over what is left
    ref_softmax(l, NV, pr);
    for (int i = 0; i < NV; i++)
        if (pr[i] > 0) h -= pr[i] * log(pr[i]);
    double t = 0.3 + (1.7 - 0.3) * pow(h / log(6.0), 1.5);
    ref_temp(l, NV, t);
    ref_softmax(l, NV, ref);
    samp_state *s = mk(&p, NV);
    cmp_probs(s, L0, NV, ref, "dynatemp");
    samp_free(s);
    chi2_seeds(&p, L0, NV, ref, "dynatemp");
}

// The llama-server chain's order: top-k → typical → top-p → min-p → temperature, with top-p and min-p on
// temperature-1 probabilities.
static void test_chain_order(void) {
    samp_params p;
    samp_params_default(&p);
    p.temperature = 2.0f, p.top_k = 10, p.typical_p = 0.5f, p.top_p = 0.7f, p.min_p = 0.5f;
    double l[NV], pr[NV], ref[NV];
    int ord[NV];
    dense(L0, NV, l);
    ref_order(l, NV, ord);
    for (int i = 10; i < NV; i++) l[ord[i]] = -INFINITY;
    ref_typical(l, NV, 0.5);
    ref_softmax(l, NV, pr);
    ref_order(pr, NV, ord);
    double cum = 0.0;
    int keep = NV;
    for (int i = 0; i < NV; i++)
        if ((cum += pr[ord[i]]) >= 0.7) {
            keep = i + 1;
            break;
        }
    for (int i = keep; i < NV; i++) l[ord[i]] = -INFINITY;
    ref_softmax(l, NV, pr);
    double pmax = 0;
    for (int i = 0; i < NV; i++) pmax = pr[i] > pmax ? pr[i] : pmax;
    for (int i = 0; i < NV; i++)
        if (pr[i] < 0.5 * pmax) l[i] = -INFINITY;
    ref_temp(l, NV, 2.0);
    ref_softmax(l, NV, ref);
    samp_state *s = mk(&p, NV);
    cmp_probs(s, L0, NV, ref, "chain order");
    samp_free(s);
}

// Mirostat: the truncation for the current mu, and mu's update from the accepted token, over 40 steps.
static void mirostat_steps(int version) {
    enum { N = 40 };
    float lg[N];
    for (int i = 0; i < N; i++) lg[i] = -1.1f * logf((float)(i + 1)) + 0.05f * (float)((i * 7) % 5); // Zipf-like
    samp_params p;
    samp_params_default(&p);
    p.temperature = 0.9f, p.mirostat = version, p.mirostat_tau = 3.0f, p.mirostat_eta = 0.2f, p.seed = 7;
    p.repetition_penalty = 1.5f; // no effect under mirostat (llama-server's chain)
    samp_state *s = mk(&p, N);
    double mu = 2.0 * 3.0;
    int mismatch = 0;
    for (int step = 0; step < 40; step++) {
        double l[N], pr[N], ref[N];
        int ord[N];
        dense(lg, N, l);
        ref_temp(l, N, 0.9);
        ref_softmax(l, N, pr);
        ref_order(pr, N, ord);
        int keep;
        if (version == 1) {
            double stb = 0, st2 = 0;
            for (int i = 0; i < N - 1; i++) {
                double ti = log((i + 2.0) / (i + 1.0)), bi = log(pr[ord[i]] / pr[ord[i + 1]]);
                stb += ti * bi, st2 += ti * ti;
            }
            double sh = stb / st2, eps = sh - 1.0;
            double k = pow(eps * pow(2.0, mu) / (1.0 - pow((double)N, -eps)), 1.0 / sh);
            keep = k >= N ? N : (int)k < 1 ? 1 : (int)k;
        } else {
            keep = 0;
            while (keep < N && -log2(pr[ord[keep]]) <= mu) keep++;
            if (!keep) keep = 1;
        }
        for (int i = keep; i < N; i++) l[ord[i]] = -INFINITY;
        ref_softmax(l, N, ref);
        float probs[N];
        samp_probs(s, lg, probs);
        double md = 0;
        for (int i = 0; i < N; i++) md = fabs(probs[i] - ref[i]) > md ? fabs(probs[i] - ref[i]) : md;
        mismatch += md > 2e-5;
        int32_t t = samp_sample(s, lg, NULL);
        CHECK_MSG(ref[t] > 0, "mirostat v%d step %d drew token %d outside the truncation", version, step, t);
        samp_accept(s, t);
        mu -= 0.2 * (-log2(ref[t]) - 3.0);
    }
    CHECK_MSG(mismatch == 0, "mirostat v%d: %d of 40 steps differ from the reference", version, mismatch);
    samp_free(s);
}

static void test_mirostat(void) {
    mirostat_steps(1);
    mirostat_steps(2);
}

// DRY reference: for each earlier position j, the longest n with h[j-n+1..j] == the history's last n
// tokens, not reaching back over the last breaker; token h[j+1] gets mult * base^(n - allowed), n >= allowed.
static void ref_dry(double *l, const int32_t *h, int len, const int *brk, int nb, double mult, double base,
                    int allowed) {
    int limit = len;
    for (int i = 0; i < len && limit == len; i++)
        for (int b = 0; b < nb; b++)
            if (h[len - 1 - i] == brk[b]) limit = i;
    int best[64] = {0};
    for (int j = 0; j + 1 < len; j++) {
        int n = 0;
        while (n <= j && n < limit && h[j - n] == h[len - 1 - n]) n++;
        if (n >= allowed && n + 1 > best[h[j + 1]]) best[h[j + 1]] = n + 1;
    }
    for (int t = 0; t < 64; t++)
        if (best[t]) l[t] -= mult * pow(base, best[t] - 1 - allowed);
}

static void dry_case(const int32_t *h, int len, const int *brk, int nb, const char *what) {
    samp_params p;
    samp_params_default(&p);
    p.temperature = 1.0f, p.dry_multiplier = 0.8f, p.dry_base = 1.75f, p.dry_allowed_length = 2;
    p.dry_breakers = (const int32_t *)brk, p.n_dry_breakers = nb;
    samp_state *s = mk(&p, NV);
    samp_accept_prompt(s, h, len / 2); // prompt and generated tokens both count
    for (int i = len / 2; i < len; i++) samp_accept(s, h[i]);
    double l[NV], ref[NV];
    dense(L0, NV, l);
    ref_dry(l, h, len, brk, nb, 0.8, 1.75, 2);
    ref_softmax(l, NV, ref);
    cmp_probs(s, L0, NV, ref, what);
    samp_free(s);
}

static void test_dry(void) {
    // 1 2 3 4 | 1 2 3 4 5 1 2 3: "1 2 3" repeats twice; 4 follows a 3-long match, 5 … nothing longer
    const int32_t h1[] = {1, 2, 3, 4, 1, 2, 3, 4, 5, 1, 2, 3};
    dry_case(h1, 12, NULL, 0, "dry repeat");
    // a breaker (5) inside the suffix caps the match: 1 2 5 1 2 → the match cannot cross 5
    const int32_t h2[] = {7, 1, 2, 5, 1, 2, 9, 7, 1, 2, 5, 1, 2};
    const int brk[] = {5};
    dry_case(h2, 13, brk, 1, "dry breaker");
    dry_case(h2, 13, NULL, 0, "dry no breaker");
    const int32_t h3[] = {3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}; // long runs: the exponent grows
    dry_case(h3, 14, NULL, 0, "dry run");
    // the penalty is real: the token that continues the repeat loses probability
    samp_params p;
    samp_params_default(&p);
    p.temperature = 1.0f, p.dry_multiplier = 2.0f;
    samp_state *s = mk(&p, NV);
    samp_accept_prompt(s, h1, 12);
    float probs[NV], plain[NV];
    samp_probs(s, L0, probs);
    samp_free(s);
    p.dry_multiplier = 0.0f;
    s = mk(&p, NV);
    samp_probs(s, L0, plain);
    samp_free(s);
    CHECK_MSG(probs[4] < 0.5f * plain[4], "dry: the continuing token keeps p %.4f (plain %.4f)", probs[4], plain[4]);
}

static void test_min_tokens(void) {
    samp_params p;
    samp_params_default(&p); // greedy: token 0 has the largest logit
    const int32_t stop_ids[] = {1};
    p.min_tokens = 3, p.end_ids = stop_ids, p.n_end_ids = 1;
    samp_state *s = mk(&p, NV);
    const int32_t eog[] = {0};
    samp_set_eog(s, eog, 1);
    int32_t got[5];
    for (int i = 0; i < 5; i++) {
        got[i] = samp_sample(s, L0, NULL);
        samp_accept(s, got[i]);
    }
    CHECK_MSG(got[0] == 2 && got[1] == 2 && got[2] == 2, "min_tokens: first tokens %d %d %d (want 2: 0 and 1 banned)",
              got[0], got[1], got[2]);
    CHECK_MSG(got[3] == 0, "min_tokens: after 3 tokens the end token is allowed again (got %d)", got[3]);
    samp_free(s);
    // sampled, the banned ids have probability 0 and the rest are renormalized
    p.temperature = 1.0f;
    s = mk(&p, NV);
    samp_set_eog(s, eog, 1);
    double l[NV], ref[NV];
    dense(L0, NV, l);
    l[0] = l[1] = -INFINITY;
    ref_softmax(l, NV, ref);
    cmp_probs(s, L0, NV, ref, "min_tokens sampled");
    samp_free(s);
    // with llama-server's chain as well
    p.typical_p = 0.99f;
    s = mk(&p, NV);
    samp_set_eog(s, eog, 1);
    float probs[NV];
    samp_probs(s, L0, probs);
    CHECK_MSG(probs[0] == 0.0f && probs[1] == 0.0f, "min_tokens (llama chain): p(end) %g %g", probs[0], probs[1]);
    samp_free(s);
}

static void expect_invalid(samp_params p, const char *field) {
    samp_state *s = NULL;
    tc_err err = {0};
    int rc = samp_new(&p, NV, &s, &err);
    CHECK_MSG(rc != 0 && !s && strstr(err.msg, field), "%s: rc %d, message '%s'", field, rc, err.msg);
    samp_free(s);
}

static void test_invalid(void) {
    samp_params d;
    samp_params_default(&d);
    samp_params p = d;
    p.typical_p = 0.0f;
    expect_invalid(p, "typical_p");
    p = d, p.xtc_probability = 1.5f;
    expect_invalid(p, "xtc_probability");
    p = d, p.mirostat = 3;
    expect_invalid(p, "mirostat");
    p = d, p.dry_base = 0.5f;
    expect_invalid(p, "dry_base");
    p = d, p.dry_multiplier = NAN;
    expect_invalid(p, "dry_multiplier");
    p = d, p.dynatemp_range = -1.0f;
    expect_invalid(p, "dynatemp_range");
    p = d, p.top_n_sigma = INFINITY;
    expect_invalid(p, "top_n_sigma");
    const int32_t big[] = {NV};
    p = d, p.end_ids = big, p.n_end_ids = 1;
    expect_invalid(p, "stop_token_ids");
}

int main(void) {
    test_typical();
    test_top_n_sigma();
    test_xtc();
    test_dynatemp();
    test_chain_order();
    test_mirostat();
    test_dry();
    test_min_tokens();
    test_invalid();
    TEST_MAIN_END();
}
