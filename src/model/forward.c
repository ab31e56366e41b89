// The CPU backend's forward pass over a ragged batch and the paged KV cache (model.h's contract): its scratch
// (model_ctx), its implementation of the operations the layer sequences call (fwd.h: cpu_fwd_ops), and the
// driver that runs a batch through the sequence (embedding, layers, output head). Every matmul runs over all
// rows of the step at once, so each weight block is read once per step.
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/attention.h"
#include "cpu/convert.h"
#include "cpu/cpu.h"
#include "cpu/ops.h"
#include "model/fwd.h"
#include "model/fwd_attn.h"
#include "model/gdn.h"
#include "model/model_internal.h"
#include "model/moe.h"
#include "tensor/quant_kv.h"
#include "tensor/ttype.h"

struct model_ctx {
    model *m;
    int max_tokens;
    cpu_pool *pool; // owned
    attn_multi_fn attn;
    attn_span_fn attn_span; // its span form (fwd_attn.h), or NULL
    float *attn_split;      // (FWD_ATTN_SPLIT_FLOATS) scratch of split attention steps
    cvt_f32_f16_fn to_f16;
    attn_geom geo;     // global (full-attention) layers
    attn_geom geo_swa; // local layers: geo with the sliding window
    float *buf[FWD_BUF_COUNT]; // (max_tokens, fwd_buf_floats) each: the activations the sequence names (fwd.h)
    // The step being run (set by model_forward_layers for the operations): its batch or sub-batch, and cache
    const model_batch *b;
    kv_store *kv;
    float *rcos;  // (max_tokens, rope_dim/2)
    float *rsin;  // (max_tokens, rope_dim/2)
    float *inv_freq; // (rope_dim/2)
    // Local (sliding-window) layers with their own RoPE base (model_layer_own_rope), else NULL
    float *rcos_swa, *rsin_swa, *inv_freq_swa; // as rcos, rsin, inv_freq
    void *mm_scratch;
    moe_scratch *moe; // mixture-of-experts models only (moe.h), else NULL
    gdn_scratch *gdn; // hybrid models only (gdn.h), else NULL
    // Batches with resumed rows: the rows that run the layers below the resume layer, as a sub-batch
    int32_t *sub_row;                   // (max_tokens) its rows' rows in the batch, ascending
    int32_t *sub_tok, *sub_pos, *sub_seq; // (max_tokens) as model_batch's
    // Hadamard rotation of a quantized KV cache (ops_hadamard): the size of the rotated blocks of a head, 0 when
    // the head dim has none or TACHYON_KV_ROTATE=0; rot_k / rot_v are set per forward from the cache's types.
    int rot_block;
    int rot_k, rot_v;
    // q4_0 cache rows: least-squares block scales (tt_q4_0_from_float_mse), or the reference quantizer when
    // TACHYON_KV_QUANT=ref (the A/B switch).
    int kv_mse;
    // K centering (key_center.c): the negated mean key, set per forward when the K cache is quantized.
    const float *center_k;
    // and the per-channel balance (key_center.h): keys times k_scale (n_layers, kv_dim), queries times q_scale
    // (n_layers, q_dim), or NULL
    const float *k_scale, *q_scale;
    // Calibration capture (model_ctx_capture_k): sums (n_layers, kv_dim) of post-RoPE keys, or NULL; and sums
    // of their squares, and of the squared queries (n_layers, q_dim).
    double *cap_k, *cap_k2, *cap_q2;
    long *cap_n;
    int cap_skip;
};

void model_ctx_capture_k(model_ctx *c, double *sums, double *k_sq, double *q_sq, long *n, int skip_pos) {
    c->cap_k = sums, c->cap_k2 = k_sq, c->cap_q2 = q_sq, c->cap_n = n, c->cap_skip = skip_pos;
}

// YaRN over the frequencies (llama.cpp's rope_yarn with ext_factor 1, which Mistral 3's graph runs with an
// attention factor that cancels YaRN's mscale): frequency d becomes a mix of itself (extrapolation, weight r)
// and itself / factor (interpolation), r ramping from 1 to 0 between the dims that turn beta_fast and
// beta_slow times over the original context.
static float yarn_corr_dim(const model_hparams *hp, float turns) {
    return (float)hp->rope_dim * logf((float)hp->rope_orig_ctx / (turns * 2.0f * (float)M_PI)) /
           (2.0f * logf(hp->rope_base));
}

static void rope_yarn(float *inv_freq, const model_hparams *hp) {
    float lo = floorf(yarn_corr_dim(hp, hp->yarn_beta_fast)), hi = ceilf(yarn_corr_dim(hp, hp->yarn_beta_slow));
    lo = lo > 0 ? lo : 0, hi = hi < (float)(hp->rope_dim - 1) ? hi : (float)(hp->rope_dim - 1);
    const float fs = 1.0f / hp->yarn_factor;
    for (int d = 0; d < hp->rope_dim / 2; d++) {
        float y = ((float)d - lo) / fmaxf(0.001f, hi - lo);
        const float r = 1.0f - fminf(1.0f, fmaxf(0.0f, y));
        inv_freq[d] *= fs * (1.0f - r) + r;
    }
}

