// The pushdown matcher. State = a set of stacks of element positions (top = the next thing to match, always
// a character set after expansion; an empty stack = the grammar may end here), and the character a token
// began and did not finish (its UTF-8 bytes so far, gram_utf8.h). A code point advances every stack whose
// top accepts it; an unfinished character must be one some stack's top can still accept. Sets live in one
// int32 arena as [len, e0 .. e(len-1)] records: the current set at the front, scratch sets after it, so the
// trie walk pushes and pops sets like a call stack.
// The work is bounded: a set holds at most GRAM_MAX_FANOUT stacks (duplicates found through a hash table of
// the set being built), expansions nest at most GRAM_MAX_DEPTH deep, and each step (a mask, or one code
// point of a token's text) takes at most GRAM_MAX_STEP_WORK units. Past a bound the matcher fails with a
// message; it never drops a stack, which would silently make part of the grammar unreachable.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "grammar/gram_internal.h"
#include "grammar/gram_utf8.h"

#define GM_CACHE 16                    // cached masks per matcher
#define GM_SLOTS (2 * GRAM_MAX_FANOUT) // the dedupe table of the set being built (a power of two)

typedef struct iarr {
    int32_t *p;
    size_t n, cap;
} iarr;

typedef struct gm_cache {
    uint64_t hash;
    int32_t *key; // (key_n) the set it was computed for; NULL = empty slot
    size_t key_n;
    gram_utf8 part; // and the unfinished character
    uint32_t *bits;
} gm_cache;

struct gram_matcher {
    gram *g;             // owned
    const gram_vocab *v; // borrowed
    iarr a;              // sets: [0, cur_n) the current one
    size_t cur_n;
    gram_utf8 part; // the character the text so far ends inside (part.need == 0: none)
    iarr t;         // stacks under construction
    int oom;
    int words; // (n_vocab + 31) / 32
    gm_cache cache[GM_CACHE];
    int cache_next;
    // the set being built: its stacks' offsets in a, by hash; a slot is live iff its stamp is set_stamp
    uint32_t slot_stamp[GM_SLOTS];
    uint32_t slot_off[GM_SLOTS];
    uint32_t set_stamp;
    int set_n;      // stacks in the set being built
    long work;      // units spent in the current call
    long budget;    // units one call may spend (gram.h: GRAM_MAX_STEP_WORK, more for a large vocabulary)
    char fail[160]; // why the matcher stopped; "" while it works
};

static void gm_fail(gram_matcher *m, const char *msg) {
    if (!m->fail[0]) snprintf(m->fail, sizeof m->fail, "grammar: %s", msg);
}

// Starts building a new set at the end of the arena (the dedupe table forgets the previous one).
static void set_begin(gram_matcher *m) {
    if (++m->set_stamp == 0) { // wrapped: clear the stamps once
        memset(m->slot_stamp, 0, sizeof m->slot_stamp);
        m->set_stamp = 1;
    }
    m->set_n = 0;
}

// Counts work; 1 when the call is over its budget (the matcher has failed).
static int spend(gram_matcher *m, long units) {
    if ((m->work += units) <= m->budget) return m->fail[0] != 0;
    gm_fail(m, "a token step took more than the work limit (the grammar is too ambiguous at this point)");
    return 1;
}

static int ia_reserve(gram_matcher *m, iarr *x, size_t more) {
    if (x->n + more <= x->cap) return 0;
    size_t cap = x->cap ? x->cap : 256;
    while (cap < x->n + more)
        cap *= 2;
    int32_t *p = realloc(x->p, cap * sizeof *p);
    if (!p) {
        m->oom = 1;
        return -1;
    }
    x->p = p, x->cap = cap;
    return 0;
}

static int is_char_el(uint32_t t) {
    return t == GE_CHAR || t == GE_CHAR_NOT || t == GE_CHAR_ANY;
}

// Does the character set at pos accept c? *next gets the position after the set; *work counts the members
// read.
static int match_char(const gram_el *el, int pos, uint32_t c, int *next, long *work) {
    if (el[pos].type == GE_CHAR_ANY) {
        *next = pos + 1;
        return 1;
    }
    int positive = el[pos].type == GE_CHAR, found = 0;
    do {
        ++*work;
        if (el[pos + 1].type == GE_CHAR_RNG_UPPER) {
            found |= el[pos].value <= c && c <= el[pos + 1].value;
            pos += 2;
        } else {
            found |= el[pos].value == c;
            pos += 1;
        }
    } while (el[pos].type == GE_CHAR_ALT);
    *next = pos;
    return found == positive;
}

