// 4-ary min-heap of 16-byte entries ordered by a 64-bit key, shared by the SPM and BPE mergers. Four
// children share one 64-byte cache line, which halves the misses of a binary heap on long words.
#ifndef TACHYON_TOK_HEAP_H
#define TACHYON_TOK_HEAP_H

#include <stdint.h>
#include <stdlib.h>

#include "common/err.h"

typedef struct {
    uint64_t key; // smaller pops first
    uint32_t a;   // payload
    int32_t b;    // payload
} tok_heap_ent;

typedef struct {
    tok_heap_ent *e;
    size_t n, cap;
} tok_heap;

static inline int tok_heap_push(tok_heap *h, tok_heap_ent x) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        tok_heap_ent *p = realloc(h->e, cap * sizeof *p);
        if (!p) return TC_ERR_NOMEM;
        h->e = p, h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 4;
        if (h->e[parent].key <= x.key) break;
        h->e[i] = h->e[parent];
        i = parent;
    }
    h->e[i] = x;
    return 0;
}

static inline tok_heap_ent tok_heap_pop(tok_heap *h) {
    tok_heap_ent top = h->e[0], last = h->e[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 4 * i + 1;
        if (c >= n) break;
        size_t best = c, end = c + 4 < n ? c + 4 : n;
        for (size_t k = c + 1; k < end; k++)
            if (h->e[k].key < h->e[best].key) best = k;
        if (h->e[best].key >= last.key) break;
        h->e[i] = h->e[best];
        i = best;
    }
    if (n) h->e[i] = last;
    return top;
}

#endif
