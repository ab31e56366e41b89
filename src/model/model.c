// Loading: hyper-parameters from GGUF metadata, weights as borrowed pointers into the mapping, every
// shape and type checked against the hyper-parameters so the forward pass can trust them.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "model/model_internal.h"
#include "tensor/ttype.h"

// --- metadata helpers: keys are "<arch>.<suffix>"
static int get_arch_u32(const gguf_ctx *g, const char *arch, const char *suffix, uint32_t *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return gguf_get_u32(g, key, out);
}

static int get_arch_f32(const gguf_ctx *g, const char *arch, const char *suffix, float *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return gguf_get_f32(g, key, out);
}

// Mixture-of-experts counts as llama.cpp's converter writes them: "<arch>.expert_count", "expert_used_count",
// "expert_feed_forward_length" and, with a shared expert, "expert_shared_feed_forward_length".
static int read_moe_hparams(model *m, tc_err *err) {
    model_hparams *hp = &m->hp;
    const char *a = hp->arch;
    uint32_t u;
    if (get_arch_u32(m->g, a, "expert_count", &u) != 0 || u == 0 || u > MODEL_MAX_EXPERTS)
        return tc_err_set(err, TC_ERR_FORMAT, "missing or invalid %s.expert_count (1..%d)", a, MODEL_MAX_EXPERTS);
    hp->n_expert = (int)u;
    if (get_arch_u32(m->g, a, "expert_used_count", &u) != 0 || u == 0 || u > (uint32_t)hp->n_expert ||
        u > MODEL_MAX_EXPERTS_USED)
        return tc_err_set(err, TC_ERR_FORMAT, "missing or invalid %s.expert_used_count (1..min(expert_count, %d))", a,
                          MODEL_MAX_EXPERTS_USED);
    hp->n_expert_used = (int)u;
    hp->expert_ffn_dim = hp->ffn_dim;
    if (get_arch_u32(m->g, a, "expert_feed_forward_length", &u) == 0) {
        if (u == 0 || u > (1u << 20)) return tc_err_set(err, TC_ERR_FORMAT, "invalid %s.expert_feed_forward_length", a);
        hp->expert_ffn_dim = (int)u;
    }
    if (m->arch->scales && hp->ffn_dim) hp->expert_ffn_dim = hp->ffn_dim; // Granite MoE: llama.cpp's n_ff
    if (!hp->expert_ffn_dim) return tc_err_set(err, TC_ERR_FORMAT, "missing %s.expert_feed_forward_length", a);
    if (m->arch->role[ROLE_FFN_GATE_SHEXP] != ARCH_ABSENT) {
        hp->shexp_ffn_dim = hp->ffn_dim;
        if (get_arch_u32(m->g, a, "expert_shared_feed_forward_length", &u) == 0) {
            if (u == 0 || u > (1u << 20))
                return tc_err_set(err, TC_ERR_FORMAT, "invalid %s.expert_shared_feed_forward_length", a);
            hp->shexp_ffn_dim = (int)u;
        }
        if (!hp->shexp_ffn_dim)
            return tc_err_set(err, TC_ERR_FORMAT, "missing %s.expert_shared_feed_forward_length", a);
    }
    if (!hp->ffn_dim) // no feed_forward_length: the widest FFN there is
        hp->ffn_dim = hp->expert_ffn_dim > hp->shexp_ffn_dim ? hp->expert_ffn_dim : hp->shexp_ffn_dim;
    hp->moe_norm_w = m->arch->moe_norm_w;
    hp->swiglu_limit = m->arch->swiglu_limit;
    hp->swiglu_alpha = m->arch->swiglu_alpha;
    return 0;
}

// The 27B Gemmas scale queries by query_pre_attn_scalar = dim / heads, not key_length. GGUF does not carry
// it: llama.cpp recognises the 27B by its layer count, and so does this.
static int gemma_27b(const model_hparams *hp) {
    return (!strcmp(hp->arch, "gemma2") && hp->n_layers == 46) || (!strcmp(hp->arch, "gemma3") && hp->n_layers == 62);
}