// Does the character set at pos accept some code point of [lo, hi]? *work counts the members read.
static int match_range(const gram_el *el, int pos, uint32_t lo, uint32_t hi, long *work) {
    if (el[pos].type == GE_CHAR_ANY) return 1;
    int positive = el[pos].type == GE_CHAR;
    // negated: cur is the least code point of the range not yet known to be a member; passes repeat while
    // it moves (members come in any order), at most once per member
    uint32_t cur = lo;
    for (int moved = 1; moved;) {
        moved = 0;
        int p = pos;
        do {
            uint32_t a = el[p].value, b = a;
            if (el[p + 1].type == GE_CHAR_RNG_UPPER)
                b = el[p + 1].value, p += 2;
            else
                p += 1;
            ++*work;
            if (positive && a <= hi && lo <= b) return 1;
            if (!positive && a <= cur && cur <= b) {
                if (b >= hi) return 0; // the rest of the range is members
                cur = b + 1, moved = 1;
            }
        } while (el[p].type == GE_CHAR_ALT);
    }
    return !positive;
}

// Adds the stack t[off .. off+len) to the set being built at set_off (the end of the arena), unless present.
static void add_unique(gram_matcher *m, size_t set_off, size_t off, int len) {
    const int32_t *st = m->t.p + off;
    if (spend(m, len / 16 + 1)) return; // hashing and comparing cost as much for a stack already in the set
    size_t h = (size_t)XXH3_64bits(st, (size_t)len * sizeof(int32_t)) & (GM_SLOTS - 1);
    for (; m->slot_stamp[h] == m->set_stamp; h = (h + 1) & (GM_SLOTS - 1)) {
        const int32_t *q = m->a.p + set_off + m->slot_off[h];
        if (q[0] == len && !memcmp(q + 1, st, (size_t)len * sizeof(int32_t))) return;
    }
    if (m->set_n >= GRAM_MAX_FANOUT) {
        char msg[120];
        snprintf(msg, sizeof msg, "more than %d alternatives are open at once", GRAM_MAX_FANOUT);
        gm_fail(m, msg);
        return;
    }
    if (ia_reserve(m, &m->a, (size_t)len + 1)) return;
    m->slot_stamp[h] = m->set_stamp;
    m->slot_off[h] = (uint32_t)(m->a.n - set_off);
    m->set_n++;
    m->a.p[m->a.n++] = len;
    memcpy(m->a.p + m->a.n, st, (size_t)len * sizeof(int32_t));
    m->a.n += (size_t)len;
}

// Expands the stack t[off .. off+len) until its top is a character set (or it is empty) and adds the
// results to the set at set_off. A rule reference on top is replaced by each of its alternatives.
static void expand(gram_matcher *m, size_t set_off, size_t off, int len, int depth) {
    const gram *g = m->g;
    if (len == 0 || is_char_el(g->el[m->t.p[off + (size_t)len - 1]].type)) {
        add_unique(m, set_off, off, len);
        return;
    }
    if (depth > GRAM_MAX_DEPTH) {
        char msg[120];
        snprintf(msg, sizeof msg, "rule references nest more than %d deep", GRAM_MAX_DEPTH);
        gm_fail(m, msg);
        return;
    }
    if (spend(m, len / 16 + 1)) return; // each alternative copies the stack below the top
    int top = m->t.p[off + (size_t)len - 1];
    const gram_el *e = &g->el[top];
    int alt = g->rule_off[e->value];
    int cont = top + 1, has_cont = g->el[cont].type != GE_END && g->el[cont].type != GE_ALT;
    for (;;) {
        size_t noff = m->t.n;
        if (ia_reserve(m, &m->t, (size_t)len + 2)) return;
        memmove(m->t.p + noff, m->t.p + off, (size_t)(len - 1) * sizeof(int32_t));
        int nlen = len - 1;
        if (has_cont) m->t.p[noff + (size_t)nlen++] = cont;
        if (g->el[alt].type != GE_END && g->el[alt].type != GE_ALT) m->t.p[noff + (size_t)nlen++] = alt;
        m->t.n = noff + (size_t)nlen;
        expand(m, set_off, noff, nlen, depth + 1);
        m->t.n = noff;
        alt = g->alt_end[alt];
        if (g->el[alt].type == GE_END) break;
        alt++;
    }
}

