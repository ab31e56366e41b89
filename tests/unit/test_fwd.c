// The layer sequences (model/fwd.h) through a recording backend: every architecture's block must call the
// operations a backend supplies, in order, on the right buffers and weights, with its optional steps (biases,
// q/k norms, post-norms, the GLU's activation) exactly when the architecture has them; an operation's error
// must stop the layers and name the layer. The model is a stand-in: hyper-parameters and a weights table whose
// present roles point at a dummy, so no file is read and no kernel runs.
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "model/fwd.h"
#include "model/model_internal.h"
#include "test_util.h"

#define N_LAYERS 2

typedef struct recorder {
    char log[8192];
    size_t len;
    int calls;
    int fail_at; // the call (1-based) that returns TC_ERR_INVALID; 0: none
} recorder;

static const char *const BUF[FWD_BUF_COUNT] = {"X", "XB", "Q", "K", "V", "HB", "HB2"};

static int rec(recorder *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int rec(recorder *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(r->log + r->len, sizeof r->log - r->len, fmt, ap);
    va_end(ap);
    if (w > 0) r->len += (size_t)w < sizeof r->log - r->len ? (size_t)w : sizeof r->log - r->len - 1;
    return ++r->calls == r->fail_at ? TC_ERR_INVALID : 0;
}

static int r_embed(void *be, fwd_buf dst, int n) { return rec(be, "embed %s %d\n", BUF[dst], n); }
static int r_norm(void *be, fwd_buf dst, fwd_buf src, int rows, int len, int layer, arch_role w, float eps) {
    return rec(be, "norm %s=%s %dx%d L%d %s %g\n", BUF[dst], BUF[src], rows, len, layer, arch_role_suffix(w), eps);
}
static int r_matmul(void *be, const fwd_buf *outs, fwd_buf x, int n, int layer, const arch_role *ws, int count) {
    char line[256] = "matmul";
    for (int i = 0; i < count; i++)
        snprintf(line + strlen(line), sizeof line - strlen(line), " %s=%s@%s", BUF[outs[i]], BUF[x],
                 arch_role_suffix(ws[i]));
    return rec(be, "%s n%d L%d\n", line, n, layer);
}
static int r_add_bias(void *be, fwd_buf x, int n, int len, int layer, arch_role b) {
    return rec(be, "bias %s %dx%d L%d %s\n", BUF[x], n, len, layer, arch_role_suffix(b));
}
static int r_rope(void *be, fwd_buf q, fwd_buf k, int n, int layer) {
    return rec(be, "rope %s %s %d L%d\n", BUF[q], BUF[k], n, layer);
}
static int r_attention(void *be, fwd_buf out, fwd_buf q, fwd_buf k, fwd_buf v, int n, int layer) {
    return rec(be, "attention %s=%s,%s,%s %d L%d\n", BUF[out], BUF[q], BUF[k], BUF[v], n, layer);
}
static int r_add(void *be, fwd_buf x, fwd_buf y, int count) { return rec(be, "add %s+=%s %d\n", BUF[x], BUF[y], count); }
static int r_glu(void *be, fwd_buf g, fwd_buf u, int count, fwd_act act) {
    return rec(be, "glu %s %s %d %s\n", BUF[g], BUF[u], count, act == FWD_ACT_GELU_TANH ? "gelu" : "silu");
}
static int r_out_norm(void *be, fwd_buf dst, fwd_buf src, float eps) {
    return rec(be, "out_norm %s=%s %g\n", BUF[dst], BUF[src], eps);
}

static int r_moe(void *be, fwd_buf dst, fwd_buf x, int n, int layer) {
    return rec(be, "moe %s=%s %d L%d\n", BUF[dst], BUF[x], n, layer);
}

static int r_gdn(void *be, fwd_buf dst, fwd_buf x, int n, int layer) {
    return rec(be, "gdn %s=%s %d L%d\n", BUF[dst], BUF[x], n, layer);
}
static int r_gate_split(void *be, fwd_buf q, fwd_buf gate, fwd_buf src, int n) {
    return rec(be, "gate_split %s %s=%s %d\n", BUF[q], BUF[gate], BUF[src], n);
}
static int r_mul_sigmoid(void *be, fwd_buf x, fwd_buf g, int count) {
    return rec(be, "mul_sigmoid %s %s %d\n", BUF[x], BUF[g], count);
}

static int r_scale(void *be, fwd_buf x, int count, float s) {
    return rec(be, "scale %s %d %g\n", BUF[x], count, s);
}

static const fwd_ops REC_OPS = {.embed = r_embed, .norm = r_norm, .matmul = r_matmul, .add_bias = r_add_bias,
                                .rope = r_rope, .attention = r_attention, .add = r_add, .scale = r_scale,
                                .glu = r_glu, .out_norm = r_out_norm, .moe = r_moe, .gdn = r_gdn,
                                .gate_split = r_gate_split, .mul_sigmoid = r_mul_sigmoid};

// A stand-in model of architecture `name`: every required role present, optional ones when with_optional.
static void fake_model(model *m, model_weight *layers, const char *name, int with_optional) {
    static const float dummy[1];
    memset(m, 0, sizeof *m);
    m->arch = arch_find(name, (int)strlen(name));
    m->hp = (model_hparams){.dim = 8, .n_layers = N_LAYERS, .n_heads = 4, .n_kv_heads = 2, .head_dim = 4,
                            .ffn_dim = 12, .norm_eps = 0.5f, .ffn_gelu = m->arch->ffn_gelu};
    m->layers = layers;
    for (int l = 0; l < N_LAYERS; l++)
        for (int r = 0; r < ROLE_COUNT; r++) {
            int on = m->arch->role[r] == ARCH_REQUIRED || (with_optional && m->arch->role[r] == ARCH_OPTIONAL);
            layers[l * ROLE_COUNT + r] = (model_weight){.data = on ? dummy : NULL, .rows = 1, .cols = 1};
        }
}

// The layers' log of a 3-row step.
static int run(recorder *r, const model *m, int *failed) {
    memset(r->log, 0, sizeof r->log);
    r->len = 0, r->calls = 0;
    const fwd_graph g = {.ops = &REC_OPS, .be = r, .m = m, .n = 3};
    return fwd_layers(&g, 0, N_LAYERS, failed);
}

static const char LLAMA_L1[] = "norm XB=X 3x8 L1 attn_norm.weight 0.5\n"
                               "matmul Q=XB@attn_q.weight K=XB@attn_k.weight V=XB@attn_v.weight n3 L1\n"
                               "rope Q K 3 L1\n"
                               "attention XB=Q,K,V 3 L1\n"
                               "matmul Q=XB@attn_output.weight n3 L1\n"
                               "add X+=Q 24\n"
                               "norm XB=X 3x8 L1 ffn_norm.weight 0.5\n"
                               "matmul HB=XB@ffn_gate.weight HB2=XB@ffn_up.weight n3 L1\n"
                               "glu HB HB2 36 silu\n"
                               "matmul Q=HB@ffn_down.weight n3 L1\n"
                               "add X+=Q 24\n";

static const char QWEN2_L0_HEAD[] = "norm XB=X 3x8 L0 attn_norm.weight 0.5\n"
                                    "matmul Q=XB@attn_q.weight K=XB@attn_k.weight V=XB@attn_v.weight n3 L0\n"
                                    "bias Q 3x16 L0 attn_q.bias\n"
                                    "bias K 3x8 L0 attn_k.bias\n"
                                    "bias V 3x8 L0 attn_v.bias\n"
                                    "rope Q K 3 L0\n";

static const char GEMMA3_L0[] = "norm XB=X 3x8 L0 attn_norm.weight 0.5\n"
                                "matmul Q=XB@attn_q.weight K=XB@attn_k.weight V=XB@attn_v.weight n3 L0\n"
                                "norm Q=Q 12x4 L0 attn_q_norm.weight 0.5\n"
                                "norm K=K 6x4 L0 attn_k_norm.weight 0.5\n"
                                "rope Q K 3 L0\n"
                                "attention XB=Q,K,V 3 L0\n"
                                "matmul Q=XB@attn_output.weight n3 L0\n"
                                "norm Q=Q 3x8 L0 post_attention_norm.weight 0.5\n"
                                "add X+=Q 24\n"
                                "norm XB=X 3x8 L0 ffn_norm.weight 0.5\n"
                                "matmul HB=XB@ffn_gate.weight HB2=XB@ffn_up.weight n3 L0\n"
                                "glu HB HB2 36 gelu\n"
                                "matmul Q=HB@ffn_down.weight n3 L0\n"
                                "norm Q=Q 3x8 L0 post_ffw_norm.weight 0.5\n"
                                "add X+=Q 24\n";

static const char QWEN3MOE_L1[] = "norm XB=X 3x8 L1 attn_norm.weight 0.5\n"
                                  "matmul Q=XB@attn_q.weight K=XB@attn_k.weight V=XB@attn_v.weight n3 L1\n"
                                  "norm Q=Q 12x4 L1 attn_q_norm.weight 0.5\n"
                                  "norm K=K 6x4 L1 attn_k_norm.weight 0.5\n"
                                  "rope Q K 3 L1\n"
                                  "attention XB=Q,K,V 3 L1\n"
                                  "matmul Q=XB@attn_output.weight n3 L1\n"
                                  "add X+=Q 24\n"
                                  "norm XB=X 3x8 L1 ffn_norm.weight 0.5\n"
                                  "moe Q=XB 3 L1\n"
                                  "add X+=Q 24\n";

// gpt-oss: q/k/v biases, attention (its sinks are the attention operation's), the output projection's bias, the
// FFN normed by post_attention_norm (no post-norm of the attention output), the MoE FFN
static const char GPTOSS_L1[] = "norm XB=X 3x8 L1 attn_norm.weight 0.5\n"
                                "matmul Q=XB@attn_q.weight K=XB@attn_k.weight V=XB@attn_v.weight n3 L1\n"
                                "bias Q 3x16 L1 attn_q.bias\n"
                                "bias K 3x8 L1 attn_k.bias\n"
                                "bias V 3x8 L1 attn_v.bias\n"
                                "rope Q K 3 L1\n"
                                "attention XB=Q,K,V 3 L1\n"
                                "matmul Q=XB@attn_output.weight n3 L1\n"
                                "bias Q 3x8 L1 attn_output.bias\n"
                                "add X+=Q 24\n"
                                "norm XB=X 3x8 L1 post_attention_norm.weight 0.5\n"
                                "moe Q=XB 3 L1\n"
                                "add X+=Q 24\n";

// qwen35 with a full-attention layer every second one: layer 0 gated DeltaNet, layer 1 gated attention (q and its
// gate from one projection into HB, split, q/k norms, RoPE, attention times sigmoid(gate)); both with the SwiGLU
// FFN normed by post_attention_norm
#define QWEN35_FFN(L)                                                                                          \
    "add X+=Q 24\n"                                                                                             \
    "norm XB=X 3x8 " L " post_attention_norm.weight 0.5\n"                                                     \
    "matmul HB=XB@ffn_gate.weight HB2=XB@ffn_up.weight n3 " L "\n"                                             \
    "glu HB HB2 36 silu\n"                                                                                      \
    "matmul Q=HB@ffn_down.weight n3 " L "\n"                                                                    \
    "add X+=Q 24\n"
static const char QWEN35[] = "norm XB=X 3x8 L0 attn_norm.weight 0.5\n"
                             "gdn Q=XB 3 L0\n" QWEN35_FFN("L0")
                             "norm XB=X 3x8 L1 attn_norm.weight 0.5\n"
                             "matmul HB=XB@attn_q.weight K=XB@attn_k.weight V=XB@attn_v.weight n3 L1\n"
                             "gate_split Q HB2=HB 3\n"
                             "norm Q=Q 12x4 L1 attn_q_norm.weight 0.5\n"
                             "norm K=K 6x4 L1 attn_k_norm.weight 0.5\n"
                             "rope Q K 3 L1\n"
                             "attention XB=Q,K,V 3 L1\n"
                             "mul_sigmoid XB HB2 48\n"
                             "matmul Q=XB@attn_output.weight n3 L1\n" QWEN35_FFN("L1");

static void test_hybrid(void) {
    static model_weight layers[N_LAYERS * ROLE_COUNT];
    model m;
    recorder r = {0};
    int failed = -1;
    fake_model(&m, layers, "qwen35", 0);
    m.hp.full_attn_interval = 2, m.hp.attn_gated = 1;
    CHECK_EQ_INT(run(&r, &m, &failed), 0);
    CHECK_MSG(!strcmp(r.log, QWEN35), "qwen35:\n%s", r.log);
    // the gated q projection's rows (2·q_dim) and its gate (q_dim) fit the FFN buffers
    CHECK_EQ_INT(fwd_buf_floats(&m.hp, FWD_HB), 32);
    CHECK_EQ_INT(fwd_buf_floats(&m.hp, FWD_HB2), 16);
    // a backend without the DeltaNet operation: unsupported, before any operation runs
    fwd_ops no_gdn = REC_OPS;
    no_gdn.gdn = NULL;
    r.calls = 0;
    const fwd_graph g = {.ops = &no_gdn, .be = &r, .m = &m, .n = 3};
    CHECK_EQ_INT(fwd_layers(&g, 0, N_LAYERS, &failed), TC_ERR_UNSUPPORTED);
    CHECK_EQ_INT(r.calls, 0);
}

static void test_sequences(void) {
    static model_weight layers[N_LAYERS * ROLE_COUNT];
    model m;
    recorder r = {0};
    int failed = -1;
    // llama without its optional biases: the plain pre-norm block, the same in every layer
    fake_model(&m, layers, "llama", 0);
    CHECK_EQ_INT(run(&r, &m, &failed), 0);
    const char *l1 = strstr(r.log, "norm XB=X 3x8 L1 attn_norm");
    CHECK_MSG(l1 && !strcmp(l1, LLAMA_L1), "llama layer 1:\n%s", l1 ? l1 : r.log);
    CHECK_EQ_INT(r.calls, 2 * 11); // eleven operations a layer
    // llama with the optional biases that some converters add: they are applied
    fake_model(&m, layers, "llama", 1);
    CHECK_EQ_INT(run(&r, &m, &failed), 0);
    CHECK_MSG(strstr(r.log, "bias V 3x8 L1 attn_v.bias\nrope Q K 3 L1\n") != NULL, "%s", r.log);
    // qwen2: biases on q, k, v between the projections and RoPE
    fake_model(&m, layers, "qwen2", 0);
    CHECK_EQ_INT(run(&r, &m, &failed), 0);
    CHECK_MSG(!strncmp(r.log, QWEN2_L0_HEAD, strlen(QWEN2_L0_HEAD)), "qwen2 layer 0:\n%s", r.log);
    // qwen3: per-head q/k norms, no biases
    fake_model(&m, layers, "qwen3", 0);
    CHECK_EQ_INT(run(&r, &m, &failed), 0);
    CHECK(strstr(r.log, "norm Q=Q 12x4 L0 attn_q_norm.weight") && strstr(r.log, "norm K=K 6x4 L1 attn_k_norm.weight"));
    CHECK(!strstr(r.log, "bias") && !strstr(r.log, "post_") && !strstr(r.log, "gelu"));
    // gemma3: q/k norms, sandwich norms, GeGLU
    fake_model(&m, layers, "gemma3", 0);
    CHECK_EQ_INT(run(&r, &m, &failed), 0);
    CHECK_MSG(!strncmp(r.log, GEMMA3_L0, strlen(GEMMA3_L0)), "gemma3 layer 0:\n%s", r.log);
    // gemma2: gemma3's block without the q/k norms
    fake_model(&m, layers, "gemma2", 0);
    CHECK_EQ_INT(run(&r, &m, &failed), 0);
    CHECK_MSG(!strstr(r.log, "attn_q_norm") && !strstr(r.log, "attn_k_norm") &&
                  strstr(r.log, "norm Q=Q 3x8 L1 post_attention_norm.weight 0.5\nadd X+=Q 24\n") &&
                  strstr(r.log, "glu HB HB2 36 gelu\nmatmul Q=HB@ffn_down.weight n3 L1\n"
                                "norm Q=Q 3x8 L1 post_ffw_norm.weight 0.5\nadd X+=Q 24\n"),
              "gemma2:\n%s", r.log);
    CHECK_EQ_INT(r.calls, 2 * 13);
    // smollm3: llama's block; the no-RoPE layers (every 4th; every 2nd here, to see one in two layers) skip RoPE
    fake_model(&m, layers, "smollm3", 0);
    CHECK_EQ_INT(m.arch->no_rope_step, 4);
    m.hp.no_rope_step = 2;
    CHECK_EQ_INT(run(&r, &m, &failed), 0);
    CHECK_MSG(strstr(r.log, "rope Q K 3 L0\n") && !strstr(r.log, "rope Q K 3 L1\n") &&
                  strstr(r.log, "V=XB@attn_v.weight n3 L1\nattention XB=Q,K,V 3 L1\n"),
              "smollm3:\n%s", r.log);
    // granite: llama's block, each block's output scaled before its residual add (none without a multiplier)
    fake_model(&m, layers, "granite", 0);
    CHECK_EQ_INT(run(&r, &m, &failed), 0);
    l1 = strstr(r.log, "norm XB=X 3x8 L1 attn_norm");
    CHECK_MSG(l1 && !strcmp(l1, LLAMA_L1), "granite layer 1 without a multiplier:\n%s", l1 ? l1 : r.log);
    m.hp.residual_scale = 0.25f;
    CHECK_EQ_INT(run(&r, &m, &failed), 0);
    CHECK_MSG(strstr(r.log, "matmul Q=XB@attn_output.weight n3 L1\nscale Q 24 0.25\nadd X+=Q 24\n") &&
                  strstr(r.log, "matmul Q=HB@ffn_down.weight n3 L1\nscale Q 24 0.25\nadd X+=Q 24\n"),
              "granite:\n%s", r.log);
    CHECK_EQ_INT(r.calls, 2 * 13);
    // olmo2: the residual stream itself into q/k/v and the FFN, q/k norms over all heads, a norm after each
    // half
    fake_model(&m, layers, "olmo2", 0);
    m.hp.residual_scale = 0;
    CHECK_EQ_INT(run(&r, &m, &failed), 0);
    l1 = strstr(r.log, "matmul Q=X@attn_q.weight K=X@attn_k.weight V=X@attn_v.weight n3 L1");
    CHECK_MSG(l1 && !strcmp(l1, "matmul Q=X@attn_q.weight K=X@attn_k.weight V=X@attn_v.weight n3 L1\n"
                                "norm Q=Q 3x16 L1 attn_q_norm.weight 0.5\n"
                                "norm K=K 3x8 L1 attn_k_norm.weight 0.5\n"
                                "rope Q K 3 L1\n"
                                "attention XB=Q,K,V 3 L1\n"
                                "matmul Q=XB@attn_output.weight n3 L1\n"
                                "norm Q=Q 3x8 L1 post_attention_norm.weight 0.5\n"
                                "add X+=Q 24\n"
                                "matmul HB=X@ffn_gate.weight HB2=X@ffn_up.weight n3 L1\n"
                                "glu HB HB2 36 silu\n"
                                "matmul Q=HB@ffn_down.weight n3 L1\n"
                                "norm Q=Q 3x8 L1 post_ffw_norm.weight 0.5\n"
                                "add X+=Q 24\n"),
              "olmo2 layer 1:\n%s", l1 ? l1 : r.log);
    // phi3 and mistral3: llama's sequence (their fused weights are bound at load, YaRN is in the RoPE operation)
    fake_model(&m, layers, "phi3", 0);
    CHECK_EQ_INT(run(&r, &m, &failed), 0);
    l1 = strstr(r.log, "norm XB=X 3x8 L1 attn_norm");
    CHECK_MSG(l1 && !strcmp(l1, LLAMA_L1), "phi3 layer 1:\n%s", l1 ? l1 : r.log);
    fake_model(&m, layers, "mistral3", 0);
    CHECK_EQ_INT(run(&r, &m, &failed), 0);
    l1 = strstr(r.log, "norm XB=X 3x8 L1 attn_norm");
    CHECK_MSG(l1 && !strcmp(l1, LLAMA_L1), "mistral3 layer 1:\n%s", l1 ? l1 : r.log);
    // qwen3moe: qwen3's attention, then the MoE FFN in place of gate/up/GLU/down
    fake_model(&m, layers, "qwen3moe", 0);
    CHECK_EQ_INT(run(&r, &m, &failed), 0);
    const char *m1 = strstr(r.log, "norm XB=X 3x8 L1 attn_norm");
    CHECK_MSG(m1 && !strcmp(m1, QWEN3MOE_L1), "qwen3moe layer 1:\n%s", m1 ? m1 : r.log);
    CHECK_EQ_INT(r.calls, 2 * 11);
    // qwen2moe: qwen2's biases, the same MoE step
    fake_model(&m, layers, "qwen2moe", 0);
    CHECK_EQ_INT(run(&r, &m, &failed), 0);
    CHECK_MSG(!strncmp(r.log, QWEN2_L0_HEAD, strlen(QWEN2_L0_HEAD)) && strstr(r.log, "moe Q=XB 3 L0\nadd X+=Q 24\n"),
              "qwen2moe:\n%s", r.log);
    fake_model(&m, layers, "gpt-oss", 0);
    CHECK_EQ_INT(run(&r, &m, &failed), 0);
    m1 = strstr(r.log, "norm XB=X 3x8 L1 attn_norm");
    CHECK_MSG(m1 && !strcmp(m1, GPTOSS_L1), "gpt-oss layer 1:\n%s", m1 ? m1 : r.log);
    CHECK_EQ_INT(r.calls, 2 * 13);
    // a backend without the MoE operation: the layer fails as unsupported, before any operation runs
    fwd_ops no_moe = REC_OPS;
    no_moe.moe = NULL;
    r.calls = 0;
    const fwd_graph g = {.ops = &no_moe, .be = &r, .m = &m, .n = 3};
    CHECK_EQ_INT(fwd_layers(&g, 0, N_LAYERS, &failed), TC_ERR_UNSUPPORTED);
    CHECK_EQ_INT(failed, 0);
    CHECK_EQ_INT(r.calls, 0);
}

static void test_errors(void) {
    static model_weight layers[N_LAYERS * ROLE_COUNT];
    model m;
    fake_model(&m, layers, "llama", 0);
    recorder r = {.fail_at = 13}; // the second operation of layer 1
    int failed = -1;
    CHECK_EQ_INT(run(&r, &m, &failed), TC_ERR_INVALID);
    CHECK_EQ_INT(failed, 1);
    CHECK_EQ_INT(r.calls, 13); // nothing ran after the failing operation
}

static void test_driver(void) {
    static model_weight layers[N_LAYERS * ROLE_COUNT];
    model m;
    fake_model(&m, layers, "llama", 0);
    recorder r = {0};
    const fwd_graph g = {.ops = &REC_OPS, .be = &r, .m = &m, .n = 5};
    CHECK_EQ_INT(fwd_embed(&g), 0);
    CHECK_EQ_INT(fwd_out_norm(&g), 0);
    CHECK_MSG(!strcmp(r.log, "embed X 5\nout_norm XB=X 0.5\n"), "%s", r.log);
    // buffer widths: the wide buffers hold max(dim, q_dim)
    CHECK_EQ_INT(fwd_buf_floats(&m.hp, FWD_X), 8);
    CHECK_EQ_INT(fwd_buf_floats(&m.hp, FWD_XB), 16);
    CHECK_EQ_INT(fwd_buf_floats(&m.hp, FWD_Q), 16);
    CHECK_EQ_INT(fwd_buf_floats(&m.hp, FWD_K), 8);
    CHECK_EQ_INT(fwd_buf_floats(&m.hp, FWD_HB2), 12);
    m.hp.n_heads = 1; // q_dim 4 < dim 8
    CHECK_EQ_INT(fwd_buf_floats(&m.hp, FWD_Q), 8);
}

int main(void) {
    // every architecture in the table has a layer sequence
    static const char *const names[] = {
        "llama",    "qwen2",   "qwen3",    "gemma2",   "gemma3",  "smollm3", "phi3",      "mistral3",
        "granite",  "granitemoe", "ernie4_5", "exaone", "olmo2",   "qwen3moe", "qwen2moe", "gpt-oss",
        "qwen35",   "qwen35moe", "qwen3next"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const arch_desc *a = arch_find(names[i], (int)strlen(names[i]));
        CHECK_MSG(a && a->layer, "%s has no layer builder", names[i]);
    }
    test_sequences();
    test_hybrid();
    test_errors();
    test_driver();
    TEST_MAIN_END();
}
