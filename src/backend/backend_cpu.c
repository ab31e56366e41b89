// The CPU backend: src/model/'s context, KV cache and forward pass as they are, behind backend_ops.
#include <unistd.h>

#include "backend/backend.h"

static int cpu_weights_new(model *m, void **w, tc_err *err) {
    (void)err;
    *w = m; // the weights are the GGUF mapping (and the repacked copies model_load made)
    return 0;
}

static void cpu_weights_free(void *w) { (void)w; }

static size_t cpu_kv_mem_default(void *w) {
    (void)w;
    long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz / 4 : (size_t)1 << 30;
}

static int cpu_kv_new(void *w, int n_blocks, int n_blocks_swa, int block_size, tt_type k_type, tt_type v_type,
                      void **kv, tc_err *err) {
    return model_kv_new_swa(w, n_blocks, n_blocks_swa, block_size, k_type, v_type, (kv_store **)kv, err);
}

static void cpu_kv_free(void *kv) { kv_store_free(kv); }

static void cpu_kv_copy_block(void *kv, int src, int dst) { kv_store_copy_block(kv, src, dst); }
static void cpu_kv_rs_restore(void *kv, int slot, int row) { model_rs_restore(kv, slot, row); }
static int cpu_kv_rs_load_block(void *kv, int slot, int block) { return model_rs_load_block(kv, slot, block); }
static int cpu_kv_rs_has_blocks(void *kv) { return model_rs_has_blocks(kv); }
static int cpu_kv_rs_reserve_ckpt(void *kv, int n_slots, int n_rows, tc_err *err) {
    return model_rs_reserve_ckpt(kv, n_slots, n_rows, err);
}

static int cpu_ctx_new(void *w, int max_batch_tokens, int n_threads, void **ctx, tc_err *err) {
    return model_ctx_new(w, max_batch_tokens, n_threads, (model_ctx **)ctx, err);
}

static void cpu_ctx_free(void *ctx) { model_ctx_free(ctx); }

static int cpu_forward(void *ctx, void *kv, const model_batch *b, int n_layers, float *logits, tc_err *err) {
    return model_forward_layers(ctx, kv, b, n_layers, logits, err);
}

static int cpu_logits_rows(void *ctx, const float *normed, int n, float *logits, tc_err *err) {
    return model_logits_rows(ctx, normed, n, logits, err);
}

const backend_ops backend_cpu_ops = {
    .name = "cpu",
    .weights_new = cpu_weights_new,
    .weights_free = cpu_weights_free,
    .kv_mem_default = cpu_kv_mem_default,
    .kv_new = cpu_kv_new,
    .kv_free = cpu_kv_free,
    .kv_copy_block = cpu_kv_copy_block,
    .kv_rs_restore = cpu_kv_rs_restore,
    .kv_rs_load_block = cpu_kv_rs_load_block,
    .kv_rs_has_blocks = cpu_kv_rs_has_blocks,
    .kv_rs_reserve_ckpt = cpu_kv_rs_reserve_ckpt,
    .ctx_new = cpu_ctx_new,
    .ctx_free = cpu_ctx_free,
    .forward = cpu_forward,
    .logits_rows = cpu_logits_rows,
};