// Builds, at the end of the arena, the set reached from the set at [off, off+n) by code point c.
// Returns its size in ints (0: dead).
static size_t step(gram_matcher *m, size_t off, size_t n, uint32_t c) {
    size_t out = m->a.n;
    set_begin(m);
    if (spend(m, (long)n + 1)) return 0;
    for (size_t i = off; i < off + n && !m->fail[0]; i += (size_t)m->a.p[i] + 1) {
        int len = m->a.p[i];
        if (len == 0) continue;
        int top = m->a.p[i + (size_t)len], next;
        long members = 0;
        int hit = match_char(m->g->el, top, c, &next, &members);
        if (spend(m, members / 8)) break; // a large set costs its members
        if (!hit) continue;
        size_t t0 = m->t.n;
        if (ia_reserve(m, &m->t, (size_t)len + 1)) break;
        memcpy(m->t.p + t0, m->a.p + i + 1, (size_t)(len - 1) * sizeof(int32_t));
        int nlen = len - 1;
        if (m->g->el[next].type != GE_END && m->g->el[next].type != GE_ALT)
            m->t.p[t0 + (size_t)nlen++] = next;
        m->t.n = t0 + (size_t)nlen;
        expand(m, out, t0, nlen, 0);
        m->t.n = t0;
    }
    if (m->fail[0]) m->a.n = out; // a partial set would be wrong: nothing
    return m->a.n - out;
}

// Any stack of the set [off, off+n) accepts c (the set after it is non-empty)?
static int any_accepts(gram_matcher *m, size_t off, size_t n, uint32_t c) {
    if (spend(m, (long)n + 1)) return 0;
    long members = 0;
    int found = 0;
    for (size_t i = off; i < off + n && !found; i += (size_t)m->a.p[i] + 1) {
        int len = m->a.p[i], next;
        found = len && match_char(m->g->el, m->a.p[i + (size_t)len], c, &next, &members);
    }
    return !spend(m, members / 8) && found;
}

// Any stack of the set [off, off+n) accepts some code point of [lo, hi] (an unfinished character can still
// become one the grammar takes here)?
static int any_accepts_range(gram_matcher *m, size_t off, size_t n, uint32_t lo, uint32_t hi) {
    if (spend(m, (long)n + 1)) return 0;
    long members = 0;
    int found = 0;
    for (size_t i = off; i < off + n && !found; i += (size_t)m->a.p[i] + 1) {
        int len = m->a.p[i];
        if (len) found = match_range(m->g->el, m->a.p[i + (size_t)len], lo, hi, &members);
    }
    return !spend(m, members) && found;
}

int gram_matcher_new(gram *g, const gram_vocab *v, gram_matcher **out, tc_err *err) {
    *out = NULL;
    gram_matcher *m = calloc(1, sizeof *m);
    if (!m) {
        gram_free(g);
        return tc_err_set(err, TC_ERR_NOMEM, "grammar: out of memory");
    }
    m->g = g;
    m->v = v;
    m->words = v ? (v->n_vocab + 31) / 32 : 0;
    m->budget = GRAM_MAX_STEP_WORK;
    if (v && (long)v->n_nodes * GRAM_STEP_WORK_PER_NODE > m->budget)
        m->budget = (long)v->n_nodes * GRAM_STEP_WORK_PER_NODE;
    // the start: one stack per alternative of the root rule
    int alt = g->rule_off[g->root];
    set_begin(m);
    for (; !m->fail[0];) {
        if (ia_reserve(m, &m->t, 1)) break;
        int len = 0;
        if (g->el[alt].type != GE_END && g->el[alt].type != GE_ALT) m->t.p[len++] = alt;
        m->t.n = (size_t)len;
        expand(m, 0, 0, len, 0);
        m->t.n = 0;
        alt = g->alt_end[alt];
        if (g->el[alt].type == GE_END) break;
        alt++;
    }
    m->cur_n = m->a.n;
    if (m->oom || m->cur_n == 0 || m->fail[0]) {
        int oom = m->oom;
        const char *why = m->fail[0] ? m->fail : "grammar: the root rule matches nothing";
        if (!oom) tc_err_set(err, TC_ERR_INVALID, "%s", why);
        gram_matcher_free(m);
        return oom ? tc_err_set(err, TC_ERR_NOMEM, "grammar: out of memory") : TC_ERR_INVALID;
    }
    *out = m;
    return 0;
}

