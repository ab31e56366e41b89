// FlashAttention-style attention over the paged KV cache (f16, q8_0 or q4_0 rows, read directly): for one query token and one KV head, the
// n_rep query heads that share it (GQA) walk the sequence's blocks as tiles with an online softmax
// (running max and sum), so no score matrix is ever materialized and each K/V tile is read once per group.
// A long context is cut into spans at fixed positions (flash-decoding): each span's softmax is computed on its
// own and the spans are merged in order, so the spans of one query may run on different threads
// (attn_span_fn) and give the same bits as one call that walks them all.
#ifndef TACHYON_CPU_ATTENTION_H
#define TACHYON_CPU_ATTENTION_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu/cpu.h"
#include "tensor/ttype.h"

#define ATTN_MAX_REP 32       // query heads per KV head
#define ATTN_MAX_HEAD_DIM 256
#define ATTN_TILE 64          // KV positions per tile of the x86 kernels (whole blocks; block_size <= 64)
#define ATTN_SPAN 1024        // KV positions per span (attn_span_len)

typedef struct attn_geom {
    int n_kv_heads;
    int head_dim;   // <= ATTN_MAX_HEAD_DIM
    int block_size; // positions per KV block
    int n_rep;      // query heads per KV head, <= ATTN_MAX_REP
    float scale;    // softmax scale, usually 1/sqrt(head_dim)
    int window;     // sliding window: attend to the last `window` positions only; 0: all positions
    float softcap;  // soft-capping of the scaled scores (Gemma 2): s = softcap·tanh(s / softcap); 0: none
    // Attention sinks (gpt-oss): a learned logit per query head, (n_kv_heads·n_rep) floats (head kv_head·n_rep + r),
    // that joins each softmax's denominator with no value: out = Σ exp(s_j)·v_j / (Σ exp(s_j) + exp(sink)).
    // NULL: none. Borrowed (the layer's weights).
    const float *sinks;
    int k_type, v_type; // tt_type of the cache rows: TT_Q8_0, TT_Q4_0; any other value reads f16 (so a
                        // geometry that leaves them 0 means an f16 cache)
    int span;           // positions per span (attn_span_len); 0: ATTN_SPAN (tests set small spans)
} attn_geom;

// Positions per tile of the x86 kernels: whole blocks, ATTN_TILE positions or one block when blocks are larger.
static inline int attn_tile_len(const attn_geom *geo) {
    return geo->block_size < ATTN_TILE ? ATTN_TILE / geo->block_size * geo->block_size : geo->block_size;
}

// Positions per span: geo->span (or ATTN_SPAN) rounded down to whole tiles, at least one tile. Span k holds
// positions [k·len, (k + 1)·len) whatever the query, the batch or the threads.
static inline int attn_span_len(const attn_geom *geo) {
    const int ts = attn_tile_len(geo), s = geo->span > 0 ? geo->span : ATTN_SPAN;
    return s > ts ? s / ts * ts : ts;
}

// A scaled score soft-capped (attn_geom.softcap > 0): every kernel applies this same scalar function to each
// score, so the kernels differ only by how they sum q·k.
static inline float attn_softcap(float s, float cap) { return cap * tanhf(s / cap); }

// What every kernel multiplies a head's accumulated output by at the end of its online softmax, with m its
// running max and l its sum of exp(s - m): 1 / l, or with a sink logit (sinks != NULL: sinks[h]) 1 / (l +
// exp(sink - m)), taken over max(m, sink) so that neither exponential overflows.
static inline float attn_out_scale(float m, float l, const float *sinks, int h) {
    if (!sinks) return l > 0 ? 1.0f / l : 0.0f;
    const float sk = sinks[h];
    if (sk > m) {
        const float c = expf(m - sk);
        return c / (l * c + 1.0f);
    }
    return 1.0f / (l + expf(sk - m));
}

// First position a query attends to when it sees n_pos positions (sliding window, else 0).
static inline int attn_first_pos(const attn_geom *geo, int n_pos) {
    return geo->window > 0 && n_pos > geo->window ? n_pos - geo->window : 0;
}