// Attention beyond the shapes: the softmax scale, the sliding window and its layers, soft-capping.
static int read_attn_hparams(model *m, tc_err *err) {
    model_hparams *hp = &m->hp;
    const gguf_ctx *g = m->g;
    const char *a = hp->arch;
    uint32_t u;
    hp->attn_scale = 1.0f / sqrtf(gemma_27b(hp) ? (float)hp->dim / (float)hp->n_heads : (float)hp->head_dim);
    int window = m->arch->swa_window;
    if (m->arch->swa_pattern > 0 && get_arch_u32(g, a, "attention.sliding_window", &u) == 0) {
        if (u == 0 || u > (1u << 24)) return tc_err_set(err, TC_ERR_FORMAT, "invalid %s.attention.sliding_window", a);
        window = (int)u;
    }
    if (window > 0) {
        hp->swa_window = window;
        hp->swa_pattern = m->arch->swa_pattern;
        if (get_arch_u32(g, a, "attention.sliding_window_pattern", &u) == 0) {
            if (u > (1u << 16)) return tc_err_set(err, TC_ERR_FORMAT, "invalid sliding_window_pattern");
            hp->swa_pattern = (int)u;
        }
        if (!m->arch->swa_rope_global)
            hp->rope_base_swa = m->arch->rope_base_swa > 0 ? m->arch->rope_base_swa : hp->rope_base;
    }
    // soft-capping, where the architecture has it: a cap is a positive finite number
    struct { const char *key; float def, *dst; } caps[] = {
        {"attn_logit_softcapping", m->arch->attn_softcap, &hp->attn_softcap},
        {"final_logit_softcapping", m->arch->final_softcap, &hp->final_softcap},
    };
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        if (caps[i].def <= 0) continue;
        float f = caps[i].def;
        if (get_arch_f32(g, a, caps[i].key, &f) == 0 && !(f > 0 && isfinite(f)))
            return tc_err_set(err, TC_ERR_FORMAT, "invalid %s.%s %g", a, caps[i].key, (double)f);
        *caps[i].dst = f;
    }
    return 0;
}

// RoPE scaling. "linear" divides positions by the factor; "llama3" is carried by the rope_freqs tensor (bound
// with the weights); "yarn", for the architectures that take it (arch_desc.yarn), mixes interpolated and
// extrapolated frequencies per dimension (forward.c); anything else would silently give wrong logits, so
// it is refused. rope.scaling.attn_factor multiplies cos and sin, as llama.cpp applies it for every
// architecture that carries it (Phi-3's LongRoPE: sqrt(1 + ln(ctx / original ctx) / ln(original ctx))).
static int read_rope_scaling(model *m, tc_err *err) {
    model_hparams *hp = &m->hp;
    const gguf_ctx *g = m->g;
    const char *a = hp->arch;
    gguf_str s;
    char key[128];
    float f;
    hp->rope_scale = 1.0f;
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    if (gguf_get_str(g, key, &s) == 0) {
        if (s.len == 6 && !memcmp(s.ptr, "linear", 6)) {
            if (get_arch_f32(g, a, "rope.scaling.factor", &f) == 0 && f > 0) hp->rope_scale = 1.0f / f;
        } else if (s.len == 4 && !memcmp(s.ptr, "yarn", 4) && m->arch->yarn) {
            if (get_arch_f32(g, a, "rope.scaling.factor", &f) != 0 || !(f >= 1.0f && f < 1e6f))
                return tc_err_set(err, TC_ERR_FORMAT, "missing or invalid %s.rope.scaling.factor for yarn", a);
            hp->yarn_factor = f;
            hp->yarn_beta_fast = 32.0f, hp->yarn_beta_slow = 1.0f;
            get_arch_f32(g, a, "rope.scaling.yarn_beta_fast", &hp->yarn_beta_fast);
            get_arch_f32(g, a, "rope.scaling.yarn_beta_slow", &hp->yarn_beta_slow);
            if (!(hp->yarn_beta_fast > 0 && hp->yarn_beta_slow > 0 && isfinite(hp->yarn_beta_fast)))
                return tc_err_set(err, TC_ERR_FORMAT, "invalid %s.rope.scaling.yarn_beta_fast/slow", a);
        } else if (!(s.len == 4 && !memcmp(s.ptr, "none", 4)) && !(s.len == 6 && !memcmp(s.ptr, "llama3", 6))) {
            return tc_err_set(err, TC_ERR_UNSUPPORTED, "unsupported rope scaling type '%.*s'",
                              (int)(s.len > 32 ? 32 : s.len), s.ptr);
        }
    }
    uint32_t u = 0;
    get_arch_u32(g, a, "rope.scaling.original_context_length", &u);
    if (u > (1u << 24)) return tc_err_set(err, TC_ERR_FORMAT, "invalid %s.rope.scaling.original_context_length", a);
    hp->rope_orig_ctx = u ? (int)u : hp->ctx_train; // absent (or 0): the trained context, as llama.cpp
    hp->rope_mscale = 1.0f;
    if (get_arch_f32(g, a, "rope.scaling.attn_factor", &hp->rope_mscale) == 0 &&
        !(hp->rope_mscale > 0 && isfinite(hp->rope_mscale)))
        return tc_err_set(err, TC_ERR_FORMAT, "invalid %s.rope.scaling.attn_factor", a);
    // YaRN's magnitude on cos and sin, as llama.cpp nets it out (HF's attention_factor): with m(x) = 1 + 0.1·x·
    // ln(factor), m(1) / m(yarn_log_multiplier) when the file gives that multiplier (Ministral 3: 1, so 1),
    // else m(1) (gpt-oss, and any YaRN file without it)
    if (hp->yarn_factor > 1.0f) {
        float lm = 0.0f, l = logf(hp->yarn_factor);
        get_arch_f32(g, a, "rope.scaling.yarn_log_multiplier", &lm);
        if (!isfinite(lm) || lm < 0)
            return tc_err_set(err, TC_ERR_FORMAT, "invalid %s.rope.scaling.yarn_log_multiplier", a);
        hp->rope_mscale *= lm > 0 ? (1.0f + 0.1f * l) / (1.0f + 0.1f * lm * l) : 1.0f + 0.1f * l;
    }
    // Llama 4's attention temperature, as Mistral 3 carries it: queries at position p times
    // 1 + scale·ln(1 + floor(p / original context))
    if (m->arch->yarn && get_arch_f32(g, a, "attention.temperature_scale", &f) == 0) {
        if (!isfinite(f) || f < 0) return tc_err_set(err, TC_ERR_FORMAT, "invalid %s.attention.temperature_scale", a);
        hp->attn_temp_scale = f;
    }
    return 0;
}

