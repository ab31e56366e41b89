// Loading of hybrid linear-attention models (Qwen3.5, Qwen3.5 MoE, Qwen3-Next): the gated DeltaNet
// hyper-parameters, the layer kinds, and each layer's weights by its kind (and the FFN's: dense, or routed experts
// with a shared one), under the names and shapes llama.cpp's converter writes. Multi-token
// prediction (MTP) layers that follow the trunk ("<arch>.nextn_predict_layers") are not loaded: the forward
// pass is the trunk's, as llama.cpp's main graph.
#include <stdio.h>
#include <string.h>

#include "model/model_internal.h"

static int get_u32(const gguf_ctx *g, const char *arch, const char *suffix, uint32_t *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return gguf_get_u32(g, key, out);
}

// IMRoPE's sections: with text positions (t = h = w, e = 0) a rotated pair turns with the text position
// unless the section pattern sends it to e; every pair must be in t, h or w, so that the rotation is NeoX's
// over rope_dim dims. A file without sections rotates that way too.
static int check_sections(const model *m, tc_err *err) {
    const model_hparams *hp = &m->hp;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", hp->arch);
    const int64_t i = gguf_find_key(m->g, key);
    if (i < 0) return 0;
    const uint64_t n = gguf_kv_type(m->g, i) == GGUF_TYPE_ARRAY ? gguf_arr_n(m->g, i) : 0;
    if (!n || gguf_arr_type(m->g, i) != GGUF_TYPE_INT32 || n < 3 || n > 4 || !gguf_arr_data(m->g, i))
        return tc_err_set(err, TC_ERR_FORMAT, "%s must be 3 or 4 int32", key);
    int32_t s[4] = {0, 0, 0, 0};
    memcpy(s, gguf_arr_data(m->g, i), (size_t)n * sizeof(int32_t));
    const int total = s[0] + s[1] + s[2] + s[3];
    if (s[0] < 0 || s[1] < 0 || s[2] < 0 || s[3] < 0 || total <= 0)
        return tc_err_set(err, TC_ERR_FORMAT, "invalid %s", key);
    for (int p = 0; p < hp->rope_dim / 2; p++) {
        const int sec = p % total, r = sec % 3;
        if (!((r == 0 && sec < 3 * s[0]) || (r == 1 && sec < 3 * s[1]) || (r == 2 && sec < 3 * s[2])))
            return tc_err_set(err, TC_ERR_UNSUPPORTED,
                              "%s [%d, %d, %d, %d]: rotated pair %d is not a text section", key, s[0], s[1],
                              s[2], s[3], p);
    }
    return 0;
}

// The explicit list of recurrent layers, "<arch>.attention.recurrent_layers" at kv index i (a bool per layer,
// the MTP layers' included: recent converters write it from the HF config's layer_types), taken when it is an
// interval's pattern over the trunk's n_layers (layer l full attention iff (l + 1) % interval == 0), which
// becomes hp->full_attn_interval; n_all: the file's block_count.
static int read_layer_list(model_hparams *hp, const gguf_ctx *g, int64_t i, const char *key, int n_all,
                           tc_err *err) {
    if (gguf_kv_type(g, i) != GGUF_TYPE_ARRAY || gguf_arr_type(g, i) != GGUF_TYPE_BOOL ||
        gguf_arr_n(g, i) != (uint64_t)n_all || !gguf_arr_data(g, i))
        return tc_err_set(err, TC_ERR_FORMAT, "%s must be %d bools (block_count)", key, n_all);
    const uint8_t *rec = gguf_arr_data(g, i);
    int interval = hp->n_layers + 1; // (every layer recurrent)
    for (int l = hp->n_layers - 1; l >= 0; l--)
        if (!rec[l]) interval = l + 1;
    for (int l = 0; l < hp->n_layers; l++)
        if ((rec[l] != 0) != ((l + 1) % interval != 0))
            return tc_err_set(err, TC_ERR_UNSUPPORTED,
                              "%s: layer %d is %s; only every n-th layer as full attention is supported", key, l,
                              rec[l] ? "recurrent" : "full attention");
    hp->full_attn_interval = interval;
    return 0;
}

