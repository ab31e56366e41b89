// The gated DeltaNet layer on the CPU (gdn.h): projections through the matmul kernels over all rows at once,
// then the conv and the delta rule row by row (each row depends on its sequence's previous one), in the order
// and precision of llama.cpp's CPU operations (ssm_conv: float sums over the taps in order; the fused
// gated_delta_net: decay, delta, rank-1 update, readout).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/delta_rule.h"
#include "cpu/ops.h"
#include "model/gdn.h"

struct gdn_scratch {
    float *qkv;  // (max_tokens, conv_dim) projections, then the conv's output in place
    float *z;    // (max_tokens, value_dim)
    float *beta; // (max_tokens, ssm_vheads)
    float *g;    // (max_tokens, ssm_vheads)
    float *o;    // (max_tokens, value_dim) the heads' outputs, normed and gated
    float *d;    // (ssm_state) delta of one head
};

void gdn_scratch_free(gdn_scratch *s) {
    if (!s) return;
    free(s->qkv), free(s->z), free(s->beta), free(s->g), free(s->o), free(s->d);
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
    s->beta = malloc(n * hp->ssm_vheads * sizeof(float));
    s->g = malloc(n * hp->ssm_vheads * sizeof(float));
    s->o = malloc(n * vd * sizeof(float));
    s->d = malloc((size_t)hp->ssm_state * sizeof(float));
    if (!s->qkv || !s->z || !s->beta || !s->g || !s->o || !s->d) {
        gdn_scratch_free(s);
        return tc_err_set(err, TC_ERR_NOMEM, "out of memory for the DeltaNet scratch");
    }
    *out = s;
    return 0;
}

static int mm(cpu_pool *pool, void *scratch, float *out, const float *x, int n, const model_weight *w) {
    cpu_matmul_args a = {.out = out,
                         .ld_out = (int)w->rows,
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

int gdn_layer(cpu_pool *pool, void *mm_scratch, gdn_scratch *s, const model *m, int l, kv_store *kv,
              const model_batch *b, float *out, const float *x, int n) {
    const model_hparams *hp = &m->hp;
    const int S = hp->ssm_state, hk = hp->ssm_groups, hv = hp->ssm_vheads, K = hp->ssm_conv;
    const int kd = S * hk, vd = S * hv, cd = 2 * kd + vd;
    if (!kv->rs || l >= hp->n_layers) return TC_ERR_INVALID;
    int rc;
    if ((rc = mm(pool, mm_scratch, s->qkv, x, n, model_layer_w(m, l, ROLE_SSM_QKV))) ||
        (rc = mm(pool, mm_scratch, s->z, x, n, model_layer_w(m, l, ROLE_SSM_GATE))) ||
        (rc = mm(pool, mm_scratch, s->beta, x, n, model_layer_w(m, l, ROLE_SSM_BETA))) ||
        (rc = mm(pool, mm_scratch, s->g, x, n, model_layer_w(m, l, ROLE_SSM_ALPHA))))
        return rc;
    const float *conv_w = model_layer_w(m, l, ROLE_SSM_CONV)->data,
                *dt = model_layer_w(m, l, ROLE_SSM_DT)->data;
    const float *a = model_layer_w(m, l, ROLE_SSM_A)->data, *nw = model_layer_w(m, l, ROLE_SSM_NORM)->data;
    const size_t conv_floats = (size_t)cd * (K - 1), layer_floats = conv_floats + (size_t)hv * S * S;
    const int rec_idx = l - (l + 1) / hp->full_attn_interval; // DeltaNet layers before l
    for (int t = 0, ri = 0; t < n; t++) {
        ri = t > 0 && b->seq[t - 1] == b->seq[t] ? ri + 1 : 0; // the row's index among its sequence's rows
        const int slot = b->rs_slots ? b->rs_slots[b->seq[t]] : b->seq[t];
        if (slot < 0 || slot >= kv->rs_slots) return TC_ERR_INVALID;
        float *cs = kv->rs + (size_t)slot * kv->rs_floats + (size_t)rec_idx * layer_floats,
              *ss = cs + conv_floats;
        if (b->pos[t] == 0) memset(cs, 0, layer_floats * sizeof(float)); // the sequence starts
        float *c = s->qkv + (size_t)t * cd, *o = s->o + (size_t)t * vd;
        conv_row(c, cs, conv_w, cd, K);
        for (int h = 0; h < hk; h++) {
            l2norm(c + (size_t)h * S, S, hp->norm_eps);
            l2norm(c + kd + (size_t)h * S, S, hp->norm_eps);
        }
        for (int h = 0; h < hv; h++) {
            const float beta = sigmoid(s->beta[(size_t)t * hv + h]);
            const float g = softplus(s->g[(size_t)t * hv + h] + dt[h]) * a[h];
            const int kh = h % hk;
            float *oh = o + (size_t)h * S;
            cpu_delta_rule(ss + (size_t)h * S * S, c + (size_t)kh * S, c + kd + (size_t)kh * S,
                       c + 2 * kd + (size_t)h * S, g, beta, s->d, oh, S);
            ops_rmsnorm(oh, oh, nw, S, hp->norm_eps);
            const float *zh = s->z + (size_t)t * vd + (size_t)h * S;
            for (int j = 0; j < S; j++)
                oh[j] *= silu(zh[j]);
        }
        const int bs = kv->block_size;
        if (kv->rs_blk && b->block_tables && (b->pos[t] + 1) % bs == 0) { // a block's last position: kept
            const int32_t blk = b->block_tables[b->seq[t]][b->pos[t] / bs];
            if (blk >= 0 && blk < kv->n_blocks)
                memcpy(kv->rs_blk + (size_t)blk * kv->rs_floats + (size_t)rec_idx * layer_floats, cs,
                       layer_floats * sizeof(float));
        }
        if (b->rs_ckpt && b->rs_ckpt[b->seq[t]] && kv->rs_ckpt && slot < kv->rs_ckpt_slots &&
            ri < kv->rs_ckpt_n) // the state after this row, kept
            memcpy(kv->rs_ckpt + ((size_t)slot * kv->rs_ckpt_n + ri) * kv->rs_floats +
                       (size_t)rec_idx * layer_floats,
                   cs, layer_floats * sizeof(float));
    }
    return mm(pool, mm_scratch, out, s->o, n, model_layer_w(m, l, ROLE_SSM_OUT));
}