// Granite's multipliers (arch_desc.scales), as llama.cpp reads them: a key that is absent, or 0, leaves its
// default (no multiplier, the 1/sqrt(head_dim) softmax scale); a given one must be a positive finite number.
static int read_scales(model *m, tc_err *err) {
    model_hparams *hp = &m->hp;
    const char *a = hp->arch;
    struct { const char *key; float *dst; } keys[] = {
        {"embedding_scale", &hp->embd_scale},   {"attention.scale", &hp->attn_scale},
        {"residual_scale", &hp->residual_scale}, {"logit_scale", &hp->logit_scale},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        float f = 0;
        if (get_arch_f32(m->g, a, keys[i].key, &f) != 0 || f == 0) continue;
        if (!(f > 0 && isfinite(f) && f < 1e6f))
            return tc_err_set(err, TC_ERR_FORMAT, "invalid %s.%s %g", a, keys[i].key, (double)f);
        *keys[i].dst = f;
    }
    char key[128];
    int rope = 1;
    snprintf(key, sizeof key, "%s.rope.scaling.finetuned", a);
    if (gguf_get_bool(m->g, key, &rope) == 0 && !rope) hp->no_rope_step = 1; // every layer without RoPE
    // llama.cpp's granite graph adds FFN biases when the file has them; no file seen has them, and ignoring
    // them would be silently wrong
    if (gguf_find_tensor(m->g, "blk.0.ffn_down.bias") || gguf_find_tensor(m->g, "blk.0.ffn_up.bias"))
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "%s: FFN biases are not supported", a);
    if (gguf_find_tensor(m->g, "blk.0.ffn_up_shexp.weight"))
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "%s: shared experts (GraniteMoeShared) are not supported",
                          a);
    float ws = 0;
    if (get_arch_f32(m->g, a, "expert_weights_scale", &ws) == 0 && ws != 0 && ws != 1)
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "%s.expert_weights_scale %g is not supported", a,
                          (double)ws);
    return 0;
}