static size_t weight_scratch(const model_weight *w, int n) { return cpu_matmul_scratch_size(w->type, n, (int)w->cols); }

int model_ctx_new(model *m, int max_batch_tokens, int n_threads, model_ctx **out, tc_err *err) {
    *out = NULL;
    const model_hparams *hp = &m->hp;
    if (max_batch_tokens <= 0 || max_batch_tokens > (1 << 16))
        return tc_err_set(err, TC_ERR_INVALID, "max batch tokens %d out of range 1..65536", max_batch_tokens);
    int n_rep = hp->n_heads / hp->n_kv_heads;
    if (n_rep > ATTN_MAX_REP || hp->head_dim > ATTN_MAX_HEAD_DIM)
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "attention geometry not supported: %d query heads per KV head "
                          "(max %d), head dim %d (max %d)", n_rep, ATTN_MAX_REP, hp->head_dim, ATTN_MAX_HEAD_DIM);
    model_ctx *c = calloc(1, sizeof *c);
    if (!c) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    c->m = m;
    c->max_tokens = max_batch_tokens;
    c->geo = (attn_geom){.n_kv_heads = hp->n_kv_heads, .head_dim = hp->head_dim, .n_rep = n_rep,
                         .scale = hp->attn_scale, .softcap = hp->attn_softcap};
    c->geo_swa = c->geo;
    c->geo_swa.window = hp->swa_window;
    cpu_isa isa = cpu_best_isa();
    c->to_f16 = cvt_select_f32_f16(isa);
    c->attn = attn_select_multi(isa, &c->geo); // depends on the ISA and head dim only
    c->attn_span = attn_select_span(isa, &c->geo);
    c->attn_split = malloc(sizeof(float) * FWD_ATTN_SPLIT_FLOATS);
    c->pool = cpu_pool_new(n_threads);
    size_t n = (size_t)max_batch_tokens, half = (size_t)hp->rope_dim / 2;
    int bufs_ok = 1;
    for (int i = 0; i < FWD_BUF_COUNT; i++)
        bufs_ok &= (c->buf[i] = malloc(n * fwd_buf_floats(hp, (fwd_buf)i) * sizeof(float))) != NULL;
    c->rcos = malloc(n * half * sizeof(float));
    c->rsin = malloc(n * half * sizeof(float));
    c->inv_freq = malloc(half * sizeof(float));
    c->sub_row = malloc(n * sizeof(int32_t));
    c->sub_tok = malloc(n * sizeof(int32_t));
    c->sub_pos = malloc(n * sizeof(int32_t));
    c->sub_seq = malloc(n * sizeof(int32_t));
    if (hp->rope_base_swa > 0) {
        c->rcos_swa = malloc(n * half * sizeof(float));
        c->rsin_swa = malloc(n * half * sizeof(float));
        c->inv_freq_swa = malloc(half * sizeof(float));
    }
    size_t scratch = weight_scratch(&m->output, max_batch_tokens);
    for (int l = 0; l < hp->n_layers; l++)
        for (int r = 0; r < ROLE_COUNT; r++) {
            const model_weight *w = model_layer_w(m, l, (arch_role)r);
            if (w->data && w->rows > 1) {
                size_t s = weight_scratch(w, max_batch_tokens);
                if (s > scratch) scratch = s;
            }
        }
    c->mm_scratch = aligned_alloc(64, (scratch + 63) / 64 * 64 + 64);
    int rc = hp->n_expert > 0 ? moe_scratch_new(m, max_batch_tokens, &c->moe, err) : 0;
    if (!rc && hp->ssm_state > 0) rc = gdn_scratch_new(m, max_batch_tokens, &c->gdn, err);
    if (rc) {
        model_ctx_free(c);
        return rc;
    }
    if (!c->pool || !bufs_ok || !c->rcos || !c->rsin ||
        !c->inv_freq || !c->mm_scratch || !c->sub_row || !c->sub_tok || !c->sub_pos || !c->sub_seq ||
        !c->attn_split ||
        (hp->rope_base_swa > 0 && (!c->rcos_swa || !c->rsin_swa || !c->inv_freq_swa))) {
        model_ctx_free(c);
        return tc_err_set(err, TC_ERR_NOMEM, "cannot allocate scratch for %d batch tokens", max_batch_tokens);
    }
    const char *rot = getenv("TACHYON_KV_ROTATE"); // "0" / "off": the A/B switch (--kv-rotate off sets it)
    c->rot_block = rot && (!strcmp(rot, "0") || !strcmp(rot, "off")) ? 0 : ops_hadamard_block(hp->head_dim);
    const char *kq = getenv("TACHYON_KV_QUANT");
    c->kv_mse = !(kq && !strcmp(kq, "ref"));
    ops_rope_inv_freq(c->inv_freq, hp->rope_dim, hp->rope_base, m->rope_freqs);
    if (hp->yarn_factor > 0) rope_yarn(c->inv_freq, hp);
    if (hp->rope_base_swa > 0) ops_rope_inv_freq(c->inv_freq_swa, hp->rope_dim, hp->rope_base_swa, m->rope_freqs);
    *out = c;
    return 0;
}

