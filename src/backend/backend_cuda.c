// The CUDA backend's host side: describes the model to src/cuda/ (tcu.h), checks each batch on the host before
// any kernel reads it (a bad id or block must be an error, never a device fault), and wraps the device objects
// in backend_ops; a step runs the architecture's layer sequence (model/fwd.h) with the device's operations
// (tcu_fwd_*). Built without CUDA (no nvcc, or -DTACHYON_CUDA=OFF), every slot says so instead.
// It reads the model's weights table (model_internal.h): the device copy is made from the same tensors.
#include "backend/backend.h"

#ifdef TACHYON_HAVE_CUDA

#include <stdlib.h>
#include <string.h>

#include "cpu/ops.h"
#include "cuda/tcu.h"
#include "cuda/tcu_quant.h"
#include "model/fwd.h"
#include "model/model_internal.h"

_Static_assert((int)TCU_F32 == (int)TT_F32 && (int)TCU_F16 == (int)TT_F16 && (int)TCU_Q4_0 == (int)TT_Q4_0 &&
                   (int)TCU_Q4_1 == (int)TT_Q4_1 && (int)TCU_Q8_0 == (int)TT_Q8_0 && (int)TCU_Q4_K == (int)TT_Q4_K &&
                   (int)TCU_Q6_K == (int)TT_Q6_K && (int)TCU_BF16 == (int)TT_BF16,
               "tcu type ids are ggml's");

typedef struct cuda_weights {
    model *m;
    tcu_model *tm;
} cuda_weights;

typedef struct cuda_kv {
    cuda_weights *w;
    tcu_kv *kv;
    int n_blocks, block_size;
} cuda_kv;

typedef struct cuda_ctx {
    cuda_weights *w;
    tcu_ctx *c;
    int max_tokens;
} cuda_ctx;

static tcu_weight desc_w(const model_weight *w) {
    tcu_weight t = {.type = (int)w->type, .host = w->data, .rows = w->rows, .cols = w->cols};
    if (w->data) t.row_bytes = tt_row_size(w->type, w->cols);
    return t;
}

static int cuda_weights_new(model *m, void **out, tc_err *err) {
    *out = NULL;
    const model_hparams *hp = &m->hp;
    char msg[sizeof err->msg];
    int rc = tcu_device_check(msg, sizeof msg);
    if (rc) return tc_err_set(err, rc, "%s", msg);
    if (hp->attn_sinks || hp->swiglu_limit > 0)
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "--device cuda: %s has attention sinks and clamped-SwiGLU experts, "
                          "which the CUDA backend does not implement yet; use --device cpu", hp->arch);
    if (hp->swa_window > 0)
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "--device cuda: %s uses sliding-window attention, which the CUDA "
                          "backend does not implement yet; use --device cpu", hp->arch);
    if (hp->attn_softcap > 0 || hp->final_softcap > 0)
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "--device cuda: %s soft-caps its attention scores or logits, which "
                          "the CUDA backend does not implement yet; use --device cpu", hp->arch);
    if (hp->rope_mscale != 1.0f || hp->yarn_factor > 0 || hp->attn_temp_scale > 0)
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "--device cuda: %s uses LongRoPE's attention factor, YaRN or an "
                          "attention temperature, which the CUDA backend does not implement yet; use --device cpu",
                          hp->arch);
    if (hp->residual_scale > 0 || hp->logit_scale > 0) // fwd_ops.scale is the CPU's only
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "--device cuda: %s scales its residual stream or its "
                          "logits, which the CUDA backend does not implement yet; use --device cpu",
                          hp->arch);
    if (hp->n_expert > 0) // fwd_ops.moe is the CPU's only
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "--device cuda: %s is a mixture-of-experts model, whose expert FFN "
                          "the CUDA backend does not implement yet; use --device cpu", hp->arch);
    if (hp->ssm_state > 0) // fwd_ops.gdn, gate_split and mul_sigmoid are the CPU's only
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "--device cuda: %s has gated DeltaNet (linear attention) layers, "
                          "which the CUDA backend does not implement yet; use --device cpu", hp->arch);
    cuda_weights *w = calloc(1, sizeof *w);
    tcu_weight *layer_w = calloc((size_t)hp->n_layers * ROLE_COUNT, sizeof *layer_w);
    float *inv_freq = malloc(((size_t)hp->rope_dim / 2 + 1) * sizeof(float));
    if (!w || !layer_w || !inv_freq) {
        free(w), free(layer_w), free(inv_freq);
        return tc_err_set(err, TC_ERR_NOMEM, "cuda: out of memory");
    }
    ops_rope_inv_freq(inv_freq, hp->rope_dim, hp->rope_base, m->rope_freqs); // the CPU's table, bit for bit
    for (int l = 0; l < hp->n_layers; l++)
        for (int r = 0; r < ROLE_COUNT; r++) layer_w[(size_t)l * ROLE_COUNT + r] = desc_w(model_layer_w(m, l, (arch_role)r));
    tcu_model_desc d = {
        .n_vocab = hp->n_vocab, .dim = hp->dim, .n_layers = hp->n_layers, .n_heads = hp->n_heads,
        .n_kv_heads = hp->n_kv_heads, .head_dim = hp->head_dim, .ffn_dim = hp->ffn_dim, .norm_eps = hp->norm_eps,
        .rope_scale = hp->rope_scale, .rope_neox = hp->rope_neox, .rope_dim = hp->rope_dim,
        .attn_scale = hp->attn_scale, .embd_scale = hp->embd_scale, .ffn_gelu = hp->ffn_gelu, .inv_freq = inv_freq,
        .tok_embd = desc_w(&m->tok_embd), .output = desc_w(&m->output), .output_norm = desc_w(&m->output_norm),
        .n_roles = ROLE_COUNT, .layer_w = layer_w,
    };
    for (int i = 0; i < FWD_BUF_COUNT; i++) d.buf_floats[i] = fwd_buf_floats(hp, (fwd_buf)i);
    w->m = m;
    rc = tcu_model_new(&d, &w->tm, msg, sizeof msg);
    free(layer_w), free(inv_freq);
    if (rc) {
        free(w);
        return tc_err_set(err, rc, "%s", msg);
    }
    *out = w;
    return 0;
}

