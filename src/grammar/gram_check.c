// The checks that make a parsed grammar safe for the matcher, each linear in the number of elements:
//   - productive / nullable rules: a worklist over the references (a rule is marked when one of its
//     alternatives has all its references marked), not a fixpoint sweep over all rules;
//   - left recursion: an iterative depth-first walk over references at the start of alternatives (those
//     after nullable references included), so a long chain of rules cannot overflow the C stack;
//   - the matcher's cost: for every rule, in how many ways expanding a reference to it can end on a
//     character set (T) or pass through it empty (P), and how deep the references nest (D); then for every
//     position of every alternative the same for the rest of the alternative. The matcher expands a position
//     into at most T + P stacks, so a bound on it bounds each step's work; past GRAM_MAX_FANOUT or
//     GRAM_MAX_DEPTH the grammar is refused (the matcher would otherwise have to drop alternatives).
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_internal.h"

#define GC_SAT (1LL << 40) // counts saturate here (products of fan-outs grow exponentially)

typedef struct gc {
    const gram *g;
    const char *const *names;
    double deadline;
    tc_err *err;
    int n_alts;
    int32_t *alt_start; // (n_alts) element index of each alternative's first element
    int32_t *alt_rule;  // (n_alts)
    int32_t *occ_off;   // (n_rules + 1) references to each rule: occ[occ_off[r] .. occ_off[r+1]) = alt ids
    int32_t *occ;       // (number of references)
    int32_t *cnt;       // (n_alts) worklist counters
    int32_t *work;      // (n_rules) worklist / DFS stack
    int32_t *cursor;    // (n_rules) DFS: the element each rule on the stack is at
    uint8_t *at_start;  // (n_rules) DFS: the cursor is still in its alternative's nullable prefix
    uint8_t *nullable, *productive, *state; // (n_rules) each
    long long *t, *p;   // (n_rules) fan-out: ends on a character set / passes through empty
    int32_t *d;         // (n_rules) nesting depth
} gc;

static int is_set_start(uint32_t t) { return t == GE_CHAR || t == GE_CHAR_NOT || t == GE_CHAR_ANY; }
static int is_alt_end(uint32_t t) { return t == GE_END || t == GE_ALT; }
static long long sat_add(long long a, long long b) { return a + b > GC_SAT ? GC_SAT : a + b; }
static long long sat_mul(long long a, long long b) { return a && b > GC_SAT / a ? GC_SAT : a * b; }

static int gc_timeout(gc *c) {
    return tc_err_set(c->err, TC_ERR_INVALID, "grammar: compiling took longer than the limit of %.1f s",
                      GRAM_MAX_COMPILE_S);
}

// Alternatives and the reference index (counting sort by referenced rule).
static int gc_index(gc *c) {
    const gram *g = c->g;
    int n_refs = 0;
    for (int i = 0; i < g->n_el; i++) {
        if (g->el[i].type == GE_RULE_REF) n_refs++;
        if (is_alt_end(g->el[i].type)) c->n_alts++;
    }
    c->alt_start = malloc((size_t)c->n_alts * sizeof(int32_t));
    c->alt_rule = malloc((size_t)c->n_alts * sizeof(int32_t));
    c->cnt = malloc((size_t)c->n_alts * sizeof(int32_t));
    c->occ_off = calloc((size_t)g->n_rules + 1, sizeof(int32_t));
    c->occ = malloc((size_t)(n_refs ? n_refs : 1) * sizeof(int32_t));
    if (!c->alt_start || !c->alt_rule || !c->cnt || !c->occ_off || !c->occ)
        return tc_err_set(c->err, TC_ERR_NOMEM, "grammar: out of memory");
    int a = 0;
    for (int r = 0; r < g->n_rules; r++) {
        int n_in_rule = 0;
        for (int i = g->rule_off[r], start = 1;; i++) {
            if (start) {
                c->alt_start[a] = i, c->alt_rule[a] = r, start = 0;
                if (++n_in_rule > GRAM_MAX_ALTS)
                    return tc_err_set(c->err, TC_ERR_INVALID,
                                      "grammar: rule '%.64s' has more than %d alternatives (an enum, anyOf or group "
                                      "this large is refused: matching it would be too slow per token)",
                                      c->names[r], GRAM_MAX_ALTS);
            }
            if (g->el[i].type == GE_RULE_REF) c->occ_off[g->el[i].value + 1]++;
            if (is_alt_end(g->el[i].type)) a++, start = 1;
            if (g->el[i].type == GE_END) break;
        }
    }
    for (int r = 0; r < g->n_rules; r++) c->occ_off[r + 1] += c->occ_off[r];
    int32_t *fill = c->cursor; // scratch: next free slot per rule
    memcpy(fill, c->occ_off, (size_t)g->n_rules * sizeof(int32_t));
    for (a = 0; a < c->n_alts; a++)
        for (int i = c->alt_start[a]; !is_alt_end(g->el[i].type); i++)
            if (g->el[i].type == GE_RULE_REF) c->occ[fill[g->el[i].value]++] = a;
    return 0;
}

