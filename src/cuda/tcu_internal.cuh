// Private to src/cuda/: the device objects behind tcu.h's handles, and the launchers each .cu file exports
// to the forward pass (no relocatable device code: kernels are launched from the file that defines them).
#ifndef TACHYON_CUDA_TCU_INTERNAL_CUH
#define TACHYON_CUDA_TCU_INTERNAL_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdio.h>

#include "common/err.h"
#include "cuda/tcu.h"
#include "cuda/tcu_quant.h"
#include "cuda/tcu_stage.h"

// A weight in device memory; d NULL: absent.
struct tcu_dweight {
    int type;
    const uint8_t *d;
    int64_t rows, cols;
    size_t row_bytes;
};

#define TCU_MAX_ALLOCS 4096

struct tcu_model {
    tcu_model_desc hp;      // the description's scalars (its pointers are not kept)
    float *inv_freq;        // device (rope_dim/2)
    tcu_dweight tok_embd, output, output_norm;
    tcu_dweight *layer_w;   // host array (n_layers, hp.n_roles) of device weights, by arch_role
    void *allocs[TCU_MAX_ALLOCS]; // device buffers owned, freed in reverse
    const void *alloc_src[TCU_MAX_ALLOCS]; // host source of each (a tied output reuses tok_embd's upload)
    int n_allocs;
};

struct tcu_kv {
    tcu_model *m;
    int n_blocks, block_size;
    size_t layer_elems;     // halves per layer: n_blocks · n_kv_heads · block_size · head_dim
    __half *k, *v;          // (n_layers, n_blocks, n_kv_heads, block_size, head_dim)
};

// Layer l's weight of role r (d NULL when the layer has none).
static inline const tcu_dweight *tcu_w(const tcu_model *m, int l, int r) {
    return &m->layer_w[(size_t)l * m->hp.n_roles + r];
}

#define TCU_NI 6           // max_tokens-sized regions of the staged integers (tcu_ctx.h_ints)
#define TCU_LOGIT_TILE 32   // logits rows per output-head pass (bounds the device logits buffer)

// The batch's device integers (tcu_ctx.ints): tokens, positions, sequences, logits rows, attention tiles, tables.
typedef struct tcu_dev_batch {
    const int32_t *tok, *pos, *seq, *lrows, *erows, *tiles, *tab;
    int n_tiles, stride;
} tcu_dev_batch;

#define TCU_GRAPH_MAX_TOKENS 256
#define TCU_GRAPH_KEY 9

struct tcu_ctx {
    tcu_model *m;
    int max_tokens;
    cudaStream_t stream;
    // device activations, sized once for max_tokens rows: (max_tokens, hp.buf_floats[i]) each (model/fwd.h)
    float *buf[FWD_BUF_COUNT];
    // the step being run (tcu_step_begin .. tcu_step_end): its cache, batch and device integers
    tcu_kv *kv;
    const tcu_batch *b;
    int n_tokens, n_layers;
    tcu_dev_batch db;
    int capturing; // 1: the operations are being captured into a graph (closed by tcu_step_end)
    float *logits;    // (TCU_LOGIT_TILE, n_vocab)
    int32_t *argmax;  // (TCU_LOGIT_TILE)
    int32_t *ints;    // device copy of h_ints
    // pinned host staging: tokens, pos, seq, logits rows, embd rows, attention tiles (TCU_NI regions of max_tokens
    // each), then the block tables
    int32_t *h_ints;
    int table_cap;    // int32 entries of the tables' part of ints / h_ints
    float *h_logits;  // (TCU_LOGIT_TILE, n_vocab) pinned
    int32_t *h_argmax; // (TCU_LOGIT_TILE) pinned
    float *h_rows;    // (max_tokens, dim) pinned: embedding rows out, normed rows in (tcu_logits_rows)
    // CUDA graph of a step's kernels (TACHYON_CUDA_GRAPHS=1, steps of up to TCU_GRAPH_MAX_TOKENS rows: decode):
    // replayed while the step's shape is the same, captured again when it changes
    int graphs;              // 1: on
    cudaGraphExec_t graph;   // the captured step, or NULL
    long long graph_key[TCU_GRAPH_KEY]; // what it was captured for: rows, tiles, table stride, layers, logits
                                        // rows, the KV pool's buffers and geometry (tcu_step_begin)
};

