// The gated DeltaNet layer on the CPU (gdn.h): projections through the matmul kernels over all rows at once,
// then the conv row by row and the delta rule head by head over the pool's threads (a row depends on its
// sequence's previous one; heads are independent), in the order and precision of llama.cpp's CPU operations
// (ssm_conv: float sums over the taps in order; the fused gated_delta_net: decay, delta, rank-1 update, readout).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/delta_rule.h"
#include "cpu/ops.h"
#include "model/gdn.h"

struct gdn_scratch {
    float *qkv; // (max_tokens, conv_dim) projections, then the conv's output in place
    float *z;   // (max_tokens, value_dim)
    float *ba;  // (max_tokens, 2·ssm_vheads) beta and alpha projections: ssm_beta's then ssm_alpha's, or ssm_ba's
    float *in;  // (max_tokens, conv_dim + value_dim) ssm_in's projections (Qwen3-Next's older files), or NULL
    float *o;   // (max_tokens, value_dim) the heads' outputs, normed and gated
};

void gdn_scratch_free(gdn_scratch *s) {
    if (!s) return;
    free(s->qkv), free(s->z), free(s->ba), free(s->in), free(s->o);
    free(s);
}

int gdn_scratch_new(const model *m, int max_tokens, gdn_scratch **out, tc_err *err) {
    const model_hparams *hp = &m->hp;
    const size_t n = (size_t)max_tokens, vd = (size_t)hp->ssm_state * hp->ssm_vheads;
    const size_t cd = (size_t)hp->ssm_state * 2 * hp->ssm_groups + vd;
    gdn_scratch *s = calloc(1, sizeof *s);
    *out = NULL;
    if (!s) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    s->qkv = malloc(n * cd * sizeof(float));
    s->z = malloc(n * vd * sizeof(float));
    s->ba = malloc(n * 2 * hp->ssm_vheads * sizeof(float));
    s->o = malloc(n * vd * sizeof(float));
    int fused_in = 0;
    for (int l = 0; l < hp->n_layers; l++) fused_in |= model_layer_w(m, l, ROLE_SSM_IN)->data != NULL;
    if (fused_in) s->in = malloc(n * (cd + vd) * sizeof(float));
    if (!s->qkv || !s->z || !s->ba || !s->o || (fused_in && !s->in)) {
        gdn_scratch_free(s);
        return tc_err_set(err, TC_ERR_NOMEM, "out of memory for the DeltaNet scratch");
    }
    *out = s;
    return 0;
}

// out (n, ld) = x (n, w->cols) · wᵀ into the first w->rows columns of each row
static int mm(cpu_pool *pool, void *scratch, float *out, int ld, const float *x, int n, const model_weight *w) {
    cpu_matmul_args a = {.out = out,
                         .ld_out = ld,
                         .x = x,
                         .n_rows = n,
                         .k = (int)w->cols,
                         .d = (int)w->rows,
                         .w_type = w->type,
                         .w = w->data,
                         .scratch = scratch,
                         .w_packed = w->packed};
    return cpu_matmul(pool, &a);
}

static float silu(float x) {
    return x / (1.0f + expf(-x));
}
static float sigmoid(float x) {
    return 1.0f / (1.0f + expf(-x));
}
static float softplus(float x) {
    return x > 20.0f ? x : log1pf(expf(x));
} // ggml_softplus's threshold

// x (len) / sqrt(Σx² + eps): llama.cpp's rms_norm(x, eps/len)/sqrt(len)
static void l2norm(float *x, int len, float eps) {
    double ss = 0.0;
    for (int i = 0; i < len; i++)
        ss += (double)(x[i] * x[i]);
    const float scale = 1.0f / sqrtf((float)(ss / len) + eps / (float)len) / sqrtf((float)len);
    for (int i = 0; i < len; i++)
        x[i] *= scale;
}

// The causal conv1d of one row over its channels (cd), with the state cs (cd, K-1) (oldest input first),
// then SiLU; x is replaced by the output and the state shifted by x.
static void conv_row(float *x, float *cs, const float *w, int cd, int K) {
    for (int ch = 0; ch < cd; ch++) {
        float *st = cs + (size_t)ch * (K - 1);
        const float *wc = w + (size_t)ch * K;
        float sum = 0.0f;
        for (int i = 0; i < K - 1; i++)
            sum += st[i] * wc[i];
        sum += x[ch] * wc[K - 1];
        memmove(st, st + 1, (size_t)(K - 2) * sizeof(float));
        st[K - 2] = x[ch];
        x[ch] = silu(sum);
    }
}

// Row t's recurrent-state slot (b->rs_slots NULL: slot = sequence).
static int row_slot(const model_batch *b, int t) {
    return b->rs_slots ? b->rs_slots[b->seq[t]] : b->seq[t];
}

