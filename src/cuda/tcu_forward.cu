// The forward pass on the device: src/model/forward.c's layer sequence over a ragged batch, every step's
// kernels queued on the context's stream; the host waits once, for the logits. The batch's integers (tokens,
// positions, sequences, logits/embedding rows, flattened block tables) go up in one copy from pinned memory.
#include <stdlib.h>
#include <string.h>

#include "cuda/tcu_internal.cuh"

// Grows the tables' part of the staging buffers (host pinned and device) to hold `need` entries. Allocates only
// when a batch's tables outgrow every earlier one.
static int grow_tables(tcu_ctx *c, size_t need, char *msg, size_t msg_cap) {
    if (need <= (size_t)c->table_cap) return 0;
    size_t cap = (size_t)c->table_cap;
    while (cap < need) cap *= 2;
    if (cap > (size_t)1 << 30) return tcu_fail(msg, msg_cap, TC_ERR_INVALID, "cuda: block tables too large");
    size_t n5 = TCU_NI * (size_t)c->max_tokens;
    int32_t *h = NULL, *d = NULL;
    TCU_TRY(cudaStreamSynchronize(c->stream), "sync");
    TCU_TRY(cudaHostAlloc((void **)&h, (n5 + cap) * sizeof(int32_t), cudaHostAllocDefault), "pinned tables");
    cudaError_t e = cudaMalloc((void **)&d, (n5 + cap) * sizeof(int32_t));
    if (e != cudaSuccess) {
        cudaFreeHost(h);
        return tcu_fail(msg, msg_cap, TC_ERR_NOMEM, "cuda: block tables: %s", cudaGetErrorString(e));
    }
    cudaFreeHost(c->h_ints), cudaFree(c->ints);
    c->h_ints = h, c->ints = d, c->table_cap = (int)cap;
    if (c->graph) cudaGraphExecDestroy(c->graph), c->graph = NULL; // it reads the old buffer
    return 0;
}

// Stages the batch's integers; returns the tables' row stride (entries per sequence) or a negative code, and the
// number of attention tiles in *n_tiles.
static int stage_batch(tcu_ctx *c, const tcu_batch *b, int block_size, int *n_tiles, char *msg, size_t msg_cap) {
    int stride = tcu_tables_stride(b->pos, b->n_tokens, block_size);
    if (c->graphs) // a power of two: a captured step stays valid while sequences grow
        for (int p2 = 1;; p2 *= 2)
            if (p2 >= stride) {
                stride = p2;
                break;
            }
    int rc = grow_tables(c, (size_t)b->n_seqs * stride, msg, msg_cap);
    if (rc) return rc;
    const size_t n = (size_t)c->max_tokens;
    int32_t *h = c->h_ints;
    memcpy(h, b->tokens, (size_t)b->n_tokens * sizeof(int32_t));
    memcpy(h + n, b->pos, (size_t)b->n_tokens * sizeof(int32_t));
    memcpy(h + 2 * n, b->seq, (size_t)b->n_tokens * sizeof(int32_t));
    if (b->n_logits) memcpy(h + 3 * n, b->logits_rows, (size_t)b->n_logits * sizeof(int32_t));
    if (b->n_embd) memcpy(h + 4 * n, b->embd_rows, (size_t)b->n_embd * sizeof(int32_t));
    *n_tiles = tcu_attn_tiles(h + 5 * n, b->pos, b->seq, b->n_tokens);
    tcu_stage_tables(h + TCU_NI * n, stride, b->block_tables, b->n_seqs, b->pos, b->seq, b->n_tokens, block_size);
    size_t total = TCU_NI * n + (size_t)b->n_seqs * stride;
    TCU_TRY(cudaMemcpyAsync(c->ints, h, total * sizeof(int32_t), cudaMemcpyHostToDevice, c->stream), "batch upload");
    return stride;
}

static const float *vec(const tcu_dweight *w) { return (const float *)w->d; }

// The batch's device integers (tcu_ctx.ints): tokens, positions, sequences, logits rows, attention tiles, tables.
typedef struct dev_batch {
    const int32_t *tok, *pos, *seq, *lrows, *tiles, *tab;
    int n_tiles, stride;
} dev_batch;