void model_ctx_free(model_ctx *c) {
    if (!c) return;
    cpu_pool_free(c->pool);
    for (int i = 0; i < FWD_BUF_COUNT; i++) free(c->buf[i]);
    free(c->rcos), free(c->rsin), free(c->inv_freq), free(c->mm_scratch);
    free(c->rcos_swa), free(c->rsin_swa), free(c->inv_freq_swa);
    free(c->sub_row), free(c->sub_tok), free(c->sub_pos), free(c->sub_seq), free(c->attn_split);
    moe_scratch_free(c->moe);
    gdn_scratch_free(c->gdn);
    free(c);
}

// out (n, w->rows) = x (n, w->cols) @ Wᵀ
static int matmul(model_ctx *c, float *out, const float *x, int n, const model_weight *w, int ld_out) {
    cpu_matmul_args a = {.out = out, .ld_out = ld_out, .x = x, .n_rows = n, .k = (int)w->cols,
                         .d = (int)w->rows, .w_type = w->type, .w = w->data, .scratch = c->mm_scratch,
                         .w_packed = w->packed};
    return cpu_matmul(c->pool, &a);
}

// Several projections of the same input x (n rows): outs[m] (n, ws[m]->rows) = x @ ws[m]ᵀ, with one
// activation quantization and one pool dispatch when the weights allow (cpu_matmul_multi).
static int matmul_multi(model_ctx *c, float *const *outs, const float *x, int n,
                        const model_weight *const *ws, const int *ld_outs, int count) {
    cpu_matmul_args a[CPU_MATMUL_MAX_MULTI];
    for (int m = 0; m < count; m++)
        a[m] = (cpu_matmul_args){.out = outs[m], .ld_out = ld_outs[m], .x = x, .n_rows = n,
                                 .k = (int)ws[m]->cols, .d = (int)ws[m]->rows, .w_type = ws[m]->type,
                                 .w = ws[m]->data, .scratch = c->mm_scratch,
                                 .w_packed = ws[m]->packed};
    return cpu_matmul_multi(c->pool, a, count);
}

// The rows of one attention call going into the cache (store_kv).
typedef struct attn_job {
    model_ctx *c;
    const kv_store *kv;
    const model_batch *b;
    int layer;
    const float *k, *v; // (n_tokens, kv_dim) x 2
} attn_job;

int model_batch_check(const model_batch *b, int max_tokens, int n_vocab, int n_layers, tc_err *err) {
    if (b->n_tokens <= 0 || b->n_tokens > max_tokens)
        return tc_err_set(err, TC_ERR_INVALID, "batch of %d tokens (max %d)", b->n_tokens, max_tokens);
    for (int t = 0; t < b->n_tokens; t++) {
        if (b->tokens[t] < 0 || b->tokens[t] >= n_vocab)
            return tc_err_set(err, TC_ERR_INVALID, "token id %d out of range [0, %d)", b->tokens[t], n_vocab);
        if (b->seq[t] < 0 || b->seq[t] >= b->n_seqs || b->pos[t] < 0)
            return tc_err_set(err, TC_ERR_INVALID, "row %d: bad sequence %d or position %d", t, b->seq[t], b->pos[t]);
    }
    for (int i = 0; i < b->n_logits; i++)
        if (b->logits_rows[i] < 0 || b->logits_rows[i] >= b->n_tokens || (i && b->logits_rows[i] <= b->logits_rows[i - 1]))
            return tc_err_set(err, TC_ERR_INVALID, "logits rows must be ascending rows of the batch");
    for (int i = 0; i < b->n_embd; i++)
        if (!b->embd || b->embd_rows[i] < 0 || b->embd_rows[i] >= b->n_tokens)
            return tc_err_set(err, TC_ERR_INVALID, "embedding rows must be rows of the batch, with an output");
    if (b->n_resume < 0 || b->n_resume > b->n_tokens)
        return tc_err_set(err, TC_ERR_INVALID, "%d resumed rows in a batch of %d", b->n_resume, b->n_tokens);
    if (b->n_resume == 0) return 0;
    if (!b->resume_rows || !b->resume_x)
        return tc_err_set(err, TC_ERR_INVALID, "resumed rows without their rows or residuals");
    if (b->resume_layer < 1 || b->resume_layer >= n_layers)
        return tc_err_set(err, TC_ERR_INVALID, "resume layer %d out of range 1..%d", b->resume_layer, n_layers - 1);
    for (int i = 0; i < b->n_resume; i++)
        if (b->resume_rows[i] < 0 || b->resume_rows[i] >= b->n_tokens ||
            (i && b->resume_rows[i] <= b->resume_rows[i - 1]))
            return tc_err_set(err, TC_ERR_INVALID, "resumed row %d: rows must be ascending rows of the batch", i);
    return 0;
}

