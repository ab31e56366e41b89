// The attention of one layer as compute-pool units (fwd_attn.h): unsplit (run, KV head) units, or, when a step
// has too few of them, (run, KV head, span) units merged afterwards in span order.
#include "model/fwd_attn.h"

#include <stddef.h>

// Units below this many per thread split by span: with fewer, the threads' shares differ by a whole unit.
#define FWD_ATTN_MIN_UNITS 4

// Rows per run: runs are cut smaller when there would be fewer than 3 units per thread.
static int run_rows(const fwd_attn *a, int nth) {
    int g = a->b->n_tokens * a->geo->n_kv_heads / (3 * nth), max_q = attn_max_queries(a->geo);
    return g < 1 ? 1 : g > max_q ? max_q : g;
}

// Rows t.. of one sequence at consecutive positions.
static int seq_len(const model_batch *b, int t) {
    int len = 1;
    while (t + len < b->n_tokens && b->seq[t + len] == b->seq[t] && b->pos[t + len] == b->pos[t] + len) len++;
    return len;
}

// A walk over the runs of the batch in order: each call gives the next run [r0, r1) (0 when done).
typedef struct run_iter {
    int t, len, k, runs, g;
} run_iter;

static int run_next(const model_batch *b, run_iter *it, int *r0, int *r1) {
    if (it->k == it->runs) {
        it->t += it->len;
        if (it->t >= b->n_tokens) return 0;
        it->len = seq_len(b, it->t), it->k = 0, it->runs = (it->len + it->g - 1) / it->g;
    }
    *r0 = it->t + it->len * it->k / it->runs, *r1 = it->t + it->len * (it->k + 1) / it->runs;
    it->k++;
    return 1;
}

// Floats of scratch one (run, KV head) unit of n_q rows takes in a split step: m and l of every span, and the
// partial outputs of every span after the first (the first is written to the output rows).
static size_t unit_floats(const attn_geom *geo, int n_q, int n_spans) {
    const size_t heads = (size_t)n_q * geo->n_rep;
    return heads * 2 * (size_t)n_spans + heads * geo->head_dim * (size_t)(n_spans - 1);
}

static const int32_t *table_of(const fwd_attn *a, int row) {
    const int32_t *const *t = kv_store_layer_is_swa(a->kv, a->layer) ? a->b->block_tables_swa : a->b->block_tables;
    return t[a->b->seq[row]];
}

// Each thread walks the units in order and runs those it claims (claims only increase): a thread that finishes
// early takes the next unit instead of waiting on a fixed share. Every unit is computed once, by the same
// kernel, whichever thread claims it.
static void attn_units(void *arg, int ith, int nth) {
    fwd_attn *a = arg;
    const model_batch *b = a->b;
    const attn_geom *geo = a->geo;
    const int n_kv = geo->n_kv_heads, hd = geo->head_dim, rep = geo->n_rep, q_dim = n_kv * rep * hd;
    const int len = attn_span_len(geo);
    const uint8_t *kl = a->kv->k_l[a->layer], *vl = a->kv->v_l[a->layer];
    run_iter it = {.g = a->g};
    int unit = 0, mine = atomic_fetch_add_explicit(&a->next, 1, memory_order_relaxed), r0, r1;
    size_t off_s = 0; // scratch of the units before this one (split steps)
    (void)ith, (void)nth;
    while (run_next(b, &it, &r0, &r1)) {
        const int n_q = r1 - r0, n_pos = b->pos[r0] + 1;
        int s0 = 0, s1 = 0;
        if (a->split) attn_span_range(geo, n_pos, n_q, &s0, &s1);
        for (int h = 0; h < n_kv; h++) {
            const size_t off = (size_t)r0 * q_dim + (size_t)h * rep * hd, heads = (size_t)n_q * rep;
            for (int k = s0; k <= s1; k++, unit++) {
                if (unit != mine) continue;
                mine = atomic_fetch_add_explicit(&a->next, 1, memory_order_relaxed);
                if (!a->split) {
                    a->multi(a->out + off, (size_t)q_dim, a->q + off, (size_t)q_dim, n_q, kl, vl, table_of(a, r0),
                             n_pos, h, geo);
                    continue;
                }
                float *ml = a->scratch + off_s + heads * 2 * (size_t)(k - s0);
                float *o = a->out + off;
                size_t o_stride = (size_t)q_dim;
                if (k > s0) // later spans: into scratch, after every span's m and l
                    o = a->scratch + off_s + heads * 2 * (size_t)(s1 - s0 + 1) + heads * hd * (size_t)(k - s0 - 1),
                    o_stride = (size_t)rep * hd;
                a->span(o, o_stride, a->q + off, (size_t)q_dim, n_q, kl, vl, table_of(a, r0), n_pos, h, geo,
                        k * len, (k + 1) * len, ml);
            }
            if (a->split) off_s += unit_floats(geo, n_q, s1 - s0 + 1);
        }
    }
}