// Marks the rules that have an alternative whose references are all marked (nullable: and no character).
static void gc_mark(gc *c, uint8_t *mark, int need_empty) {
    const gram *g = c->g;
    int top = 0;
    memset(mark, 0, (size_t)g->n_rules);
    for (int a = 0; a < c->n_alts; a++) {
        int n = 0;
        for (int i = c->alt_start[a]; !is_alt_end(g->el[i].type); i++) {
            if (g->el[i].type == GE_RULE_REF) n++;
            else if (need_empty && is_set_start(g->el[i].type)) n = INT32_MAX / 2;
        }
        c->cnt[a] = n;
        if (n == 0 && !mark[c->alt_rule[a]]) mark[c->alt_rule[a]] = 1, c->work[top++] = c->alt_rule[a];
    }
    while (top > 0) {
        int r = c->work[--top];
        for (int k = c->occ_off[r]; k < c->occ_off[r + 1]; k++) {
            int a = c->occ[k];
            if (--c->cnt[a] == 0 && !mark[c->alt_rule[a]]) mark[c->alt_rule[a]] = 1, c->work[top++] = c->alt_rule[a];
        }
    }
}

// Rule r's T, P, D from its alternatives' nullable prefixes (every rule referenced there is done).
static void gc_rule_cost(gc *c, int r) {
    const gram *g = c->g;
    long long t = 0, p = 0;
    int d = 0;
    for (int i = g->rule_off[r];; i++) {
        long long at = 0, ap = 1; // this alternative so far
        int acc = 0;
        for (; !is_alt_end(g->el[i].type); i++) {
            if (!ap) continue;
            if (is_set_start(g->el[i].type)) {
                at = sat_add(at, ap), ap = 0;
            } else if (g->el[i].type == GE_RULE_REF) {
                int k = (int)g->el[i].value;
                at = sat_add(at, sat_mul(ap, c->t[k]));
                if (acc + 1 + c->d[k] > d) d = acc + 1 + c->d[k];
                acc = acc + 1 + c->d[k] > GRAM_MAX_DEPTH * 2 ? GRAM_MAX_DEPTH * 2 : acc + 1 + c->d[k];
                ap = sat_mul(ap, c->p[k]);
            }
        }
        t = sat_add(t, at), p = sat_add(p, ap);
        if (g->el[i].type == GE_END) break;
    }
    c->t[r] = t, c->p[r] = p, c->d[r] = d > GRAM_MAX_DEPTH * 2 ? GRAM_MAX_DEPTH * 2 : d;
}

// Depth-first over the references at the start of alternatives: a reference back to a rule on the stack
// is left recursion; each rule's cost is computed when it is left.
static int gc_walk(gc *c) {
    const gram *g = c->g;
    long steps = 0;
    memset(c->state, 0, (size_t)g->n_rules);
    for (int r0 = 0; r0 < g->n_rules; r0++) {
        if (c->state[r0]) continue;
        int top = 0;
        c->work[top++] = r0, c->cursor[r0] = g->rule_off[r0], c->at_start[r0] = 1, c->state[r0] = 1;
        while (top > 0) {
            if ((++steps & 0xffff) == 0 && gram_clock() > c->deadline) return gc_timeout(c);
            int r = c->work[top - 1], i = c->cursor[r];
            uint32_t ty = g->el[i].type;
            if (ty == GE_END) {
                gc_rule_cost(c, r);
                c->state[r] = 2, top--;
                continue;
            }
            if (ty == GE_ALT) c->at_start[r] = 1;
            else if (c->at_start[r] && ty == GE_RULE_REF) {
                int k = (int)g->el[i].value;
                if (c->state[k] == 1)
                    return tc_err_set(c->err, TC_ERR_INVALID, "grammar: rule '%.64s' is left recursive", c->names[k]);
                if (c->state[k] == 0) { // visit k first; come back to this element
                    c->work[top++] = k, c->cursor[k] = g->rule_off[k], c->at_start[k] = 1, c->state[k] = 1;
                    continue;
                }
                if (!c->nullable[k]) c->at_start[r] = 0;
            } else if (is_set_start(ty)) c->at_start[r] = 0;
            c->cursor[r] = i + 1;
        }
    }
    return 0;
}