static int validate(const model_ctx *c, const kv_store *kv, const model_batch *b, tc_err *err) {
    const model_hparams *hp = &c->m->hp;
    int rc = model_batch_check(b, c->max_tokens, hp->n_vocab, hp->n_layers, err);
    if (rc) return rc;
    if (kv->n_layers != hp->n_layers || kv->n_kv_heads != hp->n_kv_heads || kv->head_dim != hp->head_dim)
        return tc_err_set(err, TC_ERR_INVALID, "KV cache was made for another model");
    for (int t = 0; t < b->n_tokens; t++) {
        int blk = b->block_tables[b->seq[t]][b->pos[t] / kv->block_size];
        if (blk < 0 || blk >= kv->n_blocks)
            return tc_err_set(err, TC_ERR_INVALID, "row %d: KV block %d out of range", t, blk);
        if (kv->n_blocks_swa > 0) { // every block the window reads must be there (none released too early)
            if (!b->block_tables_swa) return tc_err_set(err, TC_ERR_INVALID, "batch lacks the sliding-window tables");
            const int32_t *st = b->block_tables_swa[b->seq[t]];
            for (int k = attn_first_pos(&c->geo_swa, b->pos[t] + 1) / kv->block_size; k <= b->pos[t] / kv->block_size; k++)
                if (st[k] < 0 || st[k] >= kv->n_blocks_swa)
                    return tc_err_set(err, TC_ERR_INVALID, "row %d: sliding-window KV block %d (entry %d) out of range",
                                      t, st[k], k);
        }
    }
    return 0;
}

// One head row of hd values into the cache: f16 with the fast converter; q4_0 with the least-squares block
// scales (standard blocks, a smaller error than the reference's absmax scale: quant_kv.h); other types with
// the reference quantizer (ggml's bit for bit). A row per token per head per layer, cheap next to the matmuls.
static void store_row(const model_ctx *c, tt_type type, void *dst, const float *src, int hd) {
    if (type == TT_F16) c->to_f16(dst, src, hd);
    else if (type == TT_Q4_0 && c->kv_mse) tt_q4_0_from_float_mse(src, dst, hd);
    else tt_get(type)->from_float(src, dst, hd);
}

// Rows i = t * n_kv + h, i = ith, ith + nth, ...: each writes its own cache slot, so threads never share one.
static void store_kv_rows(const attn_job *j, int ith, int nth) {
    const model_ctx *c = j->c;
    const kv_store *kv = j->kv;
    const model_batch *b = j->b;
    const int layer = j->layer;
    const model_hparams *hp = &c->m->hp;
    const int hd = hp->head_dim, n_kv = hp->n_kv_heads, bs = kv->block_size;
    const int32_t *const *tables = kv_store_layer_is_swa(kv, layer) ? b->block_tables_swa : b->block_tables;
    for (int i = ith; i < b->n_tokens * n_kv; i += nth) {
        int t = i / n_kv, h = i % n_kv;
        int blk = tables[b->seq[t]][b->pos[t] / bs], slot = b->pos[t] % bs;
        store_row(c, kv->k_type, kv->k_l[layer] + kv_store_offset(kv, kv->k_row, blk, h, slot),
                  j->k + ((size_t)t * n_kv + h) * hd, hd);
        store_row(c, kv->v_type, kv->v_l[layer] + kv_store_offset(kv, kv->v_row, blk, h, slot),
                  j->v + ((size_t)t * n_kv + h) * hd, hd);
    }
}

static void store_kv_run(void *arg, int ith, int nth) { store_kv_rows(arg, ith, nth); }

// An f16 cache is a plain conversion (serial, as it always was); quantizing a row costs ~2 us (the q4_0
// least-squares search), so quantized caches are written by the pool: a 512-token prefill chunk of SmolLM2
// writes 92k rows.
static void store_kv(model_ctx *c, attn_job *job) {
    if (job->kv->k_type == TT_F16 && job->kv->v_type == TT_F16) store_kv_rows(job, 0, 1);
    else cpu_pool_run(c->pool, store_kv_run, job);
}

// Per-value work of a large step, split over the pool (the workers would otherwise spin while the caller does
// it alone): the GLU over n·ffn values and RMSNorm over rows. Each value or row is computed by the same code
// whatever the split (the GLU's tail goes through its vector body too), so results do not depend on it.
#define FWD_PAR_MIN 16384 // values below which one thread does it: a pool dispatch costs ~1-2 us

typedef struct par_job {
    float *dst;
    const float *src, *w;
    int n, dim, gelu; // the GLU: n values; RMSNorm: n rows of dim
    float eps;
} par_job;

static void glu_run(void *arg, int ith, int nth) {
    const par_job *j = arg;
    int per = (j->n + nth - 1) / nth;
    per = (per + 15) & ~15;
    const int i0 = ith * per, i1 = i0 + per < j->n ? i0 + per : j->n;
    if (i0 >= i1) return;
    if (j->gelu) ops_geglu(j->dst + i0, j->src + i0, i1 - i0);
    else ops_swiglu(j->dst + i0, j->src + i0, i1 - i0);
}