// Qwen3-Next's older files: ssm_in's rows (n, conv_dim + value_dim), [q, k, v × r, z × r] for each of the hk key
// heads, into q, k, v of the conv's channels (qkv: (n, conv_dim)) and z (n, value_dim).
static void split_qkvz(const float *in, float *qkv, float *z, int n, int S, int hk, int r) {
    const size_t kd = (size_t)S * hk, vd = kd * r, per = 2 * (size_t)S + 2 * (size_t)r * S;
    for (int t = 0; t < n; t++) {
        const float *src = in + (size_t)t * hk * per;
        float *c = qkv + (size_t)t * (2 * kd + vd), *zt = z + (size_t)t * vd;
        for (int g = 0; g < hk; g++, src += per) {
            memcpy(c + (size_t)g * S, src, (size_t)S * sizeof(float));
            memcpy(c + kd + (size_t)g * S, src + S, (size_t)S * sizeof(float));
            memcpy(c + 2 * kd + (size_t)g * r * S, src + 2 * S, (size_t)r * S * sizeof(float));
            memcpy(zt + (size_t)g * r * S, src + 2 * S + (size_t)r * S, (size_t)r * S * sizeof(float));
        }
    }
}

// The projections of layer l over x (n, dim): q, k, v into s->qkv, z into s->z, beta and alpha into s->ba.
static int project(cpu_pool *pool, void *mm_scratch, gdn_scratch *s, const model *m, int l, const float *x,
                   int n) {
    const model_hparams *hp = &m->hp;
    const int S = hp->ssm_state, hk = hp->ssm_groups, hv = hp->ssm_vheads;
    const int kd = S * hk, vd = S * hv, cd = 2 * kd + vd;
    const model_weight *in = model_layer_w(m, l, ROLE_SSM_IN), *ba = model_layer_w(m, l, ROLE_SSM_BA);
    int rc;
    if (in->data) {
        if ((rc = mm(pool, mm_scratch, s->in, cd + vd, x, n, in))) return rc;
        split_qkvz(s->in, s->qkv, s->z, n, S, hk, hv / hk);
    } else if ((rc = mm(pool, mm_scratch, s->qkv, cd, x, n, model_layer_w(m, l, ROLE_SSM_QKV))) ||
               (rc = mm(pool, mm_scratch, s->z, vd, x, n, model_layer_w(m, l, ROLE_SSM_GATE))))
        return rc;
    if (ba->data) return mm(pool, mm_scratch, s->ba, 2 * hv, x, n, ba);
    if ((rc = mm(pool, mm_scratch, s->ba, 2 * hv, x, n, model_layer_w(m, l, ROLE_SSM_BETA)))) return rc;
    return mm(pool, mm_scratch, s->ba + hv, 2 * hv, x, n, model_layer_w(m, l, ROLE_SSM_ALPHA));
}

// Where row t's recurrent state lies: the layer's part of its sequence's slot (conv state, then the heads'
// states); *ri goes from the previous row's index among its sequence's rows to row t's. NULL for a bad slot.
static float *row_state(const kv_store *kv, const model_batch *b, int t, size_t layer_off, int *ri) {
    *ri = t > 0 && b->seq[t - 1] == b->seq[t] ? *ri + 1 : 0;
    const int slot = row_slot(b, t);
    if (slot < 0 || slot >= kv->rs_slots) return NULL;
    return kv->rs + (size_t)slot * kv->rs_floats + layer_off;
}

// Where the state after row t is kept besides the slot, at the layer's offset plus off, n floats: a block's last
// position (prefix caching) and a speculation checkpoint.
static void keep_row_state(const kv_store *kv, const model_batch *b, int t, int ri, size_t off, const float *src,
                           size_t n) {
    const int bs = kv->block_size;
    if (kv->rs_blk && b->block_tables && (b->pos[t] + 1) % bs == 0) {
        const int32_t blk = b->block_tables[b->seq[t]][b->pos[t] / bs];
        if (blk >= 0 && blk < kv->n_blocks)
            memcpy(kv->rs_blk + (size_t)blk * kv->rs_floats + off, src, n * sizeof(float));
    }
    const int slot = row_slot(b, t);
    if (b->rs_ckpt && b->rs_ckpt[b->seq[t]] && kv->rs_ckpt && slot < kv->rs_ckpt_slots && ri < kv->rs_ckpt_n)
        memcpy(kv->rs_ckpt + ((size_t)slot * kv->rs_ckpt_n + ri) * kv->rs_floats + off, src, n * sizeof(float));
}

// The delta rule of a range of value heads over every row, in row order: each head's state stays in the core's
// caches for all the rows of a step, and heads are independent, so the pool's threads take a share of them.
typedef struct gdn_heads_job {
    const model *m;
    const kv_store *kv;
    const model_batch *b;
    const gdn_scratch *s;
    const float *dt, *a, *nw;
    size_t layer_off, conv_floats;
    int n;
} gdn_heads_job;

