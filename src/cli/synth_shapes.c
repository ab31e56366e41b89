// The shape tables of tachyon synth (synth_shapes.h).
#include "cli/synth_shapes.h"

#include <string.h>

// One row per shape. The <arch>-tiny shapes are the correctness shapes of tests/ref/test_kld_llamacpp.py:
// peaked next-token distributions (out_sd), enough layers for the architecture's layer pattern (Gemma 3's
// sixth global layer, SmolLM3's fourth without RoPE), a window shorter than the test's context. A tied head
// makes the current token the top one whatever the layers do, so the test could not fail: SmolLM3's head is
// untied (llama.cpp reads output.weight when present) with larger attention scores (its no-RoPE layer
// matters); Gemma 2's stays tied (llama.cpp always uses token_embd), so its post norms outweigh the embedding
// and its output norm makes the logits large enough for final soft-capping to change them. A vocabulary of
// 272 (the 259 special and byte tokens, 13 filler pieces) keeps llama.cpp's KL-divergence files of the test
// small: they store 2 bytes a vocabulary entry for every scored position.
#define TINY_BASE .dim = 256, .n_heads = 4, .n_kv_heads = 2, .ffn = 512, .ctx = 512, .out_sd = 0.3f
#define TINY TINY_BASE, .vocab = 272
static const synth_shape shapes[] = {
    {"tinyllama", .dim = 2048, .n_layers = 22, .n_heads = 32, .n_kv_heads = 4, .ffn = 5632, .vocab = 32000,
     .ctx = 2048, .rope_base = 10000.0f, .eps = 1e-5f},
    {"smollm2-135m", .dim = 576, .n_layers = 30, .n_heads = 9, .n_kv_heads = 3, .ffn = 1536, .vocab = 49152,
     .ctx = 8192, .rope_base = 100000.0f, .eps = 1e-5f, .tied = 1},
    {"tiny", .dim = 256, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .ffn = 512, .vocab = 512, .ctx = 512,
     .rope_base = 10000.0f, .eps = 1e-5f},
    {"qwen3moe-tiny", TINY_BASE, .vocab = 512, .n_layers = 2, .rope_base = 1000000.0f, .eps = 1e-6f,
     .arch = "qwen3moe", .n_expert = 8, .n_used = 2, .expert_ffn = 256, .qk_norm = 1},
    {"llama-tiny", TINY, .n_layers = 2, .rope_base = 10000.0f, .eps = 1e-5f, .arch = "llama"},
    {"qwen2-tiny", TINY, .n_layers = 2, .rope_base = 1000000.0f, .eps = 1e-6f, .arch = "qwen2",
     .qkv_bias = 1},
    {"qwen3-tiny", TINY, .n_layers = 2, .rope_base = 1000000.0f, .eps = 1e-6f, .arch = "qwen3", .qk_norm = 1},
    {"gemma2-tiny", TINY, .n_layers = 2, .rope_base = 10000.0f, .eps = 1e-6f, .tied = 1, .arch = "gemma2",
     .post_norms = 1, .swa = 64, .attn_softcap = 50.0f, .final_softcap = 30.0f, .post_norm_w = 16.0f,
     .out_norm_w = 10.0f},
    {"gemma3-tiny", TINY, .n_layers = 6, .rope_base = 1000000.0f, .eps = 1e-6f, .tied = 1, .arch = "gemma3",
     .qk_norm = 1, .post_norms = 1, .swa = 64, .rope_base_swa = 10000.0f},
    {"smollm3-tiny", TINY, .n_layers = 4, .rope_base = 5000000.0f, .eps = 1e-6f, .arch = "smollm3",
     .attn_norm_w = 4.0f},
    {"phi3-tiny", TINY, .n_layers = 2, .rope_base = 10000.0f, .eps = 1e-5f, .arch = "phi3", .fused = 1,
     .rope_dim = 48},
    // Granite: its multipliers as Granite 3.3 2B has them (head size 64: attention scale 1/64, not 1/8), the
    // logit scale smaller so that the next-token distributions stay peaked
    {"granite-tiny", TINY, .n_layers = 2, .rope_base = 10000.0f, .eps = 1e-5f, .arch = "granite",
     .embedding_scale = 12.0f, .attention_scale = 0.015625f, .residual_scale = 0.22f, .logit_scale = 2.0f,
     .attn_norm_w = 8.0f},
    // Granite MoE: granite-tiny's multipliers, 2 of 8 experts (feed_forward_length is the experts' FFN, as
    // llama.cpp reads it for this architecture)
    {"granitemoe-tiny", .dim = 256, .n_heads = 4, .n_kv_heads = 2, .ffn = 256, .ctx = 512, .out_sd = 0.3f,
     .vocab = 272, .n_layers = 2, .rope_base = 10000.0f, .eps = 1e-5f, .arch = "granitemoe",
     .n_expert = 8, .n_used = 2, .expert_ffn = 256, .embedding_scale = 12.0f, .attention_scale = 0.015625f,
     .residual_scale = 0.22f, .logit_scale = 2.0f, .attn_norm_w = 8.0f},
    // OLMo 2: post norms only (weight 4, so that the layers' part outweighs the embedding), q/k norms over
    // all heads
    {"olmo2-tiny", TINY, .n_layers = 2, .rope_base = 500000.0f, .eps = 1e-6f, .arch = "olmo2", .qk_norm = 1,
     .post_norms = 1, .post_only = 1, .post_norm_w = 4.0f},
    // OLMo 3: olmo2-tiny with a window of 64 on layers 0-2 (RoPE unscaled there) and YaRN on layer 3
    {"olmo3-tiny", TINY, .n_layers = 4, .rope_base = 500000.0f, .eps = 1e-6f, .arch = "olmo2", .qk_norm = 1,
     .post_norms = 1, .post_only = 1, .post_norm_w = 4.0f, .swa = 64, .yarn_factor = 4.0f, .yarn_ctx = 128},
    {"exaone-tiny", TINY, .n_layers = 2, .rope_base = 1000000.0f, .eps = 1e-5f, .arch = "exaone"},
    {"ernie4_5-tiny", TINY, .n_layers = 2, .rope_base = 500000.0f, .eps = 1e-5f, .arch = "ernie4_5"},
    {"mistral3-tiny", TINY, .n_layers = 2, .rope_base = 1000000.0f, .eps = 1e-5f, .arch = "mistral3",
     .yarn_factor = 4.0f, .yarn_ctx = 128},
    {"qwen2moe-tiny", TINY, .n_layers = 2, .rope_base = 1000000.0f, .eps = 1e-6f, .arch = "qwen2moe",
     .n_expert = 8, .n_used = 2, .expert_ffn = 256, .qkv_bias = 1, .shexp_ffn = 512},
    {"gptoss-tiny", .dim = 256, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .ffn = 256, .vocab = 512,
     .ctx = 512, .rope_base = 150000.0f, .eps = 1e-5f, .arch = "gpt-oss", .n_expert = 8, .n_used = 2,
     .expert_ffn = 256, .out_sd = 0.3f, .swa = 128, .yarn_factor = 32.0f, .yarn_ctx = 4096},
    // Qwen3.5: layers 0-2 gated DeltaNet (2 key heads shared by 4 value heads of 32, as the real models share
    // them), layer 3 gated attention with a quarter of each head rotated (IMRoPE sections 3+3+2 pairs)
    {"qwen35-tiny", TINY, .n_layers = 4, .rope_base = 10000000.0f, .eps = 1e-6f, .arch = "qwen35",
     .rope_dim = 16, .ssm_state = 32, .ssm_groups = 2, .ssm_vheads = 4, .ssm_conv = 4, .full_attn = 4},
    // Qwen3.5 MoE: qwen35-tiny's layers with 2 of 8 routed experts and a shared expert in every FFN
    {"qwen35moe-tiny", TINY, .n_layers = 4, .rope_base = 10000000.0f, .eps = 1e-6f, .arch = "qwen35moe",
     .rope_dim = 16, .ssm_state = 32, .ssm_groups = 2, .ssm_vheads = 4, .ssm_conv = 4, .full_attn = 4,
     .n_expert = 8, .n_used = 2, .expert_ffn = 256, .shexp_ffn = 256},
    // Qwen3-Next: qwen35moe-tiny's layers in Qwen3-Next's layout (each key head's 2 value heads next to each other,
    // beta and alpha in one ssm_ba matrix, NeoX rotation without IMRoPE sections)
    {"qwen3next-tiny", TINY, .n_layers = 4, .rope_base = 10000000.0f, .eps = 1e-6f, .arch = "qwen3next",
     .rope_dim = 16, .ssm_state = 32, .ssm_groups = 2, .ssm_vheads = 4, .ssm_conv = 4, .full_attn = 4,
     .n_expert = 8, .n_used = 2, .expert_ffn = 256, .shexp_ffn = 256},
    // ...as older converters wrote it: q, k, v and z in one ssm_in matrix, [q, k, v × 2, z × 2] per key head
    {"qwen3next-ssmin-tiny", TINY, .n_layers = 4, .rope_base = 10000000.0f, .eps = 1e-6f, .arch = "qwen3next",
     .rope_dim = 16, .ssm_state = 32, .ssm_groups = 2, .ssm_vheads = 4, .ssm_conv = 4, .full_attn = 4,
     .n_expert = 8, .n_used = 2, .expert_ffn = 256, .shexp_ffn = 256, .ssm_in = 1},
};
#undef TINY
#undef TINY_BASE

