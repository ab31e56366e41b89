// Token sampler. One pass builds (logit, id) candidates with penalties applied; greedy takes the argmax;
// otherwise top-k (selection, then a sort of k), softmax at temperature, top-p (a histogram of probability
// mass over weight buckets finds the cut, so only the head of the distribution is ever sorted), min-p, then
// one draw from xoshiro256**. Every buffer is allocated in samp_new for the vocabulary; samp_sample does not allocate.
// Candidate order is total (value desc, id asc), so results never depend on sort stability.
#include "sampling/sampling.h"

#include "sampling/samp_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SAMP_MAX_LAST_N (1 << 24)

struct samp_state {
    samp_params p;
    int n_vocab;
    uint64_t rng[4];   // xoshiro256** state
    samp_cand *cand;   // (n_vocab) scratch
    samp_bias *bias;   // (n_bias) owned copy of p.bias
    int n_bias;
    // penalty window: the last penalty_last_n accepted tokens (prompt and generated), as a ring buffer;
    // with penalty_last_n == -1 nothing is ever evicted and the ring is not used.
    int32_t *ring;     // (ring_cap) token ids; negative id = -(id+1) marks a prompt token
    int ring_cap, ring_len, ring_head; // ring_head: index of the oldest entry
    int32_t *cnt_all;  // (n_vocab) occurrences in the window (repetition penalty)
    int32_t *cnt_gen;  // (n_vocab) occurrences of generated tokens in the window (presence/frequency)
    int32_t *uniq;     // (n_vocab) distinct ids with cnt_all > 0
    int32_t *uniq_pos; // (n_vocab) index into uniq, or -1
    int n_uniq;
    // result of the last prepare(): cand[0..n_kept) with weights summing to z_kept
    int n_kept;
    double z_kept;
};

// --- RNG: splitmix64 seeds xoshiro256** (Blackman & Vigna)

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t s[4]) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

static double rng_uniform(uint64_t s[4]) { return (double)(xoshiro_next(s) >> 11) * 0x1.0p-53; } // [0, 1)

// --- params

void samp_params_default(samp_params *p) {
    memset(p, 0, sizeof *p);
    p->temperature = 0.0f;
    p->top_k = 0;
    p->top_p = 1.0f;
    p->min_p = 0.0f;
    p->repetition_penalty = 1.0f;
    p->penalty_last_n = 64;
}