// g (n values) = GLU(g, u)
static void glu(model_ctx *c, float *g, const float *u, int n, int gelu) {
    par_job j = {.dst = g, .src = u, .n = n, .gelu = gelu};
    if (n >= FWD_PAR_MIN) cpu_pool_run(c->pool, glu_run, &j);
    else glu_run(&j, 0, 1);
}

static void norm_run(void *arg, int ith, int nth) {
    const par_job *j = arg;
    for (int t = ith; t < j->n; t += nth)
        ops_rmsnorm(j->dst + (size_t)t * j->dim, j->src + (size_t)t * j->dim, j->w, j->dim, j->eps);
}

// dst (n, dim) = RMSNorm of src's rows with weight w
static void norm_rows(model_ctx *c, float *dst, const float *src, const float *w, int n, int dim, float eps) {
    par_job j = {.dst = dst, .src = src, .w = w, .n = n, .dim = dim, .eps = eps};
    if ((size_t)n * dim >= FWD_PAR_MIN) cpu_pool_run(c->pool, norm_run, &j);
    else norm_run(&j, 0, 1);
}

// --- the operations of the layer sequences (fwd.h) on the CPU: be is the model_ctx, its step in c->b, c->kv

static int cpu_embed(void *be, fwd_buf dst, int n);

static int cpu_norm(void *be, fwd_buf dst, fwd_buf src, int rows, int len, int layer, arch_role w, float eps) {
    model_ctx *c = be;
    norm_rows(c, c->buf[dst], c->buf[src], model_layer_w(c->m, layer, w)->data, rows, len, eps);
    return 0;
}

static int cpu_matmul_op(void *be, const fwd_buf *outs, fwd_buf x, int n, int layer, const arch_role *ws, int count) {
    model_ctx *c = be;
    if (count == 1) {
        const model_weight *w = model_layer_w(c->m, layer, ws[0]);
        return matmul(c, c->buf[outs[0]], c->buf[x], n, w, (int)w->rows);
    }
    float *o[CPU_MATMUL_MAX_MULTI];
    const model_weight *w[CPU_MATMUL_MAX_MULTI];
    int ld[CPU_MATMUL_MAX_MULTI];
    if (count > CPU_MATMUL_MAX_MULTI) return TC_ERR_INVALID;
    for (int i = 0; i < count; i++)
        o[i] = c->buf[outs[i]], w[i] = model_layer_w(c->m, layer, ws[i]), ld[i] = (int)w[i]->rows;
    return matmul_multi(c, o, c->buf[x], n, w, ld, count);
}

static int cpu_add_bias(void *be, fwd_buf x, int n, int len, int layer, arch_role b) {
    model_ctx *c = be;
    const float *bias = model_layer_w(c->m, layer, b)->data;
    for (int t = 0; t < n; t++) ops_add(c->buf[x] + (size_t)t * len, bias, len);
    return 0;
}

static int cpu_rope(void *be, fwd_buf qb, fwd_buf kb, int n, int layer) {
    model_ctx *c = be;
    const model_hparams *hp = &c->m->hp;
    const int hd = hp->head_dim, half = hp->rope_dim / 2, q_dim = hp->n_heads * hd, kv_dim = hp->n_kv_heads * hd;
    const int own = model_layer_own_rope(hp, layer);
    const float *rcos = own ? c->rcos_swa : c->rcos, *rsin = own ? c->rsin_swa : c->rsin;
    for (int t = 0; t < n; t++) {
        const float *cs = rcos + (size_t)t * half, *sn = rsin + (size_t)t * half;
        ops_rope(c->buf[qb] + (size_t)t * q_dim, hp->n_heads, hd, hp->rope_dim, cs, sn, hp->rope_neox);
        ops_rope(c->buf[kb] + (size_t)t * kv_dim, hp->n_kv_heads, hd, hp->rope_dim, cs, sn, hp->rope_neox);
        if (hp->attn_temp_scale > 0) // Llama 4's attention temperature (model.h)
            ops_scale(c->buf[qb] + (size_t)t * q_dim,
                      1.0f + hp->attn_temp_scale * logf(1.0f + floorf((float)c->b->pos[t] / (float)hp->rope_orig_ctx)),
                      q_dim);
    }
    return 0;
}

