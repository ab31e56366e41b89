// Detokenization: pieces (precomputed at load), whole-sequence decode, and the streaming decoder that only
// releases complete UTF-8 characters.
//
// Leading-space rule (SentencePiece vocabularies with add_space_prefix): the encoder put a ▁ in front of the
// text, so the first token that is not a control/unknown token loses one leading space. Tokens before it
// (BOS …) do not use the rule up.
//
// tok_decode returns the raw bytes (so invalid UTF-8 that was tokenized comes back byte-exact); the stream
// returns the same text with each byte that cannot be part of valid UTF-8 replaced by U+FFFD, which is the
// whole decode passed through tok_utf8_sanitize below.
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

static int is_special_type(uint8_t t) { return t == TOK_TYPE_CONTROL || t == TOK_TYPE_UNKNOWN; }

// Piece bytes of id under flags, before the leading-space rule; NULL for an invalid id.
static const char *piece_of(const tok_vocab *v, int32_t id, int flags, uint32_t *n) {
    if (id < 0 || id >= v->n_vocab) return NULL;
    if ((flags & TOK_DEC_SKIP_SPECIAL) && is_special_type(v->type[id])) {
        *n = 0;
        return v->piece;
    }
    *n = v->piece_len[id];
    return v->piece + v->piece_off[id];
}

int tok_piece(const tok_vocab *v, int32_t id, int flags, char *buf, int cap) {
    uint32_t n;
    const char *p = piece_of(v, id, flags, &n);
    if (!p) return TC_ERR_INVALID;
    if (buf && cap > 0) memcpy(buf, p, n < (uint32_t)cap ? n : (size_t)cap);
    return (int)n;
}

// Applies the leading-space rule to one token's piece; *pending is the rule's state.
static const char *strip_first(const tok_vocab *v, int32_t id, const char *p, uint32_t *n, int *pending) {
    if (!*pending || is_special_type(v->type[id])) return p;
    *pending = 0;
    if (*n && p[0] == ' ') return (*n)--, p + 1;
    return p;
}

int tok_decode(const tok_vocab *v, const int32_t *ids, int n_ids, int flags, char **text, size_t *len, tc_err *err) {
    *text = NULL, *len = 0;
    if (n_ids < 0 || (n_ids && !ids)) return tc_err_set(err, TC_ERR_INVALID, "bad token array");
    size_t total = 0;
    for (int i = 0; i < n_ids; i++) {
        uint32_t n;
        if (!piece_of(v, ids[i], flags, &n))
            return tc_err_set(err, TC_ERR_INVALID, "token id %d out of range [0, %d)", ids[i], v->n_vocab);
        total += n;
    }
    char *out = malloc(total + 1);
    if (!out) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    int pending = v->add_space_prefix;
    size_t w = 0;
    for (int i = 0; i < n_ids; i++) {
        uint32_t n;
        const char *p = piece_of(v, ids[i], flags, &n);
        p = strip_first(v, ids[i], p, &n, &pending);
        memcpy(out + w, p, n);
        w += n;
    }
    out[w] = 0;
    *text = out, *len = w;
    return 0;
}

// --- streaming

// One step of sanitizing s[0..n): bytes consumed (0 = an incomplete but valid prefix that needs more data,
// only when !final) and the replacement written to out (NULL to count only); *w gets bytes produced.
static size_t sanitize_step(const uint8_t *s, size_t n, int final, char *out, size_t *w) {
    int l = tok_utf8_valid_len(s, n);
    if (l > 0) {
        if (out) memcpy(out, s, (size_t)l);
        *w = (size_t)l;
        return (size_t)l;
    }
    // a valid prefix of a longer sequence cut off by the end of the data?
    uint8_t c = s[0];
    size_t need = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (need && n < need && !final) {
        int ok = 1;
        for (size_t i = 1; i < n && ok; i++) {
            uint8_t lo = 0x80, hi = 0xBF;
            if (i == 1 && c == 0xE0) lo = 0xA0;
            if (i == 1 && c == 0xED) hi = 0x9F;
            if (i == 1 && c == 0xF0) lo = 0x90;
            if (i == 1 && c == 0xF4) hi = 0x8F;
            ok = s[i] >= lo && s[i] <= hi;
        }
        if (ok) return *w = 0, 0;
    }
    if (out) memcpy(out, "\xef\xbf\xbd", 3);
    *w = 3;
    return 1;
}

struct tok_stream {
    const tok_vocab *v;
    int flags;
    int pending_space;
    uint8_t held[4]; // bytes of an incomplete UTF-8 character (at most 3)
    int n_held;
    uint8_t *buf; // scratch: held + the new piece
    size_t buf_cap;
};

tok_stream *tok_stream_new(const tok_vocab *v, int flags) {
    tok_stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->v = v;
    s->flags = flags;
    s->pending_space = v->add_space_prefix && !(flags & TOK_DEC_CONTINUATION);
    return s;
}

void tok_stream_free(tok_stream *s) {
    if (!s) return;
    free(s->buf);
    free(s);
}

// Sanitizes s->buf[0..n) into out (NULL: count only); returns bytes produced, *consumed bytes used.
static size_t stream_run(const uint8_t *b, size_t n, int final, char *out, size_t *consumed) {
    size_t i = 0, w = 0;
    while (i < n) {
        size_t k, c = sanitize_step(b + i, n - i, final, out ? out + w : NULL, &k);
        if (c == 0) break;
        i += c, w += k;
    }
    *consumed = i;
    return w;
}

int tok_stream_push(tok_stream *s, int32_t id, char *out, int cap) {
    uint32_t n;
    const char *p = piece_of(s->v, id, s->flags, &n);
    if (!p) return TC_ERR_INVALID;
    int pending = s->pending_space;
    p = strip_first(s->v, id, p, &n, &pending);
    size_t total = (size_t)s->n_held + n;
    if (total > s->buf_cap) {
        uint8_t *b = realloc(s->buf, total);
        if (!b) return TC_ERR_NOMEM;
        s->buf = b, s->buf_cap = total;
    }
    if (s->n_held) memcpy(s->buf, s->held, (size_t)s->n_held);
    if (n) memcpy(s->buf + s->n_held, p, n);
    size_t used, need = stream_run(s->buf, total, 0, NULL, &used);
    if (need > (size_t)INT32_MAX) return TC_ERR_INVALID;
    if (need > (size_t)(cap < 0 ? 0 : cap)) return (int)need; // nothing consumed
    stream_run(s->buf, total, 0, out, &used);
    s->n_held = (int)(total - used); // < 4: only an incomplete valid prefix is held back
    if (s->n_held) memcpy(s->held, s->buf + used, (size_t)s->n_held);
    s->pending_space = pending;
    return (int)need;
}

int tok_stream_flush(tok_stream *s, char *out, int cap) {
    size_t used, need = stream_run(s->held, (size_t)s->n_held, 1, NULL, &used);
    if (need > (size_t)(cap < 0 ? 0 : cap)) return (int)need;
    stream_run(s->held, (size_t)s->n_held, 1, out, &used);
    s->n_held = 0;
    return (int)need;
}
