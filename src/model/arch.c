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
};

#define R ARCH_REQUIRED
#define O ARCH_OPTIONAL
#define BASE_ROLES                                                                                           \
    [ROLE_ATTN_NORM] = R, [ROLE_ATTN_Q] = R, [ROLE_ATTN_K] = R, [ROLE_ATTN_V] = R, [ROLE_ATTN_OUT] = R,      \
    [ROLE_FFN_NORM] = R, [ROLE_FFN_GATE] = R, [ROLE_FFN_UP] = R, [ROLE_FFN_DOWN] = R

static const arch_desc archs[] = {
    // Llama 2/3, SmolLM2, TinyLlama, Mistral. Some converters add q/k/v biases: accept them.
    {.name = "llama", .role = {BASE_ROLES, [ROLE_ATTN_Q_BIAS] = O, [ROLE_ATTN_K_BIAS] = O, [ROLE_ATTN_V_BIAS] = O},
     .layer = fwd_layer_std},
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
};
#undef R
#undef O

const char *arch_role_suffix(arch_role r) { return (unsigned)r < ROLE_COUNT ? role_suffix[r] : "?"; }

const arch_desc *arch_find(const char *name, int len) {
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if ((int)strlen(archs[i].name) == len && !memcmp(archs[i].name, name, (size_t)len)) return &archs[i];
    return NULL;
}

const char *arch_supported_list(void) { return "llama, qwen2, qwen3, gemma3"; }
