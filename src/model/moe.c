// The CPU's mixture-of-experts FFN (moe.h). A step routes every row, sorts the (row, expert) pairs by expert,
// and runs each chosen expert as a small dense FFN over the rows gathered for it: at batch 1 only the
// n_expert_used chosen experts' slices of the 3-D tensors are read (decode cost follows the active
// parameters), in a batch each chosen expert's weights are read once for all its rows.
#include "model/moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/ops.h"

struct moe_scratch {
    int max_tokens;
    float *logits;  // (max_tokens, n_expert) router logits
    int32_t *ids;   // (max_tokens, n_expert_used) each row's experts
    float *wts;     // (max_tokens, n_expert_used) and their weights
    int32_t *start; // (n_expert + 1) first entry of each expert in order[]
    int32_t *fill;  // (n_expert) cursors while sorting
    int32_t *order; // (max_tokens * n_expert_used) entries t * n_expert_used + j, by expert, then by row
    float *xg;      // (max_tokens, dim) the rows routed to one expert, gathered
    float *g, *u;   // (max_tokens, max(expert_ffn, shexp_ffn)) gate and up projections
    float *y;       // (max_tokens, dim) an expert's output rows
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
    const size_t n = (size_t)max_tokens, k = (size_t)hp->n_expert_used;
    const size_t ff = (size_t)(hp->expert_ffn_dim > hp->shexp_ffn_dim ? hp->expert_ffn_dim : hp->shexp_ffn_dim);
    s->max_tokens = max_tokens;
    s->logits = malloc(n * (size_t)hp->n_expert * sizeof(float));
    s->ids = malloc(n * k * sizeof(int32_t));
    s->wts = malloc(n * k * sizeof(float));
    s->start = malloc(((size_t)hp->n_expert + 1) * sizeof(int32_t));
    s->order = malloc(n * k * sizeof(int32_t));
    s->xg = malloc(n * (size_t)hp->dim * sizeof(float));
    s->g = malloc(n * ff * sizeof(float));
    s->u = malloc(n * ff * sizeof(float));
    s->y = malloc(n * (size_t)hp->dim * sizeof(float));
    s->fill = malloc((size_t)hp->n_expert * sizeof(int32_t));
    if (!s->logits || !s->ids || !s->wts || !s->start || !s->order || !s->xg || !s->g || !s->u || !s->y || !s->fill) {
        moe_scratch_free(s);
        return tc_err_set(err, TC_ERR_NOMEM, "cannot allocate MoE scratch for %d batch tokens", max_tokens);
    }
    *out = s;
    return 0;
}

void moe_scratch_free(moe_scratch *s) {
    if (!s) return;
    free(s->logits), free(s->ids), free(s->wts), free(s->start), free(s->order);
    free(s->xg), free(s->g), free(s->u), free(s->y), free(s->fill);
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

int moe_ffn(cpu_pool *pool, void *mm, moe_scratch *s, const model *m, int l, float *out, const float *x, int n) {
    const model_hparams *hp = &m->hp;
    const int dim = hp->dim, k = hp->n_expert_used, ne = hp->n_expert;
    if (n > s->max_tokens) return TC_ERR_INVALID;
    const model_weight *router = model_layer_w(m, l, ROLE_FFN_GATE_INP);
    cpu_matmul_args ra = mm_args(s->logits, x, n, router, router->data, NULL, mm);
    int rc = cpu_matmul(pool, &ra);
    if (rc) return rc;
    add_expert_bias(s->logits, n, ne, model_layer_w(m, l, ROLE_FFN_GATE_INP_BIAS), 0); // (1, n_expert) or none
    for (int t = 0; t < n; t++)
        moe_route(s->logits + (size_t)t * ne, ne, k, hp->moe_norm_w, s->ids + (size_t)t * k, s->wts + (size_t)t * k);
    group_by_expert(s, ne, k, n);
    memset(out, 0, (size_t)n * dim * sizeof(float));
    const model_weight *wg = model_layer_w(m, l, ROLE_FFN_GATE_EXPS), *wu = model_layer_w(m, l, ROLE_FFN_UP_EXPS);
    const model_weight *wd = model_layer_w(m, l, ROLE_FFN_DOWN_EXPS);
    const expert_bias eb = {model_layer_w(m, l, ROLE_FFN_GATE_EXPS_BIAS), model_layer_w(m, l, ROLE_FFN_UP_EXPS_BIAS),
                            model_layer_w(m, l, ROLE_FFN_DOWN_EXPS_BIAS)};
    for (int e = 0; e < ne; e++) {
        const int i0 = s->start[e], cnt = s->start[e + 1] - i0;
        if (!cnt) continue;
        for (int i = 0; i < cnt; i++)
            memcpy(s->xg + (size_t)i * dim, x + (size_t)(s->order[i0 + i] / k) * dim, (size_t)dim * sizeof(float));
        if ((rc = expert_ffn(pool, mm, s, hp, wg, wu, wd, &eb, e, s->xg, cnt))) return rc;
        for (int i = 0; i < cnt; i++) {
            const int ent = s->order[i0 + i];
            const float w = s->wts[ent], *y = s->y + (size_t)i * dim;
            float *o = out + (size_t)(ent / k) * dim;
            for (int c = 0; c < dim; c++) o[c] += w * y[c];
        }
    }
    const model_weight *sgate = model_layer_w(m, l, ROLE_FFN_GATE_INP_SHEXP);
    if (!sgate->data) return 0;
    // the shared expert, on every row, scaled by sigmoid(gate_inp_shexp · x)
    if ((rc = expert_ffn(pool, mm, s, hp, model_layer_w(m, l, ROLE_FFN_GATE_SHEXP),
                         model_layer_w(m, l, ROLE_FFN_UP_SHEXP), model_layer_w(m, l, ROLE_FFN_DOWN_SHEXP), NULL, -1, x,
                         n)))
        return rc;
    const float *gv = sgate->data;
    for (int t = 0; t < n; t++) {
        const float *xr = x + (size_t)t * dim, *y = s->y + (size_t)t * dim;
        float dot = 0.0f;
        for (int c = 0; c < dim; c++) dot += gv[c] * xr[c];
        const float gate = 1.0f / (1.0f + expf(-dot));
        float *o = out + (size_t)t * dim;
        for (int c = 0; c < dim; c++) o[c] += gate * y[c];
    }
    return 0;
}
