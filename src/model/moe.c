// The CPU's mixture-of-experts FFN (moe.h). A step routes every row, sorts the (row, expert) pairs by expert,
// and runs every chosen expert as a small dense FFN over the rows routed to it: at batch 1 only the
// n_expert_used chosen experts' slices of the 3-D tensors are read (decode cost follows the active
// parameters), in a batch each chosen expert's weights are read once for all its rows. All experts of a layer
// go through the pool together (cpu_matmul_grouped): one dispatch quantizes the activation rows, one runs every
// expert's gate and up projections, one the SwiGLU, two the down projections, one the weighted sum; the expert
// slices use the repacked layout when the model has one (model_repack_weights).
#include "model/moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/matmul_grouped.h"
#include "cpu/ops.h"

// Tokens routed per pass: the (token, expert) scratch grows with n_expert_used times this; a larger batch runs
// in passes of this many tokens (each reads its chosen experts once).
#define MOE_CHUNK 512
// Entries (token, expert) from which the SwiGLU and the weighted sum are split over the pool.
#define MOE_POOL_ROWS 32

struct moe_scratch {
    int max_tokens; // tokens per pass: min(the runner's batch, MOE_CHUNK)
    float *logits;  // (max_tokens, n_expert) router logits
    int32_t *ids;   // (max_tokens, n_expert_used) each row's experts
    float *wts;     // (max_tokens, n_expert_used) and their weights
    int32_t *start; // (n_expert + 1) first entry of each expert in order[]
    int32_t *fill;  // (n_expert) cursors while sorting
    int32_t *order; // (max_tokens * n_expert_used) entries t * n_expert_used + j, by expert, then by row
    int32_t *pos;   // (max_tokens * n_expert_used) the inverse: where entry t * n_expert_used + j lies in order[]
    int32_t *xrow;  // (max_tokens * n_expert_used) the token of each entry of order[]
    cpu_mm_group *grp; // (2 * n_expert) the grouped matmuls' groups
    float *g, *u;   // (max_tokens * n_expert_used, max(expert_ffn, shexp_ffn)) gate and up projections, by order[]
    float *y;       // (max_tokens * n_expert_used, dim) expert outputs, by order[]
    void *qa;       // the grouped matmuls' scratch (quantized activations of every entry)
    size_t qa_size;
};

void moe_route(const float *logits, int n_expert, int k, int norm, int32_t *ids, float *w) {
    float mx = logits[0], sum = 0.0f;
    for (int e = 1; e < n_expert; e++) mx = logits[e] > mx ? logits[e] : mx;
    for (int e = 0; e < n_expert; e++) sum += expf(logits[e] - mx);
    // Selection over the logits (the softmax is monotonic): insertion into the k best, stable for ties.
    int n = 0;
    for (int e = 0; e < n_expert; e++) {
        if (n == k && logits[e] <= logits[ids[k - 1]]) continue;
        int i = n < k ? n++ : k - 1;
        while (i > 0 && logits[ids[i - 1]] < logits[e]) ids[i] = ids[i - 1], i--;
        ids[i] = e;
    }
    float wsum = 0.0f;
    for (int j = 0; j < k; j++) wsum += w[j] = expf(logits[ids[j]] - mx) / sum;
    if (norm)
        for (int j = 0; j < k; j++) w[j] /= wsum;
}