int model_read_hparams(model *m, tc_err *err) {
    model_hparams *hp = &m->hp;
    const gguf_ctx *g = m->g;
    gguf_str s;
    if (gguf_get_str(g, "general.architecture", &s) != 0)
        return tc_err_set(err, TC_ERR_FORMAT, "missing general.architecture");
    m->arch = arch_find(s.ptr, (int)s.len);
    if (!m->arch)
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "unsupported architecture '%.*s' (supported: %s)",
                          (int)(s.len > 64 ? 64 : s.len), s.ptr, arch_supported_list());
    snprintf(hp->arch, sizeof hp->arch, "%s", m->arch->name);
    if (gguf_get_str(g, "general.name", &s) == 0)
        snprintf(hp->name, sizeof hp->name, "%.*s", (int)(s.len > 120 ? 120 : s.len), s.ptr);
    const char *a = hp->arch;
    uint32_t u;
    struct { const char *key; int *dst; } req[] = {
        {"embedding_length", &hp->dim},    {"block_count", &hp->n_layers},
        {"attention.head_count", &hp->n_heads}, {"feed_forward_length", &hp->ffn_dim},
    };
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++) {
        const int found = get_arch_u32(g, a, req[i].key, &u) == 0;
        if (!found && m->arch->moe && req[i].dst == &hp->ffn_dim) continue; // the experts' own (read_moe_hparams)
        if (!found || u == 0 || u > (1u << 20))
            return tc_err_set(err, TC_ERR_FORMAT, "missing or invalid %s.%s", a, req[i].key);
        *req[i].dst = (int)u;
    }
    hp->n_kv_heads = hp->n_heads;
    if (get_arch_u32(g, a, "attention.head_count_kv", &u) == 0) hp->n_kv_heads = (int)u;
    if (hp->n_kv_heads <= 0 || hp->n_heads % hp->n_kv_heads != 0)
        return tc_err_set(err, TC_ERR_FORMAT, "head_count %d is not a multiple of head_count_kv %d", hp->n_heads,
                          hp->n_kv_heads);
    hp->head_dim = hp->dim / hp->n_heads;
    if (get_arch_u32(g, a, "attention.key_length", &u) == 0) hp->head_dim = (int)u;
    if (hp->head_dim <= 0 || hp->head_dim > 1024 || hp->head_dim % 2)
        return tc_err_set(err, TC_ERR_FORMAT, "invalid head dimension %d", hp->head_dim);
    hp->ctx_train = 2048;
    if (get_arch_u32(g, a, "context_length", &u) == 0 && u > 0) hp->ctx_train = u > (1u << 24) ? 1 << 24 : (int)u;
    hp->norm_eps = 1e-5f;
    get_arch_f32(g, a, "attention.layer_norm_rms_epsilon", &hp->norm_eps);
    hp->rope_base = 10000.0f;
    get_arch_f32(g, a, "rope.freq_base", &hp->rope_base);
    hp->rope_dim = hp->head_dim;
    if (get_arch_u32(g, a, "rope.dimension_count", &u) == 0) hp->rope_dim = (int)u;
    if (hp->rope_dim <= 0 || hp->rope_dim > hp->head_dim || hp->rope_dim % 2)
        return tc_err_set(err, TC_ERR_FORMAT, "invalid rope.dimension_count %d", hp->rope_dim);
    int rc = read_rope_scaling(m, err);
    if (rc) return rc;
    hp->rope_neox = m->arch->rope_neox;
    hp->no_rope_step = m->arch->no_rope_step;
    hp->ffn_gelu = m->arch->ffn_gelu;
    hp->embd_scale = m->arch->embd_scale ? sqrtf((float)hp->dim) : 1.0f;
    hp->attn_sinks = m->arch->role[ROLE_ATTN_SINKS] != ARCH_ABSENT;
    if ((rc = read_attn_hparams(m, err))) return rc;
    if (m->arch->scales && (rc = read_scales(m, err))) return rc;
    return m->arch->moe ? read_moe_hparams(m, err) : 0;
}

// A row range [row0, row0 + rows) of the matrix src as a matrix of its own (rows of a GGUF matrix are whole
// blocks, so any row range is one).
static model_weight weight_rows(const model_weight *src, int64_t row0, int64_t rows) {
    model_weight w = *src;
    w.data = (const char *)src->data + (size_t)row0 * tt_row_size(src->type, src->cols);
    w.rows = rows;
    return w;
}

