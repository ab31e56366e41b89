// The layer sequences of the architectures (fwd.h), written once for every backend, and the driver that runs
// them. Nothing here touches memory: each step is a call to the backend's operation.
#include "model/fwd.h"

#include "model/model_internal.h"

size_t fwd_buf_floats(const struct model_hparams *hp, fwd_buf b) {
    const size_t q_dim = (size_t)hp->n_heads * hp->head_dim, kv_dim = (size_t)hp->n_kv_heads * hp->head_dim;
    const size_t wide = q_dim > (size_t)hp->dim ? q_dim : (size_t)hp->dim;
    switch (b) {
    case FWD_X: return (size_t)hp->dim;
    case FWD_XB:
    case FWD_Q: return wide;
    case FWD_K:
    case FWD_V: return kv_dim;
    case FWD_HB:
    case FWD_HB2: {
        const size_t gq = hp->attn_gated ? (b == FWD_HB ? 2 * q_dim : q_dim) : 0;
        return gq > (size_t)hp->ffn_dim ? gq : (size_t)hp->ffn_dim;
    }
    case FWD_BUF_COUNT: break;
    }
    return 0;
}

int fwd_embed(const fwd_graph *g) { return g->ops->embed(g->be, FWD_X, g->n); }

int fwd_layers(const fwd_graph *g, int l0, int l1, int *failed_layer) {
    for (int l = l0; l < l1; l++) {
        int rc = g->m->arch->layer(g, l);
        if (rc) {
            *failed_layer = l;
            return rc;
        }
    }
    return 0;
}

int fwd_out_norm(const fwd_graph *g) { return g->ops->out_norm(g->be, FWD_XB, FWD_X, g->m->hp.norm_eps); }

static int has(const fwd_graph *g, int l, arch_role r) { return model_layer_w(g->m, l, r)->data != NULL; }

#define TRY(call)                                                                                            \
    do {                                                                                                     \
        int rc_ = (call);                                                                                    \
        if (rc_) return rc_;                                                                                 \
    } while (0)

// The residual add of a block's output y (n rows of dim) into FWD_X, times Granite's multiplier where the
// model has one.
static int residual(const fwd_graph *g, fwd_buf y) {
    const model_hparams *hp = &g->m->hp;
    const int count = g->n * hp->dim;
    if (hp->residual_scale > 0) {
        if (!g->ops->scale) return TC_ERR_UNSUPPORTED;
        TRY(g->ops->scale(g->be, y, count, hp->residual_scale));
    }
    return g->ops->add(g->be, FWD_X, y, count);
}

// The attention half of the pre-norm block: RMSNorm, q/k/v (optional biases and q/k norms), RoPE, attention
// (with the layer's sinks where it has them: the backend's attention reads them), output projection (optional
// bias, optional post-norm), residual add into FWD_X.
static int attn_block(const fwd_graph *g, int l) {
    const fwd_ops *o = g->ops;
    void *be = g->be;
    const model_hparams *hp = &g->m->hp;
    const int n = g->n, dim = hp->dim, hd = hp->head_dim;
    const int q_dim = hp->n_heads * hd, kv_dim = hp->n_kv_heads * hd;
    const float eps = hp->norm_eps;
    static const fwd_buf qkv[3] = {FWD_Q, FWD_K, FWD_V}, proj[1] = {FWD_Q};
    static const arch_role w_qkv[3] = {ROLE_ATTN_Q, ROLE_ATTN_K, ROLE_ATTN_V}, w_out[1] = {ROLE_ATTN_OUT};
    TRY(o->norm(be, FWD_XB, FWD_X, n, dim, l, ROLE_ATTN_NORM, eps));
    TRY(o->matmul(be, qkv, FWD_XB, n, l, w_qkv, 3));
    if (has(g, l, ROLE_ATTN_Q_BIAS)) TRY(o->add_bias(be, FWD_Q, n, q_dim, l, ROLE_ATTN_Q_BIAS));
    if (has(g, l, ROLE_ATTN_K_BIAS)) TRY(o->add_bias(be, FWD_K, n, kv_dim, l, ROLE_ATTN_K_BIAS));
    if (has(g, l, ROLE_ATTN_V_BIAS)) TRY(o->add_bias(be, FWD_V, n, kv_dim, l, ROLE_ATTN_V_BIAS));
    if (has(g, l, ROLE_ATTN_Q_NORM)) TRY(o->norm(be, FWD_Q, FWD_Q, n * hp->n_heads, hd, l, ROLE_ATTN_Q_NORM, eps));
    if (has(g, l, ROLE_ATTN_K_NORM)) TRY(o->norm(be, FWD_K, FWD_K, n * hp->n_kv_heads, hd, l, ROLE_ATTN_K_NORM, eps));
    if (model_layer_has_rope(hp, l)) TRY(o->rope(be, FWD_Q, FWD_K, n, l));
    TRY(o->attention(be, FWD_XB, FWD_Q, FWD_K, FWD_V, n, l));
    TRY(o->matmul(be, proj, FWD_XB, n, l, w_out, 1));
    if (has(g, l, ROLE_ATTN_OUT_BIAS)) TRY(o->add_bias(be, FWD_Q, n, dim, l, ROLE_ATTN_OUT_BIAS));
    if (has(g, l, ROLE_ATTN_POST_NORM)) TRY(o->norm(be, FWD_Q, FWD_Q, n, dim, l, ROLE_ATTN_POST_NORM, eps));
    return residual(g, FWD_Q);
}