int moe_scratch_new(const model *m, int max_tokens, moe_scratch **out, tc_err *err) {
    const model_hparams *hp = &m->hp;
    *out = NULL;
    moe_scratch *s = calloc(1, sizeof *s);
    if (!s) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    max_tokens = max_tokens < MOE_CHUNK ? max_tokens : MOE_CHUNK;
    const size_t n = (size_t)max_tokens, k = (size_t)hp->n_expert_used, ne = (size_t)hp->n_expert;
    const size_t ff = (size_t)(hp->expert_ffn_dim > hp->shexp_ffn_dim ? hp->expert_ffn_dim : hp->shexp_ffn_dim);
    s->max_tokens = max_tokens;
    s->logits = malloc(n * ne * sizeof(float));
    s->ids = malloc(n * k * sizeof(int32_t));
    s->wts = malloc(n * k * sizeof(float));
    s->start = malloc((ne + 1) * sizeof(int32_t));
    s->fill = malloc(ne * sizeof(int32_t));
    s->order = malloc(n * k * sizeof(int32_t));
    s->pos = malloc(n * k * sizeof(int32_t));
    s->xrow = malloc(n * k * sizeof(int32_t));
    s->grp = malloc(2 * ne * sizeof(cpu_mm_group));
    s->g = malloc(n * k * ff * sizeof(float));
    s->u = malloc(n * k * ff * sizeof(float));
    s->y = malloc(n * k * (size_t)hp->dim * sizeof(float));
    // the grouped matmuls' activations: every entry's row of x (gate, up) or of the SwiGLU output (down), in
    // the types of the layers' expert weights (a Q4_K_M file mixes Q4_K and Q6_K down projections)
    for (int l = 0; l < hp->n_layers; l++) {
        const model_weight *wg = model_layer_w(m, l, ROLE_FFN_GATE_EXPS), *wd = model_layer_w(m, l, ROLE_FFN_DOWN_EXPS);
        const model_weight *wu = model_layer_w(m, l, ROLE_FFN_UP_EXPS);
        const size_t sz[3] = {wg->data ? cpu_matmul_grouped_scratch_size(wg->type, (int)(n * k), hp->dim) : 0,
                              wu->data ? cpu_matmul_grouped_scratch_size(wu->type, (int)(n * k), hp->dim) : 0,
                              wd->data ? cpu_matmul_grouped_scratch_size(wd->type, (int)(n * k), (int)wd->cols) : 0};
        for (int i = 0; i < 3; i++) s->qa_size = sz[i] > s->qa_size ? sz[i] : s->qa_size;
    }
    s->qa = s->qa_size ? malloc(s->qa_size) : NULL;
    if (!s->logits || !s->ids || !s->wts || !s->start || !s->fill || !s->order || !s->pos || !s->xrow || !s->grp ||
        !s->g || !s->u || !s->y || (s->qa_size && !s->qa)) {
        moe_scratch_free(s);
        return tc_err_set(err, TC_ERR_NOMEM, "cannot allocate MoE scratch for %d batch tokens", max_tokens);
    }
    *out = s;
    return 0;
}

void moe_scratch_free(moe_scratch *s) {
    if (!s) return;
    free(s->logits), free(s->ids), free(s->wts), free(s->start), free(s->fill), free(s->order), free(s->pos);
    free(s->xrow), free(s->grp), free(s->g), free(s->u), free(s->y), free(s->qa);
    free(s);
}

// out (n, rows) = x (n, cols) @ Wᵀ for a matrix at data (an expert's slice, or a plain weight with its repacked
// copy). The arguments of cpu_matmul_multi when gate and up are run together.
static cpu_matmul_args mm_args(float *out, const float *x, int n, const model_weight *w, const void *data,
                               const void *packed, void *scratch) {
    return (cpu_matmul_args){.out = out, .ld_out = (int)w->rows, .x = x, .n_rows = n, .k = (int)w->cols,
                             .d = (int)w->rows, .w_type = w->type, .w = data, .scratch = scratch, .w_packed = packed};
}

// x (n, len) += bias row e of b (F32 (n_expert, len)) on every row; nothing when the layer has no such bias.
static void add_expert_bias(float *x, int n, int len, const model_weight *b, int e) {
    if (!b || !b->data) return;
    const float *row = (const float *)b->data + (size_t)e * len;
    for (int t = 0; t < n; t++) ops_add(x + (size_t)t * len, row, len);
}

