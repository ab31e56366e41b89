// Device objects: the device check, the weight upload (quant blocks as they are in the file), the paged KV
// pool and the per-runner context (its stream, activations and pinned staging buffers).
#include <stdlib.h>
#include <string.h>

#include "cuda/tcu_internal.cuh"

extern "C" int tcu_device_check(char *msg, size_t msg_cap) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
        return tcu_fail(msg, msg_cap, TC_ERR_UNSUPPORTED, "--device cuda: no CUDA device (%s)",
                        e != cudaSuccess ? cudaGetErrorString(e) : "the driver lists none");
    if ((e = cudaSetDevice(0)) != cudaSuccess)
        return tcu_fail(msg, msg_cap, TC_ERR_UNSUPPORTED, "--device cuda: cannot use device 0: %s", cudaGetErrorString(e));
    return 0;
}

extern "C" size_t tcu_mem_free(void) {
    size_t free_b = 0, total = 0;
    return cudaMemGetInfo(&free_b, &total) == cudaSuccess ? free_b : 0;
}

// --- weights

static int upload(tcu_model *m, const tcu_weight *w, tcu_dweight *out, const char *what, char *msg, size_t msg_cap) {
    memset(out, 0, sizeof *out);
    if (!w->host) return 0;
    out->type = w->type, out->rows = w->rows, out->cols = w->cols, out->row_bytes = w->row_bytes;
    for (int i = 0; i < m->n_allocs; i++) // the same host tensor twice (a tied output): one copy
        if (m->alloc_src[i] == w->host) {
            out->d = (const uint8_t *)m->allocs[i];
            return 0;
        }
    if (!tcu_type_ok(w->type, w->cols))
        return tcu_fail(msg, msg_cap, TC_ERR_UNSUPPORTED, "--device cuda: %s has type %d with %lld columns, which the "
                        "CUDA backend does not read (Q4_0, Q4_1, Q8_0, Q4_K, Q6_K, F16, BF16, F32)", what, w->type,
                        (long long)w->cols);
    if (m->n_allocs == TCU_MAX_ALLOCS) return tcu_fail(msg, msg_cap, TC_ERR_UNSUPPORTED, "cuda: too many tensors");
    size_t bytes = w->row_bytes * (size_t)w->rows;
    void *d = NULL;
    TCU_TRY(cudaMalloc(&d, bytes), what);
    m->allocs[m->n_allocs] = d, m->alloc_src[m->n_allocs] = w->host, m->n_allocs++;
    TCU_TRY(cudaMemcpy(d, w->host, bytes, cudaMemcpyHostToDevice), what);
    out->d = (const uint8_t *)d;
    return 0;
}

