// The operations of the shared layer sequence (model/fwd.h) on the device: each resolves the buffer names to
// the context's activations and the (layer, role) names to the uploaded weights, and queues its kernels on
// the context's stream (tcu_internal.cuh's launchers). The host drives them between tcu_step_begin and
// tcu_step_end (tcu_forward.cu), possibly into a CUDA graph being captured, so none of them synchronizes.
#include "cuda/tcu_internal.cuh"

static const float *vec(const tcu_dweight *w) { return (const float *)w->d; }

extern "C" int tcu_fwd_embed(void *be, fwd_buf dst, int n) {
    tcu_ctx *c = (tcu_ctx *)be;
    tcu_embed(c->stream, c->buf[dst], &c->m->tok_embd, c->db.tok, n, c->m->hp.embd_scale);
    return 0;
}

extern "C" int tcu_fwd_norm(void *be, fwd_buf dst, fwd_buf src, int rows, int len, int layer, arch_role w, float eps) {
    tcu_ctx *c = (tcu_ctx *)be;
    tcu_rmsnorm(c->stream, c->buf[dst], len, c->buf[src], len, NULL, rows, len, vec(tcu_w(c->m, layer, w)), eps);
    return 0;
}

extern "C" int tcu_fwd_matmul(void *be, const fwd_buf *outs, fwd_buf x, int n, int layer, const arch_role *ws,
                              int count) {
    tcu_ctx *c = (tcu_ctx *)be;
    for (int i = 0; i < count; i++) {
        const tcu_dweight *w = tcu_w(c->m, layer, ws[i]);
        tcu_matmul(c->stream, c->buf[outs[i]], (int)w->rows, c->buf[x], n, w);
    }
    return 0;
}

extern "C" int tcu_fwd_add_bias(void *be, fwd_buf x, int n, int len, int layer, arch_role b) {
    tcu_ctx *c = (tcu_ctx *)be;
    tcu_add_bias(c->stream, c->buf[x], vec(tcu_w(c->m, layer, b)), n, len);
    return 0;
}

extern "C" int tcu_fwd_rope(void *be, fwd_buf q, fwd_buf k, int n, int layer) {
    tcu_ctx *c = (tcu_ctx *)be;
    const tcu_model_desc *hp = &c->m->hp;
    (void)layer; // one RoPE base: sliding-window models are refused at upload
    tcu_rope(c->stream, c->buf[q], c->buf[k], c->db.pos, n, hp->n_heads, hp->n_kv_heads, hp->head_dim, hp->rope_dim,
             hp->rope_scale, c->m->inv_freq, hp->rope_neox);
    return 0;
}

extern "C" int tcu_fwd_attention(void *be, fwd_buf out, fwd_buf q, fwd_buf k, fwd_buf v, int n, int layer) {
    tcu_ctx *c = (tcu_ctx *)be;
    const tcu_model_desc *hp = &c->m->hp;
    const tcu_kv *kv = c->kv;
    const tcu_dev_batch *db = &c->db;
    __half *kc = kv->k + (size_t)layer * kv->layer_elems, *vc = kv->v + (size_t)layer * kv->layer_elems;
    tcu_store_kv(c->stream, kc, vc, c->buf[k], c->buf[v], db->tab, db->stride, db->seq, db->pos, n, hp->n_kv_heads,
                 hp->head_dim, kv->block_size);
    tcu_attention(c->stream, c->buf[out], c->buf[q], kc, vc, db->tab, db->stride, db->seq, db->pos, db->tiles,
                  db->n_tiles, hp->n_heads, hp->n_kv_heads, hp->head_dim, kv->block_size, hp->attn_scale, 0);
    return 0;
}

extern "C" int tcu_fwd_add(void *be, fwd_buf x, fwd_buf y, int count) {
    tcu_ctx *c = (tcu_ctx *)be;
    tcu_add(c->stream, c->buf[x], c->buf[y], count);
    return 0;
}

extern "C" int tcu_fwd_glu(void *be, fwd_buf g, fwd_buf u, int count, fwd_act act) {
    tcu_ctx *c = (tcu_ctx *)be;
    tcu_glu(c->stream, c->buf[g], c->buf[u], count, act == FWD_ACT_GELU_TANH);
    return 0;
}

// The logits rows of the residual stream, gathered and normed into dst (the embedding rows are tcu_step_end's:
// they stay out of a captured graph).
extern "C" int tcu_fwd_out_norm(void *be, fwd_buf dst, fwd_buf src, float eps) {
    tcu_ctx *c = (tcu_ctx *)be;
    const int dim = c->m->hp.dim, n_logits = c->b->n_logits;
    if (n_logits > 0)
        tcu_rmsnorm(c->stream, c->buf[dst], dim, c->buf[src], dim, c->db.lrows, n_logits, dim,
                    vec(&c->m->output_norm), eps);
    return 0;
}