// The rest of every alternative from every position, right to left: what the matcher expands after a
// character (or at the start) must stay within the bounds.
static int gc_positions(gc *c) {
    const gram *g = c->g;
    for (int a = 0; a < c->n_alts; a++) {
        if ((a & 0xfff) == 0 && gram_clock() > c->deadline) return gc_timeout(c);
        int end = c->alt_start[a];
        while (!is_alt_end(g->el[end].type)) end++;
        long long t = 0, p = 1;
        int d = 0;
        for (int i = end - 1; i >= c->alt_start[a]; i--) {
            uint32_t ty = g->el[i].type;
            if (is_set_start(ty)) t = 1, p = 0, d = 0;
            else if (ty == GE_RULE_REF) {
                int k = (int)g->el[i].value;
                t = sat_add(c->t[k], sat_mul(c->p[k], t));
                p = sat_mul(c->p[k], p);
                d = 1 + c->d[k] + (c->p[k] ? d : 0);
                if (d > GRAM_MAX_DEPTH * 2) d = GRAM_MAX_DEPTH * 2;
            } else continue;
            const char *name = c->names[c->alt_rule[a]];
            if (sat_add(t, p) > GRAM_MAX_FANOUT)
                return tc_err_set(c->err, TC_ERR_INVALID,
                                  "grammar: rule '%.64s' can continue in more than %d ways at once (alternatives "
                                  "reachable without reading a character; the limit bounds the work per token)",
                                  name, GRAM_MAX_FANOUT);
            if (d > GRAM_MAX_DEPTH)
                return tc_err_set(c->err, TC_ERR_INVALID,
                                  "grammar: rule references nest more than %d deep before a character in rule '%.64s'",
                                  GRAM_MAX_DEPTH, name);
        }
    }
    return 0;
}

int gram_check(const gram *g, const char *const *names, double deadline, tc_err *err) {
    gc c = {.g = g, .names = names, .deadline = deadline, .err = err};
    size_t nr = (size_t)g->n_rules;
    c.work = malloc(nr * sizeof(int32_t));
    c.cursor = malloc(nr * sizeof(int32_t));
    c.at_start = malloc(nr * 4);
    c.t = malloc(nr * sizeof(long long));
    c.p = malloc(nr * sizeof(long long));
    c.d = malloc(nr * sizeof(int32_t));
    int rc = 0;
    if (!c.work || !c.cursor || !c.at_start || !c.t || !c.p || !c.d)
        rc = tc_err_set(err, TC_ERR_NOMEM, "grammar: out of memory");
    if (!rc) {
        c.nullable = c.at_start + nr, c.productive = c.at_start + 2 * nr, c.state = c.at_start + 3 * nr;
        rc = gc_index(&c);
    }
    if (!rc) {
        gc_mark(&c, c.nullable, 1);
        rc = gc_walk(&c);
    }
    if (!rc) {
        gc_mark(&c, c.productive, 0);
        if (!c.productive[g->root])
            rc = tc_err_set(err, TC_ERR_INVALID,
                            "grammar: rule '%.64s' can never complete (every alternative refers back to itself "
                            "without end), so no output can match it", names[g->root]);
    }
    if (!rc) rc = gc_positions(&c);
    free(c.alt_start);
    free(c.alt_rule);
    free(c.cnt);
    free(c.occ_off);
    free(c.occ);
    free(c.work);
    free(c.cursor);
    free(c.at_start);
    free(c.t);
    free(c.p);
    free(c.d);
    return rc;
}