// The biases of one routed expert's gate, up and down projections (gpt-oss), or NULL each.
typedef struct expert_bias {
    const model_weight *g, *u, *d;
} expert_bias;

// y (n, dim) = down(SiLU(gate·x) · up·x) for one expert (e >= 0: slice e of the 3-D tensors, with its biases in
// eb where the layer has them, and the clamped SwiGLU where hp says so) or the shared one (e < 0).
static int expert_ffn(cpu_pool *pool, void *mm, moe_scratch *s, const model_hparams *hp, const model_weight *wg,
                      const model_weight *wu, const model_weight *wd, const expert_bias *eb, int e, const float *x,
                      int n) {
    const void *pg = e >= 0 ? model_weight_expert(wg, e) : wg->data, *pu = e >= 0 ? model_weight_expert(wu, e) : wu->data;
    const void *pd = e >= 0 ? model_weight_expert(wd, e) : wd->data;
    const int ff = (int)wg->rows;
    cpu_matmul_args a[2] = {mm_args(s->g, x, n, wg, pg, e >= 0 ? NULL : wg->packed, mm),
                            mm_args(s->u, x, n, wu, pu, e >= 0 ? NULL : wu->packed, mm)};
    int rc = cpu_matmul_multi(pool, a, 2);
    if (rc) return rc;
    if (eb) add_expert_bias(s->g, n, ff, eb->g, e), add_expert_bias(s->u, n, ff, eb->u, e);
    if (e >= 0 && hp->swiglu_limit > 0) ops_swiglu_clamped(s->g, s->u, n * ff, hp->swiglu_alpha, hp->swiglu_limit);
    else ops_swiglu(s->g, s->u, n * ff);
    cpu_matmul_args d = mm_args(s->y, s->g, n, wd, pd, e >= 0 ? NULL : wd->packed, mm);
    if ((rc = cpu_matmul(pool, &d))) return rc;
    if (eb) add_expert_bias(s->y, n, (int)wd->rows, eb->d, e);
    return 0;
}

// Counting sort of the (row, slot) entries by expert; within an expert, rows ascend.
static void group_by_expert(moe_scratch *s, int n_expert, int k, int n) {
    memset(s->start, 0, ((size_t)n_expert + 1) * sizeof(int32_t));
    for (int i = 0; i < n * k; i++) s->start[s->ids[i] + 1]++;
    for (int e = 0; e < n_expert; e++) s->start[e + 1] += s->start[e];
    memcpy(s->fill, s->start, (size_t)n_expert * sizeof(int32_t));
    for (int i = 0; i < n * k; i++) s->order[s->fill[s->ids[i]]++] = i;
}

// --- the routed experts of one pass, all experts together

typedef struct moe_pass {
    moe_scratch *s;
    const model_hparams *hp;
    expert_bias eb;
    int ff, n_ent, n, k;
    float *out;         // (n, dim)
} moe_pass;

// Entries [i0, i1) of order[] (pool job): each one's expert biases (gpt-oss), then its SwiGLU, in s->g.
static void moe_act_job(void *arg, int ith, int nth) {
    const moe_pass *p = arg;
    const moe_scratch *s = p->s;
    const int per = (p->n_ent + nth - 1) / nth, i0 = ith * per, i1 = i0 + per < p->n_ent ? i0 + per : p->n_ent;
    for (int i = i0; i < i1; i++) {
        float *g = s->g + (size_t)i * p->ff, *u = s->u + (size_t)i * p->ff;
        const int e = s->ids[s->order[i]];
        add_expert_bias(g, 1, p->ff, p->eb.g, e), add_expert_bias(u, 1, p->ff, p->eb.u, e);
        if (p->hp->swiglu_limit > 0) ops_swiglu_clamped(g, u, p->ff, p->hp->swiglu_alpha, p->hp->swiglu_limit);
        else ops_swiglu(g, u, p->ff);
    }
}