int model_hybrid_read_hparams(model *m, tc_err *err) {
    model_hparams *hp = &m->hp;
    const char *a = hp->arch;
    uint32_t u;
    struct {
        const char *key;
        int *dst;
        uint32_t max;
    } req[] = {
        {"ssm.conv_kernel", &hp->ssm_conv, 64},
        {"ssm.state_size", &hp->ssm_state, 1024},
        {"ssm.group_count", &hp->ssm_groups, 1024},
        {"ssm.time_step_rank", &hp->ssm_vheads, 1024},
    };
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++) {
        if (get_u32(m->g, a, req[i].key, &u) != 0 || u == 0 || u > req[i].max)
            return tc_err_set(err, TC_ERR_FORMAT, "missing or invalid %s.%s (1..%u)", a, req[i].key,
                              req[i].max);
        *req[i].dst = (int)u;
    }
    if (hp->ssm_conv < 2)
        return tc_err_set(err, TC_ERR_FORMAT, "%s.ssm.conv_kernel %d: at least 2", a, hp->ssm_conv);
    if (hp->ssm_vheads % hp->ssm_groups)
        return tc_err_set(err, TC_ERR_FORMAT,
                          "%s.ssm.time_step_rank %d is not a multiple of ssm.group_count %d", a,
                          hp->ssm_vheads, hp->ssm_groups);
    if (get_u32(m->g, a, "ssm.inner_size", &u) == 0 && u != (uint32_t)(hp->ssm_state * hp->ssm_vheads))
        return tc_err_set(err, TC_ERR_UNSUPPORTED,
                          "%s.ssm.inner_size %u: value heads of another size than "
                          "ssm.state_size are not supported",
                          a, u);
    if (get_u32(m->g, a, "attention.value_length", &u) == 0 && u != (uint32_t)hp->head_dim)
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "%s.attention.value_length %u differs from key_length %d", a, u,
                          hp->head_dim);
    hp->full_attn_interval = 4; // llama.cpp's default
    if (get_u32(m->g, a, "full_attention_interval", &u) == 0) {
        if (u == 0 || u > (1u << 16))
            return tc_err_set(err, TC_ERR_FORMAT, "invalid %s.full_attention_interval", a);
        hp->full_attn_interval = (int)u;
    }
    const int n_all = hp->n_layers;
    if (get_u32(m->g, a, "nextn_predict_layers", &u) == 0 && u > 0) { // the MTP layers follow the trunk
        if ((int)u >= hp->n_layers)
            return tc_err_set(err, TC_ERR_FORMAT, "invalid %s.nextn_predict_layers", a);
        hp->n_layers -= (int)u;
    }
    char key[128];
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", a);
    const int64_t list = gguf_find_key(m->g, key);
    int rc;
    if (list >= 0 && (rc = read_layer_list(hp, m->g, list, key, n_all, err))) return rc;
    hp->attn_gated = 1;
    hp->ssm_grouped = m->arch->ssm_grouped;
    // every sequence's state is read and written once per token: a file asking for more than real models'
    // (Qwen3.5-397B: 0.2 GiB) would take the memory and time of far larger weights than it holds
    const double rs_bytes = (double)model_rs_slot_floats(hp) * sizeof(float);
    if (rs_bytes > MODEL_RS_SEQ_MAX)
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "%s: a recurrent state of %.1f GiB per sequence (at most %.0f)",
                          a, rs_bytes / 1073741824.0, MODEL_RS_SEQ_MAX / 1073741824.0);
    return check_sections(m, err);
}

