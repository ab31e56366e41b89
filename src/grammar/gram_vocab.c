// The vocabulary as a trie over bytes, built once per model: tokens sorted by their bytes, then each node's
// children laid out contiguously so the mask walk touches memory in order.
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_internal.h"
#include "grammar/gram_utf8.h"

// A token's bytes can occur in valid UTF-8: any continuation bytes it starts with may finish a character
// begun before it (at most three), what follows decodes, and its end may leave a character unfinished.
// Other tokens can never be written under a grammar and stay out of the trie.
static int utf8_fragment_ok(const unsigned char *s, int n) {
    int i = 0;
    while (i < n && i < 3 && (s[i] & 0xC0) == 0x80) i++;
    gram_utf8 st = {0};
    for (uint32_t cp; i < n; i++)
        if (gram_utf8_feed(&st, s[i], &cp) == GRAM_UTF8_BAD) return 0;
    return 1;
}

static const gram_vocab *sort_v; // qsort has no context argument; building is single-threaded per call
static int cmp_tok(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    int nx = sort_v->b_len[x], ny = sort_v->b_len[y];
    const uint8_t *px = sort_v->bytes + sort_v->b_off[x], *py = sort_v->bytes + sort_v->b_off[y];
    int c = memcmp(px, py, (size_t)(nx < ny ? nx : ny));
    if (c) return c;
    if (nx != ny) return nx < ny ? -1 : 1;
    return x < y ? -1 : x > y;
}

static uint8_t byte_at(const gram_vocab *v, int32_t tok, int depth) { return v->bytes[v->b_off[tok] + depth]; }

// Fills node `at` from sorted tokens [lo, hi) sharing their first `depth` bytes.
static void build(gram_vocab *v, int at, int lo, int hi, int depth) {
    gram_tnode *nd = &v->nodes[at];
    nd->tok_off = lo;
    nd->n_tok = 0;
    while (lo < hi && v->b_len[v->toks[lo]] == depth) lo++, nd->n_tok++;
    int n = 0;
    for (int i = lo; i < hi;) { // count distinct next bytes
        uint8_t c = byte_at(v, v->toks[i], depth);
        while (i < hi && byte_at(v, v->toks[i], depth) == c) i++;
        n++;
    }
    int first = v->n_nodes;
    v->n_nodes += n;
    v->nodes[at].child = first;
    v->nodes[at].n_child = n;
    int k = 0;
    for (int i = lo; i < hi; k++) {
        uint8_t c = byte_at(v, v->toks[i], depth);
        int j = i;
        while (j < hi && byte_at(v, v->toks[j], depth) == c) j++;
        v->nodes[first + k].byte = c;
        build(v, first + k, i, j, depth + 1);
        i = j;
    }
}

int gram_vocab_new(const char *const *pieces, const int *lens, int n_vocab, const int32_t *eog, int n_eog,
                   gram_vocab **out, tc_err *err) {
    *out = NULL;
    if (n_vocab < 1) return tc_err_set(err, TC_ERR_INVALID, "grammar: empty vocabulary");
    gram_vocab *v = calloc(1, sizeof *v);
    if (!v) return tc_err_set(err, TC_ERR_NOMEM, "grammar: out of memory");
    v->n_vocab = n_vocab;
    long total = 0;
    for (int i = 0; i < n_vocab; i++)
        if (pieces[i] && lens[i] > 0) total += lens[i];
    v->bytes = malloc((size_t)(total + 1));
    v->b_off = malloc((size_t)n_vocab * sizeof *v->b_off);
    v->b_len = malloc((size_t)n_vocab * sizeof *v->b_len);
    v->is_eog = calloc((size_t)n_vocab, 1);
    v->toks = malloc((size_t)n_vocab * sizeof *v->toks);
    v->nodes = malloc((size_t)(total + 1) * sizeof *v->nodes); // at most one node per byte, + root
    if (!v->bytes || !v->b_off || !v->b_len || !v->is_eog || !v->toks || !v->nodes) {
        gram_vocab_free(v);
        return tc_err_set(err, TC_ERR_NOMEM, "grammar: out of memory");
    }
    for (int i = 0; i < n_eog; i++)
        if (eog[i] >= 0 && eog[i] < n_vocab) v->is_eog[eog[i]] = 1;
    long off = 0;
    int n_tok = 0;
    for (int i = 0; i < n_vocab; i++) {
        v->b_off[i] = (int32_t)off;
        v->b_len[i] = -1;
        if (!pieces[i] || lens[i] <= 0 || v->is_eog[i]) continue; // control, empty or end-of-generation
        if (!utf8_fragment_ok((const unsigned char *)pieces[i], lens[i])) continue;
        memcpy(v->bytes + off, pieces[i], (size_t)lens[i]);
        v->b_len[i] = lens[i];
        off += lens[i];
        v->toks[n_tok++] = i;
    }
    sort_v = v;
    qsort(v->toks, (size_t)n_tok, sizeof *v->toks, cmp_tok);
    sort_v = NULL;
    v->n_nodes = 1;
    v->nodes[0] = (gram_tnode){0};
    build(v, 0, 0, n_tok, 0);
    *out = v;
    return 0;
}

void gram_vocab_free(gram_vocab *v) {
    if (!v) return;
    free(v->bytes);
    free(v->b_off);
    free(v->b_len);
    free(v->is_eog);
    free(v->toks);
    free(v->nodes);
    free(v);
}

int gram_vocab_n(const gram_vocab *v) { return v->n_vocab; }