// What a quantized cache asks of the rows before they are stored: calibration capture, K centering and
// balance, Hadamard rotation (key_center.h, ops.h). Each row's values go through the same steps in the same
// order whatever the batch.
static void cache_transforms(model_ctx *c, float *qb, float *kb, float *vb, int n, int l) {
    const model_hparams *hp = &c->m->hp;
    const int hd = hp->head_dim, q_dim = hp->n_heads * hd, kv_dim = hp->n_kv_heads * hd;
    for (int t = 0; t < n; t++) {
        float *q = qb + (size_t)t * q_dim, *k = kb + (size_t)t * kv_dim, *v = vb + (size_t)t * kv_dim;
        if (c->cap_k && c->b->pos[t] >= c->cap_skip) {
            double *sk = c->cap_k + (size_t)l * kv_dim, *sk2 = c->cap_k2 + (size_t)l * kv_dim;
            double *sq2 = c->cap_q2 + (size_t)l * q_dim;
            for (int i = 0; i < kv_dim; i++) sk[i] += k[i], sk2[i] += (double)k[i] * k[i];
            for (int i = 0; i < q_dim; i++) sq2[i] += (double)q[i] * q[i];
            if (l == 0) ++*c->cap_n;
        }
        // A constant vector subtracted from every key shifts each query's scores by one constant: softmax,
        // hence attention, is unchanged, and the quantized rows lose their shared offset (key_center.h).
        if (c->center_k) ops_add(k, c->center_k + (size_t)l * kv_dim, kv_dim);
        if (c->k_scale) { // q'·k' = (q / s)·(k · s) = q·k, channel by channel
            const float *ks = c->k_scale + (size_t)l * kv_dim, *qs = c->q_scale + (size_t)l * q_dim;
            for (int i = 0; i < kv_dim; i++) k[i] *= ks[i];
            for (int i = 0; i < q_dim; i++) q[i] *= qs[i];
        }
        // Rotate what goes into a quantized cache (after QK-norm and RoPE: the cache holds the final rows), and
        // Q with K so that scores are unchanged; rotated V rows give a rotated output, undone after attention.
        if (c->rot_k) {
            ops_hadamard_heads(q, hp->n_heads, hd, c->rot_block);
            ops_hadamard_heads(k, hp->n_kv_heads, hd, c->rot_block);
        }
        if (c->rot_v) ops_hadamard_heads(v, hp->n_kv_heads, hd, c->rot_block);
    }
}

static int cpu_attention(void *be, fwd_buf out, fwd_buf q, fwd_buf k, fwd_buf v, int n, int layer) {
    model_ctx *c = be;
    const model_hparams *hp = &c->m->hp;
    const int q_dim = hp->n_heads * hp->head_dim;
    cache_transforms(c, c->buf[q], c->buf[k], c->buf[v], n, layer);
    attn_job job = {.c = c, .kv = c->kv, .b = c->b, .layer = layer, .k = c->buf[k], .v = c->buf[v]};
    store_kv(c, &job);
    attn_geom geo = model_layer_is_swa(hp, layer) ? c->geo_swa : c->geo;
    geo.sinks = model_layer_w(c->m, layer, ROLE_ATTN_SINKS)->data; // the layer's, or NULL
    fwd_attn fa = {.pool = c->pool, .multi = c->attn, .span = c->attn_span, .scratch = c->attn_split,
                   .kv = c->kv, .b = c->b, .geo = &geo, .layer = layer, .out = c->buf[out], .q = c->buf[q]};
    fwd_attn_run(&fa);
    if (c->rot_v) // H·H = I: back to the model's basis before the output projection
        for (int t = 0; t < n; t++) ops_hadamard_heads(c->buf[out] + (size_t)t * q_dim, hp->n_heads, hp->head_dim, c->rot_block);
    return 0;
}

static int cpu_add(void *be, fwd_buf x, fwd_buf y, int count) {
    model_ctx *c = be;
    ops_add(c->buf[x], c->buf[y], count);
    return 0;
}

static int cpu_scale(void *be, fwd_buf x, int count, float s) {
    model_ctx *c = be;
    ops_scale(c->buf[x], s, count);
    return 0;
}

static int cpu_glu(void *be, fwd_buf g, fwd_buf u, int count, fwd_act act) {
    model_ctx *c = be;
    glu(c, c->buf[g], c->buf[u], count, act == FWD_ACT_GELU_TANH);
    return 0;
}

// The residual stream after the layers (x_out), the embedding rows, and the logits rows gathered and normed
// into dst.
static int cpu_out_norm(void *be, fwd_buf dst, fwd_buf src, float eps) {
    model_ctx *c = be;
    const model_batch *b = c->b;
    const int dim = c->m->hp.dim;
    const float *x = c->buf[src], *w = c->m->output_norm.data;
    if (b->x_out) memcpy(b->x_out, x, (size_t)b->n_tokens * dim * sizeof(float));
    for (int i = 0; i < b->n_embd; i++) // the final-normed hidden state, as pooled embeddings use it
        ops_rmsnorm(b->embd + (size_t)i * dim, x + (size_t)b->embd_rows[i] * dim, w, dim, eps);
    for (int i = 0; i < b->n_logits; i++) // only the rows that sample
        ops_rmsnorm(c->buf[dst] + (size_t)i * dim, x + (size_t)b->logits_rows[i] * dim, w, dim, eps);
    return 0;
}

static int cpu_moe(void *be, fwd_buf dst, fwd_buf x, int n, int layer) {
    model_ctx *c = be;
    return moe_ffn(c->pool, c->mm_scratch, c->moe, c->m, layer, c->buf[dst], c->buf[x], n);
}