void gram_matcher_free(gram_matcher *m) {
    if (!m) return;
    gram_free(m->g);
    free(m->a.p);
    free(m->t.p);
    for (int i = 0; i < GM_CACHE; i++) {
        free(m->cache[i].key);
        free(m->cache[i].bits);
    }
    free(m);
}

// Runs bytes of text from the current state (its unfinished character first); on success makes the result
// current. commit=0: only checks. Text that ends inside a character is accepted when some stack can accept
// a character those bytes can still become.
static int run(gram_matcher *m, const uint8_t *s, size_t nb, int commit) {
    size_t off = 0, len = m->cur_n;
    gram_utf8 st = m->part;
    int ok = 1;
    for (size_t i = 0; i < nb && len; i++) {
        uint32_t cp;
        int r = gram_utf8_feed(&st, s[i], &cp);
        if (r == GRAM_UTF8_BAD) {
            ok = 0;
            break;
        }
        if (r == GRAM_UTF8_MORE) continue;
        size_t noff = m->a.n;
        m->work = 0; // the bound is per code point here (a token has a few)
        len = step(m, off, len, cp);
        off = noff;
    }
    ok = ok && len > 0 && !m->oom && !m->fail[0];
    uint32_t lo, hi;
    if (ok && gram_utf8_range(&st, &lo, &hi)) {
        m->work = 0;
        ok = any_accepts_range(m, off, len, lo, hi) && !m->fail[0];
    }
    if (ok && commit) {
        memmove(m->a.p, m->a.p + off, len * sizeof(int32_t));
        m->cur_n = len;
        m->part = st;
    }
    m->a.n = m->cur_n;
    return ok;
}

int gram_matcher_can_end(const gram_matcher *m) {
    if (m->part.need) return 0; // inside a character
    for (size_t i = 0; i < m->cur_n; i += (size_t)m->a.p[i] + 1)
        if (m->a.p[i] == 0) return 1;
    return 0;
}

int gram_matcher_done(const gram_matcher *m) {
    return !m->part.need && m->cur_n == 1 && m->a.p[0] == 0;
}

int gram_matcher_token_ok(gram_matcher *m, int32_t tok) {
    const gram_vocab *v = m->v;
    if (tok < 0 || tok >= v->n_vocab) return 0;
    if (v->is_eog[tok]) return gram_matcher_can_end(m);
    if (v->b_len[tok] <= 0) return 0;
    return run(m, v->bytes + v->b_off[tok], (size_t)v->b_len[tok], 0);
}

int gram_matcher_accept_token(gram_matcher *m, int32_t tok) {
    const gram_vocab *v = m->v;
    if (tok < 0 || tok >= v->n_vocab) return -1;
    if (v->is_eog[tok]) return gram_matcher_can_end(m) ? 0 : -1;
    if (v->b_len[tok] <= 0) return -1;
    return run(m, v->bytes + v->b_off[tok], (size_t)v->b_len[tok], 1) ? 0 : -1;
}

int gram_matcher_accept_str(gram_matcher *m, const char *s, size_t n) {
    return run(m, (const uint8_t *)s, n, 1) ? 0 : -1;
}

// --- the mask

static void mark(const gram_vocab *v, const gram_tnode *nd, uint32_t *bits) {
    for (int i = 0; i < nd->n_tok; i++) {
        int32_t t = v->toks[nd->tok_off + i];
        bits[t >> 5] |= 1u << (t & 31);
    }
}