static void gdn_heads(void *arg, int ith, int nth) {
    const gdn_heads_job *j = arg;
    const model_hparams *hp = &j->m->hp;
    const int S = hp->ssm_state, hk = hp->ssm_groups, hv = hp->ssm_vheads;
    const int kd = S * hk, vd = S * hv, cd = 2 * kd + vd;
    const int h0 = hv * ith / nth, h1 = hv * (ith + 1) / nth;
    float d[1024]; // ssm_state <= 1024 (model_hybrid.c)
    for (int h = h0; h < h1; h++) {
        // value head h's key head, beta and alpha: grouped by key head (ssm_ba: r betas, then r alphas, for each
        // key head) or tiled (beta's hv, then alpha's hv)
        const int r = hv / hk, grp = hp->ssm_grouped;
        const int kh = grp ? h / r : h % hk, bi = grp ? (h / r) * 2 * r + h % r : h, ai = grp ? bi + r : hv + h;
        const size_t off = j->conv_floats + (size_t)h * S * S;
        for (int t = 0, ri = 0; t < j->n; t++) {
            float *cs = row_state(j->kv, j->b, t, j->layer_off, &ri);
            if (!cs) continue; // gdn_layer checked every slot
            const float *c = j->s->qkv + (size_t)t * cd;
            float *oh = j->s->o + (size_t)t * vd + (size_t)h * S;
            const float *bat = j->s->ba + (size_t)t * 2 * hv;
            const float beta = sigmoid(bat[bi]);
            const float g = softplus(bat[ai] + j->dt[h]) * j->a[h];
            cpu_delta_rule(cs + off, c + (size_t)kh * S, c + kd + (size_t)kh * S, c + 2 * kd + (size_t)h * S, g,
                           beta, d, oh, S);
            ops_rmsnorm(oh, oh, j->nw, S, hp->norm_eps);
            const float *zh = j->s->z + (size_t)t * vd + (size_t)h * S;
            for (int i = 0; i < S; i++)
                oh[i] *= silu(zh[i]);
            keep_row_state(j->kv, j->b, t, ri, j->layer_off + off, cs + off, (size_t)S * S);
        }
    }
}

int gdn_layer(cpu_pool *pool, void *mm_scratch, gdn_scratch *s, const model *m, int l, kv_store *kv,
              const model_batch *b, float *out, const float *x, int n) {
    const model_hparams *hp = &m->hp;
    const int S = hp->ssm_state, hk = hp->ssm_groups, hv = hp->ssm_vheads, K = hp->ssm_conv;
    const int kd = S * hk, vd = S * hv, cd = 2 * kd + vd;
    if (!kv->rs || l >= hp->n_layers) return TC_ERR_INVALID;
    int rc = project(pool, mm_scratch, s, m, l, x, n);
    if (rc) return rc;
    const float *conv_w = model_layer_w(m, l, ROLE_SSM_CONV)->data;
    const size_t conv_floats = (size_t)cd * (K - 1), layer_floats = conv_floats + (size_t)hv * S * S;
    const int rec_idx = l - (l + 1) / hp->full_attn_interval; // DeltaNet layers before l
    const size_t layer_off = (size_t)rec_idx * layer_floats;
    // the conv, row by row (a row's inputs shift its sequence's conv state), and q/k normed per head
    for (int t = 0, ri = 0; t < n; t++) {
        float *cs = row_state(kv, b, t, layer_off, &ri);
        if (!cs) return TC_ERR_INVALID;
        if (b->pos[t] == 0) memset(cs, 0, layer_floats * sizeof(float)); // the sequence starts
        float *c = s->qkv + (size_t)t * cd;
        conv_row(c, cs, conv_w, cd, K);
        for (int h = 0; h < hk; h++) {
            l2norm(c + (size_t)h * S, S, hp->norm_eps);
            l2norm(c + kd + (size_t)h * S, S, hp->norm_eps);
        }
        keep_row_state(kv, b, t, ri, layer_off, cs, conv_floats);
    }
    // the delta rule and the gated norm, heads over the pool's threads (every head's rows in order)
    gdn_heads_job j = {.m = m,
                       .kv = kv,
                       .b = b,
                       .s = s,
                       .dt = model_layer_w(m, l, ROLE_SSM_DT)->data,
                       .a = model_layer_w(m, l, ROLE_SSM_A)->data,
                       .nw = model_layer_w(m, l, ROLE_SSM_NORM)->data,
                       .layer_off = layer_off,
                       .conv_floats = conv_floats,
                       .n = n};
    cpu_pool_run(pool, gdn_heads, &j);
    return mm(pool, mm_scratch, out, hp->dim, s->o, n, model_layer_w(m, l, ROLE_SSM_OUT));
}