// msg helpers: format into (msg, cap) and return code.
static inline int tcu_fail(char *msg, size_t cap, int code, const char *fmt, ...) {
    if (msg && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, cap, fmt, ap);
        va_end(ap);
    }
    return code;
}

#define TCU_TRY(call, what)                                                                                     \
    do {                                                                                                        \
        cudaError_t e_ = (call);                                                                                \
        if (e_ != cudaSuccess)                                                                                  \
            return tcu_fail(msg, msg_cap, e_ == cudaErrorMemoryAllocation ? TC_ERR_NOMEM : TC_ERR, "cuda: %s: %s", \
                            what, cudaGetErrorString(e_));                                                      \
    } while (0)

// --- launchers (all asynchronous on stream s)

// tcu_ops.cu
// out rows (n, len) with stride ld_out = RMSNorm of x rows (rows[i] if rows, else i) with stride ld_x, times w
// (len, may be NULL); as ops_rmsnorm (sum of squares in double).
void tcu_rmsnorm(cudaStream_t s, float *out, int ld_out, const float *x, int ld_x, const int32_t *rows, int n,
                 int len, const float *w, float eps);
// x (n, d) += b (d)
void tcu_add_bias(cudaStream_t s, float *x, const float *b, int n, int d);
// x (n) += y
void tcu_add(cudaStream_t s, float *x, const float *y, int64_t n);
// g (n) = act(g)·u, act SiLU or tanh-GELU
void tcu_glu(cudaStream_t s, float *g, const float *u, int64_t n, int gelu);
// x (n, dim) = rows tokens[t] of the embedding (any tcu type), times scale
void tcu_embed(cudaStream_t s, float *x, const tcu_dweight *e, const int32_t *tokens, int n, float scale);
// Rotates q (n, n_heads, head_dim) and k (n, n_kv, head_dim) in place at positions pos (ops_rope's convention;
// angles pos·scale·inv_freq_i in double, as ops_rope_angles).
void tcu_rope(cudaStream_t s, float *q, float *k, const int32_t *pos, int n, int n_heads, int n_kv, int head_dim,
              int rope_dim, float scale, const float *inv_freq, int neox);
// Writes k, v (n, n_kv, head_dim) as f16 into the paged layer caches at each token's (block, slot).
void tcu_store_kv(cudaStream_t s, __half *kc, __half *vc, const float *k, const float *v, const int32_t *tables,
                  int stride, const int32_t *seq, const int32_t *pos, int n, int n_kv, int head_dim, int block_size);
// out[r] = argmax of logits row r (n_vocab), ties to the lowest id, NaN never wins
void tcu_argmax_rows(cudaStream_t s, int32_t *out, const float *logits, int n, int n_vocab);

// tcu_matmul.cu: out (n, w.rows) with row stride ld_out = x (n, w.cols) @ wᵀ, dequantizing w on the fly.
void tcu_matmul(cudaStream_t s, float *out, int ld_out, const float *x, int n, const tcu_dweight *w);

// tcu_attn.cu: out (n, n_heads·hd) = softmax(q·Kᵀ·scale)·V per token and query head, over positions
// [first, pos[t]] of the token's sequence (first from the window; 0 without one), reading the paged f16 cache.
// The rows go in tiles (tcu_attn_tiles, tcu_stage.h) of consecutive positions of one sequence.
#define TCU_ATT_TK 32 // K/V positions staged in shared memory at a time
void tcu_attention(cudaStream_t s, float *out, const float *q, const __half *kc, const __half *vc,
                   const int32_t *tables, int stride, const int32_t *seq, const int32_t *pos, const int32_t *tiles,
                   int n_tiles, int n_heads, int n_kv, int head_dim, int block_size, float scale, int window);

#endif
