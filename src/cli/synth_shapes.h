// The shapes tachyon synth writes: tiny correctness shapes of every architecture and full-size speed shapes.
#ifndef TACHYON_CLI_SYNTH_SHAPES_H
#define TACHYON_CLI_SYNTH_SHAPES_H

#include <stdio.h>

typedef struct {
    const char *name;
    int dim, n_layers, n_heads, n_kv_heads, ffn, vocab, ctx;
    float rope_base, eps;
    int tied;         // no output.weight: the output projection reuses token_embd
    const char *arch; // general.architecture; NULL: "llama"
    // qwen3moe: per-head q/k norms, and an FFN of n_used of n_expert experts of expert_ffn
    int n_expert, n_used, expert_ffn;
    // standard deviation of the output projection's weights (0: that of every weight): larger makes the
    // next-token distributions peaked, so that a comparison with another engine can fail
    float out_sd;
    // the architecture's extra tensors: per-head q/k RMSNorms; q/k/v biases; norms after attention and FFN
    // (Gemma); fused attn_qkv and gate+up in ffn_up (Phi-3); a shared expert of shexp_ffn (Qwen2-MoE)
    int qk_norm, qkv_bias, post_norms, fused, shexp_ffn;
    // metadata: the sliding window (0: none) and the RoPE base of its layers (0: not written); soft-capping
    // (0: not written); rotated dims per head (0: all); YaRN scaling (factor 0: none) over yarn_ctx positions
    int swa;
    float rope_base_swa, attn_softcap, final_softcap;
    int rope_dim;
    float yarn_factor;
    int yarn_ctx;
    // Qwen3.5 (gated DeltaNet): the recurrent layers' head size, key heads, value heads and conv kernel;
    // every full_attn-th layer is a (gated, partially rotated) attention layer; 0: no recurrent layers.
    // ssm_in: Qwen3-Next as older converters wrote it (q, k, v and z in one ssm_in matrix)
    int ssm_state, ssm_groups, ssm_vheads, ssm_conv, full_attn, ssm_in;
    // full-size shapes: the head size when it is not dim / n_heads (written as attention.key_length and
    // value_length); fast: quantized weights written as random blocks (synth_blocks.h), not quantized floats
    int head_dim, fast;
    // norm weights other than 1.0 (0: 1.0), so that a layer's part in the logits outweighs the tied
    // embedding's own token: attn_norm (larger attention scores), Gemma's post norms (a larger residual
    // update), output_norm (logits large enough for soft-capping to matter)
    float attn_norm_w, post_norm_w, out_norm_w;
    // Granite's multipliers (0: not written): embedding_scale, attention.scale, residual_scale, logit_scale
    float embedding_scale, attention_scale, residual_scale, logit_scale;
    // OLMo 2: no norms before attention and FFN (post_norms after them), q/k norms over all heads at once
    int post_only;
} synth_shape;

// The shape named name, or NULL.
const synth_shape *synth_shape_find(const char *name);
// Each table's names, space-separated, to f (the tiny and small shapes; full: the full-size ones).
void synth_shape_list(FILE *f, int full);
// The head size (key_length) of sh.
int synth_shape_head_dim(const synth_shape *sh);

#endif
