// The CUDA backend's entry points (src/cuda/*.cu), callable from C: a plain-data description of the model in,
// opaque device objects out. backend_cuda.c fills the description from src/model/ and wraps these in
// backend_ops; the .cu files never include the host model headers. Every function that can fail returns 0 or
// a negative TC_ERR_* code and writes a message into msg (msg_cap bytes). Nothing here aborts.
#ifndef TACHYON_CUDA_TCU_H
#define TACHYON_CUDA_TCU_H

#include <stddef.h>
#include <stdint.h>

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

typedef struct tcu_layer {
    tcu_weight attn_norm, wq, wk, wv, wo, bq, bk, bv, q_norm, k_norm;
    tcu_weight ffn_norm, gate, up, down, attn_post_norm, ffn_post_norm;
} tcu_layer;

typedef struct tcu_model_desc {
    int n_vocab, dim, n_layers, n_heads, n_kv_heads, head_dim, ffn_dim;
    float norm_eps;
    float rope_scale;       // linear position scale
    int rope_neox, rope_dim;
    float attn_scale, embd_scale;
    int ffn_gelu;           // 1: tanh-GeGLU, 0: SwiGLU
    const float *inv_freq;  // (rope_dim/2) host, from ops_rope_inv_freq (copied at upload)
    tcu_weight tok_embd, output, output_norm;
    const tcu_layer *layers; // (n_layers) host, copied at upload
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
// (the CPU's layout: model_internal.h, model_kv_offset).
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

// The batch through the first n_layers layers, the final norm and the output head; KV written for every token;
// logits (n_logits, n_vocab) copied to the host. argmax (optional, n_logits): each logits row's greedy token,
// computed on the device (lowest index among equal maxima); logits may then be NULL (not copied).
int tcu_forward(tcu_ctx *c, tcu_kv *kv, const tcu_batch *b, int n_layers, float *logits, int32_t *argmax,
                char *msg, size_t msg_cap);
// Logits (n, n_vocab) of n final-normed host rows (n <= max_tokens).
int tcu_logits_rows(tcu_ctx *c, const float *normed, int n, float *logits, char *msg, size_t msg_cap);

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
