// Private to src/model/: the model struct shared by loading and the forward pass.
#ifndef TACHYON_MODEL_INTERNAL_H
#define TACHYON_MODEL_INTERNAL_H

#include "model/arch.h"
#include "model/model.h"

// A weight matrix (rows, cols) row-major in its GGUF type; rows = ne[1], cols = ne[0]. Vectors have rows 1.
// The experts of a mixture-of-experts layer are n_expert such matrices one after the other (ne[2]): expert e's
// is a matrix of its own at model_weight_expert(w, e).
typedef struct model_weight {
    uint32_t type;    // tt_type
    const void *data; // borrowed, into the GGUF mapping; NULL when the tensor is absent (optional role)
    int64_t rows, cols;
    int64_t n_expert; // matrices in data: ne[2] (1 for a plain matrix or vector)
    void *packed; // owned, freed by model_free: cpu_repack form of data for the CPU matmul, or NULL
} model_weight;

struct model {
    gguf_ctx *g; // owned
    model_hparams hp;
    const arch_desc *arch;
    model_weight tok_embd;    // (n_vocab, dim)
    model_weight output;      // (n_vocab, dim): output.weight, or tok_embd when tied
    model_weight output_norm; // (dim) F32
    model_weight *layers;     // (n_layers, ROLE_COUNT)
    const float *rope_freqs;  // (rope_dim/2) divisors of each rotation frequency (Llama 3.1 rope), or NULL
    // K centering of a quantized K cache (kv_center.c): minus each layer's mean key, (n_layers, kv_dim), or NULL
    float *k_center_neg;
    // ...and its per-channel balance: keys times k_scale (n_layers, kv_dim), queries times q_scale (n_layers,
    // q_dim) = 1 / their kv head's k_scale; NULL when off. Same allocation as k_center_neg.
    float *k_scale, *q_scale;
    int k_center_tried; // model_kv_center_init ran (whatever its outcome)
};

// Calibration hook (kv_center.c): while set, every forward of c adds each layer's post-RoPE keys of
// positions >= skip_pos into sums (n_layers, kv_dim), their squares into k_sq, the squares of the post-RoPE
// queries into q_sq (n_layers, q_dim), and counts the positions in *n. NULL sums: off.
void model_ctx_capture_k(model_ctx *c, double *sums, double *k_sq, double *q_sq, long *n, int skip_pos);

// Expert e's matrix (rows, cols) of a 3-D expert tensor.
static inline const void *model_weight_expert(const model_weight *w, int e) {
    return (const char *)w->data + (size_t)e * (size_t)w->rows * tt_row_size(w->type, w->cols);
}

static inline const model_weight *model_layer_w(const model *m, int l, arch_role r) {
    return &m->layers[(size_t)l * ROLE_COUNT + r];
}

struct model_kv {
    int n_blocks, block_size;
    int n_blocks_swa;       // blocks of the local (sliding-window) layers' own storage; 0: they share the global one
    int n_layers, n_kv_heads, head_dim;
    tt_type k_type, v_type; // F16, Q8_0 or Q4_0 (quantized: blocks of 32 values along head_dim)
    size_t k_row, v_row;    // bytes of one head's row of head_dim values
    uint8_t *k, *v;         // (n_global, n_blocks, n_kv_heads, block_size) rows of k_row / v_row bytes; with
                            // n_blocks_swa == 0 every layer is "global" here
    uint8_t *k_swa, *v_swa; // (n_local, n_blocks_swa, n_kv_heads, block_size) rows, or NULL
    uint8_t **k_l, **v_l;   // (n_layers) each layer's base in k/k_swa and v/v_swa
    uint8_t *swa_l;         // (n_layers) 1: the layer lives in k_swa/v_swa
};

// 1 when layer l's KV lives in the local layers' storage (and is addressed by the batch's swa tables).
static inline int model_kv_layer_is_swa(const model_kv *kv, int l) { return kv->swa_l[l]; }

// Byte offset of row (block, head, slot) from a layer's base (k_l[l] with k_row, v_l[l] with v_row).
static inline size_t model_kv_offset(const model_kv *kv, size_t row, int block, int head, int slot) {
    return (((size_t)block * kv->n_kv_heads + head) * kv->block_size + slot) * row;
}

#endif
