// SentencePiece-style ("llama") encoding of one raw-text fragment: spaces become ▁ (with a leading ▁ when
// asked), the text is split into UTF-8 characters, and adjacent symbols are merged best-score-first
// (ties: leftmost first) whenever their concatenation is a vocabulary piece. Symbols left without a piece
// fall back to their bytes (<0xNN> tokens), or to the unknown token when the vocab has no byte tokens.
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_heap.h"
#include "tokenizer/tok_internal.h"

typedef struct {
    int32_t prev, next;
    uint32_t off, n; // bytes of the escaped text; n == 0 once merged into its left neighbour
} spm_sym;

// Maps a score to a key whose ascending order is the score's descending order (total order on floats).
static uint32_t score_key(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u & 0x80000000u) ? ~u : u | 0x80000000u; // ascending order of f
    return ~u;
}

// A piece the merge may produce: normal and user-defined tokens (never control, byte or unknown ones).
static int32_t mergeable(const tok_vocab *v, const char *s, size_t n) {
    int32_t id = tok_lookup(v, s, n);
    if (id < 0 || id >= v->n_vocab) return -1;
    uint8_t t = v->type[id];
    return (t == TOK_TYPE_NORMAL || t == TOK_TYPE_USER_DEFINED) ? id : -1;
}

static int try_bigram(const tok_vocab *v, const char *esc, const spm_sym *sy, int32_t l, int32_t r, tok_heap *h) {
    if (l < 0 || r < 0) return 0;
    uint32_t size = sy[l].n + sy[r].n;
    int32_t id = mergeable(v, esc + sy[l].off, size);
    if (id < 0) return 0;
    // key: (score, descending) << 32 | left; a: bytes of the pair when queued; b: right symbol
    return tok_heap_push(h, (tok_heap_ent){(uint64_t)score_key(v->scores[id]) << 32 | (uint32_t)l, size, r});
}

static int emit_bytes(const tok_vocab *v, const uint8_t *s, size_t n, tok_out *o) {
    for (size_t i = 0; i < n; i++) {
        int32_t id = v->byte_tok[s[i]] >= 0 ? v->byte_tok[s[i]] : v->unk;
        if (id >= 0 && tok_out_push(o, id)) return TC_ERR_NOMEM;
    }
    return 0;
}

// Merges the symbols of esc[a..b) and emits their tokens. sy and h are scratch (sy has room for b - a).
static int spm_segment(const tok_vocab *v, const char *esc, size_t a, size_t b, spm_sym *sy, tok_heap *h, tok_out *o) {
    int32_t ns = 0;
    for (size_t off = a; off < b; ns++) {
        int l = tok_utf8_valid_len((const uint8_t *)esc + off, b - off);
        if (l <= 0) l = 1; // an invalid byte is a symbol of its own
        sy[ns] = (spm_sym){ns - 1, -1, (uint32_t)off, (uint32_t)l};
        if (ns > 0) sy[ns - 1].next = ns;
        off += (size_t)l;
    }
    int rc = 0;
    h->n = 0;
    for (int32_t i = 1; i < ns && !rc; i++) rc = try_bigram(v, esc, sy, i - 1, i, h);
    while (h->n && !rc) {
        tok_heap_ent bg = tok_heap_pop(h);
        int32_t left = (int32_t)(uint32_t)bg.key;
        spm_sym *L = &sy[left], *R = &sy[bg.b];
        if (L->n == 0 || R->n == 0 || L->n + R->n != bg.a) continue; // stale
        L->n += R->n;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) sy[R->next].prev = left;
        rc = try_bigram(v, esc, sy, L->prev, left, h);
        if (!rc) rc = try_bigram(v, esc, sy, left, L->next, h);
    }
    for (int32_t i = ns ? 0 : -1; i >= 0 && !rc; i = sy[i].next) {
        int32_t id = tok_lookup(v, esc + sy[i].off, sy[i].n);
        if (id >= 0 && id < v->n_vocab) rc = tok_out_push(o, id);
        else rc = emit_bytes(v, (const uint8_t *)esc + sy[i].off, sy[i].n, o);
    }
    return rc;
}

#define SPM_SPACE "\xe2\x96\x81"

int tok_spm_encode(const tok_vocab *v, const char *text, size_t len, int add_space, tok_out *o, tc_err *err) {
    size_t cap = 3 * len + 3;
    char *esc = malloc(cap);
    spm_sym *sy = malloc((cap + 1) * sizeof *sy);
    tok_heap h = {0};
    int rc = 0;
    if (!esc || !sy) {
        rc = TC_ERR_NOMEM;
        goto done;
    }
    size_t n = 0;
    if (add_space) memcpy(esc, SPM_SPACE, 3), n = 3;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') memcpy(esc + n, SPM_SPACE, 3), n += 3;
        else esc[n++] = text[i];
    }
    // When no piece has a ▁ right after another character (checked at load), no merge can cross the point
    // before a ▁ that follows a non-▁ character, so each word merges on its own (same result, small heaps).
    size_t a = 0;
    if (v->spm_word_split)
        for (size_t p = 1; p + 3 <= n && !rc; p++) {
            if (memcmp(esc + p, SPM_SPACE, 3) || (p >= 3 && !memcmp(esc + p - 3, SPM_SPACE, 3))) continue;
            rc = spm_segment(v, esc, a, p, sy, &h, o);
            a = p;
            p += 2;
        }
    if (!rc && a < n) rc = spm_segment(v, esc, a, n, sy, &h, o);
done:
    free(esc);
    free(sy);
    free(h.e);
    if (rc) tc_err_set(err, rc, "out of memory in SPM tokenizer");
    return rc;
}