static void cuda_weights_free(void *p) {
    cuda_weights *w = p;
    if (!w) return;
    tcu_model_free(w->tm);
    free(w);
}

static size_t cuda_kv_mem_default(void *p) {
    (void)p;
    return tcu_mem_free() / 4;
}

static int cuda_kv_new(void *p, int n_blocks, int n_blocks_swa, int block_size, tt_type k_type, tt_type v_type,
                       void **out, tc_err *err) {
    *out = NULL;
    cuda_weights *w = p;
    if (k_type != TT_F16 || v_type != TT_F16)
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "--device cuda: KV cache types %s/%s not supported yet (f16 only)",
                          tt_name(k_type), tt_name(v_type));
    if (n_blocks_swa > 0) return tc_err_set(err, TC_ERR_UNSUPPORTED, "--device cuda: no sliding-window KV storage");
    if (n_blocks <= 0 || block_size <= 0 || block_size > 64)
        return tc_err_set(err, TC_ERR_INVALID, "invalid KV geometry: %d blocks of %d tokens", n_blocks, block_size);
    cuda_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return tc_err_set(err, TC_ERR_NOMEM, "cuda: out of memory");
    char msg[sizeof err->msg];
    int rc = tcu_kv_new(w->tm, n_blocks, block_size, &kv->kv, msg, sizeof msg);
    if (rc) {
        free(kv);
        return tc_err_set(err, rc, "%s", msg);
    }
    kv->w = w, kv->n_blocks = n_blocks, kv->block_size = block_size;
    *out = kv;
    return 0;
}

static void cuda_kv_free(void *p) {
    cuda_kv *kv = p;
    if (!kv) return;
    tcu_kv_free(kv->kv);
    free(kv);
}

static void cuda_kv_copy_block(void *p, int src, int dst) {
    cuda_kv *kv = p;
    char msg[256];
    tcu_kv_copy_block(kv->kv, src, dst, msg, sizeof msg); // (void) slot: a range error leaves the blocks alone
}

static int cuda_ctx_new(void *p, int max_batch_tokens, int n_threads, void **out, tc_err *err) {
    (void)n_threads; // the host threads only stage batches
    *out = NULL;
    cuda_weights *w = p;
    cuda_ctx *c = calloc(1, sizeof *c);
    if (!c) return tc_err_set(err, TC_ERR_NOMEM, "cuda: out of memory");
    char msg[sizeof err->msg];
    int rc = tcu_ctx_new(w->tm, max_batch_tokens, &c->c, msg, sizeof msg);
    if (rc) {
        free(c);
        return tc_err_set(err, rc, "%s", msg);
    }
    c->w = w, c->max_tokens = max_batch_tokens;
    *out = c;
    return 0;
}

static void cuda_ctx_free(void *p) {
    cuda_ctx *c = p;
    if (!c) return;
    tcu_ctx_free(c->c);
    free(c);
}

// model_batch_check, and more than forward.c's validate(): every block-table entry a token's attention reads
// must be a block of the pool (the CPU trusts entries below the token's own block; a device must not read
// outside its buffers).
static int validate(const cuda_ctx *c, const cuda_kv *kv, const model_batch *b, tc_err *err) {
    int rc = model_batch_check(b, c->max_tokens, c->w->m->hp.n_vocab, c->w->m->hp.n_layers, err);
    if (rc) return rc;
    if (kv->w != c->w) return tc_err_set(err, TC_ERR_INVALID, "KV cache was made for another model");
    int last_seq = -1, checked = 0; // entries [0, checked) of last_seq's table are known good
    for (int t = 0; t < b->n_tokens; t++) {
        if (b->seq[t] != last_seq) last_seq = b->seq[t], checked = 0;
        const int32_t *tab = b->block_tables[b->seq[t]];
        for (int k = checked; k <= b->pos[t] / kv->block_size; k++)
            if (tab[k] < 0 || tab[k] >= kv->n_blocks)
                return tc_err_set(err, TC_ERR_INVALID, "row %d: KV block %d (entry %d) out of range", t, tab[k], k);
        if (b->pos[t] / kv->block_size + 1 > checked) checked = b->pos[t] / kv->block_size + 1;
    }
    return 0;
}

