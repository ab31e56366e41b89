// Private to src/model/: the model struct shared by loading and the forward pass.
#ifndef TACHYON_MODEL_INTERNAL_H
#define TACHYON_MODEL_INTERNAL_H

#include "cpu/repack.h"
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
    void *packed; // in the model's arena (model_place.c): cpu_repack form of data for the CPU matmul, or NULL
    void *copy;   // in the model's arena: data's bytes moved there from the mapping (then data points here), or NULL
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
    // K centering of a quantized K cache (key_center.c): minus each layer's mean key, (n_layers, kv_dim), or NULL
    float *k_center_neg;
    // ...and its per-channel balance: keys times k_scale (n_layers, kv_dim), queries times q_scale (n_layers,
    // q_dim) = 1 / their kv head's k_scale; NULL when off. Same allocation as k_center_neg.
    float *k_scale, *q_scale;
    int k_center_tried; // model_kv_center_init ran (whatever its outcome)
    void *arena;                             // owned: the moved matrices (model_place.c), or NULL
    uint64_t placed_repacked, placed_copied; // model_placement
};

// Calibration hook (key_center.c): while set, every forward of c adds each layer's post-RoPE keys of
// positions >= skip_pos into sums (n_layers, kv_dim), their squares into k_sq, the squares of the post-RoPE
// queries into q_sq (n_layers, q_dim), and counts the positions in *n. NULL sums: off.
void model_ctx_capture_k(model_ctx *c, double *sums, double *k_sq, double *q_sq, long *n, int skip_pos);

// Expert e's matrix (rows, cols) of a 3-D expert tensor.
static inline const void *model_weight_expert(const model_weight *w, int e) {
    return (const char *)w->data + (size_t)e * (size_t)w->rows * tt_row_size(w->type, w->cols);
}
// ...and its repacked form (the experts' cpu_repack forms one after the other), or NULL when w has none.
static inline const void *model_weight_expert_packed(const model_weight *w, int e) {
    return w->packed ? (const char *)w->packed + (size_t)e * cpu_repack_size(w->type, w->rows, w->cols) : NULL;
}

// Loading steps (model.c; the last in model_place.c), in order, by model_load.c: the hyper-parameters from the
// metadata (sets m->arch; a hybrid model's DeltaNet ones are model_hybrid_read_hparams'), every non-hybrid layer's
// weights bound (a hybrid model's by model_hybrid_bind), the matrices moved into the huge-page arena, repacked for
// the CPU kernels or copied (from_file: data lies in the file mapping).
int model_read_hparams(model *m, tc_err *err);
int model_bind_weights(model *m, tc_err *err);
int model_repack_weights(model *m, int from_file, tc_err *err);
// Resolves tensor `name` into w, checking its type and shape (rows x cols; rows 1 for a vector, which must be F32);
// depth: the matrices a 3-D expert tensor holds (ne[2]); 1 for plain matrices and vectors. Absent: an error when
// required, else w->data NULL.
int model_bind(model *m, model_weight *w, const char *name, int64_t rows, int64_t cols, int64_t depth, int vector,
               int required, tc_err *err);
// Resolves tensor `name` into w, checking its type and shape (rows x cols; rows 1 for a vector, which must be F32).
// Absent: an error when required, else w->data NULL.
int model_bind_tensor(model *m, model_weight *w, const char *name, int64_t rows, int64_t cols, int vector,
                      int required, tc_err *err);
// Hybrid models (arch_desc.hybrid, model_hybrid.c): the DeltaNet hyper-parameters and layer kinds (after the
// common ones), and every layer's weights by its kind.
int model_hybrid_read_hparams(model *m, tc_err *err);
int model_hybrid_bind(model *m, tc_err *err);

static inline const model_weight *model_layer_w(const model *m, int l, arch_role r) {
    return &m->layers[(size_t)l * ROLE_COUNT + r];
}

#endif