static void layer(tcu_ctx *c, tcu_kv *kv, int l, int n, const dev_batch *db) {
    const tcu_model *m = c->m;
    const tcu_model_desc *hp = &m->hp;
    const tcu_dlayer *L = &m->layers[l];
    const int dim = hp->dim, hd = hp->head_dim, q_dim = hp->n_heads * hd, kv_dim = hp->n_kv_heads * hd, ffn = hp->ffn_dim;
    cudaStream_t s = c->stream;
    tcu_rmsnorm(s, c->xb, dim, c->x, dim, NULL, n, dim, vec(&L->attn_norm), hp->norm_eps);
    tcu_matmul(s, c->q, q_dim, c->xb, n, &L->wq);
    tcu_matmul(s, c->k, kv_dim, c->xb, n, &L->wk);
    tcu_matmul(s, c->v, kv_dim, c->xb, n, &L->wv);
    if (L->bq.d) tcu_add_bias(s, c->q, vec(&L->bq), n, q_dim);
    if (L->bk.d) tcu_add_bias(s, c->k, vec(&L->bk), n, kv_dim);
    if (L->bv.d) tcu_add_bias(s, c->v, vec(&L->bv), n, kv_dim);
    if (L->q_norm.d) tcu_rmsnorm(s, c->q, hd, c->q, hd, NULL, n * hp->n_heads, hd, vec(&L->q_norm), hp->norm_eps);
    if (L->k_norm.d) tcu_rmsnorm(s, c->k, hd, c->k, hd, NULL, n * hp->n_kv_heads, hd, vec(&L->k_norm), hp->norm_eps);
    tcu_rope(s, c->q, c->k, db->pos, n, hp->n_heads, hp->n_kv_heads, hd, hp->rope_dim, hp->rope_scale, m->inv_freq,
             hp->rope_neox);
    __half *kc = kv->k + (size_t)l * kv->layer_elems, *vc = kv->v + (size_t)l * kv->layer_elems;
    tcu_store_kv(s, kc, vc, c->k, c->v, db->tab, db->stride, db->seq, db->pos, n, hp->n_kv_heads, hd, kv->block_size);
    tcu_attention(s, c->xb, c->q, kc, vc, db->tab, db->stride, db->seq, db->pos, db->tiles, db->n_tiles, hp->n_heads,
                  hp->n_kv_heads, hd, kv->block_size, hp->attn_scale, 0);
    tcu_matmul(s, c->q, dim, c->xb, n, &L->wo);
    if (L->attn_post_norm.d) tcu_rmsnorm(s, c->q, dim, c->q, dim, NULL, n, dim, vec(&L->attn_post_norm), hp->norm_eps);
    tcu_add(s, c->x, c->q, (int64_t)n * dim);
    tcu_rmsnorm(s, c->xb, dim, c->x, dim, NULL, n, dim, vec(&L->ffn_norm), hp->norm_eps);
    tcu_matmul(s, c->hb, ffn, c->xb, n, &L->gate);
    tcu_matmul(s, c->hb2, ffn, c->xb, n, &L->up);
    tcu_glu(s, c->hb, c->hb2, (int64_t)n * ffn, hp->ffn_gelu);
    tcu_matmul(s, c->q, dim, c->hb, n, &L->down);
    if (L->ffn_post_norm.d) tcu_rmsnorm(s, c->q, dim, c->q, dim, NULL, n, dim, vec(&L->ffn_post_norm), hp->norm_eps);
    tcu_add(s, c->x, c->q, (int64_t)n * dim);
}

// Everything from the embedding to the final norm of the logits rows (into xb), queued on the stream.
static void body(tcu_ctx *c, tcu_kv *kv, int n, int n_layers, int n_logits, const dev_batch *db) {
    const tcu_model *m = c->m;
    const int dim = m->hp.dim;
    tcu_embed(c->stream, c->x, &m->tok_embd, db->tok, n, m->hp.embd_scale);
    for (int l = 0; l < n_layers; l++) layer(c, kv, l, n, db);
    if (n_logits > 0)
        tcu_rmsnorm(c->stream, c->xb, dim, c->x, dim, db->lrows, n_logits, dim, vec(&m->output_norm), m->hp.norm_eps);
}

// body() as a CUDA graph: replays the captured one when the step has its shape, else captures it again. Returns 0
// (nothing queued; the caller runs body() itself) when capture fails, which turns graphs off for this context.
static int run_graph(tcu_ctx *c, tcu_kv *kv, int n, int n_layers, int n_logits, const dev_batch *db) {
    // every argument of every launch that can change between steps (the activations are the context's own)
    const long long key[TCU_GRAPH_KEY] = {n, db->n_tiles, db->stride, n_layers, n_logits, (long long)(uintptr_t)kv->k,
                                          (long long)(uintptr_t)kv->v, kv->block_size, (long long)kv->layer_elems};
    if (!c->graph || memcmp(key, c->graph_key, sizeof key)) {
        if (c->graph) cudaGraphExecDestroy(c->graph), c->graph = NULL;
        cudaGraph_t g = NULL;
        cudaError_t e = cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal);
        if (e == cudaSuccess) {
            body(c, kv, n, n_layers, n_logits, db);
            e = cudaStreamEndCapture(c->stream, &g);
        }
        if (e == cudaSuccess) e = cudaGraphInstantiate(&c->graph, g, 0);
        if (g) cudaGraphDestroy(g);
        if (e != cudaSuccess) {
            (void)cudaGetLastError(); // clear it: the step runs without a graph
            c->graph = NULL, c->graphs = 0;
            return 0;
        }
        memcpy(c->graph_key, key, sizeof key);
    }
    if (cudaGraphLaunch(c->graph, c->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        cudaGraphExecDestroy(c->graph);
        c->graph = NULL, c->graphs = 0;
        return 0;
    }
    return 1;
}

