// The vocabulary as a trie over code points, built once per model: tokens sorted by their code-point
// strings, then each node's children laid out contiguously so the mask walk touches memory in order.
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_internal.h"

// Decodes complete, valid UTF-8; returns the number of code points, or -1.
static int utf8_decode(const unsigned char *s, int n, uint32_t *out) {
    int k = 0;
    for (int i = 0; i < n;) {
        unsigned c = s[i];
        int m = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!m || i + m > n) return -1;
        uint32_t v = m == 1 ? c : m == 2 ? (c & 0x1f) : m == 3 ? (c & 0x0f) : (c & 0x07);
        for (int j = 1; j < m; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return -1;
            v = (v << 6) | (s[i + j] & 0x3f);
        }
        if ((m == 2 && v < 0x80) || (m == 3 && v < 0x800) || (m == 4 && (v < 0x10000 || v > 0x10FFFF))) return -1;
        out[k++] = v;
        i += m;
    }
    return k;
}

static const gram_vocab *sort_v; // qsort has no context argument; building is single-threaded per call
static int cmp_tok(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    const uint32_t *px = sort_v->cps + sort_v->cp_off[x], *py = sort_v->cps + sort_v->cp_off[y];
    int nx = sort_v->cp_len[x], ny = sort_v->cp_len[y];
    for (int i = 0; i < nx && i < ny; i++)
        if (px[i] != py[i]) return px[i] < py[i] ? -1 : 1;
    if (nx != ny) return nx < ny ? -1 : 1;
    return x < y ? -1 : x > y;
}

// Fills node `at` from sorted tokens [lo, hi) sharing their first `depth` code points.
static void build(gram_vocab *v, int at, int lo, int hi, int depth) {
    gram_tnode *nd = &v->nodes[at];
    nd->tok_off = lo;
    nd->n_tok = 0;
    while (lo < hi && v->cp_len[v->toks[lo]] == depth) lo++, nd->n_tok++;
    int n = 0;
    for (int i = lo; i < hi;) { // count distinct next code points
        uint32_t c = v->cps[v->cp_off[v->toks[i]] + depth];
        while (i < hi && v->cps[v->cp_off[v->toks[i]] + depth] == c) i++;
        n++;
    }
    int first = v->n_nodes;
    v->n_nodes += n;
    v->nodes[at].child = first;
    v->nodes[at].n_child = n;
    int k = 0;
    for (int i = lo; i < hi; k++) {
        uint32_t c = v->cps[v->cp_off[v->toks[i]] + depth];
        int j = i;
        while (j < hi && v->cps[v->cp_off[v->toks[j]] + depth] == c) j++;
        v->nodes[first + k].cp = c;
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
    v->cps = malloc((size_t)(total + 1) * sizeof *v->cps);
    v->cp_off = malloc((size_t)n_vocab * sizeof *v->cp_off);
    v->cp_len = malloc((size_t)n_vocab * sizeof *v->cp_len);
    v->is_eog = calloc((size_t)n_vocab, 1);
    v->toks = malloc((size_t)n_vocab * sizeof *v->toks);
    v->nodes = malloc((size_t)(total + 1) * sizeof *v->nodes); // at most one node per code point, + root
    if (!v->cps || !v->cp_off || !v->cp_len || !v->is_eog || !v->toks || !v->nodes) {
        gram_vocab_free(v);
        return tc_err_set(err, TC_ERR_NOMEM, "grammar: out of memory");
    }
    for (int i = 0; i < n_eog; i++)
        if (eog[i] >= 0 && eog[i] < n_vocab) v->is_eog[eog[i]] = 1;
    long off = 0;
    int n_tok = 0;
    for (int i = 0; i < n_vocab; i++) {
        v->cp_off[i] = (int32_t)off;
        v->cp_len[i] = -1;
        if (!pieces[i] || lens[i] <= 0 || v->is_eog[i]) continue; // control, empty or end-of-generation
        int k = utf8_decode((const unsigned char *)pieces[i], lens[i], v->cps + off);
        if (k <= 0) continue; // a fragment of a character: never under a grammar
        v->cp_len[i] = k;
        off += k;
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
    free(v->cps);
    free(v->cp_off);
    free(v->cp_len);
    free(v->is_eog);
    free(v->toks);
    free(v->nodes);
    free(v);
}

int gram_vocab_n(const gram_vocab *v) { return v->n_vocab; }