static int cpu_gdn(void *be, fwd_buf dst, fwd_buf x, int n, int layer) {
    model_ctx *c = be;
    return gdn_layer(c->pool, c->mm_scratch, c->gdn, c->m, layer, c->kv, c->b, c->buf[dst], c->buf[x], n);
}

static int cpu_gate_split(void *be, fwd_buf qb, fwd_buf gb, fwd_buf src, int n) {
    model_ctx *c = be;
    const int hd = c->m->hp.head_dim, nh = c->m->hp.n_heads;
    for (int t = 0; t < n; t++)
        for (int h = 0; h < nh; h++) {
            const float *s = c->buf[src] + ((size_t)t * nh + h) * 2 * hd;
            memcpy(c->buf[qb] + ((size_t)t * nh + h) * hd, s, (size_t)hd * sizeof(float));
            memcpy(c->buf[gb] + ((size_t)t * nh + h) * hd, s + hd, (size_t)hd * sizeof(float));
        }
    return 0;
}

static int cpu_mul_sigmoid(void *be, fwd_buf x, fwd_buf g, int count) {
    model_ctx *c = be;
    float *xs = c->buf[x];
    const float *gs = c->buf[g];
    for (int i = 0; i < count; i++) xs[i] *= 1.0f / (1.0f + expf(-gs[i]));
    return 0;
}

static const fwd_ops cpu_fwd_ops = {
    .embed = cpu_embed,
    .norm = cpu_norm,
    .matmul = cpu_matmul_op,
    .add_bias = cpu_add_bias,
    .rope = cpu_rope,
    .attention = cpu_attention,
    .add = cpu_add,
    .scale = cpu_scale,
    .glu = cpu_glu,
    .out_norm = cpu_out_norm,
    .moe = cpu_moe,
    .gdn = cpu_gdn,
    .gate_split = cpu_gate_split,
    .mul_sigmoid = cpu_mul_sigmoid,
};

// The output head: logits (n, n_vocab) of n final-normed rows, soft-capped or divided by Granite's logit
// scale where the model says so.
static int output_head(model_ctx *c, float *logits, const float *normed, int n, tc_err *err) {
    const model *m = c->m;
    const float cap = m->hp.final_softcap;
    int rc = n ? matmul(c, logits, normed, n, &m->output, m->hp.n_vocab) : 0;
    if (rc) return tc_err_set(err, rc, "output matmul failed (type %s)", tt_name(m->output.type));
    if (cap > 0)
        for (size_t i = 0; i < (size_t)n * m->hp.n_vocab; i++) logits[i] = cap * tanhf(logits[i] / cap);
    const int nv = m->hp.n_vocab;
    if (m->hp.logit_scale > 0)
        for (int r = 0; r < n; r++) ops_scale(logits + (size_t)r * nv, 1.0f / m->hp.logit_scale, nv);
    return 0;
}

int model_logits_rows(model_ctx *c, const float *normed, int n, float *logits, tc_err *err) {
    if (n < 0 || n > c->max_tokens) return tc_err_set(err, TC_ERR_INVALID, "%d rows (max %d)", n, c->max_tokens);
    return output_head(c, logits, normed, n, err);
}

int model_forward(model_ctx *c, kv_store *kv, const model_batch *b, float *logits, tc_err *err) {
    return model_forward_layers(c, kv, b, c->m->hp.n_layers, logits, err);
}

// The token embeddings of the step's rows into dst's rows 0..n-1.
static int cpu_embed(void *be, fwd_buf dst, int n) {
    model_ctx *c = be;
    const model *m = c->m;
    const model_hparams *hp = &m->hp;
    const int dim = hp->dim;
    const tt_traits *et = tt_get(m->tok_embd.type);
    size_t erow = tt_row_size(m->tok_embd.type, dim);
    float *x = c->buf[dst];
    for (int t = 0; t < n; t++) {
        et->to_float((const char *)m->tok_embd.data + (size_t)c->b->tokens[t] * erow, x + (size_t)t * dim, dim);
        if (hp->embd_scale != 1.0f) ops_scale(x + (size_t)t * dim, hp->embd_scale, dim);
    }
    return 0;
}

// The RoPE angles of b's rows (a pure function of each row's position).
static void rope_rows(model_ctx *c, const model_batch *b) {
    const model_hparams *hp = &c->m->hp;
    const int half = hp->rope_dim / 2;
    for (int t = 0; t < b->n_tokens; t++) {
        ops_rope_angles(c->rcos + (size_t)t * half, c->rsin + (size_t)t * half, b->pos[t], hp->rope_dim,
                        hp->rope_scale, c->inv_freq);
        if (hp->rope_base_swa > 0) // local layers: their own base, positions never scaled (as llama.cpp)
            ops_rope_angles(c->rcos_swa + (size_t)t * half, c->rsin_swa + (size_t)t * half, b->pos[t], hp->rope_dim,
                            1.0f, c->inv_freq_swa);
        if (hp->rope_mscale != 1.0f) { // LongRoPE's attention factor: the rotated dims of q and k scaled
            ops_scale(c->rcos + (size_t)t * half, hp->rope_mscale, half);
            ops_scale(c->rsin + (size_t)t * half, hp->rope_mscale, half);
        }
    }
}