// A quantized K cache is read with integer dot products, as llama.cpp's flash attention does (it converts Q
// to K's vec_dot_type): the query rows are rounded once per (token, KV head) to 8 bits with one float scale
// per 32-value block, and q·k = Σ_blocks d_q·d_k·Σ(int8 q × int k). Every kernel, the scalar reference
// included, scores a q8_0/q4_0 K cache this way (an f16 K cache keeps f32 q), so they agree up to float
// summation order.
typedef struct attn_q8 {
    int8_t qs[ATTN_MAX_REP][ATTN_MAX_HEAD_DIM] __attribute__((aligned(32))); // (n_rep, head_dim)
    float d[ATTN_MAX_REP][ATTN_MAX_HEAD_DIM / 32];                           // block scales
    int32_t sum[ATTN_MAX_REP][ATTN_MAX_HEAD_DIM / 32];                       // Σ qs per block (K offsets)
} attn_q8;

static inline int attn_k_quantized(int k_type) { return k_type == TT_Q8_0 || k_type == TT_Q4_0; }

// dst = q (nr, hd) rounded per 32-value block: d = max|x| / 127, qs = round-to-nearest-even(x / d).
void attn_quantize_q(attn_q8 *dst, const float *q, int nr, int hd);
// The same into dst's rows [row0, row0 + nr).
void attn_quantize_q_at(attn_q8 *dst, int row0, const float *q, int nr, int hd);

// out (n_rep, head_dim) = softmax(q·Kᵀ·scale) V over positions [attn_first_pos, n_pos) of one sequence, KV
// head kv_head. q (n_rep, head_dim); k_layer/v_layer: one layer's cache laid out (n_blocks, n_kv_heads,
// block_size) rows of head_dim values each, of type geo->k_type / geo->v_type (tt_row_size bytes); blocks: the sequence's block table (covers n_pos positions; entries of blocks wholly
// before the window are never read).
typedef void (*attn_fn)(float *out, const float *q, const void *k_layer, const void *v_layer,
                        const int32_t *blocks, int n_pos, int kv_head, const attn_geom *geo);

void attn_tile_scalar(float *out, const float *q, const void *k_layer, const void *v_layer,
                      const int32_t *blocks, int n_pos, int kv_head, const attn_geom *geo);
#if defined(__x86_64__) // the ARM tiles are in arm_kernels.h
void attn_tile_avx2(float *out, const float *q, const void *k_layer, const void *v_layer,
                    const int32_t *blocks, int n_pos, int kv_head, const attn_geom *geo);
void attn_tile_avx512(float *out, const float *q, const void *k_layer, const void *v_layer,
                      const int32_t *blocks, int n_pos, int kv_head, const attn_geom *geo);
#endif

// Several queries of one sequence at consecutive positions at once (a prefill chunk, a verification item):
// query i (0 <= i < n_q) sees n_pos + i positions; its q rows are q + i·q_stride (n_rep, head_dim) and its
// output out + i·out_stride. n_q · n_rep <= ATTN_MAX_REP. Each query's output is bit for bit what the
// one-query kernel of the same ISA gives it (the same operations per head in the same order): only the
// conversion of each K row and V chunk, read once per tile for all the queries, is shared.
typedef void (*attn_multi_fn)(float *out, size_t out_stride, const float *q, size_t q_stride, int n_q,
                              const void *k_layer, const void *v_layer, const int32_t *blocks, int n_pos,
                              int kv_head, const attn_geom *geo);

void attn_multi_scalar(float *out, size_t out_stride, const float *q, size_t q_stride, int n_q,
                       const void *k_layer, const void *v_layer, const int32_t *blocks, int n_pos, int kv_head,
                       const attn_geom *geo);
#if defined(__x86_64__)
void attn_multi_avx2(float *out, size_t out_stride, const float *q, size_t q_stride, int n_q,
                     const void *k_layer, const void *v_layer, const int32_t *blocks, int n_pos, int kv_head,
                     const attn_geom *geo);
