// Token sampler. One pass builds (logit, id) candidates with penalties applied; greedy takes the argmax;
// otherwise top-k (selection, then a sort of k), softmax at temperature, top-p (a histogram of probability
// mass over weight buckets finds the cut, so only the head of the distribution is ever sorted), min-p, then
// one draw from xoshiro256**. Every buffer is allocated in samp_new for the vocabulary; samp_sample does not allocate.
// Candidate order is total (value desc, id asc), so results never depend on sort stability.
#include "sampling/sampling.h"

#include "sampling/samp_impl.h"
#include "sampling/samp_rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SAMP_MAX_LAST_N (1 << 24)

// --- params

void samp_params_default(samp_params *p) {
    memset(p, 0, sizeof *p);
    p->temperature = 0.0f;
    p->top_k = 0;
    p->top_p = 1.0f;
    p->min_p = 0.0f;
    p->repetition_penalty = 1.0f;
    p->penalty_last_n = 64;
    p->dry_base = 1.75f;
    p->dry_allowed_length = 2;
    p->dry_penalty_last_n = -1;
    p->xtc_threshold = 0.1f;
    p->typical_p = 1.0f;
    p->dynatemp_exponent = 1.0f;
    p->mirostat_tau = 5.0f;
    p->mirostat_eta = 0.1f;
}

// Range checks of llama-server's sampler settings (NaN fails every one).
static int validate_ext(const samp_params *p, int n_vocab, tc_err *err) {
    if (!(p->dry_multiplier >= 0.0f) || isinf(p->dry_multiplier))
        return tc_err_set(err, TC_ERR_INVALID, "dry_multiplier must be a finite number >= 0 (got %g)", p->dry_multiplier);
    if (!(p->dry_base >= 1.0f) || isinf(p->dry_base))
        return tc_err_set(err, TC_ERR_INVALID, "dry_base must be a finite number >= 1 (got %g)", p->dry_base);
    if (p->dry_allowed_length < 0 || p->dry_allowed_length > SAMP_DRY_MAX_N)
        return tc_err_set(err, TC_ERR_INVALID, "dry_allowed_length must be in [0, %d] (got %d)", SAMP_DRY_MAX_N,
                          p->dry_allowed_length);
    if (p->dry_penalty_last_n < -1 || p->dry_penalty_last_n > SAMP_DRY_MAX_N)
        return tc_err_set(err, TC_ERR_INVALID, "dry_penalty_last_n must be -1 (all) or in [0, %d] (got %d)",
                          SAMP_DRY_MAX_N, p->dry_penalty_last_n);
    if (!(p->top_n_sigma >= -1.0f) || isinf(p->top_n_sigma)) // llama.cpp's "off" is -1
        return tc_err_set(err, TC_ERR_INVALID, "top_n_sigma must be a finite number (<= 0: off) (got %g)",
                          p->top_n_sigma);
    if (!(p->typical_p > 0.0f && p->typical_p <= 1.0f))
        return tc_err_set(err, TC_ERR_INVALID, "typical_p must be in (0, 1] (got %g)", p->typical_p);
    if (!(p->xtc_probability >= 0.0f && p->xtc_probability <= 1.0f))
        return tc_err_set(err, TC_ERR_INVALID, "xtc_probability must be in [0, 1] (got %g)", p->xtc_probability);
    if (!(p->xtc_threshold >= 0.0f && p->xtc_threshold <= 1.0f))
        return tc_err_set(err, TC_ERR_INVALID, "xtc_threshold must be in [0, 1] (> 0.5: off) (got %g)",
                          p->xtc_threshold);
    if (!(p->dynatemp_range >= 0.0f) || isinf(p->dynatemp_range))
        return tc_err_set(err, TC_ERR_INVALID, "dynatemp_range must be a finite number >= 0 (got %g)", p->dynatemp_range);
    if (!(p->dynatemp_exponent >= 0.0f) || isinf(p->dynatemp_exponent))
        return tc_err_set(err, TC_ERR_INVALID, "dynatemp_exponent must be a finite number >= 0 (got %g)",
                          p->dynatemp_exponent);
    if (p->mirostat < 0 || p->mirostat > 2)
        return tc_err_set(err, TC_ERR_INVALID, "mirostat must be 0, 1 or 2 (got %d)", p->mirostat);
    if (!(p->mirostat_tau >= 0.0f) || isinf(p->mirostat_tau))
        return tc_err_set(err, TC_ERR_INVALID, "mirostat_tau must be a finite number >= 0 (got %g)", p->mirostat_tau);
    if (!(p->mirostat_eta >= 0.0f) || isinf(p->mirostat_eta))
        return tc_err_set(err, TC_ERR_INVALID, "mirostat_eta must be a finite number >= 0 (got %g)", p->mirostat_eta);
    if (p->min_tokens < 0) return tc_err_set(err, TC_ERR_INVALID, "min_tokens must be >= 0 (got %d)", p->min_tokens);
    if (p->n_dry_breakers < 0 || p->n_dry_breakers > SAMP_MAX_IDS || (p->n_dry_breakers && !p->dry_breakers))
        return tc_err_set(err, TC_ERR_INVALID, "dry_sequence_breakers: bad entry count %d", p->n_dry_breakers);
    for (int i = 0; i < p->n_dry_breakers; i++)
        if (p->dry_breakers[i] < 0 || p->dry_breakers[i] >= n_vocab)
            return tc_err_set(err, TC_ERR_INVALID, "dry_sequence_breakers: token id %d is out of range", p->dry_breakers[i]);
    if (p->n_end_ids < 0 || p->n_end_ids > SAMP_MAX_IDS || (p->n_end_ids && !p->end_ids))
        return tc_err_set(err, TC_ERR_INVALID, "stop_token_ids: bad entry count %d", p->n_end_ids);
    for (int i = 0; i < p->n_end_ids; i++)
        if (p->end_ids[i] < 0 || p->end_ids[i] >= n_vocab)
            return tc_err_set(err, TC_ERR_INVALID, "stop_token_ids: token id %d is outside the vocabulary (%d)",
                              p->end_ids[i], n_vocab);
    return 0;
}