// A split step's second part, on the calling thread: every (run, KV head) merges its spans in order (as
// attn_span_run does) and is finished.
static void attn_merge_units(fwd_attn *a) {
    const model_batch *b = a->b;
    const attn_geom *geo = a->geo;
    const int n_kv = geo->n_kv_heads, hd = geo->head_dim, rep = geo->n_rep, q_dim = n_kv * rep * hd;
    run_iter it = {.g = a->g};
    size_t off_s = 0;
    int r0, r1;
    while (run_next(b, &it, &r0, &r1)) {
        const int n_q = r1 - r0;
        int s0, s1;
        attn_span_range(geo, b->pos[r0] + 1, n_q, &s0, &s1);
        for (int h = 0; h < n_kv; h++) {
            const size_t heads = (size_t)n_q * rep;
            float *out = a->out + (size_t)r0 * q_dim + (size_t)h * rep * hd, *ml = a->scratch + off_s;
            const float *parts = a->scratch + off_s + heads * 2 * (size_t)(s1 - s0 + 1);
            for (int k = 1; k <= s1 - s0; k++)
                attn_span_merge(out, (size_t)q_dim, ml, parts + heads * hd * (size_t)(k - 1), (size_t)rep * hd,
                                ml + heads * 2 * (size_t)k, n_q, rep, hd);
            attn_span_finish(out, (size_t)q_dim, ml, n_q, h, geo);
            off_s += unit_floats(geo, n_q, s1 - s0 + 1);
        }
    }
}

// Whether to split this step: too few unsplit units for the threads, some unit longer than one span, and the
// partial results fit the scratch.
static int want_split(const fwd_attn *a, int nth) {
    if (!a->span || !a->scratch) return 0;
    run_iter it = {.g = a->g};
    int units = 0, spans = 0, r0, r1;
    size_t floats = 0;
    while (run_next(a->b, &it, &r0, &r1)) {
        int s0, s1;
        attn_span_range(a->geo, a->b->pos[r0] + 1, r1 - r0, &s0, &s1);
        units += a->geo->n_kv_heads, spans += a->geo->n_kv_heads * (s1 - s0 + 1);
        floats += (size_t)a->geo->n_kv_heads * unit_floats(a->geo, r1 - r0, s1 - s0 + 1);
    }
    return units < FWD_ATTN_MIN_UNITS * nth && spans > units && floats <= FWD_ATTN_SPLIT_FLOATS;
}

void fwd_attn_run(fwd_attn *a) {
    const int nth = cpu_pool_size(a->pool);
    a->g = run_rows(a, nth);
    a->split = want_split(a, nth);
    atomic_store_explicit(&a->next, 0, memory_order_relaxed);
    cpu_pool_run(a->pool, attn_units, a);
    if (a->split) attn_merge_units(a);
}