// Tokens [t0, t1) (pool job): out row t = the sum of its experts' outputs (down bias added first), each times its
// routing weight, in ascending expert order (its entries' places in order[] ascend with the expert).
static void moe_sum_job(void *arg, int ith, int nth) {
    const moe_pass *p = arg;
    const moe_scratch *s = p->s;
    const int dim = p->hp->dim, k = p->k;
    const int per = (p->n + nth - 1) / nth, t0 = ith * per, t1 = t0 + per < p->n ? t0 + per : p->n;
    for (int t = t0; t < t1; t++) {
        int32_t at[MODEL_MAX_EXPERTS_USED];
        for (int j = 0; j < k; j++) { // insertion sort of the token's k places
            int i = j;
            for (const int32_t v = s->pos[t * k + j]; i > 0 && at[i - 1] > v; i--) at[i] = at[i - 1];
            at[i] = s->pos[t * k + j];
        }
        float *o = p->out + (size_t)t * dim;
        memset(o, 0, (size_t)dim * sizeof(float));
        for (int j = 0; j < k; j++) {
            const int ent = s->order[at[j]];
            float *y = s->y + (size_t)at[j] * dim;
            add_expert_bias(y, 1, dim, p->eb.d, s->ids[ent]);
            const float w = s->wts[ent];
            for (int c = 0; c < dim; c++) o[c] += w * y[c];
        }
    }
}

// One grouped matmul of nw (1 or 2) expert tensors of one type and shape over the experts that have entries:
// entry i's output row of tensor w[m] at out[m] + i * rows. Rows of x: x_rows by entry, or, for one token
// (decode), x itself for every entry (quantized once).
static int moe_grouped(cpu_pool *pool, moe_scratch *s, const model_weight *const *w, float *const *out, int nw,
                       const float *x, const int32_t *x_rows, int n_act, int ne) {
    const int d = (int)w[0]->rows;
    int ng = 0;
    for (int e = 0; e < ne; e++) {
        const int i0 = s->start[e], cnt = s->start[e + 1] - i0;
        for (int mi = 0; mi < nw && cnt; mi++)
            s->grp[ng++] = (cpu_mm_group){.w = model_weight_expert(w[mi], e),
                                          .w_packed = model_weight_expert_packed(w[mi], e),
                                          .a0 = n_act == 1 ? 0 : i0, .n = cnt, .out = out[mi] + (size_t)i0 * d};
    }
    const cpu_matmul_grouped_args a = {.w_type = w[0]->type, .k = (int)w[0]->cols, .d = d, .ld_out = d, .x = x,
                                       .x_rows = n_act == 1 ? NULL : x_rows, .n_act = n_act, .groups = s->grp,
                                       .n_groups = ng, .scratch = s->qa};
    return cpu_matmul_grouped(pool, &a);
}