// Phi-3's fused matrices of layer l (arch_desc.fused): attn_qkv, when present, as q, k and v; ffn_up as gate
// (its first ffn_dim rows) and up. ws: the layer's ROLE_COUNT weights.
static int bind_fused(model *m, int l, model_weight *ws, tc_err *err) {
    const model_hparams *hp = &m->hp;
    const int64_t q = (int64_t)hp->n_heads * hp->head_dim, kv = (int64_t)hp->n_kv_heads * hp->head_dim;
    char name[96];
    model_weight f;
    int rc;
    snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", l);
    if ((rc = model_bind(m, &f, name, q + 2 * kv, hp->dim, 1, 0, 0, err))) return rc;
    if (f.data) {
        ws[ROLE_ATTN_Q] = weight_rows(&f, 0, q);
        ws[ROLE_ATTN_K] = weight_rows(&f, q, kv);
        ws[ROLE_ATTN_V] = weight_rows(&f, q + kv, kv);
    }
    snprintf(name, sizeof name, "blk.%d.ffn_up.weight", l);
    if ((rc = model_bind(m, &f, name, 2 * (int64_t)hp->ffn_dim, hp->dim, 1, 0, 1, err))) return rc;
    ws[ROLE_FFN_GATE] = weight_rows(&f, 0, hp->ffn_dim);
    ws[ROLE_FFN_UP] = weight_rows(&f, hp->ffn_dim, hp->ffn_dim);
    return 0;
}

// RoPE frequency divisors (rope_dim/2, F32): a llama3 rope_freqs tensor, or Phi-3's LongRoPE pair, of which
// the long factors apply when the model's context exceeds the original one (llama.cpp: get_rope_factors, with
// the context it serves; here the trained context, what tachyon serves at most) and the short ones otherwise.
static int bind_rope_factors(model *m, tc_err *err) {
    model_hparams *hp = &m->hp;
    hp->rope_long = hp->ctx_train > hp->rope_orig_ctx;
    const gguf_tensor *rf = gguf_find_tensor(m->g, "rope_freqs.weight");
    if (!rf) rf = gguf_find_tensor(m->g, hp->rope_long ? "rope_factors_long.weight" : "rope_factors_short.weight");
    if (!rf) return 0;
    if (rf->type != TT_F32 || rf->ne[0] != hp->rope_dim / 2 || rf->n_dims != 1)
        return tc_err_set(err, TC_ERR_FORMAT, "%.*s must be F32 [%d]", (int)rf->name.len, rf->name.ptr,
                          hp->rope_dim / 2);
    m->rope_freqs = rf->data;
    return 0;
}

