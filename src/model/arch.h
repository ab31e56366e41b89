// Architecture table: per-architecture differences live here as data (which tensors a layer has, rope
// style, norms) and one builder function for the layer's sequence of operations (fwd.h), not as branches
// scattered through the forward pass. A new architecture is a new row (and a builder when its block differs).
#ifndef TACHYON_MODEL_ARCH_H
#define TACHYON_MODEL_ARCH_H

// Tensor roles inside one transformer block; names are "blk.%d.<suffix>".
typedef enum {
    ROLE_ATTN_NORM = 0,
    ROLE_ATTN_Q,
    ROLE_ATTN_K,
    ROLE_ATTN_V,
    ROLE_ATTN_OUT,
    ROLE_ATTN_Q_BIAS,
    ROLE_ATTN_K_BIAS,
    ROLE_ATTN_V_BIAS,
    ROLE_ATTN_Q_NORM, // per-head RMSNorm of q (qwen3, gemma3)
    ROLE_ATTN_K_NORM,
    ROLE_FFN_NORM,
    ROLE_FFN_GATE,
    ROLE_FFN_UP,
    ROLE_FFN_DOWN,
    ROLE_ATTN_POST_NORM, // RMSNorm of the attention output before the residual add (gemma3)
    ROLE_FFN_POST_NORM,  // RMSNorm of the FFN output before the residual add (gemma3)
    // Mixture of experts (qwen3moe, qwen2moe): the router and the experts' weights, 3-D tensors of n_expert
    // matrices (model_weight.n_expert)
    ROLE_FFN_GATE_INP,  // (n_expert, dim) router
    ROLE_FFN_GATE_EXPS, // (n_expert, expert_ffn, dim)
    ROLE_FFN_UP_EXPS,   // (n_expert, expert_ffn, dim)
    ROLE_FFN_DOWN_EXPS, // (n_expert, dim, expert_ffn)
    // ...and the shared expert every row also goes through (qwen2moe), scaled by sigmoid(gate_inp_shexp · x)
    ROLE_FFN_GATE_INP_SHEXP, // (dim) F32
    ROLE_FFN_GATE_SHEXP,     // (shexp_ffn, dim)
    ROLE_FFN_UP_SHEXP,       // (shexp_ffn, dim)
    ROLE_FFN_DOWN_SHEXP,     // (dim, shexp_ffn)
    // gpt-oss: the output projection's bias, a learned attention sink per query head (F32 (n_heads): one more
    // logit in each head's softmax, with no value), the pre-FFN RMSNorm under the name its converter gives it
    // (post_attention_norm: HF's post_attention_layernorm), and biases on the router and on every expert's
    // gate, up and down projections (F32 (n_expert, rows): expert e's bias is row e)
    ROLE_ATTN_OUT_BIAS,      // (dim)
    ROLE_ATTN_SINKS,         // (n_heads)
    ROLE_FFN_NORM_PA,        // (dim)
    ROLE_FFN_GATE_INP_BIAS,  // (n_expert)
    ROLE_FFN_GATE_EXPS_BIAS, // (n_expert, expert_ffn)
    ROLE_FFN_UP_EXPS_BIAS,   // (n_expert, expert_ffn)
    ROLE_FFN_DOWN_EXPS_BIAS, // (n_expert, dim)
    // Qwen3.5's gated DeltaNet layers (ssm_*: hparams.ssm_*): the q/k/v projection before the causal conv1d
    // (conv_dim = 2·key_dim + value_dim rows), the output gate z (value_dim rows), the conv's kernels (F32
    // (conv_dim, ssm_conv)), the decay's bias and rate (F32 (ssm_vheads); ssm_a = -exp(A_log)), the beta and
    // alpha projections (ssm_vheads rows), the per-head RMSNorm (F32 (ssm_state)), the output projection
    ROLE_SSM_QKV,   // (conv_dim, dim)
    ROLE_SSM_GATE,  // (value_dim, dim)
    ROLE_SSM_CONV,  // (conv_dim, ssm_conv)
    ROLE_SSM_DT,    // (ssm_vheads)
    ROLE_SSM_A,     // (ssm_vheads)
    ROLE_SSM_BETA,  // (ssm_vheads, dim)
    ROLE_SSM_ALPHA, // (ssm_vheads, dim)
    ROLE_SSM_NORM,  // (ssm_state)
    ROLE_SSM_OUT,   // (dim, value_dim)
    // Qwen3-Next's fused forms of them, by key head (r = ssm_vheads / ssm_groups value heads each): beta and
    // alpha as one matrix, [beta × r, alpha × r] for each key head; and, in files of older converters, q, k, v
    // and z as one matrix, [q, k, v × r, z × r] for each key head, instead of attn_qkv and attn_gate
    ROLE_SSM_BA, // (2·ssm_vheads, dim)
    ROLE_SSM_IN, // (2·key_dim + 2·value_dim, dim)
    ROLE_COUNT
} arch_role;