int fwd_layer_std(const fwd_graph *g, int l) {
    const fwd_ops *o = g->ops;
    void *be = g->be;
    const model_hparams *hp = &g->m->hp;
    const int n = g->n, dim = hp->dim, ffn = hp->ffn_dim;
    const float eps = hp->norm_eps;
    static const fwd_buf gate_up[2] = {FWD_HB, FWD_HB2}, proj[1] = {FWD_Q};
    static const arch_role w_gate_up[2] = {ROLE_FFN_GATE, ROLE_FFN_UP}, w_down[1] = {ROLE_FFN_DOWN};
    TRY(attn_block(g, l));
    // feed-forward block
    TRY(o->norm(be, FWD_XB, FWD_X, n, dim, l, ROLE_FFN_NORM, eps));
    TRY(o->matmul(be, gate_up, FWD_XB, n, l, w_gate_up, 2));
    TRY(o->glu(be, FWD_HB, FWD_HB2, n * ffn, hp->ffn_gelu ? FWD_ACT_GELU_TANH : FWD_ACT_SILU));
    TRY(o->matmul(be, proj, FWD_HB, n, l, w_down, 1));
    if (has(g, l, ROLE_FFN_POST_NORM)) TRY(o->norm(be, FWD_Q, FWD_Q, n, dim, l, ROLE_FFN_POST_NORM, eps));
    return residual(g, FWD_Q);
}

int fwd_layer_post(const fwd_graph *g, int l) {
    const fwd_ops *o = g->ops;
    void *be = g->be;
    const model_hparams *hp = &g->m->hp;
    const int n = g->n, dim = hp->dim, q_dim = hp->n_heads * hp->head_dim;
    const int kv_dim = hp->n_kv_heads * hp->head_dim;
    const float eps = hp->norm_eps;
    static const fwd_buf qkv[3] = {FWD_Q, FWD_K, FWD_V}, proj[1] = {FWD_Q}, gate_up[2] = {FWD_HB, FWD_HB2};
    static const arch_role w_qkv[3] = {ROLE_ATTN_Q, ROLE_ATTN_K, ROLE_ATTN_V}, w_out[1] = {ROLE_ATTN_OUT};
    static const arch_role w_gate_up[2] = {ROLE_FFN_GATE, ROLE_FFN_UP}, w_down[1] = {ROLE_FFN_DOWN};
    TRY(o->matmul(be, qkv, FWD_X, n, l, w_qkv, 3));
    TRY(o->norm(be, FWD_Q, FWD_Q, n, q_dim, l, ROLE_ATTN_Q_NORM, eps));
    TRY(o->norm(be, FWD_K, FWD_K, n, kv_dim, l, ROLE_ATTN_K_NORM, eps));
    if (model_layer_has_rope(hp, l)) TRY(o->rope(be, FWD_Q, FWD_K, n, l));
    TRY(o->attention(be, FWD_XB, FWD_Q, FWD_K, FWD_V, n, l));
    TRY(o->matmul(be, proj, FWD_XB, n, l, w_out, 1));
    TRY(o->norm(be, FWD_Q, FWD_Q, n, dim, l, ROLE_ATTN_POST_NORM, eps));
    TRY(residual(g, FWD_Q));
    TRY(o->matmul(be, gate_up, FWD_X, n, l, w_gate_up, 2));
    TRY(o->glu(be, FWD_HB, FWD_HB2, n * hp->ffn_dim, FWD_ACT_SILU));
    TRY(o->matmul(be, proj, FWD_HB, n, l, w_down, 1));
    TRY(o->norm(be, FWD_Q, FWD_Q, n, dim, l, ROLE_FFN_POST_NORM, eps));
    return residual(g, FWD_Q);
}