int model_bind_weights(model *m, tc_err *err) {
    model_hparams *hp = &m->hp;
    const gguf_tensor *te = gguf_find_tensor(m->g, "token_embd.weight");
    if (!te || te->n_dims != 2) return tc_err_set(err, TC_ERR_FORMAT, "missing or malformed token_embd.weight");
    hp->n_vocab = (int)te->ne[1];
    int rc;
    if ((rc = model_bind(m, &m->tok_embd, "token_embd.weight", hp->n_vocab, hp->dim, 1, 0, 1, err))) return rc;
    if ((rc = model_bind(m, &m->output_norm, "output_norm.weight", 1, hp->dim, 1, 1, 1, err))) return rc;
    if ((rc = model_bind(m, &m->output, "output.weight", hp->n_vocab, hp->dim, 1, 0, 0, err))) return rc;
    hp->tied_embeddings = m->output.data == NULL;
    if (hp->tied_embeddings) m->output = m->tok_embd;

    if ((rc = bind_rope_factors(m, err))) return rc;

    int q_dim = hp->n_heads * hp->head_dim, kv_dim = hp->n_kv_heads * hp->head_dim;
    const int ne = hp->n_expert, eff = hp->expert_ffn_dim, sff = hp->shexp_ffn_dim;
    // MAT: a matrix, VEC: a vector or a bias (vectors' rows 1; an expert bias is a matrix of vectors), EXPS: a 3-D
    // tensor of d experts' matrices; every field given (clang's -Wmissing-field-initializers)
#define MAT(r, c) {(r), (c), 0, 1}
#define VEC(r, c) {(r), (c), 1, 1}
#define EXPS(r, c, d) {(r), (c), 0, (d)}
    struct { int64_t rows, cols; int vector; int64_t depth; } shape[ROLE_COUNT] = {
        [ROLE_ATTN_NORM] = VEC(1, hp->dim),       [ROLE_ATTN_Q] = MAT(q_dim, hp->dim),
        [ROLE_ATTN_K] = MAT(kv_dim, hp->dim),     [ROLE_ATTN_V] = MAT(kv_dim, hp->dim),
        [ROLE_ATTN_OUT] = MAT(hp->dim, q_dim),    [ROLE_ATTN_Q_BIAS] = VEC(1, q_dim),
        [ROLE_ATTN_K_BIAS] = VEC(1, kv_dim),      [ROLE_ATTN_V_BIAS] = VEC(1, kv_dim),
        [ROLE_ATTN_Q_NORM] = VEC(1, m->arch->qk_norm_all ? q_dim : hp->head_dim),
        [ROLE_ATTN_K_NORM] = VEC(1, m->arch->qk_norm_all ? kv_dim : hp->head_dim),
        [ROLE_FFN_NORM] = VEC(1, hp->dim),        [ROLE_FFN_GATE] = MAT(hp->ffn_dim, hp->dim),
        [ROLE_FFN_UP] = MAT(hp->ffn_dim, hp->dim), [ROLE_FFN_DOWN] = MAT(hp->dim, hp->ffn_dim),
        [ROLE_ATTN_POST_NORM] = VEC(1, hp->dim),  [ROLE_FFN_POST_NORM] = VEC(1, hp->dim),
        [ROLE_FFN_GATE_INP] = MAT(ne, hp->dim),   [ROLE_FFN_GATE_EXPS] = EXPS(eff, hp->dim, ne),
        [ROLE_FFN_UP_EXPS] = EXPS(eff, hp->dim, ne), [ROLE_FFN_DOWN_EXPS] = EXPS(hp->dim, eff, ne),
        [ROLE_FFN_GATE_INP_SHEXP] = VEC(1, hp->dim), [ROLE_FFN_GATE_SHEXP] = MAT(sff, hp->dim),
        [ROLE_FFN_UP_SHEXP] = MAT(sff, hp->dim),  [ROLE_FFN_DOWN_SHEXP] = MAT(hp->dim, sff),
        [ROLE_ATTN_OUT_BIAS] = VEC(1, hp->dim),   [ROLE_ATTN_SINKS] = VEC(1, hp->n_heads),
        [ROLE_FFN_NORM_PA] = VEC(1, hp->dim),     [ROLE_FFN_GATE_INP_BIAS] = VEC(1, ne),
        [ROLE_FFN_GATE_EXPS_BIAS] = VEC(ne, eff), [ROLE_FFN_UP_EXPS_BIAS] = VEC(ne, eff),
        [ROLE_FFN_DOWN_EXPS_BIAS] = VEC(ne, hp->dim),
    };
#undef MAT
#undef VEC
#undef EXPS
    for (int r = 0; r < ROLE_COUNT; r++)
        if (!shape[r].depth) shape[r].depth = 1;
    if (hp->n_layers > gguf_n_tensors(m->g)) // every layer has tensors: a larger count is not this file's
        return tc_err_set(err, TC_ERR_INVALID, "the file declares %d layers but holds %lld tensors", hp->n_layers,
                          (long long)gguf_n_tensors(m->g));
    m->layers = calloc((size_t)hp->n_layers * ROLE_COUNT, sizeof *m->layers);
    if (!m->layers) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    for (int l = 0; l < hp->n_layers && !m->arch->hybrid; l++) {
        model_weight *ws = &m->layers[(size_t)l * ROLE_COUNT];
        if (m->arch->fused && (rc = bind_fused(m, l, ws, err))) return rc;
        for (int r = 0; r < ROLE_COUNT; r++) {
            if (m->arch->role[r] == ARCH_ABSENT || ws[r].data) continue; // (bound from a fused matrix)
            char name[96];
            snprintf(name, sizeof name, "blk.%d.%s", l, arch_role_suffix((arch_role)r));
            rc = model_bind(m, &m->layers[(size_t)l * ROLE_COUNT + r], name, shape[r].rows, shape[r].cols,
                      shape[r].depth, shape[r].vector, m->arch->role[r] == ARCH_REQUIRED, err);
            if (rc) return rc;
        }
    }
    uint64_t n_params = 0, bytes = 0;
    for (int64_t i = 0; i < gguf_n_tensors(m->g); i++) {
        const gguf_tensor *t = gguf_tensor_at(m->g, i);
        n_params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        bytes += t->size;
    }
    hp->n_params = n_params;
    hp->weight_bytes = bytes;
    return 0;
}

void model_free(model *m) {
    if (!m) return;
    free(m->arena);
    free(m->layers);
    free(m->k_center_neg);
    gguf_close(m->g);
    free(m);
}

const model_hparams *model_get_hparams(const model *m) { return &m->hp; }
const gguf_ctx *model_gguf(const model *m) { return m->g; }
