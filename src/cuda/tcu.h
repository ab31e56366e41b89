// The CUDA backend's entry points (src/cuda/*.cu), callable from C: a plain-data description of the model in,
// opaque device objects out, and the operations of the shared layer sequence (model/fwd.h) on the device.
// backend_cuda.c fills the description from src/model/, drives a step through the sequence with these
// operations, and wraps the rest in backend_ops; of the host model headers the .cu files include only fwd.h
// (plain C: the operation vocabulary). Every function that can fail returns 0 or a negative TC_ERR_* code and
// writes a message into msg (msg_cap bytes). Nothing here aborts.
#ifndef TACHYON_CUDA_TCU_H
#define TACHYON_CUDA_TCU_H

#include <stddef.h>
#include <stdint.h>

#include "model/fwd.h"

#ifdef __cplusplus
extern "C" {
#endif

// A weight matrix (rows, cols) row-major in its GGUF type (tcu_quant.h ids), read from host memory (the GGUF
// mapping) at upload; host NULL: absent (an optional tensor). Vectors (norms, biases) are F32 with rows 1.
typedef struct tcu_weight {
    int type;
    const void *host;
    int64_t rows, cols;
    size_t row_bytes; // bytes of one row
} tcu_weight;

typedef struct tcu_model_desc {
    int n_vocab, dim, n_layers, n_heads, n_kv_heads, head_dim, ffn_dim;
    float norm_eps;
    float rope_scale;       // linear position scale
    int rope_neox, rope_dim;
    float attn_scale, embd_scale;
    int ffn_gelu;           // 1: tanh-GeGLU, 0: SwiGLU
    const float *inv_freq;  // (rope_dim/2) host, from ops_rope_inv_freq (copied at upload)
    tcu_weight tok_embd, output, output_norm;
    int n_roles;                // weights per layer, indexed by arch_role (model/arch.h)
    const tcu_weight *layer_w;  // (n_layers, n_roles) host, copied at upload; absent roles have host NULL
    size_t buf_floats[FWD_BUF_COUNT]; // floats per row of each activation buffer (fwd_buf_floats)
} tcu_model_desc;

typedef struct tcu_model tcu_model; // weights in device memory
typedef struct tcu_kv tcu_kv;       // a paged f16 KV pool in device memory
typedef struct tcu_ctx tcu_ctx;     // one stream, device scratch and pinned host staging for one runner

// 0 when a CUDA device is usable; otherwise TC_ERR_UNSUPPORTED with the reason (no device, no driver …).
int tcu_device_check(char *msg, size_t msg_cap);
// Bytes of device memory free now (0 when none is usable).
size_t tcu_mem_free(void);

// Uploads every weight as it is in the file (quant blocks unchanged); a tied output shares tok_embd's copy.
// Owned: free with tcu_model_free after every kv and ctx made from it.
int tcu_model_new(const tcu_model_desc *d, tcu_model **out, char *msg, size_t msg_cap);
void tcu_model_free(tcu_model *m);

// n_blocks blocks of block_size positions × every layer × n_kv_heads rows of head_dim f16 values, K and V
// (the CPU's layout: kv/kv_store.h, kv_store_offset).
int tcu_kv_new(tcu_model *m, int n_blocks, int block_size, tcu_kv **out, char *msg, size_t msg_cap);
void tcu_kv_free(tcu_kv *kv);
int tcu_kv_n_blocks(const tcu_kv *kv);
int tcu_kv_block_size(const tcu_kv *kv);
// Copies every layer's K/V of block src to dst (on the device, synchronously).
int tcu_kv_copy_block(tcu_kv *kv, int src, int dst, char *msg, size_t msg_cap);

int tcu_ctx_new(tcu_model *m, int max_tokens, tcu_ctx **out, char *msg, size_t msg_cap);
void tcu_ctx_free(tcu_ctx *c);

// A validated ragged batch (model.h's model_batch; the caller has checked every id, position, block and row).
typedef struct tcu_batch {
    int n_tokens;
    const int32_t *tokens, *pos, *seq; // (n_tokens)
    int n_seqs;
    const int32_t *const *block_tables; // (n_seqs) each covers positions 0..max pos of its sequence
    int n_logits;
    const int32_t *logits_rows;         // (n_logits) ascending
    int n_embd;
    const int32_t *embd_rows;           // (n_embd)
    float *embd;                        // (n_embd, dim) host
} tcu_batch;

// --- one step: tcu_step_begin, the layer sequence through the operations below, tcu_step_end.
// Begin stages the batch's integers in one upload and makes (c, kv, b) the step the operations run. *queue = 0:
// a CUDA graph captured for a step of this shape was replayed (TACHYON_CUDA_GRAPHS=1), the operations must not
// be called; 1: the caller queues them (embedding, n_layers layers, the output norm), maybe into a capture.
int tcu_step_begin(tcu_ctx *c, tcu_kv *kv, const tcu_batch *b, int n_layers, int *queue, char *msg, size_t msg_cap);
// Ends the step: launches the captured graph; copies the embedding rows to the host; runs the output head and
// copies logits (n_logits, n_vocab) to the host. argmax (optional, n_logits): each logits row's greedy token,
// computed on the device (lowest index among equal maxima); logits may then be NULL (not copied).
// TCU_REQUEUE: the capture failed (graphs are now off for c): queue the operations again, then call it again.
#define TCU_REQUEUE 1
int tcu_step_end(tcu_ctx *c, float *logits, int32_t *argmax, char *msg, size_t msg_cap);
// Logits (n, n_vocab) of n final-normed host rows (n <= max_tokens).
int tcu_logits_rows(tcu_ctx *c, const float *normed, int n, float *logits, char *msg, size_t msg_cap);

// The operations (fwd.h: fwd_ops' slots, be a tcu_ctx inside a step): kernels queued on the context's stream;
// launch errors surface at tcu_step_end. Sliding-window layers are not implemented (the backend refuses such
// models).
int tcu_fwd_embed(void *be, fwd_buf dst, int n);
int tcu_fwd_norm(void *be, fwd_buf dst, fwd_buf src, int rows, int len, int layer, arch_role w, float eps);
int tcu_fwd_matmul(void *be, const fwd_buf *outs, fwd_buf x, int n, int layer, const arch_role *ws, int count);
int tcu_fwd_add_bias(void *be, fwd_buf x, int n, int len, int layer, arch_role b);
int tcu_fwd_rope(void *be, fwd_buf q, fwd_buf k, int n, int layer);
int tcu_fwd_attention(void *be, fwd_buf out, fwd_buf q, fwd_buf k, fwd_buf v, int n, int layer);
int tcu_fwd_add(void *be, fwd_buf x, fwd_buf y, int count);
int tcu_fwd_glu(void *be, fwd_buf g, fwd_buf u, int count, fwd_act act);
int tcu_fwd_out_norm(void *be, fwd_buf dst, fwd_buf src, float eps);

// --- test hooks (tests/unit/test_cuda_kernels.c): one kernel on host data, synchronously, on a stream of its own.
// out (n, rows) = x (n, cols) @ wᵀ, w (rows, cols) of type `type` (row_bytes per row) in host memory.
int tcu_test_matmul(int type, const void *w, int64_t rows, int64_t cols, size_t row_bytes, const float *x, int n,
                    float *out, char *msg, size_t msg_cap);
// out (n_rows, n_heads, head_dim) = attention of n_rows consecutive query rows of one sequence at positions
// n_pos - n_rows .. n_pos - 1 (a prefill chunk; 1: a decode row): q (n_rows, n_heads, head_dim); k, v: one
// layer's host f16 cache (n_blocks, n_kv, block_size, head_dim); blocks: the sequence's table.
int tcu_test_attention(const float *q, const uint16_t *k, const uint16_t *v, int n_blocks, const int32_t *blocks,
                       int n_rows, int n_pos, int n_heads, int n_kv, int head_dim, int block_size, float scale,
                       int window, float *out, char *msg, size_t msg_cap);

#ifdef __cplusplus
}
#endif

#endif