// The mixture-of-experts FFN: the norm, the routed (and shared) experts, the residual add into FWD_X.
static int ffn_moe(const fwd_graph *g, int l, arch_role norm) {
    const fwd_ops *o = g->ops;
    const model_hparams *hp = &g->m->hp;
    if (!o->moe) return TC_ERR_UNSUPPORTED;
    TRY(o->norm(g->be, FWD_XB, FWD_X, g->n, hp->dim, l, norm, hp->norm_eps));
    TRY(o->moe(g->be, FWD_Q, FWD_XB, g->n, l));
    return residual(g, FWD_Q);
}

int fwd_layer_moe(const fwd_graph *g, int l) {
    if (!g->ops->moe) return TC_ERR_UNSUPPORTED;
    TRY(attn_block(g, l));
    // gpt-oss's converter names the pre-FFN norm post_attention_norm (ROLE_FFN_NORM_PA)
    return ffn_moe(g, l, has(g, l, ROLE_FFN_NORM) ? ROLE_FFN_NORM : ROLE_FFN_NORM_PA);
}

// The FFN half of the hybrid block: RMSNorm (post_attention_norm), SwiGLU, residual add into FWD_X.
static int ffn_swiglu(const fwd_graph *g, int l, arch_role norm) {
    const fwd_ops *o = g->ops;
    void *be = g->be;
    const model_hparams *hp = &g->m->hp;
    const int n = g->n, dim = hp->dim;
    static const fwd_buf gate_up[2] = {FWD_HB, FWD_HB2}, proj[1] = {FWD_Q};
    static const arch_role w_gate_up[2] = {ROLE_FFN_GATE, ROLE_FFN_UP}, w_down[1] = {ROLE_FFN_DOWN};
    TRY(o->norm(be, FWD_XB, FWD_X, n, dim, l, norm, hp->norm_eps));
    TRY(o->matmul(be, gate_up, FWD_XB, n, l, w_gate_up, 2));
    TRY(o->glu(be, FWD_HB, FWD_HB2, n * hp->ffn_dim, FWD_ACT_SILU));
    TRY(o->matmul(be, proj, FWD_HB, n, l, w_down, 1));
    return residual(g, FWD_Q);
}

// Qwen3.5's gated attention into FWD_Q (n, dim) from the normed input in FWD_XB: the q projection's rows are each
// head's q and its gate; q and k RMSNormed per head, rotated, attention, times sigmoid(gate), output projection.
static int gated_attn(const fwd_graph *g, int l) {
    const fwd_ops *o = g->ops;
    void *be = g->be;
    const model_hparams *hp = &g->m->hp;
    const int n = g->n, hd = hp->head_dim;
    static const fwd_buf qkv[3] = {FWD_HB, FWD_K, FWD_V}, proj[1] = {FWD_Q};
    static const arch_role w_qkv[3] = {ROLE_ATTN_Q, ROLE_ATTN_K, ROLE_ATTN_V}, w_out[1] = {ROLE_ATTN_OUT};
    TRY(o->matmul(be, qkv, FWD_XB, n, l, w_qkv, 3));
    TRY(o->gate_split(be, FWD_Q, FWD_HB2, FWD_HB, n));
    TRY(o->norm(be, FWD_Q, FWD_Q, n * hp->n_heads, hd, l, ROLE_ATTN_Q_NORM, hp->norm_eps));
    TRY(o->norm(be, FWD_K, FWD_K, n * hp->n_kv_heads, hd, l, ROLE_ATTN_K_NORM, hp->norm_eps));
    TRY(o->rope(be, FWD_Q, FWD_K, n, l));
    TRY(o->attention(be, FWD_XB, FWD_Q, FWD_K, FWD_V, n, l));
    TRY(o->mul_sigmoid(be, FWD_XB, FWD_HB2, n * hp->n_heads * hd));
    TRY(o->matmul(be, proj, FWD_XB, n, l, w_out, 1));
    return 0;
}

int fwd_layer_hybrid(const fwd_graph *g, int l) {
    const fwd_ops *o = g->ops;
    const model_hparams *hp = &g->m->hp;
    if (!o->gdn || !o->gate_split || !o->mul_sigmoid) return TC_ERR_UNSUPPORTED;
    TRY(o->norm(g->be, FWD_XB, FWD_X, g->n, hp->dim, l, ROLE_ATTN_NORM, hp->norm_eps));
    if (model_layer_is_recurrent(hp, l)) TRY(o->gdn(g->be, FWD_Q, FWD_XB, g->n, l));
    else TRY(gated_attn(g, l));
    TRY(residual(g, FWD_Q));
    return has(g, l, ROLE_FFN_GATE_INP) ? ffn_moe(g, l, ROLE_FFN_NORM_PA) : ffn_swiglu(g, l, ROLE_FFN_NORM_PA);
}