// Batch b (or a sub-batch) as the step: embedding (from layer 0) and RoPE angles, then layers [l0, l1).
static int run_layers(model_ctx *c, const model_batch *b, int l0, int l1, tc_err *err) {
    c->b = b;
    const fwd_graph g = {.ops = &cpu_fwd_ops, .be = c, .m = c->m, .n = b->n_tokens};
    int rc, failed = l0;
    if (l0 == 0 && (rc = fwd_embed(&g))) return tc_err_set(err, rc, "embedding failed");
    rope_rows(c, b);
    if ((rc = fwd_layers(&g, l0, l1, &failed))) return tc_err_set(err, rc, "matmul failed in layer %d", failed);
    return 0;
}

// Layers 0..n_layers-1 over a batch with resumed rows: layers below the resume layer over the other rows
// (compacted into a sub-batch that keeps the sequences and their block tables), then every row from there,
// the resumed rows' residual taken from resume_x. Each row's arithmetic is what the one-pass forward does.
static int forward_resumed(model_ctx *c, const model_batch *b, int n_layers, tc_err *err) {
    const int dim = c->m->hp.dim, n = b->n_tokens;
    float *x = c->buf[FWD_X];
    int ns = 0, rc;
    for (int t = 0, j = 0; t < n; t++) {
        if (j < b->n_resume && b->resume_rows[j] == t) {
            j++;
            continue;
        }
        c->sub_row[ns] = t, c->sub_tok[ns] = b->tokens[t], c->sub_pos[ns] = b->pos[t], c->sub_seq[ns] = b->seq[t];
        ns++;
    }
    model_batch sb = {.n_tokens = ns, .tokens = c->sub_tok, .pos = c->sub_pos, .seq = c->sub_seq,
                      .n_seqs = b->n_seqs, .block_tables = b->block_tables, .block_tables_swa = b->block_tables_swa};
    if (ns > 0 && (rc = run_layers(c, &sb, 0, b->resume_layer, err))) return rc;
    // Spread the sub-batch back to its rows, last first (sub_row[i] >= i: nothing is overwritten unread), and
    // put the resumed rows' residuals in theirs.
    for (int i = ns - 1; i >= 0; i--)
        if (c->sub_row[i] != i)
            memcpy(x + (size_t)c->sub_row[i] * dim, x + (size_t)i * dim, (size_t)dim * sizeof(float));
    for (int j = 0; j < b->n_resume; j++)
        memcpy(x + (size_t)b->resume_rows[j] * dim, b->resume_x + (size_t)j * dim, (size_t)dim * sizeof(float));
    return run_layers(c, b, b->resume_layer, n_layers, err);
}

int model_forward_layers(model_ctx *c, kv_store *kv, const model_batch *b, int n_layers, float *logits, tc_err *err) {
    const model *m = c->m;
    const model_hparams *hp = &m->hp;
    if (n_layers < 1 || n_layers > hp->n_layers)
        return tc_err_set(err, TC_ERR_INVALID, "forward through %d layers (model has %d)", n_layers, hp->n_layers);
    int rc = validate(c, kv, b, err);
    if (rc) return rc;
    if (b->n_resume > 0 && b->resume_layer >= n_layers)
        return tc_err_set(err, TC_ERR_INVALID, "resume layer %d is not below the %d layers run", b->resume_layer,
                          n_layers);
    // the geometry fields that come from the cache, not the model
    c->geo.block_size = c->geo_swa.block_size = kv->block_size;
    c->geo.k_type = c->geo_swa.k_type = kv->k_type;
    c->geo.v_type = c->geo_swa.v_type = kv->v_type;
    // As llama.cpp: K rotated when the K cache is quantized, V when the V cache is; an f16 cache is untouched.
    const int qk = kv->k_type != TT_F16 && kv->k_type != TT_F32, qv = kv->v_type != TT_F16 && kv->v_type != TT_F32;
    c->rot_k = c->rot_block && qk;
    c->rot_v = c->rot_block && qv;
    // K centering and balance (key_center.h): likewise only for a quantized K cache
    c->center_k = qk ? m->k_center_neg : NULL;
    c->k_scale = qk ? m->k_scale : NULL;
    c->q_scale = qk ? m->q_scale : NULL;
    c->kv = kv;
    rc = b->n_resume > 0 ? forward_resumed(c, b, n_layers, err) : run_layers(c, b, 0, n_layers, err);
    if (rc) return rc;
    c->b = b;
    const fwd_graph g = {.ops = &cpu_fwd_ops, .be = c, .m = m, .n = b->n_tokens};
    if ((rc = fwd_out_norm(&g))) return tc_err_set(err, rc, "output norm failed");
    return output_head(c, logits, c->buf[FWD_XB], b->n_logits, err);
}