enum { ARCH_ABSENT = 0, ARCH_REQUIRED = 1, ARCH_OPTIONAL = 2 };

struct fwd_graph;

typedef struct arch_desc {
    const char *name;             // general.architecture
    unsigned char role[ROLE_COUNT]; // ARCH_ABSENT / ARCH_REQUIRED / ARCH_OPTIONAL
    int rope_neox;                // rotate pairs (i, i + rope_dim/2) instead of (2i, 2i+1)
    int ffn_gelu;                 // GeGLU with tanh-approximated GELU instead of SwiGLU
    int embd_scale;               // multiply token embeddings by sqrt(dim)
    // Sliding-window attention. The window comes from "<arch>.attention.sliding_window"; these are the
    // architecture's defaults where the GGUF does not carry them.
    int swa_pattern;              // every swa_pattern-th layer is global (full attention), the others local;
                                  // "<arch>.attention.sliding_window_pattern" overrides; 0: all layers global
    float rope_base_swa;          // RoPE base of local layers (0: same as global)
    int swa_rope_global;          // local layers rotate exactly as global ones (gpt-oss: YaRN and its scaling
                                  // included); 0: local layers have their own base and unscaled positions
    int swa_window;               // the window where the GGUF has none (0: no sliding window then)
    // Soft-capping of the attention scores and of the logits (c·tanh(x/c)): the defaults where the GGUF has no
    // "<arch>.attn_logit_softcapping" / "<arch>.final_logit_softcapping"; 0: the architecture has none
    float attn_softcap, final_softcap;
    // Phi-3: q, k and v may come as one attn_qkv matrix (q_dim + 2·kv_dim rows) and gate and up always come as
    // one ffn_up matrix (2·ffn_dim rows, gate first); the loader binds their row ranges as the separate roles.
    int fused;
    int yarn;                     // takes YaRN RoPE scaling and Llama 4's attention temperature (Mistral 3)
    int no_rope_step;             // layers l with (l + 1) % no_rope_step == 0 skip RoPE (SmolLM3: 4); 0: none
    // Granite's multipliers, from the GGUF: token embeddings times <arch>.embedding_scale, the attention
    // softmax scale <arch>.attention.scale (instead of 1/sqrt(head_dim)), every block's output times
    // <arch>.residual_scale before its residual add, logits divided by <arch>.logit_scale; without
    // <arch>.rope.scaling.finetuned (true by default) no layer rotates q and k
    int scales;
    // OLMo 2: q and k RMSNormed over all heads at once (attn_q_norm of q_dim, attn_k_norm of kv_dim weights)
    int qk_norm_all;
    // Mixture of experts: the FFN is routed (ROLE_FFN_*_EXPS); the top-k routing weights are renormalised to
    // sum to 1 when moe_norm_w (qwen3moe), used as the softmax gave them otherwise (qwen2moe).
    int moe;
    int moe_norm_w;
    // The experts' clamped SwiGLU (gpt-oss): gate ≤ limit, up within ±limit, gate·σ(alpha·gate)·(up + 1);
    // 0: plain SwiGLU. llama.cpp fixes both for gpt-oss (no GGUF key carries them).
    float swiglu_limit, swiglu_alpha;
    // Hybrid linear attention (Qwen3.5): gated DeltaNet layers (the ROLE_SSM_* roles) between full-attention
    // layers whose q projection carries a sigmoid output gate per head (2·q_dim rows: each head's q, then its
    // gate); each sequence keeps a recurrent state (model.h: model_rs_*). The roles of both kinds are optional
    // in role[]: the loader checks per layer which kind it is.
    int hybrid;
    // Qwen3-Next's layout of the DeltaNet heads: the value heads are grouped by key head (value head h reads key
    // head h / r, r = ssm_vheads / ssm_groups, where Qwen3.5's tiled order has h mod ssm_groups), and beta and
    // alpha come as one ssm_ba matrix (ROLE_SSM_BA; q, k, v and z as one ssm_in matrix in older files)
    int ssm_grouped;
    // The transformer block as a sequence of operations (fwd.h: fwd_layer_fn, e.g. fwd_layer_std): the one
    // place the architecture's forward pass is written, for every backend.
    int (*layer)(const struct fwd_graph *g, int layer);
} arch_desc;

const char *arch_role_suffix(arch_role r); // e.g. "attn_q.weight"
const arch_desc *arch_find(const char *name, int len); // NULL if unknown
// Comma-separated list of supported names, for error messages.
const char *arch_supported_list(void);

#endif