// Which chain the settings ask for (see sampling.h).
static samp_chain chain_of(const samp_params *p) {
    if (p->mirostat) return SAMP_CHAIN_MIROSTAT;
    int dry = p->dry_multiplier > 0.0f && p->dry_penalty_last_n != 0;
    if (dry || p->top_n_sigma > 0.0f || p->typical_p < 1.0f || (p->xtc_probability > 0.0f && p->xtc_threshold <= 0.5f) ||
        p->dynatemp_range > 0.0f)
        return SAMP_CHAIN_LLAMA;
    return SAMP_CHAIN_OAI;
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
    int rc = validate_ext(p, n_vocab, err);
    if (rc) return rc;
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

// Buffers of llama-server's chains and of min_tokens (1 when out of memory).
static int alloc_ext(samp_state *s, const samp_params *p) {
    size_t nv = (size_t)s->n_vocab;
    s->ban = malloc((size_t)(SAMP_MAX_IDS + p->n_end_ids + 1) * sizeof *s->ban);
    if (!s->ban) return 1;
    s->n_ban = 0; // the eog ids (samp_set_eog) go first, then end_ids
    for (int i = 0; i < p->n_end_ids; i++) s->ban[s->n_ban++] = p->end_ids[i];
    if (s->chain == SAMP_CHAIN_OAI) return 0;
    if (!(s->td = malloc(3 * nv * sizeof *s->td))) return 1;
    if (s->chain != SAMP_CHAIN_LLAMA || !(p->dry_multiplier > 0.0f) || p->dry_penalty_last_n == 0) return 0;
    s->dry_cap = p->dry_penalty_last_n > 0 ? p->dry_penalty_last_n : SAMP_DRY_MAX_N;
    s->dry_h = malloc(2 * (size_t)s->dry_cap * sizeof *s->dry_h);
    s->dry_scratch = malloc(2 * (size_t)s->dry_cap * sizeof *s->dry_scratch);
    s->dry_best = calloc(nv, sizeof *s->dry_best);
    s->dry_brk = calloc(nv, 1);
    if (!s->dry_h || !s->dry_scratch || !s->dry_best || !s->dry_brk) return 1;
    for (int i = 0; i < p->n_dry_breakers; i++) s->dry_brk[p->dry_breakers[i]] = 1;
    return 0;
}

void samp_set_eog(samp_state *s, const int32_t *ids, int n) {
    if (n > SAMP_MAX_IDS) n = SAMP_MAX_IDS;
    if (n < 0) n = 0;
    int n_end = s->n_ban - s->n_eog;
    memmove(s->ban + n, s->ban + s->n_eog, (size_t)n_end * sizeof *s->ban);
    if (n) memcpy(s->ban, ids, (size_t)n * sizeof *s->ban);
    s->n_eog = n;
    s->n_ban = n + n_end;
}

int samp_new(const samp_params *p, int n_vocab, samp_state **out, tc_err *err) {
    *out = NULL;
    int rc = validate(p, n_vocab, err);
    if (rc) return rc;
    samp_state *s = calloc(1, sizeof *s);
    if (!s) return tc_err_set(err, TC_ERR_NOMEM, "sampler: out of memory");
    s->p = *p;
    s->p.bias = NULL; // borrowed by the caller: the copies below are ours
    s->p.dry_breakers = s->p.end_ids = NULL;
    s->chain = chain_of(p);
    s->mu = 2.0f * p->mirostat_tau;
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
    if (alloc_ext(s, p)) {
        samp_free(s);
        return tc_err_set(err, TC_ERR_NOMEM, "sampler: out of memory for a %d-token vocabulary", n_vocab);
    }
    uint64_t x = p->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    *out = s;
    return 0;
}

void samp_free(samp_state *s) {
    if (!s) return;
    free(s->td);
    free(s->dry_h);
    free(s->dry_brk);
    free(s->dry_scratch);
    free(s->dry_best);
    free(s->ban);
    free(s->bias);
    free(s->cand);
    free(s->cnt_all);
    free(s->cnt_gen);
    free(s->uniq);
    free(s->uniq_pos);
    free(s->ring);
    free(s);
}

int samp_is_greedy(const samp_state *s) {
    return s->p.temperature == 0.0f && !(s->chain == SAMP_CHAIN_LLAMA && s->p.xtc_probability > 0.0f);
}

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

// DRY's ordered history: when the buffer is full, the newest dry_cap tokens slide to its start.
static void dry_push(samp_state *s, int32_t tok) {
    if (!s->dry_cap || tok < 0 || tok >= s->n_vocab) return;
    if (s->dry_len == 2 * s->dry_cap) {
        memmove(s->dry_h, s->dry_h + s->dry_cap, (size_t)s->dry_cap * sizeof *s->dry_h);
        s->dry_len = s->dry_cap;
    }
    s->dry_h[s->dry_len++] = tok;
}

void samp_accept(samp_state *s, int32_t token) {
    hist_push(s, token, 1);
    dry_push(s, token);
    s->n_gen++;
    samp_chain_accept(s, token);
}

void samp_accept_prompt(samp_state *s, const int32_t *tokens, int n) {
    for (int i = 0; i < n; i++) {
        hist_push(s, tokens[i], 0);
        dry_push(s, tokens[i]);
    }
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

// Bans the min_tokens ids in cand (in id order). Returns the new maximum.
static float apply_ban(samp_state *s, float vmax) {
    int lowered_max = 0;
    for (int i = 0; i < s->n_ban; i++) {
        samp_cand *c = &s->cand[s->ban[i]];
        lowered_max |= c->v == vmax;
        c->v = -INFINITY;
    }
    if (!lowered_max) return vmax;
    float m = -INFINITY;
    for (int i = 0; i < s->n_vocab; i++) m = s->cand[i].v > m ? s->cand[i].v : m;
    return m;
}

// Builds the final distribution into cand[0..n_kept) (weights summing to z_kept).
static void prepare(samp_state *s, const float *logits, samp_xtc_mode xtc) {
    const samp_params *p = &s->p;
    if (s->chain != SAMP_CHAIN_OAI) {
        samp_chain_prepare(s, logits, xtc);
        return;
    }
    int n = s->n_vocab;
    samp_cand *c = s->cand;
    int ban = samp_ban_on(s);
    if (p->temperature == 0.0f && s->n_bias == 0 && p->repetition_penalty == 1.0f && p->presence_penalty == 0.0f &&
        p->frequency_penalty == 0.0f && !ban) {
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
    float vmax = samp_penalize(s, samp_max(logits, n));
    if (ban) vmax = apply_ban(s, vmax);

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
    prepare(s, logits, SAMP_XTC_DRAW);
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

void samp_result_for(const samp_state *s, const float *logits, int32_t token, samp_result *res) {
    fill_logprobs(s, logits, token, res);
}

void samp_probs(samp_state *s, const float *logits, float *probs) {
    const samp_params *p = &s->p;
    int xtc = s->chain == SAMP_CHAIN_LLAMA && p->xtc_probability > 0.0f && p->xtc_threshold <= 0.5f;
    // XTC applies with probability xtc_probability: the distribution is the mixture of both branches
    float w = xtc ? 1.0f - p->xtc_probability : 1.0f;
    prepare(s, logits, SAMP_XTC_SKIP);
    memset(probs, 0, (size_t)s->n_vocab * sizeof *probs);
    for (int i = 0; i < s->n_kept; i++) probs[s->cand[i].id] = (float)(w * s->cand[i].v / s->z_kept);
    if (!xtc) return;
    prepare(s, logits, SAMP_XTC_APPLY);
    for (int i = 0; i < s->n_kept; i++) probs[s->cand[i].id] += (float)(p->xtc_probability * s->cand[i].v / s->z_kept);
}