// One layer's weights by its kind; ws: its ROLE_COUNT entries. Qwen3-Next (ssm_grouped) has beta and alpha in
// one ssm_ba matrix, and q, k, v and z in attn_qkv and attn_gate or, in files of older converters, in one ssm_in.
static int bind_layer(model *m, int l, model_weight *ws, tc_err *err) {
    const model_hparams *hp = &m->hp;
    const int64_t dim = hp->dim, hd = hp->head_dim, q = (int64_t)hp->n_heads * hd,
                  kv = (int64_t)hp->n_kv_heads * hd;
    const int64_t kd = (int64_t)hp->ssm_state * hp->ssm_groups, vd = (int64_t)hp->ssm_state * hp->ssm_vheads;
    const int64_t hv = hp->ssm_vheads, ne = hp->n_expert, eff = hp->expert_ffn_dim, sff = hp->shexp_ffn_dim;
    const int rec = model_layer_is_recurrent(hp, l), att = !rec, moe = m->arch->moe, grp = hp->ssm_grouped;
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s", l, arch_role_suffix(ROLE_SSM_IN));
    const int fused_in = rec && grp && gguf_find_tensor(m->g, name) != NULL;
    struct {
        arch_role r;
        int64_t rows, cols;
        int vector, on;
        int64_t depth; // experts of a 3-D tensor (0: a matrix)
    } t[] = {
        {ROLE_ATTN_NORM, 1, dim, 1, 1, 0},
        {ROLE_FFN_NORM_PA, 1, dim, 1, 1, 0},
        {ROLE_FFN_GATE, hp->ffn_dim, dim, 0, !moe, 0},
        {ROLE_FFN_UP, hp->ffn_dim, dim, 0, !moe, 0},
        {ROLE_FFN_DOWN, dim, hp->ffn_dim, 0, !moe, 0},
        {ROLE_FFN_GATE_INP, ne, dim, 0, moe, 0},
        {ROLE_FFN_GATE_EXPS, eff, dim, 0, moe, ne},
        {ROLE_FFN_UP_EXPS, eff, dim, 0, moe, ne},
        {ROLE_FFN_DOWN_EXPS, dim, eff, 0, moe, ne},
        {ROLE_FFN_GATE_INP_SHEXP, 1, dim, 1, moe, 0},
        {ROLE_FFN_GATE_SHEXP, sff, dim, 0, moe, 0},
        {ROLE_FFN_UP_SHEXP, sff, dim, 0, moe, 0},
        {ROLE_FFN_DOWN_SHEXP, dim, sff, 0, moe, 0},
        {ROLE_SSM_QKV, 2 * kd + vd, dim, 0, rec && !fused_in, 0},
        {ROLE_SSM_GATE, vd, dim, 0, rec && !fused_in, 0},
        {ROLE_SSM_IN, 2 * kd + 2 * vd, dim, 0, fused_in, 0},
        {ROLE_SSM_CONV, 2 * kd + vd, hp->ssm_conv, 1, rec, 0},
        {ROLE_SSM_DT, 1, hv, 1, rec, 0},
        {ROLE_SSM_A, 1, hv, 1, rec, 0},
        {ROLE_SSM_BETA, hv, dim, 0, rec && !grp, 0},
        {ROLE_SSM_ALPHA, hv, dim, 0, rec && !grp, 0},
        {ROLE_SSM_BA, 2 * hv, dim, 0, rec && grp, 0},
        {ROLE_SSM_NORM, 1, hp->ssm_state, 1, rec, 0},
        {ROLE_SSM_OUT, dim, vd, 0, rec, 0},
        {ROLE_ATTN_Q, 2 * q, dim, 0, att, 0},
        {ROLE_ATTN_K, kv, dim, 0, att, 0},
        {ROLE_ATTN_V, kv, dim, 0, att, 0},
        {ROLE_ATTN_OUT, dim, q, 0, att, 0},
        {ROLE_ATTN_Q_NORM, 1, hd, 1, att, 0},
        {ROLE_ATTN_K_NORM, 1, hd, 1, att, 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (!t[i].on) continue;
        snprintf(name, sizeof name, "blk.%d.%s", l, arch_role_suffix(t[i].r));
        int rc = model_bind(m, &ws[t[i].r], name, t[i].rows, t[i].cols, t[i].depth ? t[i].depth : 1, t[i].vector, 1,
                            err);
        if (rc) return rc;
    }
    return 0;
}

int model_hybrid_bind(model *m, tc_err *err) {
    for (int l = 0; l < m->hp.n_layers; l++) {
        int rc = bind_layer(m, l, &m->layers[(size_t)l * ROLE_COUNT], err);
        if (rc) return rc;
    }
    return 0;
}
