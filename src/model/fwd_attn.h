// The CPU backend's attention of one layer over a ragged batch, as compute-pool jobs. Units are (run of
// queries, KV head) pairs: a run is up to attn_max_queries rows of one sequence at consecutive positions (a
// prefill chunk, a verification item), so each K/V tile is read once for all of them. A step with fewer units
// than keep the threads busy (a decode step of one or two sequences: SmolLM2 has 3 KV heads for 2 threads)
// splits each unit further by span of the context (flash-decoding, attention.h): the spans' partial softmaxes
// are merged in span order afterwards, which gives the same bits as one call over the whole context, so a
// row's result does not depend on whether its step was split.
#ifndef TACHYON_MODEL_FWD_ATTN_H
#define TACHYON_MODEL_FWD_ATTN_H

#include <stdatomic.h>

#include "cpu/attention.h"
#include "cpu/cpu.h"
#include "kv/kv_store.h"
#include "model/model.h"

#define FWD_ATTN_SPLIT_FLOATS (1 << 18) // floats of split scratch (1 MiB): partial outputs of later spans, m and l

typedef struct fwd_attn {
    cpu_pool *pool;      // borrowed
    attn_multi_fn multi; // the kernel of unsplit units
    attn_span_fn span;   // its span form, or NULL: never split
    float *scratch;      // (FWD_ATTN_SPLIT_FLOATS), borrowed
    // one layer's call
    const kv_store *kv;
    const model_batch *b;
    const attn_geom *geo; // the layer's: global or sliding-window
    int layer;
    float *out;      // (n_tokens, n_kv_heads·n_rep·head_dim) attention output
    const float *q;  // (n_tokens, n_kv_heads·n_rep·head_dim)
    int split, g;    // set by fwd_attn_run: whether this step splits; rows per run
    atomic_int next; // the next unit to claim
} fwd_attn;

// out = attention of every row of a->b over its sequence's cache (a->kv, layer a->layer), on a->pool.
void fwd_attn_run(fwd_attn *a);

#endif