// Output head over n normed rows already in c->xb: tiles of TCU_LOGIT_TILE rows through the device logits
// buffer, each copied out through pinned memory (and argmax'd on the device when asked).
static int head(tcu_ctx *c, int n, float *logits, int32_t *argmax, char *msg, size_t msg_cap) {
    const tcu_model *m = c->m;
    const int dim = m->hp.dim, nv = m->hp.n_vocab;
    for (int r0 = 0; r0 < n; r0 += TCU_LOGIT_TILE) {
        int rows = n - r0 < TCU_LOGIT_TILE ? n - r0 : TCU_LOGIT_TILE;
        tcu_matmul(c->stream, c->logits, nv, c->xb + (size_t)r0 * dim, rows, &m->output);
        if (argmax) {
            tcu_argmax_rows(c->stream, c->argmax, c->logits, rows, nv);
            TCU_TRY(cudaMemcpyAsync(c->h_argmax, c->argmax, rows * sizeof(int32_t), cudaMemcpyDeviceToHost, c->stream),
                    "argmax download");
        }
        if (logits)
            TCU_TRY(cudaMemcpyAsync(c->h_logits, c->logits, (size_t)rows * nv * sizeof(float), cudaMemcpyDeviceToHost,
                                    c->stream), "logits download");
        TCU_TRY(cudaStreamSynchronize(c->stream), "forward");
        TCU_TRY(cudaGetLastError(), "kernel launch");
        if (logits) memcpy(logits + (size_t)r0 * nv, c->h_logits, (size_t)rows * nv * sizeof(float));
        if (argmax) memcpy(argmax + r0, c->h_argmax, rows * sizeof(int32_t));
    }
    return 0;
}

extern "C" int tcu_forward(tcu_ctx *c, tcu_kv *kv, const tcu_batch *b, int n_layers, float *logits, int32_t *argmax,
                           char *msg, size_t msg_cap) {
    const tcu_model *m = c->m;
    const tcu_model_desc *hp = &m->hp;
    const int n = b->n_tokens, dim = hp->dim;
    if (n <= 0 || n > c->max_tokens || n_layers < 1 || n_layers > hp->n_layers || kv->m != m)
        return tcu_fail(msg, msg_cap, TC_ERR_INVALID, "cuda: batch of %d tokens (max %d), %d layers", n, c->max_tokens,
                        n_layers);
    int n_tiles = 0, stride = stage_batch(c, b, kv->block_size, &n_tiles, msg, msg_cap);
    if (stride < 0) return stride;
    const size_t nn = (size_t)c->max_tokens;
    const int32_t *d_erows = c->ints + 4 * nn;
    const dev_batch db = {.tok = c->ints, .pos = c->ints + nn, .seq = c->ints + 2 * nn, .lrows = c->ints + 3 * nn,
                          .tiles = c->ints + 5 * nn, .tab = c->ints + TCU_NI * nn, .n_tiles = n_tiles, .stride = stride};
    if (!(c->graphs && b->n_embd == 0 && n <= TCU_GRAPH_MAX_TOKENS && run_graph(c, kv, n, n_layers, b->n_logits, &db)))
        body(c, kv, n, n_layers, b->n_logits, &db);
    if (b->n_embd > 0) { // into q (free after the layers): xb holds the logits rows' normed states
        tcu_rmsnorm(c->stream, c->q, dim, c->x, dim, d_erows, b->n_embd, dim, vec(&m->output_norm), hp->norm_eps);
        TCU_TRY(cudaMemcpyAsync(c->h_rows, c->q, (size_t)b->n_embd * dim * sizeof(float), cudaMemcpyDeviceToHost,
                                c->stream), "embedding download");
        TCU_TRY(cudaStreamSynchronize(c->stream), "forward");
        memcpy(b->embd, c->h_rows, (size_t)b->n_embd * dim * sizeof(float));
    }
    if (b->n_logits == 0) {
        TCU_TRY(cudaStreamSynchronize(c->stream), "forward");
        TCU_TRY(cudaGetLastError(), "kernel launch");
        return 0;
    }
    return head(c, b->n_logits, logits, argmax, msg, msg_cap);
}

extern "C" int tcu_logits_rows(tcu_ctx *c, const float *normed, int n, float *logits, char *msg, size_t msg_cap) {
    const int dim = c->m->hp.dim;
    if (n < 0 || n > c->max_tokens) return tcu_fail(msg, msg_cap, TC_ERR_INVALID, "%d rows (max %d)", n, c->max_tokens);
    if (n == 0) return 0;
    memcpy(c->h_rows, normed, (size_t)n * dim * sizeof(float));
    TCU_TRY(cudaMemcpyAsync(c->xb, c->h_rows, (size_t)n * dim * sizeof(float), cudaMemcpyHostToDevice, c->stream),
            "rows upload");
    return head(c, n, logits, NULL, msg, msg_cap);
}
