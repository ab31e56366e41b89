// Byte-level BPE ("gpt2") encoding of one raw-text fragment: the pre-tokenizer splits it into words; each
// word starts as one symbol per byte (the token of the byte's stand-in code point) and adjacent pairs are
// merged lowest-rank-first (ties: leftmost first) through the (left id, right id) → (rank, merged id) table.
// Merging on ids is equivalent to llama.cpp's merging on the byte-encoded strings.
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_heap.h"
#include "tokenizer/tok_internal.h"

typedef struct {
    int32_t prev, next;
    int32_t id;  // token (or synthetic intermediate) id; -1 if the byte has no token
    uint32_t n;  // bytes covered; 0 once merged into the left neighbour
} bpe_sym;

typedef struct {
    bpe_sym *sy;
    size_t sy_cap;
    tok_heap h; // key: rank << 32 | left (lowest rank first, ties leftmost); a: pair bytes when queued; b: merged id
} bpe_scratch;

static int add_bigram(const tok_vocab *v, bpe_scratch *s, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return 0;
    int32_t a = s->sy[l].id, b = s->sy[r].id;
    if (a < 0 || b < 0) return 0;
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    uint32_t i = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & v->merge_mask;
    for (; v->merge_key[i]; i = (i + 1) & v->merge_mask)
        if (v->merge_key[i] == key)
            return tok_heap_push(&s->h, (tok_heap_ent){(uint64_t)v->merge_rank[i] << 32 | (uint32_t)l,
                                                       s->sy[l].n + s->sy[r].n, v->merge_res[i]});
    return 0;
}

static int emit_fallback(const tok_vocab *v, const uint8_t *w, size_t n, tok_out *o) {
    for (size_t i = 0; i < n; i++) {
        int32_t id = v->byte_tok[w[i]] >= 0 ? v->byte_tok[w[i]] : v->unk;
        if (id >= 0 && tok_out_push(o, id)) return TC_ERR_NOMEM;
    }
    return 0;
}

static int encode_word(const tok_vocab *v, bpe_scratch *s, const uint8_t *w, size_t n, tok_out *o) {
    if (v->ignore_merges) { // a word that is a whole token is taken as is
        int32_t id = tok_lookup_piece(v, (const char *)w, n);
        if (id >= 0) return tok_out_push(o, id);
    }
    if (n == 1) return emit_fallback(v, w, 1, o);
    if (n > s->sy_cap) {
        bpe_sym *p = realloc(s->sy, n * sizeof *p);
        if (!p) return TC_ERR_NOMEM;
        s->sy = p, s->sy_cap = n;
    }
    for (size_t i = 0; i < n; i++)
        s->sy[i] = (bpe_sym){(int32_t)i - 1, i + 1 < n ? (int32_t)i + 1 : -1, v->byte_tok[w[i]], 1};
    s->h.n = 0;
    int rc = 0;
    for (size_t i = 1; i < n && !rc; i++) rc = add_bigram(v, s, (int32_t)i - 1, (int32_t)i);
    while (s->h.n && !rc) {
        tok_heap_ent b = tok_heap_pop(&s->h);
        int32_t left = (int32_t)(uint32_t)b.key;
        bpe_sym *L = &s->sy[left];
        if (L->n == 0 || L->next < 0) continue;
        bpe_sym *R = &s->sy[L->next];
        if (L->n + R->n != b.a) continue; // stale: one side changed since it was queued
        L->n += R->n;
        L->id = b.b;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) s->sy[R->next].prev = left;
        rc = add_bigram(v, s, L->prev, left);
        if (!rc) rc = add_bigram(v, s, left, L->next);
    }
    size_t off = 0;
    for (int32_t i = 0; i >= 0 && !rc; i = s->sy[i].next) {
        const bpe_sym *x = &s->sy[i];
        if (x->id >= 0 && x->id < v->n_vocab) rc = tok_out_push(o, x->id);
        else rc = emit_fallback(v, w + off, x->n, o);
        off += x->n;
    }
    return rc;
}

int tok_bpe_encode(const tok_vocab *v, const char *text, size_t len, tok_out *o, tc_err *err) {
    tok_span *sp;
    size_t n_sp;
    int rc = tok_pretok_split(v->pre, text, len, &sp, &n_sp, err);
    if (rc) return rc;
    bpe_scratch s = {0};
    for (size_t i = 0; i < n_sp && !rc; i++) rc = encode_word(v, &s, (const uint8_t *)text + sp[i].off, sp[i].len, o);
    free(sp);
    free(s.sy);
    free(s.h.e);
    if (rc) tc_err_set(err, rc, "out of memory in BPE tokenizer");
    return rc;
}