static int validate(const samp_params *p, int n_vocab, tc_err *err) {
    // written as !(in range) so NaN is rejected too
    if (!(p->temperature >= 0.0f) || isinf(p->temperature))
        return tc_err_set(err, TC_ERR_INVALID, "temperature must be a finite number >= 0 (got %g)", p->temperature);
    if (p->top_k < 0) return tc_err_set(err, TC_ERR_INVALID, "top_k must be >= 0 (got %d)", p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return tc_err_set(err, TC_ERR_INVALID, "top_p must be in (0, 1] (got %g)", p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return tc_err_set(err, TC_ERR_INVALID, "min_p must be in [0, 1] (got %g)", p->min_p);
    if (!(p->repetition_penalty > 0.0f) || isinf(p->repetition_penalty))
        return tc_err_set(err, TC_ERR_INVALID, "repetition_penalty must be a finite number > 0 (got %g)",
                          p->repetition_penalty);
    if (!(p->presence_penalty >= -2.0f && p->presence_penalty <= 2.0f))
        return tc_err_set(err, TC_ERR_INVALID, "presence_penalty must be in [-2, 2] (got %g)", p->presence_penalty);
    if (!(p->frequency_penalty >= -2.0f && p->frequency_penalty <= 2.0f))
        return tc_err_set(err, TC_ERR_INVALID, "frequency_penalty must be in [-2, 2] (got %g)", p->frequency_penalty);
    if (p->penalty_last_n < -1 || p->penalty_last_n > SAMP_MAX_LAST_N)
        return tc_err_set(err, TC_ERR_INVALID, "penalty_last_n must be -1 (all) or in [0, %d] (got %d)",
                          SAMP_MAX_LAST_N, p->penalty_last_n);
    if (p->n_logprobs < 0 || p->n_logprobs > SAMP_MAX_LOGPROBS)
        return tc_err_set(err, TC_ERR_INVALID, "n_logprobs (top_logprobs) must be in [0, %d] (got %d)",
                          SAMP_MAX_LOGPROBS, p->n_logprobs);
    if (n_vocab <= 0) return tc_err_set(err, TC_ERR_INVALID, "sampler: n_vocab must be > 0 (got %d)", n_vocab);
    if (p->n_bias < 0 || (p->n_bias > 0 && !p->bias))
        return tc_err_set(err, TC_ERR_INVALID, "logit_bias: bad entry count %d", p->n_bias);
    for (int i = 0; i < p->n_bias; i++) {
        if (p->bias[i].id < 0 || p->bias[i].id >= n_vocab)
            return tc_err_set(err, TC_ERR_INVALID, "logit_bias: token id %d is out of range (vocabulary %d)",
                              p->bias[i].id, n_vocab);
        if (!(p->bias[i].bias >= -SAMP_BIAS_MAX && p->bias[i].bias <= SAMP_BIAS_MAX))
            return tc_err_set(err, TC_ERR_INVALID, "logit_bias: value %g for token %d is outside [-100, 100]",
                              p->bias[i].bias, p->bias[i].id);
    }
    return 0;
}

int samp_new(const samp_params *p, int n_vocab, samp_state **out, tc_err *err) {
    *out = NULL;
    int rc = validate(p, n_vocab, err);
    if (rc) return rc;
    samp_state *s = calloc(1, sizeof *s);
    if (!s) return tc_err_set(err, TC_ERR_NOMEM, "sampler: out of memory");
    s->p = *p;
    s->p.bias = NULL; // borrowed by the caller: the copy below is ours
    s->n_vocab = n_vocab;
    if (p->n_bias) {
        s->bias = malloc((size_t)p->n_bias * sizeof *s->bias);
        if (!s->bias) {
            free(s);
            return tc_err_set(err, TC_ERR_NOMEM, "sampler: out of memory");
        }
        memcpy(s->bias, p->bias, (size_t)p->n_bias * sizeof *s->bias);
        s->n_bias = p->n_bias;
    }
    size_t nv = (size_t)n_vocab;
    s->cand = malloc(nv * sizeof *s->cand);
    s->cnt_all = calloc(nv, sizeof *s->cnt_all);
    s->cnt_gen = calloc(nv, sizeof *s->cnt_gen);
    s->uniq = malloc(nv * sizeof *s->uniq);
    s->uniq_pos = malloc(nv * sizeof *s->uniq_pos);
    s->ring_cap = p->penalty_last_n > 0 ? p->penalty_last_n : 0;
    if (s->ring_cap) s->ring = malloc((size_t)s->ring_cap * sizeof *s->ring);
    if (!s->cand || !s->cnt_all || !s->cnt_gen || !s->uniq || !s->uniq_pos || (s->ring_cap && !s->ring)) {
        samp_free(s);
        return tc_err_set(err, TC_ERR_NOMEM, "sampler: out of memory for a %d-token vocabulary", n_vocab);
    }
    memset(s->uniq_pos, 0xff, nv * sizeof *s->uniq_pos);
    uint64_t x = p->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    *out = s;
    return 0;
}

void samp_free(samp_state *s) {
    if (!s) return;
    free(s->bias);
    free(s->cand);
    free(s->cnt_all);
    free(s->cnt_gen);
    free(s->uniq);
    free(s->uniq_pos);
    free(s->ring);
    free(s);
}

int samp_is_greedy(const samp_state *s) { return s->p.temperature == 0.0f; }

// --- penalty history

static void hist_count(samp_state *s, int32_t tok, int gen, int d) {
    int was = s->cnt_all[tok];
    s->cnt_all[tok] += d;
    if (gen) s->cnt_gen[tok] += d;
    if (!was && s->cnt_all[tok]) { // entered the window
        s->uniq_pos[tok] = s->n_uniq;
        s->uniq[s->n_uniq++] = tok;
    } else if (was && !s->cnt_all[tok]) { // left it: swap-remove
        int i = s->uniq_pos[tok];
        int32_t last = s->uniq[--s->n_uniq];
        s->uniq[i] = last;
        s->uniq_pos[last] = i;
        s->uniq_pos[tok] = -1;
    }
}

static void hist_push(samp_state *s, int32_t tok, int gen) {
    if (tok < 0 || tok >= s->n_vocab || s->p.penalty_last_n == 0) return;
    if (s->ring_cap) {
        if (s->ring_len == s->ring_cap) { // evict the oldest
            int32_t old = s->ring[s->ring_head];
            int old_gen = old >= 0;
            hist_count(s, old_gen ? old : -old - 1, old_gen, -1);
            s->ring[s->ring_head] = gen ? tok : -tok - 1;
            s->ring_head = (s->ring_head + 1) % s->ring_cap;
        } else {
            s->ring[(s->ring_head + s->ring_len++) % s->ring_cap] = gen ? tok : -tok - 1;
        }
    }
    hist_count(s, tok, gen, +1);
}

void samp_accept(samp_state *s, int32_t token) { hist_push(s, token, 1); }

void samp_accept_prompt(samp_state *s, const int32_t *tokens, int n) {
    for (int i = 0; i < n; i++) hist_push(s, tokens[i], 0);
}

// --- selection and sorting over candidates, by (v desc, id asc)

static inline int cand_gt(samp_cand a, samp_cand b) { return a.v > b.v || (a.v == b.v && a.id < b.id); }

static inline void cand_swap(samp_cand *a, samp_cand *b) {
    samp_cand t = *a;
    *a = *b;
    *b = t;
}

// Partitions c[lo..hi) around a median-of-3 pivot: returns p with c[lo..p) > pivot = c[p] > c[p+1..hi).
static int partition(samp_cand *c, int lo, int hi) {
    int mid = lo + (hi - lo) / 2, last = hi - 1;
    if (cand_gt(c[mid], c[lo])) cand_swap(&c[mid], &c[lo]);
    if (cand_gt(c[last], c[lo])) cand_swap(&c[last], &c[lo]);
    if (cand_gt(c[mid], c[last])) cand_swap(&c[mid], &c[last]);
    samp_cand piv = c[last]; // the median of the three
    int i = lo;
    for (int j = lo; j < last; j++)
        if (cand_gt(c[j], piv)) cand_swap(&c[i++], &c[j]);
    cand_swap(&c[i], &c[last]);
    return i;
}

// Rearranges c[lo..hi) so that c[lo..lo+k) holds its k greatest elements (in no particular order).
static void select_top(samp_cand *c, int lo, int hi, int k) {
    int target = lo + k;
    while (hi - lo > 1 && target > lo && target < hi) {
        int p = partition(c, lo, hi);
        if (p == target || p + 1 == target) return;
        if (p > target) hi = p;
        else lo = p + 1;
    }
}

static void sort_desc(samp_cand *c, int lo, int hi) {
    while (hi - lo > 16) {
        int p = partition(c, lo, hi);
        if (p - lo < hi - p - 1) { // recurse into the smaller side
            sort_desc(c, lo, p);
            lo = p + 1;
        } else {
            sort_desc(c, p + 1, hi);
            hi = p;
        }
    }
    for (int i = lo + 1; i < hi; i++) { // insertion sort
        samp_cand x = c[i];
        int j = i;
        for (; j > lo && cand_gt(x, c[j - 1]); j--) c[j] = c[j - 1];
        c[j] = x;
    }
}

// --- weight buckets

// Weights in [0, 1] fall into quarter-octave buckets: 0 holds the largest weights, 511 zero. Monotonic, so
// "bucket <= b" selects a prefix of the sorted order.
#define SAMP_NB 512
static inline int wbucket(float w) {
    uint32_t b;
    memcpy(&b, &w, sizeof b);
    int e = 127 - (int)(b >> 23);
    return e * 4 + 3 - (int)((b >> 21) & 3);
}

// --- the transform pipeline

// Penalizes the logits in cand (still in id order). Returns the new maximum given the old one.
static float apply_penalties(samp_state *s, float vmax) {
    const samp_params *p = &s->p;
    float rp = p->repetition_penalty, pp = p->presence_penalty, fp = p->frequency_penalty;
    if (rp == 1.0f && pp == 0.0f && fp == 0.0f) return vmax;
    int lowered_max = 0;
    float m = -INFINITY;
    for (int i = 0; i < s->n_uniq; i++) {
        int32_t t = s->uniq[i];
        float v = s->cand[t].v;
        lowered_max |= v == vmax;
        if (rp != 1.0f) v = v > 0.0f ? v / rp : v * rp;
        int g = s->cnt_gen[t];
        if (g) v -= (float)g * fp + pp;
        s->cand[t].v = v;
        m = v > m ? v : m;
    }
    if (lowered_max) { // the old maximum may have been penalized: recompute
        m = -INFINITY;
        for (int i = 0; i < s->n_vocab; i++) m = s->cand[i].v > m ? s->cand[i].v : m;
        return m;
    }
    return m > vmax ? m : vmax;
}

// Adds logit_bias to cand (in id order) before anything else sees the logits, so greedy, sampling and
// samp_probs (the speculative verifier's distribution) agree. Returns the new maximum.
static float apply_bias(samp_state *s, float vmax) {
    int lowered_max = 0;
    float m = -INFINITY;
    for (int i = 0; i < s->n_bias; i++) {
        samp_cand *c = &s->cand[s->bias[i].id];
        lowered_max |= c->v == vmax;
        c->v = s->bias[i].bias <= -SAMP_BIAS_MAX ? -INFINITY : c->v + s->bias[i].bias;
        m = c->v > m ? c->v : m;
    }
    if (lowered_max) {
        m = -INFINITY;
        for (int i = 0; i < s->n_vocab; i++) m = s->cand[i].v > m ? s->cand[i].v : m;
        return m;
    }
    return m > vmax ? m : vmax;
}

// Builds the final distribution into cand[0..n_kept) (weights summing to z_kept).
static void prepare(samp_state *s, const float *logits) {
    const samp_params *p = &s->p;
    int n = s->n_vocab;
    samp_cand *c = s->cand;
    if (p->temperature == 0.0f && s->n_bias == 0 && p->repetition_penalty == 1.0f && p->presence_penalty == 0.0f &&
        p->frequency_penalty == 0.0f) {
        // plain greedy: the argmax of the logits as they are (ties to the lowest id, NaN as -inf), without
        // copying the vocabulary into candidates: once per verified row of a speculative step
        float vmax = samp_max(logits, n);
        int best = 0;
        while (best < n - 1 && (isnan(logits[best]) ? -INFINITY : logits[best]) != vmax) best++;
        c[0] = (samp_cand){1.0f, best};
        s->n_kept = 1, s->z_kept = 1.0;
        return;
    }
    for (int i = 0; i < n; i++) {
        float v = logits[i];
        c[i].v = isnan(v) ? -INFINITY : v;
        c[i].id = i;
    }
    float vmax = samp_max(logits, n);
    if (s->n_bias) vmax = apply_bias(s, vmax);
    vmax = apply_penalties(s, vmax);

    if (p->temperature == 0.0f) { // greedy: argmax, ties to the lowest id
        int best = 0;
        while (best < n - 1 && c[best].v != vmax) best++;
        c[0] = (samp_cand){1.0f, best};
        s->n_kept = 1, s->z_kept = 1.0;
        return;
    }

    int sorted = 0; // c[0..sorted) is sorted and greater than everything after it
    if (p->top_k > 0 && p->top_k < n) {
        select_top(c, 0, n, p->top_k);
        n = p->top_k;
        sort_desc(c, 0, n);
        sorted = n;
    }
    if (sorted) vmax = c[0].v;
    if (vmax == -INFINITY) { // nothing has finite probability: fall back to the lowest id
        int best = 0;
        for (int i = 1; i < n; i++) best = c[i].id < c[best].id ? i : best;
        c[0] = (samp_cand){1.0f, c[best].id};
        s->n_kept = 1, s->z_kept = 1.0;
        return;
    }
    float inv_t = 1.0f / p->temperature;
    double z = 0.0;
    int kept = n;
    if (p->top_p < 1.0f && !sorted) {
        // top-p without top-k: a histogram of weight mass per bucket finds the bucket where the cumulative
        // mass crosses top_p; only tokens at or above it are collected and sorted.
        z = samp_weights(c, n, vmax, inv_t);
        float hist[4][SAMP_NB]; // four interleaved histograms break the store-to-load dependency chains
        memset(hist, 0, sizeof hist);
        for (int i = 0; i < n; i++) hist[i & 3][wbucket(c[i].v)] += c[i].v;
        double target = (double)p->top_p * z, cum = 0.0;
        int bc = SAMP_NB - 1;
        for (int b = 0; b < SAMP_NB; b++) {
            cum += (double)hist[0][b] + hist[1][b] + hist[2][b] + hist[3][b];
            if (cum >= target) {
                bc = b < SAMP_NB - 1 ? b + 1 : b; // one bucket of margin for float rounding of the masses
                break;
            }
        }
        int m = 0;
        for (int i = 0; i < n; i++)
            if (wbucket(c[i].v) <= bc && c[i].v >= p->min_p) c[m++] = c[i];
        sort_desc(c, 0, m);
        kept = m, cum = 0.0;
        for (int i = 0; i < m; i++) {
            cum += c[i].v;
            if (cum >= target) {
                kept = i + 1;
                break;
            }
        }
    } else {
        z = samp_weights(c, n, vmax, inv_t); // weights in [0, 1]; the max has weight 1
        if (p->top_p < 1.0f) { // after top-k: c[0..n) is sorted; min-p cuts the prefix too
            double target = (double)p->top_p * z, cum = 0.0;
            for (int i = 0; i < n; i++) {
                if (c[i].v < p->min_p) {
                    kept = i;
                    break;
                }
                cum += c[i].v;
                if (cum >= target) {
                    kept = i + 1;
                    break;
                }
            }
        } else if (p->min_p > 0.0f) { // weights are relative to the max, so the threshold is min_p itself
            int j = 0;
            for (int i = 0; i < n; i++)
                if (c[i].v >= p->min_p) c[j++] = c[i];
            kept = j;
        }
    }
    double zk = 0.0;
    if (kept == n) zk = z;
    else
        for (int i = 0; i < kept; i++) zk += c[i].v;
    s->n_kept = kept;
    s->z_kept = zk;
}

// log-softmax of the raw logits at `token` and the top-n alternatives.
// Skipped with no_logprob: the log-softmax over the vocabulary costs ~2.5x the candidate copy and argmax, and
// it runs per sampled row, so per verified row of a speculative step.
static void fill_logprobs(const samp_state *s, const float *logits, int32_t token, samp_result *res) {
    if (s->p.no_logprob && s->p.n_logprobs == 0) {
        res->token = token;
        res->logprob = 0.0f;
        res->n_top = 0;
        return;
    }
    samp_logprobs(logits, s->n_vocab, token, s->p.n_logprobs, res);
}

void samp_logprobs(const float *logits, int n, int32_t token, int nt, samp_result *res) {
    res->token = token;
    float vmax = samp_max(logits, n);
    float lse = vmax == -INFINITY ? 0.0f : vmax + (float)log(samp_sumexp(logits, n, vmax));
    float lt = logits[token];
    res->logprob = isnan(lt) ? -INFINITY : lt - lse;
    // top-n by insertion into a short sorted list (value desc, id asc)
    int m = 0;
    for (int i = 0; i < n && nt > 0; i++) {
        float v = isnan(logits[i]) ? -INFINITY : logits[i];
        if (m == nt && !(v > res->top_logprobs[m - 1])) continue;
        int j = m < nt ? m++ : m - 1;
        for (; j > 0 && v > res->top_logprobs[j - 1]; j--) {
            res->top_logprobs[j] = res->top_logprobs[j - 1];
            res->top_ids[j] = res->top_ids[j - 1];
        }
        res->top_logprobs[j] = v;
        res->top_ids[j] = i;
    }
    for (int j = 0; j < m; j++) res->top_logprobs[j] -= lse;
    res->n_top = m;
}

int32_t samp_sample(samp_state *s, const float *logits, samp_result *res) {
    prepare(s, logits);
    int k = 0;
    if (s->n_kept > 1) {
        double u = rng_uniform(s->rng) * s->z_kept, acc = 0.0;
        int last_nz = 0; // if rounding leaves u >= the total, the last token with weight takes it
        k = -1;
        for (int i = 0; i < s->n_kept && k < 0; i++) {
            if (s->cand[i].v > 0.0f) last_nz = i;
            acc += s->cand[i].v;
            if (u < acc) k = i;
        }
        if (k < 0) k = last_nz;
    }
    int32_t tok = s->cand[k].id;
    if (res) {
        res->token = tok;
        fill_logprobs(s, logits, tok, res);
    }
    return tok;
}

double samp_uniform(samp_state *s) { return rng_uniform(s->rng); }

void samp_result_for(const samp_state *s, const float *logits, int32_t token, samp_result *res) {
    fill_logprobs(s, logits, token, res);
}

void samp_probs(samp_state *s, const float *logits, float *probs) {
    prepare(s, logits);
    memset(probs, 0, (size_t)s->n_vocab * sizeof *probs);
    for (int i = 0; i < s->n_kept; i++) probs[s->cand[i].id] = (float)(s->cand[i].v / s->z_kept);
}