// Full-size speed shapes, from the models' config.json: Meta-Llama-3-8B (Llama 3.0: 8k context, no rope
// scaling), Qwen/Qwen3-8B, Qwen/Qwen3-30B-A3B, openai/gpt-oss-20b, Qwen/Qwen3.5-9B (its text model: 24 gated
// DeltaNet layers of 16 key heads and 32 value heads of 128, every fourth layer gated attention; MTP layers
// left out, as llama.cpp's main graph skips them). Random quantized blocks (fast): the logits
// mean nothing, the bytes read per token are those of the real model.
#define FULL .fast = 1
static const synth_shape full_shapes[] = {
    {"llama3-8b", .dim = 4096, .n_layers = 32, .n_heads = 32, .n_kv_heads = 8, .ffn = 14336, .vocab = 128256,
     .ctx = 8192, .rope_base = 500000.0f, .eps = 1e-5f, .arch = "llama", FULL},
    {"qwen3-8b", .dim = 4096, .n_layers = 36, .n_heads = 32, .n_kv_heads = 8, .head_dim = 128, .ffn = 12288,
     .vocab = 151936, .ctx = 40960, .rope_base = 1000000.0f, .eps = 1e-6f, .arch = "qwen3", .qk_norm = 1,
     FULL},
    {"qwen3moe-30b-a3b", .dim = 2048, .n_layers = 48, .n_heads = 32, .n_kv_heads = 4, .head_dim = 128,
     .ffn = 6144, .vocab = 151936, .ctx = 40960, .rope_base = 1000000.0f, .eps = 1e-6f, .arch = "qwen3moe",
     .n_expert = 128, .n_used = 8, .expert_ffn = 768, .qk_norm = 1, FULL},
    {"gptoss-20b", .dim = 2880, .n_layers = 24, .n_heads = 64, .n_kv_heads = 8, .head_dim = 64, .ffn = 2880,
     .vocab = 201088, .ctx = 131072, .rope_base = 150000.0f, .eps = 1e-5f, .arch = "gpt-oss", .n_expert = 32,
     .n_used = 4, .expert_ffn = 2880, .swa = 128, .yarn_factor = 32.0f, .yarn_ctx = 4096, FULL},
    {"qwen35-9b", .dim = 4096, .n_layers = 32, .n_heads = 16, .n_kv_heads = 4, .head_dim = 256, .ffn = 12288,
     .vocab = 248320, .ctx = 262144, .rope_base = 10000000.0f, .eps = 1e-6f, .arch = "qwen35", .rope_dim = 64,
     .ssm_state = 128, .ssm_groups = 16, .ssm_vheads = 32, .ssm_conv = 4, .full_attn = 4, FULL},
};
#undef FULL

const synth_shape *synth_shape_find(const char *name) {
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (!strcmp(shapes[i].name, name)) return &shapes[i];
    for (size_t i = 0; i < sizeof full_shapes / sizeof full_shapes[0]; i++)
        if (!strcmp(full_shapes[i].name, name)) return &full_shapes[i];
    return NULL;
}

int synth_shape_head_dim(const synth_shape *sh) {
    return sh->head_dim ? sh->head_dim : sh->dim / sh->n_heads;
}

void synth_shape_list(FILE *f, int full) {
    const synth_shape *t = full ? full_shapes : shapes;
    size_t n = full ? sizeof full_shapes / sizeof full_shapes[0] : sizeof shapes / sizeof shapes[0];
    for (size_t i = 0; i < n; i++)
        fprintf(f, " %s", t[i].name);
}