void attn_multi_avx512(float *out, size_t out_stride, const float *q, size_t q_stride, int n_q,
                       const void *k_layer, const void *v_layer, const int32_t *blocks, int n_pos, int kv_head,
                       const attn_geom *geo);
#endif

// --- spans (split attention)
// The multi-query kernel over the positions [lo, hi) of span lo / attn_span_len (each query's own positions
// intersected with it), each head r (query r / n_rep's head r % n_rep) left unnormalized: its output row holds
// Σ exp(s_j - m)·v_j, ml[2r] its running max m (-INFINITY when the head saw no position of the span) and
// ml[2r + 1] its sum l = Σ exp(s_j - m). Sinks are not applied (attn_span_finish does). Within a span the
// arithmetic is the multi-query kernel's, so a query's partial result does not depend on n_q.
typedef void (*attn_span_fn)(float *out, size_t out_stride, const float *q, size_t q_stride, int n_q,
                             const void *k_layer, const void *v_layer, const int32_t *blocks, int n_pos,
                             int kv_head, const attn_geom *geo, int lo, int hi, float *ml);

void attn_span_scalar(float *out, size_t out_stride, const float *q, size_t q_stride, int n_q,
                      const void *k_layer, const void *v_layer, const int32_t *blocks, int n_pos, int kv_head,
                      const attn_geom *geo, int lo, int hi, float *ml);
#if defined(__x86_64__)
void attn_span_avx2(float *out, size_t out_stride, const float *q, size_t q_stride, int n_q,
                    const void *k_layer, const void *v_layer, const int32_t *blocks, int n_pos, int kv_head,
                    const attn_geom *geo, int lo, int hi, float *ml);
void attn_span_avx512(float *out, size_t out_stride, const float *q, size_t q_stride, int n_q,
                      const void *k_layer, const void *v_layer, const int32_t *blocks, int n_pos, int kv_head,
                      const attn_geom *geo, int lo, int hi, float *ml);
#endif

// The spans n_q queries at n_pos.. touch: [*first, *last] (span indices; the first query's window start to the
// last query's last position).
void attn_span_range(const attn_geom *geo, int n_pos, int n_q, int *first, int *last);

// Heads of acc (rows as attn_span_fn lays them out, acc_ml their m and l) absorb the span partial part
// (part_ml): acc = acc·exp(m_acc - m) + part·exp(m_part - m), l likewise, m = max. A part whose head saw no
// position is skipped. Spans merged one at a time in span order give the same bits wherever they were computed.
void attn_span_merge(float *acc, size_t acc_stride, float *acc_ml, const float *part, size_t part_stride,
                     const float *part_ml, int n_q, int n_rep, int hd);

// Each head's output = its merged row · attn_out_scale (1 / l, with the layer's sink when geo->sinks).
void attn_span_finish(float *out, size_t out_stride, const float *ml, int n_q, int kv_head, const attn_geom *geo);

// The multi-query result (attn_multi_fn) from a span kernel: the first span into out, each later one into a
// stack buffer merged into out in order, then finished.
void attn_span_run(attn_span_fn span, float *out, size_t out_stride, const float *q, size_t q_stride, int n_q,
                   const void *k_layer, const void *v_layer, const int32_t *blocks, int n_pos, int kv_head,
                   const attn_geom *geo);

// The span kernel behind attn_select_multi's choice, or NULL where that kernel walks the context whole (the
// ARM levels: their results are then not split).
attn_span_fn attn_select_span(cpu_isa isa, const attn_geom *geo);

// Queries one multi-query call may take for this geometry (>= 1).
static inline int attn_max_queries(const attn_geom *geo) { return ATTN_MAX_REP / geo->n_rep; }

// The best kernel for this ISA level and geometry (vector kernels need head_dim % 16 == 0). Every kernel
// reads every supported cache type (the type is in geo, checked per row, not per element).
attn_fn attn_select(cpu_isa isa, const attn_geom *geo);
// Its multi-query form (the scalar one loops over the queries).
attn_multi_fn attn_select_multi(cpu_isa isa, const attn_geom *geo);

#endif