// The routed experts of n tokens x (n, dim) -> out (n, dim).
static int moe_routed(cpu_pool *pool, void *mm, moe_scratch *s, const model *m, int l, float *out, const float *x,
                      int n) {
    const model_hparams *hp = &m->hp;
    const int k = hp->n_expert_used, ne = hp->n_expert;
    const model_weight *router = model_layer_w(m, l, ROLE_FFN_GATE_INP);
    cpu_matmul_args ra = mm_args(s->logits, x, n, router, router->data, NULL, mm);
    int rc = cpu_matmul(pool, &ra);
    if (rc) return rc;
    add_expert_bias(s->logits, n, ne, model_layer_w(m, l, ROLE_FFN_GATE_INP_BIAS), 0); // (1, n_expert) or none
    for (int t = 0; t < n; t++)
        moe_route(s->logits + (size_t)t * ne, ne, k, hp->moe_norm_w, s->ids + (size_t)t * k, s->wts + (size_t)t * k);
    group_by_expert(s, ne, k, n);
    const int n_ent = n * k, n_act = n == 1 ? 1 : n_ent;
    for (int i = 0; i < n_ent; i++) s->pos[s->order[i]] = i, s->xrow[i] = s->order[i] / k;
    const model_weight *w[2] = {model_layer_w(m, l, ROLE_FFN_GATE_EXPS), model_layer_w(m, l, ROLE_FFN_UP_EXPS)};
    const model_weight *wd = model_layer_w(m, l, ROLE_FFN_DOWN_EXPS);
    float *gu[2] = {s->g, s->u};
    if (w[0]->type == w[1]->type && w[0]->rows == w[1]->rows) // gate and up in one call
        rc = moe_grouped(pool, s, w, gu, 2, x, s->xrow, n_act, ne);
    else if (!(rc = moe_grouped(pool, s, w, gu, 1, x, s->xrow, n_act, ne)))
        rc = moe_grouped(pool, s, w + 1, gu + 1, 1, x, s->xrow, n_act, ne);
    if (rc) return rc;
    moe_pass p = {.s = s, .hp = hp, .ff = (int)w[0]->rows, .n_ent = n_ent, .n = n, .k = k, .out = out,
                  .eb = {model_layer_w(m, l, ROLE_FFN_GATE_EXPS_BIAS), model_layer_w(m, l, ROLE_FFN_UP_EXPS_BIAS),
                         model_layer_w(m, l, ROLE_FFN_DOWN_EXPS_BIAS)}};
    // decode's few rows run on the caller: a fork-join costs more than their work
    if (n_ent >= MOE_POOL_ROWS) cpu_pool_run(pool, moe_act_job, &p);
    else moe_act_job(&p, 0, 1);
    if ((rc = moe_grouped(pool, s, &wd, &s->y, 1, s->g, NULL, n_ent, ne))) return rc;
    if (n * k >= MOE_POOL_ROWS) cpu_pool_run(pool, moe_sum_job, &p);
    else moe_sum_job(&p, 0, 1);
    return 0;
}

int moe_ffn(cpu_pool *pool, void *mm, moe_scratch *s, const model *m, int l, float *out, const float *x, int n) {
    const model_hparams *hp = &m->hp;
    const int dim = hp->dim;
    int rc;
    for (int t0 = 0; t0 < n; t0 += s->max_tokens) {
        const int nt = n - t0 < s->max_tokens ? n - t0 : s->max_tokens;
        if ((rc = moe_routed(pool, mm, s, m, l, out + (size_t)t0 * dim, x + (size_t)t0 * dim, nt))) return rc;
    }
    const model_weight *sgate = model_layer_w(m, l, ROLE_FFN_GATE_INP_SHEXP);
    if (!sgate->data) return 0;
    // the shared expert, on every row, scaled by sigmoid(gate_inp_shexp · x)
    for (int t0 = 0; t0 < n; t0 += s->max_tokens) {
        const int nt = n - t0 < s->max_tokens ? n - t0 : s->max_tokens;
        const float *xt = x + (size_t)t0 * dim;
        if ((rc = expert_ffn(pool, mm, s, hp, model_layer_w(m, l, ROLE_FFN_GATE_SHEXP),
                             model_layer_w(m, l, ROLE_FFN_UP_SHEXP), model_layer_w(m, l, ROLE_FFN_DOWN_SHEXP), NULL, -1,
                             xt, nt)))
            return rc;
        const float *gv = sgate->data;
        for (int t = 0; t < nt; t++) {
            const float *xr = xt + (size_t)t * dim, *y = s->y + (size_t)t * dim;
            float dot = 0.0f;
            for (int c = 0; c < dim; c++) dot += gv[c] * xr[c];
            const float gate = 1.0f / (1.0f + expf(-dot));
            float *o = out + (size_t)(t0 + t) * dim;
            for (int c = 0; c < dim; c++) o[c] += gate * y[c];
        }
    }
    return 0;
}
