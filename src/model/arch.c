#include "model/arch.h"

#include "model/fwd.h"

#include <string.h>

static const char *const role_suffix[ROLE_COUNT] = {
    [ROLE_ATTN_NORM] = "attn_norm.weight",   [ROLE_ATTN_Q] = "attn_q.weight",
    [ROLE_ATTN_K] = "attn_k.weight",         [ROLE_ATTN_V] = "attn_v.weight",
    [ROLE_ATTN_OUT] = "attn_output.weight",  [ROLE_ATTN_Q_BIAS] = "attn_q.bias",
    [ROLE_ATTN_K_BIAS] = "attn_k.bias",      [ROLE_ATTN_V_BIAS] = "attn_v.bias",
    [ROLE_ATTN_Q_NORM] = "attn_q_norm.weight", [ROLE_ATTN_K_NORM] = "attn_k_norm.weight",
    [ROLE_FFN_NORM] = "ffn_norm.weight",     [ROLE_FFN_GATE] = "ffn_gate.weight",
    [ROLE_FFN_UP] = "ffn_up.weight",         [ROLE_FFN_DOWN] = "ffn_down.weight",
    [ROLE_ATTN_POST_NORM] = "post_attention_norm.weight", [ROLE_FFN_POST_NORM] = "post_ffw_norm.weight",
    [ROLE_FFN_GATE_INP] = "ffn_gate_inp.weight", [ROLE_FFN_GATE_EXPS] = "ffn_gate_exps.weight",
    [ROLE_FFN_UP_EXPS] = "ffn_up_exps.weight",   [ROLE_FFN_DOWN_EXPS] = "ffn_down_exps.weight",
    [ROLE_FFN_GATE_INP_SHEXP] = "ffn_gate_inp_shexp.weight", [ROLE_FFN_GATE_SHEXP] = "ffn_gate_shexp.weight",
    [ROLE_FFN_UP_SHEXP] = "ffn_up_shexp.weight", [ROLE_FFN_DOWN_SHEXP] = "ffn_down_shexp.weight",
    [ROLE_ATTN_OUT_BIAS] = "attn_output.bias",   [ROLE_ATTN_SINKS] = "attn_sinks.weight",
    [ROLE_FFN_NORM_PA] = "post_attention_norm.weight", [ROLE_FFN_GATE_INP_BIAS] = "ffn_gate_inp.bias",
    [ROLE_FFN_GATE_EXPS_BIAS] = "ffn_gate_exps.bias", [ROLE_FFN_UP_EXPS_BIAS] = "ffn_up_exps.bias",
    [ROLE_FFN_DOWN_EXPS_BIAS] = "ffn_down_exps.bias",
    [ROLE_SSM_QKV] = "attn_qkv.weight",       [ROLE_SSM_GATE] = "attn_gate.weight",
    [ROLE_SSM_CONV] = "ssm_conv1d.weight",    [ROLE_SSM_DT] = "ssm_dt.bias",
    [ROLE_SSM_A] = "ssm_a",                   [ROLE_SSM_BETA] = "ssm_beta.weight",
    [ROLE_SSM_ALPHA] = "ssm_alpha.weight",    [ROLE_SSM_NORM] = "ssm_norm.weight",
    [ROLE_SSM_OUT] = "ssm_out.weight",        [ROLE_SSM_BA] = "ssm_ba.weight",
    [ROLE_SSM_IN] = "ssm_in.weight",
};

#define R ARCH_REQUIRED
#define O ARCH_OPTIONAL
#define ATTN_ROLES                                                                                           \
    [ROLE_ATTN_NORM] = R, [ROLE_ATTN_Q] = R, [ROLE_ATTN_K] = R, [ROLE_ATTN_V] = R, [ROLE_ATTN_OUT] = R,      \
    [ROLE_FFN_NORM] = R
#define BASE_ROLES ATTN_ROLES, [ROLE_FFN_GATE] = R, [ROLE_FFN_UP] = R, [ROLE_FFN_DOWN] = R
#define MOE_ROLES                                                                                            \
    [ROLE_FFN_GATE_INP] = R, [ROLE_FFN_GATE_EXPS] = R, [ROLE_FFN_UP_EXPS] = R, [ROLE_FFN_DOWN_EXPS] = R

