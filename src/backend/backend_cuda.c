// The CUDA backend's host side: without CUDA in the build, every slot says so. (The real one is added with
// src/cuda/.)
#include "backend/backend.h"

static int nocuda_weights_new(model *m, void **w, tc_err *err) {
    (void)m, (void)w;
    return tc_err_set(err, TC_ERR_UNSUPPORTED, "--device cuda: this binary was built without CUDA (nvcc was not "
                      "found at build time, or -DTACHYON_CUDA=OFF); use --device cpu or rebuild with the CUDA toolkit");
}
static void nocuda_weights_free(void *w) { (void)w; }
static size_t nocuda_kv_mem_default(void *w) { (void)w; return 0; }
static int nocuda_kv_new(void *w, int n_blocks, int n_blocks_swa, int block_size, tt_type k_type, tt_type v_type,
                         void **kv, tc_err *err) {
    (void)w, (void)n_blocks, (void)n_blocks_swa, (void)block_size, (void)k_type, (void)v_type, (void)kv;
    return tc_err_set(err, TC_ERR_UNSUPPORTED, "built without CUDA");
}
static void nocuda_free(void *p) { (void)p; }
static int nocuda_ctx_new(void *w, int max_batch_tokens, int n_threads, void **ctx, tc_err *err) {
    (void)w, (void)max_batch_tokens, (void)n_threads, (void)ctx;
    return tc_err_set(err, TC_ERR_UNSUPPORTED, "built without CUDA");
}
static int nocuda_forward(void *ctx, void *kv, const model_batch *b, int n_layers, float *logits, tc_err *err) {
    (void)ctx, (void)kv, (void)b, (void)n_layers, (void)logits;
    return tc_err_set(err, TC_ERR_UNSUPPORTED, "built without CUDA");
}

const backend_ops backend_cuda_ops = {
    .name = "cuda",
    .weights_new = nocuda_weights_new,
    .weights_free = nocuda_weights_free,
    .kv_mem_default = nocuda_kv_mem_default,
    .kv_new = nocuda_kv_new,
    .kv_free = nocuda_free,
    .ctx_new = nocuda_ctx_new,
    .ctx_free = nocuda_free,
    .forward = nocuda_forward,
};