// The device's operations for the layer sequences (fwd.h).
static const fwd_ops cuda_fwd_ops = {
    .embed = tcu_fwd_embed,
    .norm = tcu_fwd_norm,
    .matmul = tcu_fwd_matmul,
    .add_bias = tcu_fwd_add_bias,
    .rope = tcu_fwd_rope,
    .attention = tcu_fwd_attention,
    .add = tcu_fwd_add,
    .glu = tcu_fwd_glu,
    .out_norm = tcu_fwd_out_norm,
};

static int cuda_forward(void *pc, void *pkv, const model_batch *b, int n_layers, float *logits, tc_err *err) {
    cuda_ctx *c = pc;
    cuda_kv *kv = pkv;
    if (n_layers < 1 || n_layers > c->w->m->hp.n_layers)
        return tc_err_set(err, TC_ERR_INVALID, "forward through %d layers (model has %d)", n_layers, c->w->m->hp.n_layers);
    int rc = validate(c, kv, b, err);
    if (rc) return rc;
    if (b->n_resume > 0 || b->x_out) // self-speculation's KV reuse: the CPU forward only
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "the CUDA backend does not run resumed rows or return the residual "
                          "stream (self-speculation reusing the target's KV): use --device cpu");
    tcu_batch tb = {.n_tokens = b->n_tokens, .tokens = b->tokens, .pos = b->pos, .seq = b->seq, .n_seqs = b->n_seqs,
                    .block_tables = b->block_tables, .n_logits = b->n_logits, .logits_rows = b->logits_rows,
                    .n_embd = b->n_embd, .embd_rows = b->embd_rows, .embd = b->embd};
    char msg[sizeof err->msg];
    int queue = 0;
    if ((rc = tcu_step_begin(c->c, kv->kv, &tb, n_layers, &queue, msg, sizeof msg))) return tc_err_set(err, rc, "%s", msg);
    const fwd_graph g = {.ops = &cuda_fwd_ops, .be = c->c, .m = c->w->m, .n = b->n_tokens};
    for (int tries = 0; tries < 2; tries++) { // a second time only when capturing the step into a graph failed
        int failed = 0;
        if (queue && ((rc = fwd_embed(&g)) || (rc = fwd_layers(&g, 0, n_layers, &failed)) || (rc = fwd_out_norm(&g))))
            return tc_err_set(err, rc, "cuda: layer %d failed", failed);
        rc = tcu_step_end(c->c, logits, NULL, msg, sizeof msg);
        if (rc != TCU_REQUEUE) break;
        queue = 1;
    }
    return rc ? tc_err_set(err, rc, "%s", msg) : 0;
}

static int cuda_logits_rows(void *pc, const float *normed, int n, float *logits, tc_err *err) {
    cuda_ctx *c = pc;
    char msg[sizeof err->msg];
    int rc = tcu_logits_rows(c->c, normed, n, logits, msg, sizeof msg);
    return rc ? tc_err_set(err, rc, "%s", msg) : 0;
}

const backend_ops backend_cuda_ops = {
    .name = "cuda",
    .weights_new = cuda_weights_new,
    .weights_free = cuda_weights_free,
    .kv_mem_default = cuda_kv_mem_default,
    .kv_new = cuda_kv_new,
    .kv_free = cuda_kv_free,
    .kv_copy_block = cuda_kv_copy_block,
    .ctx_new = cuda_ctx_new,
    .ctx_free = cuda_ctx_free,
    .forward = cuda_forward,
    .logits_rows = cuda_logits_rows,
};

#else // no CUDA in this build

static int nocuda_weights_new(model *m, void **w, tc_err *err) {
    (void)m, (void)w;
    return tc_err_set(err, TC_ERR_UNSUPPORTED, "--device cuda: this binary was built without CUDA (nvcc was not "
                      "found at build time, or -DTACHYON_CUDA=OFF); use --device cpu or rebuild with the CUDA toolkit");
}
// The other slots are never reached: no weights handle exists without weights_new.
static void nocuda_free(void *p) { (void)p; }
static size_t nocuda_kv_mem_default(void *w) {
    (void)w;
    return 0;
}
static int nocuda_kv_new(void *w, int n_blocks, int n_blocks_swa, int block_size, tt_type k_type, tt_type v_type,
                         void **kv, tc_err *err) {
    (void)w, (void)n_blocks, (void)n_blocks_swa, (void)block_size, (void)k_type, (void)v_type, (void)kv;
    return tc_err_set(err, TC_ERR_UNSUPPORTED, "built without CUDA");
}
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
    .weights_free = nocuda_free,
    .kv_mem_default = nocuda_kv_mem_default,
    .kv_new = nocuda_kv_new,
    .kv_free = nocuda_free,
    .ctx_new = nocuda_ctx_new,
    .ctx_free = nocuda_free,
    .forward = nocuda_forward,
};

#endif