// Marks every token under node whose bytes the state (the set [off, off+n), the unfinished character st)
// can read: a byte that completes a character steps the set; one that leaves it unfinished only checks that
// some stack can accept a character it may become, so a fragment costs a scan of the set, not a new one.
static void walk(gram_matcher *m, const gram_tnode *node, size_t off, size_t n, gram_utf8 st,
                 uint32_t *bits) {
    const gram_vocab *v = m->v;
    for (int k = 0; k < node->n_child && !m->fail[0]; k++) {
        const gram_tnode *c = &v->nodes[node->child + k];
        gram_utf8 cst = st;
        uint32_t cp, lo, hi;
        int r = gram_utf8_feed(&cst, c->byte, &cp);
        if (r == GRAM_UTF8_BAD) continue;
        if (r == GRAM_UTF8_MORE) {
            gram_utf8_range(&cst, &lo, &hi);
            if (!any_accepts_range(m, off, n, lo, hi)) continue;
            mark(v, c, bits);
            walk(m, c, off, n, cst, bits);
            continue;
        }
        if (c->n_child == 0) { // a leaf: no need to build the next set
            if (any_accepts(m, off, n, cp)) mark(v, c, bits);
            continue;
        }
        size_t noff = m->a.n;
        size_t nn = step(m, off, n, cp);
        if (nn) {
            mark(v, c, bits);
            walk(m, c, noff, nn, cst, bits);
        }
        m->a.n = noff;
    }
}

static uint64_t hash_set(const int32_t *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint32_t)p[i]) * 1099511628211ull;
    return h;
}

const uint32_t *gram_matcher_mask(gram_matcher *m) {
    if (m->fail[0]) return NULL;
    const gram_utf8 *pt = &m->part;
    uint64_t h = hash_set(m->a.p, m->cur_n) ^ ((uint64_t)pt->value << 8 | (uint64_t)pt->len << 4 | pt->need);
    for (int i = 0; i < GM_CACHE; i++) {
        gm_cache *c = &m->cache[i];
        if (c->key && c->hash == h && c->key_n == m->cur_n && c->part.value == pt->value &&
            c->part.len == pt->len && c->part.need == pt->need &&
            !memcmp(c->key, m->a.p, m->cur_n * sizeof(int32_t)))
            return c->bits;
    }
    gm_cache *c = &m->cache[m->cache_next];
    m->cache_next = (m->cache_next + 1) % GM_CACHE;
    free(c->key);
    c->key = malloc(m->cur_n * sizeof(int32_t));
    if (!c->bits) c->bits = malloc((size_t)m->words * sizeof(uint32_t));
    if (!c->key || !c->bits) {
        free(c->key);
        c->key = NULL;
        return NULL;
    }
    memcpy(c->key, m->a.p, m->cur_n * sizeof(int32_t));
    c->key_n = m->cur_n;
    c->part = m->part;
    c->hash = h;
    memset(c->bits, 0, (size_t)m->words * sizeof(uint32_t));
    m->work = 0;
    walk(m, &m->v->nodes[0], 0, m->cur_n, m->part, c->bits);
    m->a.n = m->cur_n;
    if (m->fail[0] || m->oom) { // the walk stopped part way: the bits are not the mask
        free(c->key);
        c->key = NULL;
        return NULL;
    }
    if (gram_matcher_can_end(m))
        for (int t = 0; t < m->v->n_vocab; t++)
            if (m->v->is_eog[t]) c->bits[t >> 5] |= 1u << (t & 31);
    return c->bits;
}

long gram_matcher_work(const gram_matcher *m) {
    return m->work;
}

const char *gram_matcher_error(const gram_matcher *m) {
    return m->fail[0] ? m->fail : m->oom ? "grammar: out of memory" : NULL;
}

int gram_matcher_check_start(gram_matcher *m, tc_err *err) {
    const uint32_t *bits = gram_matcher_mask(m);
    if (!bits) {
        const char *why = gram_matcher_error(m);
        int code = m->oom || !why ? TC_ERR_NOMEM : TC_ERR_INVALID;
        return tc_err_set(err, code, "%s", why ? why : "grammar: out of memory");
    }
    if (gram_matcher_can_end(m)) return 0;
    for (int w = 0; w < m->words; w++)
        if (bits[w]) return 0;
    return tc_err_set(
        err, TC_ERR_INVALID,
        "grammar: no token of the model's vocabulary can start the output the grammar requires, so "
        "nothing can be generated");
}