extern "C" int tcu_model_new(const tcu_model_desc *d, tcu_model **out, char *msg, size_t msg_cap) {
    *out = NULL;
    int rc = tcu_device_check(msg, msg_cap);
    if (rc) return rc;
    if (d->head_dim > 32 * 8 || d->n_kv_heads <= 0 || d->n_heads % d->n_kv_heads)
        return tcu_fail(msg, msg_cap, TC_ERR_UNSUPPORTED, "--device cuda: head dim %d (max 256) / %d heads over %d KV "
                        "heads not supported", d->head_dim, d->n_heads, d->n_kv_heads);
    tcu_model *m = (tcu_model *)calloc(1, sizeof *m);
    if (!m) return tcu_fail(msg, msg_cap, TC_ERR_NOMEM, "cuda: out of memory");
    m->hp = *d;
    m->hp.inv_freq = NULL, m->hp.layer_w = NULL;
    m->layer_w = (tcu_dweight *)calloc((size_t)d->n_layers * d->n_roles + 1, sizeof *m->layer_w);
    if (!m->layer_w) {
        tcu_model_free(m);
        return tcu_fail(msg, msg_cap, TC_ERR_NOMEM, "cuda: out of memory");
    }
    char what[64];
    rc = upload(m, &d->tok_embd, &m->tok_embd, "token_embd.weight", msg, msg_cap);
    if (!rc) rc = upload(m, &d->output, &m->output, "output.weight", msg, msg_cap);
    if (!rc) rc = upload(m, &d->output_norm, &m->output_norm, "output_norm.weight", msg, msg_cap);
    for (int l = 0; !rc && l < d->n_layers; l++)
        for (int r = 0; !rc && r < d->n_roles; r++) {
            const size_t i = (size_t)l * d->n_roles + r;
            snprintf(what, sizeof what, "layer %d tensor %d", l, r);
            rc = upload(m, &d->layer_w[i], &m->layer_w[i], what, msg, msg_cap);
        }
    if (!rc) {
        size_t half = (size_t)d->rope_dim / 2 * sizeof(float);
        cudaError_t e = cudaMalloc(&m->inv_freq, half ? half : sizeof(float));
        if (e == cudaSuccess && half) e = cudaMemcpy(m->inv_freq, d->inv_freq, half, cudaMemcpyHostToDevice);
        if (e != cudaSuccess) rc = tcu_fail(msg, msg_cap, TC_ERR, "cuda: rope table: %s", cudaGetErrorString(e));
    }
    if (rc) {
        tcu_model_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

extern "C" void tcu_model_free(tcu_model *m) {
    if (!m) return;
    for (int i = m->n_allocs - 1; i >= 0; i--) cudaFree(m->allocs[i]);
    cudaFree(m->inv_freq);
    free(m->layer_w);
    free(m);
}

// --- KV pool

extern "C" int tcu_kv_new(tcu_model *m, int n_blocks, int block_size, tcu_kv **out, char *msg, size_t msg_cap) {
    *out = NULL;
    if (n_blocks <= 0 || block_size <= 0)
        return tcu_fail(msg, msg_cap, TC_ERR_INVALID, "cuda: KV geometry %d blocks of %d", n_blocks, block_size);
    tcu_kv *kv = (tcu_kv *)calloc(1, sizeof *kv);
    if (!kv) return tcu_fail(msg, msg_cap, TC_ERR_NOMEM, "cuda: out of memory");
    kv->m = m, kv->n_blocks = n_blocks, kv->block_size = block_size;
    kv->layer_elems = (size_t)n_blocks * m->hp.n_kv_heads * block_size * m->hp.head_dim;
    size_t bytes = kv->layer_elems * m->hp.n_layers * sizeof(__half);
    cudaError_t e = cudaMalloc(&kv->k, bytes);
    if (e == cudaSuccess) e = cudaMalloc(&kv->v, bytes);
    if (e == cudaSuccess) e = cudaMemset(kv->k, 0, bytes);
    if (e == cudaSuccess) e = cudaMemset(kv->v, 0, bytes);
    if (e != cudaSuccess) {
        tcu_kv_free(kv);
        return tcu_fail(msg, msg_cap, e == cudaErrorMemoryAllocation ? TC_ERR_NOMEM : TC_ERR,
                        "cuda: KV pool of 2 x %.1f MiB: %s (lower --kv-cache-mem)", bytes / 1048576.0,
                        cudaGetErrorString(e));
    }
    *out = kv;
    return 0;
}

extern "C" void tcu_kv_free(tcu_kv *kv) {
    if (!kv) return;
    cudaFree(kv->k);
    cudaFree(kv->v);
    free(kv);
}

extern "C" int tcu_kv_n_blocks(const tcu_kv *kv) { return kv->n_blocks; }
extern "C" int tcu_kv_block_size(const tcu_kv *kv) { return kv->block_size; }

extern "C" int tcu_kv_copy_block(tcu_kv *kv, int src, int dst, char *msg, size_t msg_cap) {
    if (src < 0 || dst < 0 || src >= kv->n_blocks || dst >= kv->n_blocks)
        return tcu_fail(msg, msg_cap, TC_ERR_INVALID, "cuda: copy of KV block %d to %d out of range", src, dst);
    const tcu_model_desc *hp = &kv->m->hp;
    size_t blk = (size_t)hp->n_kv_heads * kv->block_size * hp->head_dim; // halves of one block in one layer
    for (int l = 0; l < hp->n_layers; l++) {
        __half *k = kv->k + l * kv->layer_elems, *v = kv->v + l * kv->layer_elems;
        TCU_TRY(cudaMemcpy(k + dst * blk, k + src * blk, blk * sizeof(__half), cudaMemcpyDeviceToDevice), "KV copy");
        TCU_TRY(cudaMemcpy(v + dst * blk, v + src * blk, blk * sizeof(__half), cudaMemcpyDeviceToDevice), "KV copy");
    }
    return 0;
}

// --- context

extern "C" int tcu_ctx_new(tcu_model *m, int max_tokens, tcu_ctx **out, char *msg, size_t msg_cap) {
    *out = NULL;
    if (max_tokens <= 0 || max_tokens > (1 << 16))
        return tcu_fail(msg, msg_cap, TC_ERR_INVALID, "max batch tokens %d out of range 1..65536", max_tokens);
    tcu_ctx *c = (tcu_ctx *)calloc(1, sizeof *c);
    if (!c) return tcu_fail(msg, msg_cap, TC_ERR_NOMEM, "cuda: out of memory");
    c->m = m, c->max_tokens = max_tokens;
    const tcu_model_desc *hp = &m->hp;
    size_t n = (size_t)max_tokens;
    c->table_cap = 4096;
    const char *g = getenv("TACHYON_CUDA_GRAPHS");
    c->graphs = g && !strcmp(g, "1");
    cudaError_t e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
#define ALLOC(ptr, bytes) \
    if (e == cudaSuccess) e = cudaMalloc((void **)&(ptr), (bytes))
#define HOST(ptr, bytes) \
    if (e == cudaSuccess) e = cudaHostAlloc((void **)&(ptr), (bytes), cudaHostAllocDefault)
    for (int i = 0; i < FWD_BUF_COUNT; i++) ALLOC(c->buf[i], n * (hp->buf_floats[i] ? hp->buf_floats[i] : 1) * sizeof(float));
    ALLOC(c->logits, (size_t)TCU_LOGIT_TILE * hp->n_vocab * sizeof(float));
    ALLOC(c->argmax, TCU_LOGIT_TILE * sizeof(int32_t));
    ALLOC(c->ints, (TCU_NI * n + (size_t)c->table_cap) * sizeof(int32_t));
    HOST(c->h_ints, (TCU_NI * n + (size_t)c->table_cap) * sizeof(int32_t));
    HOST(c->h_logits, (size_t)TCU_LOGIT_TILE * hp->n_vocab * sizeof(float));
    HOST(c->h_argmax, TCU_LOGIT_TILE * sizeof(int32_t));
    HOST(c->h_rows, n * hp->dim * sizeof(float));
#undef ALLOC
#undef HOST
    if (e != cudaSuccess) {
        tcu_ctx_free(c);
        return tcu_fail(msg, msg_cap, e == cudaErrorMemoryAllocation ? TC_ERR_NOMEM : TC_ERR,
                        "cuda: scratch for %d batch tokens: %s", max_tokens, cudaGetErrorString(e));
    }
    *out = c;
    return 0;
}

extern "C" void tcu_ctx_free(tcu_ctx *c) {
    if (!c) return;
    if (c->stream) cudaStreamSynchronize(c->stream);
    if (c->graph) cudaGraphExecDestroy(c->graph);
    for (int i = 0; i < FWD_BUF_COUNT; i++) cudaFree(c->buf[i]);
    cudaFree(c->logits), cudaFree(c->argmax), cudaFree(c->ints);
    cudaFreeHost(c->h_ints), cudaFreeHost(c->h_logits), cudaFreeHost(c->h_argmax), cudaFreeHost(c->h_rows);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}