static const arch_desc archs[] = {
    // Llama 2/3, SmolLM2, TinyLlama, Mistral. Some converters add q/k/v biases: accept them.
    {.name = "llama", .role = {BASE_ROLES, [ROLE_ATTN_Q_BIAS] = O, [ROLE_ATTN_K_BIAS] = O, [ROLE_ATTN_V_BIAS] = O},
     .layer = fwd_layer_std},
    // SmolLM3: llama's block (optional biases as llama.cpp's graph takes them) without RoPE on every fourth layer
    // (3, 7, …), the step llama.cpp hard-codes (no GGUF key carries it); HF's no_rope_layers says the same.
    {.name = "smollm3",
     .role = {BASE_ROLES, [ROLE_ATTN_Q_BIAS] = O, [ROLE_ATTN_K_BIAS] = O, [ROLE_ATTN_V_BIAS] = O},
     .no_rope_step = 4, .layer = fwd_layer_std},
    // Phi-3 / Phi-3.5 / Phi-4-mini: llama's block with fused matrices (q/k/v in attn_qkv when the converter fused
    // them, gate and up always in ffn_up), NeoX rotation of the first rope.dimension_count dims of each head
    // (partial), LongRoPE's short or long frequency factors and attention factor. A sliding window in the file is
    // ignored, as llama.cpp does (its Phi-3 converters do not say which layers have it).
    {.name = "phi3", .role = {BASE_ROLES}, .rope_neox = 1, .fused = 1, .layer = fwd_layer_std},
    // Mistral 3 (Ministral 3, the text part of Mistral Small 3.x): llama's block; YaRN RoPE scaling and Llama 4's
    // attention temperature when the file has them (llama.cpp's mistral3 graph).
    {.name = "mistral3",
     .role = {BASE_ROLES, [ROLE_ATTN_Q_BIAS] = O, [ROLE_ATTN_K_BIAS] = O, [ROLE_ATTN_V_BIAS] = O},
     .yarn = 1, .layer = fwd_layer_std},
    // ERNIE 4.5 dense (ERNIE-4.5-0.3B), as llama.cpp's ernie4_5 graph: llama's block (optional q/k/v biases;
    // an output-projection bias in the file is not applied there, so it is not read here either).
    {.name = "ernie4_5",
     .role = {BASE_ROLES, [ROLE_ATTN_Q_BIAS] = O, [ROLE_ATTN_K_BIAS] = O, [ROLE_ATTN_V_BIAS] = O},
     .layer = fwd_layer_std},
    // EXAONE 3.0 / 3.5, as llama.cpp's exaone graph: llama's block with NeoX rotation (optional q/k/v biases; a
    // llama3 rope_freqs tensor when the file has one, as every architecture here).
    {.name = "exaone",
     .role = {BASE_ROLES, [ROLE_ATTN_Q_BIAS] = O, [ROLE_ATTN_K_BIAS] = O, [ROLE_ATTN_V_BIAS] = O},
     .rope_neox = 1, .layer = fwd_layer_std},
    // OLMo 2 and OLMo 3, as llama.cpp's olmo2 graph (fwd_layer_post): no norm before attention or the FFN, a
    // norm after each (post_attention_norm, post_ffw_norm); q and k RMSNormed over all heads at once; NeoX
    // rotation. OLMo 3: a sliding window (from the file) on three layers of four, whose RoPE is unscaled, and
    // YaRN on the others.
    {.name = "olmo2",
     .role = {[ROLE_ATTN_Q] = R, [ROLE_ATTN_K] = R, [ROLE_ATTN_V] = R, [ROLE_ATTN_OUT] = R,
      [ROLE_ATTN_Q_NORM] = R, [ROLE_ATTN_K_NORM] = R, [ROLE_ATTN_POST_NORM] = R, [ROLE_FFN_GATE] = R,
      [ROLE_FFN_UP] = R, [ROLE_FFN_DOWN] = R, [ROLE_FFN_POST_NORM] = R},
     .rope_neox = 1, .qk_norm_all = 1, .swa_pattern = 4, .yarn = 1, .layer = fwd_layer_post},
    // Granite 3.x and Granite 4.0's dense models, as llama.cpp's granite graph: llama's block with the four
    // multipliers of arch_desc.scales; optional q/k/v and output-projection biases.
    {.name = "granite",
     .role = {BASE_ROLES, [ROLE_ATTN_Q_BIAS] = O, [ROLE_ATTN_K_BIAS] = O, [ROLE_ATTN_V_BIAS] = O,
      [ROLE_ATTN_OUT_BIAS] = O},
     .scales = 1, .layer = fwd_layer_std},
    // Granite 3.x MoE (granite-3.1-1b-a400m, 3b-a800m), as llama.cpp's granite graph with experts: granite's
    // attention and multipliers, the FFN n_expert_used of n_expert experts (softmax over all, top k, weights
    // renormalised, as qwen3moe). Shared experts (GraniteMoeShared files) are refused.
    {.name = "granitemoe",
     .role = {ATTN_ROLES, MOE_ROLES, [ROLE_ATTN_Q_BIAS] = O, [ROLE_ATTN_K_BIAS] = O, [ROLE_ATTN_V_BIAS] = O,
      [ROLE_ATTN_OUT_BIAS] = O},
     .moe = 1, .moe_norm_w = 1, .scales = 1, .layer = fwd_layer_moe},
    // Qwen2 / Qwen2.5: biases on q, k, v; NeoX rotation.
    {.name = "qwen2", .role = {BASE_ROLES, [ROLE_ATTN_Q_BIAS] = R, [ROLE_ATTN_K_BIAS] = R, [ROLE_ATTN_V_BIAS] = R},
     .rope_neox = 1, .layer = fwd_layer_std},
    // Qwen3: per-head RMSNorm on q and k before RoPE; NeoX rotation; no biases.
    {.name = "qwen3", .role = {BASE_ROLES, [ROLE_ATTN_Q_NORM] = R, [ROLE_ATTN_K_NORM] = R}, .rope_neox = 1,
     .layer = fwd_layer_std},
    // Gemma 3: QK-norm, extra norms after attention and FFN, GeGLU (tanh GELU), embeddings scaled by
    // sqrt(dim), NeoX rotation; 5 local (sliding-window, RoPE base 10000) layers per global one, as
    // llama.cpp hard-codes for gemma3 (the GGUF carries only the window). The converter stores RMSNorm
    // weights as 1 + w, so the norms are plain RMSNorms here.
    {.name = "gemma3",
     .role = {BASE_ROLES, [ROLE_ATTN_Q_NORM] = R, [ROLE_ATTN_K_NORM] = R, [ROLE_ATTN_POST_NORM] = R,
      [ROLE_FFN_POST_NORM] = R},
     .rope_neox = 1, .ffn_gelu = 1, .embd_scale = 1, .swa_pattern = 6, .rope_base_swa = 10000.0f,
     .layer = fwd_layer_std},
    // Gemma 2: Gemma 3's block without QK-norm; sliding-window attention (4096 where the GGUF has no window)
    // on the even layers, every layer with the one RoPE base; attention scores and logits soft-capped
    // (c·tanh(x/c), c = 50 and 30 unless the GGUF says otherwise), as llama.cpp's gemma2 graph and HF's
    // Gemma2 modeling code. The converter stores RMSNorm weights as 1 + w here too.
    {.name = "gemma2", .role = {BASE_ROLES, [ROLE_ATTN_POST_NORM] = R, [ROLE_FFN_POST_NORM] = R},
     .rope_neox = 1, .ffn_gelu = 1, .embd_scale = 1, .swa_pattern = 2, .swa_window = 4096, .attn_softcap = 50.0f,
     .final_softcap = 30.0f, .layer = fwd_layer_std},
    // Qwen3-MoE (Qwen3-30B-A3B, 235B-A22B): Qwen3's attention; the FFN is n_expert_used of n_expert experts,
    // routed by softmax over all experts, top-k, weights renormalised (llama.cpp's build_moe_ffn, norm_w).
    {.name = "qwen3moe", .role = {ATTN_ROLES, MOE_ROLES, [ROLE_ATTN_Q_NORM] = R, [ROLE_ATTN_K_NORM] = R},
     .rope_neox = 1, .moe = 1, .moe_norm_w = 1, .layer = fwd_layer_moe},
    // Qwen2-MoE (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): Qwen2's attention (q/k/v biases); routed experts with the
    // softmax weights as they are (not renormalised), plus a shared expert gated by sigmoid(gate_inp_shexp · x).
    {.name = "qwen2moe",
     .role = {ATTN_ROLES, MOE_ROLES, [ROLE_ATTN_Q_BIAS] = R, [ROLE_ATTN_K_BIAS] = R, [ROLE_ATTN_V_BIAS] = R,
      [ROLE_FFN_GATE_INP_SHEXP] = R, [ROLE_FFN_GATE_SHEXP] = R, [ROLE_FFN_UP_SHEXP] = R, [ROLE_FFN_DOWN_SHEXP] = R},
     .rope_neox = 1, .moe = 1, .layer = fwd_layer_moe},
    // gpt-oss (gpt-oss-20b, -120b), as llama.cpp's openai-moe graph and HF's GptOss modeling code: biases on q, k,
    // v and the output projection; a learned sink logit per query head in every softmax; sliding-window attention
    // (128 where the GGUF has no window) on the even layers; NeoX RoPE with YaRN and its magnitude scaling on every
    // layer alike; the FFN normed by post_attention_norm, then n_expert_used of n_expert experts: the top k of the
    // router's logits (plus its bias), weighted by the softmax over those k, which is the softmax over all experts
    // renormalised over the k (moe_norm_w); experts with biases and the clamped SwiGLU (limit 7, alpha 1.702).
    {.name = "gpt-oss",
     .role = {[ROLE_ATTN_NORM] = R, [ROLE_ATTN_Q] = R, [ROLE_ATTN_K] = R, [ROLE_ATTN_V] = R, [ROLE_ATTN_OUT] = R,
      [ROLE_ATTN_Q_BIAS] = R, [ROLE_ATTN_K_BIAS] = R, [ROLE_ATTN_V_BIAS] = R, [ROLE_ATTN_OUT_BIAS] = R,
      [ROLE_ATTN_SINKS] = R, [ROLE_FFN_NORM_PA] = R, MOE_ROLES, [ROLE_FFN_GATE_INP_BIAS] = R,
      [ROLE_FFN_GATE_EXPS_BIAS] = R, [ROLE_FFN_UP_EXPS_BIAS] = R, [ROLE_FFN_DOWN_EXPS_BIAS] = R},
     .rope_neox = 1, .swa_pattern = 2, .swa_window = 128, .swa_rope_global = 1, .yarn = 1,
     .moe = 1, .moe_norm_w = 1, .swiglu_limit = 7.0f, .swiglu_alpha = 1.702f, .layer = fwd_layer_moe},
    // Qwen3.5 (dense), as llama.cpp's qwen35 graph: every full_attention_interval-th layer is attention (gated q:
    // sigmoid(gate)·attention before the output projection; per-head q/k RMSNorm; NeoX rotation of the first
    // rope.dimension_count dims, IMRoPE with text positions), the others gated DeltaNet; every layer's FFN input
    // normed by post_attention_norm. The loader binds each layer's roles (model_hybrid.c).
    {.name = "qwen35",
     .role = {[ROLE_ATTN_NORM] = R, [ROLE_FFN_NORM_PA] = R, [ROLE_FFN_GATE] = R, [ROLE_FFN_UP] = R,
              [ROLE_FFN_DOWN] = R},
     .rope_neox = 1, .hybrid = 1, .layer = fwd_layer_hybrid},
    // Qwen3.5 MoE (Qwen3.5-35B-A3B, 122B-A10B, 397B-A17B), as llama.cpp's qwen35moe graph: Qwen3.5's layers with
    // Qwen3-MoE's FFN (softmax over all experts, top k, weights renormalised) plus a shared expert scaled by
    // sigmoid(gate_inp_shexp · x), as Qwen3-Next. The loader binds each layer's roles (model_hybrid.c).
    {.name = "qwen35moe",
     .role = {[ROLE_ATTN_NORM] = R, [ROLE_FFN_NORM_PA] = R, MOE_ROLES, [ROLE_FFN_GATE_INP_SHEXP] = R,
              [ROLE_FFN_GATE_SHEXP] = R, [ROLE_FFN_UP_SHEXP] = R, [ROLE_FFN_DOWN_SHEXP] = R},
     .rope_neox = 1, .hybrid = 1, .moe = 1, .moe_norm_w = 1, .layer = fwd_layer_hybrid},
    // Qwen3-Next (Qwen3-Next-80B-A3B), as llama.cpp's qwen3next graph: Qwen3.5 MoE's layers (NeoX rotation of the
    // first rope.dimension_count dims, no IMRoPE sections) with the DeltaNet heads in Qwen3-Next's layout: value
    // heads grouped by key head, beta and alpha in one ssm_ba matrix, and q, k, v and z as attn_qkv and attn_gate
    // or, in files of older converters, as one ssm_in matrix (model_hybrid.c, gdn.c).
    {.name = "qwen3next",
     .role = {[ROLE_ATTN_NORM] = R, [ROLE_FFN_NORM_PA] = R, MOE_ROLES, [ROLE_FFN_GATE_INP_SHEXP] = R,
              [ROLE_FFN_GATE_SHEXP] = R, [ROLE_FFN_UP_SHEXP] = R, [ROLE_FFN_DOWN_SHEXP] = R},
     .rope_neox = 1, .hybrid = 1, .moe = 1, .moe_norm_w = 1, .ssm_grouped = 1, .layer = fwd_layer_hybrid},
};
#undef R
#undef O

const char *arch_role_suffix(arch_role r) { return (unsigned)r < ROLE_COUNT ? role_suffix[r] : "?"; }

const arch_desc *arch_find(const char *name, int len) {
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if ((int)strlen(archs[i].name) == len && !memcmp(archs[i].name, name, (size_t)len)) return &archs[i];
    return NULL;
}

const char *arch_supported_list(void) {
    return "llama, qwen2, qwen3, gemma2, gemma3, smollm3, phi3, mistral3, qwen3moe, qwen2moe, gpt-oss, qwen35, "
           "qwen35moe, qwen3next";
}
