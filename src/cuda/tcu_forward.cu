// A step on the device: staging the ragged batch, the CUDA graph of its kernels, and the output head. The layer
// sequence itself is model/fwd.c's, run by the host through the operations of tcu_fwd.cu between
// tcu_step_begin and tcu_step_end; every kernel is queued on the context's stream and the host waits once, for
// the logits. The batch's integers (tokens, positions, sequences, logits/embedding rows, flattened block
// tables) go up in one copy from pinned memory.
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

// Replays the graph captured for this step's shape and returns 1; or, when there is none (or another shape),
// begins a capture of the operations the caller queues next (closed in tcu_step_end) and returns 0.
static int graph_begin(tcu_ctx *c, tcu_kv *kv, int n, int n_layers, int n_logits) {
    // every argument of every launch that can change between steps (the activations are the context's own)
    const long long key[TCU_GRAPH_KEY] = {n, c->db.n_tiles, c->db.stride, n_layers, n_logits,
                                          (long long)(uintptr_t)kv->k, (long long)(uintptr_t)kv->v, kv->block_size,
                                          (long long)kv->layer_elems};
    if (c->graph && !memcmp(key, c->graph_key, sizeof key)) {
        if (cudaGraphLaunch(c->graph, c->stream) == cudaSuccess) return 1;
        (void)cudaGetLastError(); // the step runs without a graph from now on
        cudaGraphExecDestroy(c->graph);
        c->graph = NULL, c->graphs = 0;
        return 0;
    }
    if (c->graph) cudaGraphExecDestroy(c->graph), c->graph = NULL;
    if (cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        (void)cudaGetLastError();
        c->graphs = 0;
        return 0;
    }
    memcpy(c->graph_key, key, sizeof key);
    c->capturing = 1;
    return 0;
}

// Closes the capture and launches it: 0, or TCU_REQUEUE when capture failed (graphs are then off for c and
// nothing of the step has run).
static int graph_end(tcu_ctx *c) {
    c->capturing = 0;
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(c->stream, &g);
    if (e == cudaSuccess) e = cudaGraphInstantiate(&c->graph, g, 0);
    if (g) cudaGraphDestroy(g);
    if (e == cudaSuccess && cudaGraphLaunch(c->graph, c->stream) == cudaSuccess) return 0;
    (void)cudaGetLastError(); // clear it: the step runs without a graph
    if (c->graph) cudaGraphExecDestroy(c->graph);
    c->graph = NULL, c->graphs = 0;
    return TCU_REQUEUE;
}

// Output head over n normed rows already in FWD_XB: tiles of TCU_LOGIT_TILE rows through the device logits
// buffer, each copied out through pinned memory (and argmax'd on the device when asked).
static int head(tcu_ctx *c, int n, float *logits, int32_t *argmax, char *msg, size_t msg_cap) {
    const tcu_model *m = c->m;
    const int dim = m->hp.dim, nv = m->hp.n_vocab;
    for (int r0 = 0; r0 < n; r0 += TCU_LOGIT_TILE) {
        int rows = n - r0 < TCU_LOGIT_TILE ? n - r0 : TCU_LOGIT_TILE;
        tcu_matmul(c->stream, c->logits, nv, c->buf[FWD_XB] + (size_t)r0 * dim, rows, &m->output);
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

extern "C" int tcu_step_begin(tcu_ctx *c, tcu_kv *kv, const tcu_batch *b, int n_layers, int *queue, char *msg,
                               size_t msg_cap) {
    const tcu_model *m = c->m;
    const int n = b->n_tokens;
    *queue = 1;
    if (n <= 0 || n > c->max_tokens || n_layers < 1 || n_layers > m->hp.n_layers || kv->m != m)
        return tcu_fail(msg, msg_cap, TC_ERR_INVALID, "cuda: batch of %d tokens (max %d), %d layers", n, c->max_tokens,
                        n_layers);
    int n_tiles = 0, stride = stage_batch(c, b, kv->block_size, &n_tiles, msg, msg_cap);
    if (stride < 0) return stride;
    const size_t nn = (size_t)c->max_tokens;
    const tcu_dev_batch db = {.tok = c->ints, .pos = c->ints + nn, .seq = c->ints + 2 * nn, .lrows = c->ints + 3 * nn,
                              .erows = c->ints + 4 * nn, .tiles = c->ints + 5 * nn, .tab = c->ints + TCU_NI * nn,
                              .n_tiles = n_tiles, .stride = stride};
    c->db = db;
    c->kv = kv, c->b = b, c->n_tokens = n, c->n_layers = n_layers, c->capturing = 0;
    if (c->graphs && b->n_embd == 0 && n <= TCU_GRAPH_MAX_TOKENS && graph_begin(c, kv, n, n_layers, b->n_logits))
        *queue = 0;
    return 0;
}

extern "C" int tcu_step_end(tcu_ctx *c, float *logits, int32_t *argmax, char *msg, size_t msg_cap) {
    const tcu_model *m = c->m;
    const tcu_batch *b = c->b;
    const int dim = m->hp.dim;
    if (c->capturing && graph_end(c)) return TCU_REQUEUE;
    if (b->n_embd > 0) { // into q (free after the layers): xb holds the logits rows' normed states
        float *e = c->buf[FWD_Q];
        tcu_rmsnorm(c->stream, e, dim, c->buf[FWD_X], dim, c->db.erows, b->n_embd, dim, (const float *)m->output_norm.d,
                    m->hp.norm_eps);
        TCU_TRY(cudaMemcpyAsync(c->h_rows, e, (size_t)b->n_embd * dim * sizeof(float), cudaMemcpyDeviceToHost,
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
    TCU_TRY(cudaMemcpyAsync(c->buf[FWD_XB], c->h_rows, (size_t)n * dim * sizeof(float), cudaMemcpyHostToDevice, c->stream),
            "rows upload");
    return head(c, n, logits, NULL, msg, msg_cap);
}
