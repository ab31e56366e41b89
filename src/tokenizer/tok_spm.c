// SentencePiece-style ("llama") encoding of one raw-text fragment: spaces become ▁ (with a leading ▁ when
// asked), the text is split into UTF-8 characters, and adjacent symbols are merged best-score-first
// (ties: leftmost first) whenever their concatenation is a vocabulary piece. Symbols left without a piece
// fall back to their bytes (<0xNN> tokens), or to the unknown token when the vocab has no byte tokens.
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

typedef struct {
    int32_t prev, next;
    uint32_t off, n; // bytes of the escaped text; n == 0 once merged into its left neighbour
} spm_sym;

typedef struct {
    float score;
    int32_t left, right;
    uint32_t size; // bytes of the concatenation when queued; stale if the symbols changed since
} spm_bigram;

typedef struct {
    spm_bigram *a;
    size_t n, cap;
} spm_heap;

static int better(const spm_bigram *x, const spm_bigram *y) { // x pops before y
    return x->score > y->score || (x->score == y->score && x->left < y->left);
}

static int heap_push(spm_heap *h, spm_bigram b) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        spm_bigram *p = realloc(h->a, cap * sizeof *p);
        if (!p) return TC_ERR_NOMEM;
        h->a = p, h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!better(&b, &h->a[parent])) break;
        h->a[i] = h->a[parent];
        i = parent;
    }
    h->a[i] = b;
    return 0;
}

static spm_bigram heap_pop(spm_heap *h) {
    spm_bigram top = h->a[0], last = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && better(&h->a[c + 1], &h->a[c])) c++;
        if (!better(&h->a[c], &last)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->n) h->a[i] = last;
    return top;
}

// A piece the merge may produce: normal and user-defined tokens (never control, byte or unknown ones).
static int32_t mergeable(const tok_vocab *v, const char *s, size_t n) {
    int32_t id = tok_lookup(v, s, n);
    if (id < 0 || id >= v->n_vocab) return -1;
    uint8_t t = v->type[id];
    return (t == TOK_TYPE_NORMAL || t == TOK_TYPE_USER_DEFINED) ? id : -1;
}

static int try_bigram(const tok_vocab *v, const char *esc, const spm_sym *sy, int32_t l, int32_t r, spm_heap *h) {
    if (l < 0 || r < 0) return 0;
    uint32_t size = sy[l].n + sy[r].n;
    int32_t id = mergeable(v, esc + sy[l].off, size);
    if (id < 0) return 0;
    return heap_push(h, (spm_bigram){v->scores[id], l, r, size});
}

static int emit_bytes(const tok_vocab *v, const uint8_t *s, size_t n, tok_out *o) {
    for (size_t i = 0; i < n; i++) {
        int32_t id = v->byte_tok[s[i]] >= 0 ? v->byte_tok[s[i]] : v->unk;
        if (id >= 0 && tok_out_push(o, id)) return TC_ERR_NOMEM;
    }
    return 0;
}

int tok_spm_encode(const tok_vocab *v, const char *text, size_t len, int add_space, tok_out *o, tc_err *err) {
    size_t cap = 3 * len + 3;
    char *esc = malloc(cap);
    spm_sym *sy = malloc((len + 1) * sizeof *sy);
    spm_heap h = {0};
    int rc = 0;
    if (!esc || !sy) {
        rc = TC_ERR_NOMEM;
        goto done;
    }
    size_t n = 0;
    if (add_space) memcpy(esc, "\xe2\x96\x81", 3), n = 3;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') memcpy(esc + n, "\xe2\x96\x81", 3), n += 3;
        else esc[n++] = text[i];
    }
    int32_t ns = 0;
    for (size_t off = 0; off < n; ns++) {
        size_t l = (size_t)tok_utf8_len((uint8_t)esc[off]);
        if (l > n - off) l = n - off;
        sy[ns] = (spm_sym){ns - 1, -1, (uint32_t)off, (uint32_t)l};
        if (ns > 0) sy[ns - 1].next = ns;
        off += l;
    }
    for (int32_t i = 1; i < ns && !rc; i++) rc = try_bigram(v, esc, sy, i - 1, i, &h);
    while (h.n && !rc) {
        spm_bigram b = heap_pop(&h);
        spm_sym *L = &sy[b.left], *R = &sy[b.right];
        if (L->n == 0 || R->n == 0 || L->n + R->n != b.size) continue; // stale
        L->n += R->n;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) sy[R->next].prev = b.left;
        rc = try_bigram(v, esc, sy, L->prev, b.left, &h);
        if (!rc) rc = try_bigram(v, esc, sy, b.left, L->next, &h);
    }
    for (int32_t i = ns ? 0 : -1; i >= 0 && !rc; i = sy[i].next) {
        int32_t id = tok_lookup(v, esc + sy[i].off, sy[i].n);
        if (id >= 0 && id < v->n_vocab) rc = tok_out_push(o, id);
        else rc = emit_bytes(v, (const uint8_t *)esc + sy[i].off, sy[i].n, o);
    }
done:
    free(esc);
    free(sy);
    free(h.a);
    if (rc) tc_err_set(err, rc, "out of memory in SPM tokenizer");
    return rc;
}
