// GBNF parser (llama.cpp's grammar syntax): `name ::= alternatives`, sequences of "literals", [classes]
// (ranges, ^negation, escapes \n \t \r \\ \" \] \xHH \uHHHH \UHHHHHHHH), rule references, ( groups ), '.',
// and the repetitions * + ? {m} {m,} {m,n}; # comments. Groups and repetitions become generated rules.
// After parsing: every referenced rule must be defined, the root must exist, and no rule may be left
// recursive (the matcher would expand it forever), and the limits in gram.h hold (gram_check.c). Rule names
// are found through a hash table; the size of everything built is counted as it is built.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "grammar/gram_internal.h"

#define GP_MAX_REPEAT 10000

typedef struct gvec {
    gram_el *p;
    int n, cap;
} gvec;

typedef struct gp_slot {
    int32_t id;   // rule id; -1 = free
    uint32_t tag; // the name hash's upper bits (most mismatches are told apart without touching the name)
} gp_slot;

typedef struct gp {
    const char *src, *end, *pos;
    gvec *rules;    // (n_rules) elements per rule; empty + !defined = referenced only
    char **names;   // (n_rules) owned
    uint8_t *defined;
    int n_rules, cap_rules;
    gp_slot *slots; // (n_slots, a power of two) rule ids by name hash, open addressing
    int n_slots;
    long n_el;      // elements pushed so far, all rules
    double deadline; // gram_clock() seconds
    int depth;
    tc_err *err;
    int failed;
} gp;

static int gp_fail(gp *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int gp_fail(gp *p, const char *fmt, ...) {
    if (p->failed) return -1;
    p->failed = 1;
    int line = 1, col = 1;
    for (const char *s = p->src; s < p->pos && s < p->end; s++) {
        if (*s == '\n') line++, col = 1;
        else col++;
    }
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tc_err_set(p->err, TC_ERR_INVALID, "grammar: %s at line %d, column %d", msg, line, col);
    return -1;
}

static int gv_push(gp *p, gvec *v, uint32_t type, uint32_t value) {
    if (++p->n_el > GRAM_MAX_ELEMENTS) return gp_fail(p, "the grammar is larger than %d elements", GRAM_MAX_ELEMENTS);
    if ((p->n_el & 0xffff) == 0 && gram_clock() > p->deadline)
        return gp_fail(p, "compiling took longer than the limit of %.1f s", GRAM_MAX_COMPILE_S);
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 16;
        gram_el *q = realloc(v->p, (size_t)cap * sizeof *q);
        if (!q) {
            p->failed = 1;
            return tc_err_set(p->err, TC_ERR_NOMEM, "grammar: out of memory");
        }
        v->p = q, v->cap = cap;
    }
    v->p[v->n++] = (gram_el){type, value};
    return 0;
}

static int gv_append(gp *p, gvec *v, const gram_el *src, int n) {
    for (int i = 0; i < n; i++)
        if (gv_push(p, v, src[i].type, src[i].value)) return -1;
    return 0;
}

// The slot of name in the hash table: its rule, or the free slot where it would go (tag already set).
static gp_slot *name_slot(gp *p, const char *name, size_t len) {
    uint64_t h = XXH3_64bits(name, len);
    uint32_t tag = (uint32_t)(h >> 32);
    size_t mask = (size_t)p->n_slots - 1, i = (size_t)h & mask;
    for (;; i = (i + 1) & mask) {
        gp_slot *sl = &p->slots[i];
        if (sl->id < 0) {
            sl->tag = tag;
            return sl;
        }
        if (sl->tag == tag && !strncmp(p->names[sl->id], name, len) && !p->names[sl->id][len]) return sl;
    }
}

// Doubles the table (kept at most half full).
static int grow_slots(gp *p) {
    int n = p->n_slots ? p->n_slots * 2 : 64;
    gp_slot *old = p->slots;
    int n_old = p->n_slots;
    if (!(p->slots = malloc((size_t)n * sizeof *p->slots))) {
        p->slots = old;
        return gp_fail(p, "out of memory");
    }
    for (int i = 0; i < n; i++) p->slots[i].id = -1;
    p->n_slots = n;
    for (int i = 0; i < n_old; i++)
        if (old[i].id >= 0) name_slot(p, p->names[old[i].id], strlen(p->names[old[i].id]))->id = old[i].id;
    free(old);
    return 0;
}

// Rule id for a name, created (undefined) if new; name not NUL-terminated.
static int rule_id(gp *p, const char *name, size_t len) {
    if (p->n_slots) {
        int32_t id = name_slot(p, name, len)->id;
        if (id >= 0) return id;
    }
    if (p->n_rules == GRAM_MAX_RULES) return gp_fail(p, "more than %d rules", GRAM_MAX_RULES);
    if (2 * (p->n_rules + 1) > p->n_slots && grow_slots(p)) return -1;
    if (p->n_rules == p->cap_rules) {
        int cap = p->cap_rules ? p->cap_rules * 2 : 32;
        gvec *r = realloc(p->rules, (size_t)cap * sizeof *r);
        if (r) p->rules = r;
        char **nm = realloc(p->names, (size_t)cap * sizeof *nm);
        if (nm) p->names = nm;
        uint8_t *d = realloc(p->defined, (size_t)cap);
        if (d) p->defined = d;
        if (!r || !nm || !d) return gp_fail(p, "out of memory");
        p->cap_rules = cap;
    }
    char *s = malloc(len + 1);
    if (!s) return gp_fail(p, "out of memory");
    memcpy(s, name, len);
    s[len] = 0;
    int id = p->n_rules++;
    p->names[id] = s;
    name_slot(p, s, len)->id = id;
    p->rules[id] = (gvec){0};
    p->defined[id] = 0;
    return id;
}

// A fresh rule named after base (for groups and repetitions).
static int gen_rule(gp *p, int base) {
    char name[96];
    snprintf(name, sizeof name, "%.64s_%d", base >= 0 ? p->names[base] : "g", p->n_rules);
    int id = rule_id(p, name, strlen(name));
    if (id >= 0) p->defined[id] = 1;
    return id;
}

// --- lexing

static int is_word(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'; }

// Skips spaces, tabs, comments, and newlines when newlines are allowed (inside groups).
static void skip_space(gp *p, int newlines) {
    while (p->pos < p->end) {
        char c = *p->pos;
        if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) p->pos++;
        else if (c == '#') {
            while (p->pos < p->end && *p->pos != '\n') p->pos++;
        } else if (!newlines && c == '\r' && p->pos + 1 < p->end && p->pos[1] == '\n') break;
        else break;
    }
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Decodes one UTF-8 code point at p->pos (advancing); invalid → error.
static int read_utf8(gp *p, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)p->pos;
    size_t left = (size_t)(p->end - p->pos);
    unsigned c = s[0];
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!n || (size_t)n > left) return gp_fail(p, "invalid UTF-8");
    uint32_t v = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return gp_fail(p, "invalid UTF-8");
        v = (v << 6) | (s[i] & 0x3f);
    }
    p->pos += n;
    *cp = v;
    return 0;
}

// One character of a literal or class, with escapes.
static int read_char(gp *p, uint32_t *cp) {
    if (p->pos >= p->end) return gp_fail(p, "unexpected end of input");
    if (*p->pos != '\\') return read_utf8(p, cp);
    p->pos++;
    if (p->pos >= p->end) return gp_fail(p, "unexpected end after '\\'");
    char c = *p->pos++;
    int nhex = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
    if (nhex) {
        uint32_t v = 0;
        for (int i = 0; i < nhex; i++) {
            int h = p->pos < p->end ? hexval(*p->pos) : -1;
            if (h < 0) return gp_fail(p, "expected %d hex digits after '\\%c'", nhex, c);
            v = v * 16 + (uint32_t)h;
            p->pos++;
        }
        if (v > 0x10FFFF) return gp_fail(p, "code point out of range");
        *cp = v;
        return 0;
    }
    switch (c) {
    case 'n': *cp = '\n'; return 0;
    case 't': *cp = '\t'; return 0;
    case 'r': *cp = '\r'; return 0;
    case '\\': case '"': case '[': case ']': case '-': case '^': case '/': *cp = (uint32_t)(unsigned char)c; return 0;
    default: return gp_fail(p, "unknown escape '\\%c'", c);
    }
}

static int read_uint(gp *p, int *out) {
    skip_space(p, 1);
    if (p->pos >= p->end || *p->pos < '0' || *p->pos > '9') return gp_fail(p, "expected a number");
    long v = 0;
    while (p->pos < p->end && *p->pos >= '0' && *p->pos <= '9') {
        v = v * 10 + (*p->pos++ - '0');
        if (v > GP_MAX_REPEAT) return gp_fail(p, "repetition count above %d", GP_MAX_REPEAT);
    }
    *out = (int)v;
    return 0;
}

// --- repetitions: S{min,max} (max < 0: unbounded) replaces out[start..] as llama.cpp does:
// S repeated min times, then a chain of optional rules  R ::= S R' |  (or R ::= S R | when unbounded).
static int repeat(gp *p, int rule, int start, int min, int max) {
    gvec *out = &p->rules[rule];
    int n = out->n - start;
    gram_el *s = malloc((size_t)(n > 0 ? n : 1) * sizeof *s);
    if (!s) return gp_fail(p, "out of memory");
    memcpy(s, out->p + start, (size_t)n * sizeof *s);
    int rc = 0;
    if (min == 0) out->n = start;
    for (int i = 1; i < min && !rc; i++) rc = gv_append(p, &p->rules[rule], s, n);
    int n_opt = max < 0 ? 1 : max - min, last = -1;
    for (int i = 0; i < n_opt && !rc; i++) {
        int id = gen_rule(p, rule);
        if (id < 0) {
            rc = -1;
            break;
        }
        gvec *r = &p->rules[id];
        rc = gv_append(p, r, s, n);
        if (!rc && (i > 0 || max < 0)) rc = gv_push(p, &p->rules[id], GE_RULE_REF, (uint32_t)(max < 0 ? id : last));
        if (!rc) rc = gv_push(p, &p->rules[id], GE_ALT, 0);
        if (!rc) rc = gv_push(p, &p->rules[id], GE_END, 0);
        last = id;
    }
    if (!rc && n_opt > 0) rc = gv_push(p, &p->rules[rule], GE_RULE_REF, (uint32_t)last);
    free(s);
    return rc;
}

static int parse_alternates(gp *p, int rule, int nested);

static int parse_sequence(gp *p, int rule, int nested) {
    int last_start = -1; // start of the last symbol in p->rules[rule], for repetitions
    for (;;) {
        skip_space(p, nested);
        if (p->pos >= p->end) return 0;
        char c = *p->pos;
        int start = p->rules[rule].n;
        if (c == '"') {
            p->pos++;
            last_start = start;
            while (p->pos < p->end && *p->pos != '"') {
                uint32_t cp;
                if (read_char(p, &cp) || gv_push(p, &p->rules[rule], GE_CHAR, cp)) return -1;
            }
            if (p->pos >= p->end) return gp_fail(p, "unterminated string literal");
            p->pos++;
            if (p->rules[rule].n == start) last_start = -1; // "" is empty
        } else if (c == '[') {
            p->pos++;
            last_start = start;
            uint32_t first = GE_CHAR;
            if (p->pos < p->end && *p->pos == '^') p->pos++, first = GE_CHAR_NOT;
            int any = 0;
            while (p->pos < p->end && *p->pos != ']') {
                uint32_t lo, hi;
                if (read_char(p, &lo)) return -1;
                if (gv_push(p, &p->rules[rule], any ? GE_CHAR_ALT : first, lo)) return -1;
                any = 1;
                if (p->pos + 1 < p->end && *p->pos == '-' && p->pos[1] != ']') {
                    p->pos++;
                    if (read_char(p, &hi)) return -1;
                    if (hi < lo) return gp_fail(p, "empty character range");
                    if (gv_push(p, &p->rules[rule], GE_CHAR_RNG_UPPER, hi)) return -1;
                }
            }
            if (p->pos >= p->end) return gp_fail(p, "unterminated character class");
            p->pos++;
            if (!any) { // [] matches nothing; [^] matches anything
                if (first == GE_CHAR_NOT) {
                    if (gv_push(p, &p->rules[rule], GE_CHAR_ANY, 0)) return -1;
                } else return gp_fail(p, "empty character class");
            }
        } else if (c == '.') {
            p->pos++;
            last_start = start;
            if (gv_push(p, &p->rules[rule], GE_CHAR_ANY, 0)) return -1;
        } else if (is_word(c)) {
            const char *s = p->pos;
            while (p->pos < p->end && is_word(*p->pos)) p->pos++;
            // a name followed by ::= starts the next rule: the sequence ends before it
            const char *save = p->pos;
            skip_space(p, 1);
            if (p->end - p->pos >= 3 && !memcmp(p->pos, "::=", 3)) {
                p->pos = s;
                return 0;
            }
            p->pos = save;
            int id = rule_id(p, s, (size_t)(save - s));
            if (id < 0) return -1;
            last_start = start;
            if (gv_push(p, &p->rules[rule], GE_RULE_REF, (uint32_t)id)) return -1;
        } else if (c == '(') {
            p->pos++;
            if (++p->depth > 200) return gp_fail(p, "groups nested too deeply");
            int id = gen_rule(p, rule);
            if (id < 0 || parse_alternates(p, id, 1)) return -1;
            p->depth--;
            skip_space(p, 1);
            if (p->pos >= p->end || *p->pos != ')') return gp_fail(p, "expected ')'");
            p->pos++;
            last_start = start;
            if (gv_push(p, &p->rules[rule], GE_RULE_REF, (uint32_t)id)) return -1;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last_start < 0) return gp_fail(p, "'%c' without a preceding symbol", c);
            p->pos++;
            int min = 0, max = -1;
            if (c == '+') min = 1;
            else if (c == '?') max = 1;
            else if (c == '{') {
                if (read_uint(p, &min)) return -1;
                skip_space(p, 1);
                max = min;
                if (p->pos < p->end && *p->pos == ',') {
                    p->pos++;
                    skip_space(p, 1);
                    max = -1;
                    if (p->pos < p->end && *p->pos != '}' && read_uint(p, &max)) return -1;
                    skip_space(p, 1);
                }
                if (p->pos >= p->end || *p->pos != '}') return gp_fail(p, "expected '}'");
                p->pos++;
                if (max >= 0 && max < min) return gp_fail(p, "repetition {%d,%d} has max < min", min, max);
            }
            if (repeat(p, rule, last_start, min, max)) return -1;
            last_start = -1;
        } else return 0; // '|', ')', newline, or an unexpected character: the caller decides
    }
}

static int parse_alternates(gp *p, int rule, int nested) {
    for (;;) {
        if (parse_sequence(p, rule, nested)) return -1;
        skip_space(p, nested);
        if (p->pos < p->end && *p->pos == '|') {
            p->pos++;
            skip_space(p, 1);
            if (gv_push(p, &p->rules[rule], GE_ALT, 0)) return -1;
            continue;
        }
        return gv_push(p, &p->rules[rule], GE_END, 0);
    }
}

static int parse_rules(gp *p) {
    for (;;) {
        skip_space(p, 1);
        if (p->pos >= p->end) return 0;
        const char *s = p->pos;
        while (p->pos < p->end && is_word(*p->pos)) p->pos++;
        if (p->pos == s) return gp_fail(p, "expected a rule name");
        size_t len = (size_t)(p->pos - s);
        skip_space(p, 0);
        if (p->end - p->pos < 3 || memcmp(p->pos, "::=", 3)) return gp_fail(p, "expected '::='");
        p->pos += 3;
        skip_space(p, 1);
        int id = rule_id(p, s, len);
        if (id < 0) return -1;
        if (p->defined[id]) return gp_fail(p, "rule '%.*s' defined twice", (int)len, s);
        p->defined[id] = 1;
        if (parse_alternates(p, id, 0)) return -1;
        skip_space(p, 0);
        if (p->pos < p->end && *p->pos != '\n' && *p->pos != '\r')
            return gp_fail(p, "unexpected '%c'", *p->pos);
    }
}

int gram_parse(const char *src, size_t len, const char *root, gram **out, tc_err *err) {
    *out = NULL;
    gp p = {.src = src, .end = src + len, .pos = src, .err = err, .deadline = gram_clock() + GRAM_MAX_COMPILE_S};
    gram *g = NULL;
    int rc = parse_rules(&p);
    if (!rc && !p.failed) {
        if (!root) root = "root";
        int rid = p.n_slots ? name_slot(&p, root, strlen(root))->id : -1;
        if (rid < 0 || !p.defined[rid]) rc = tc_err_set(err, TC_ERR_INVALID, "grammar: no rule named '%s'", root);
        for (int i = 0; !rc && i < p.n_rules; i++)
            if (!p.defined[i]) rc = tc_err_set(err, TC_ERR_INVALID, "grammar: undefined rule '%s'", p.names[i]);
        if (!rc) {
            g = calloc(1, sizeof *g);
            long n = 0;
            for (int i = 0; i < p.n_rules; i++) n += p.rules[i].n;
            if (g) {
                g->el = malloc((size_t)(n + 1) * sizeof *g->el);
                g->rule_off = malloc((size_t)p.n_rules * sizeof *g->rule_off);
                g->alt_end = malloc((size_t)(n + 1) * sizeof *g->alt_end);
            }
            if (!g || !g->el || !g->rule_off || !g->alt_end)
                rc = tc_err_set(err, TC_ERR_NOMEM, "grammar: out of memory");
        }
        if (!rc) {
            g->n_rules = p.n_rules;
            g->root = rid;
            g->refs = 1;
            for (int i = 0; i < p.n_rules; i++) {
                g->rule_off[i] = g->n_el;
                memcpy(g->el + g->n_el, p.rules[i].p, (size_t)p.rules[i].n * sizeof *g->el);
                g->n_el += p.rules[i].n;
            }
            for (int i = g->n_el - 1, end = i; i >= 0; i--) { // every rule ends with GE_END
                if (g->el[i].type == GE_ALT || g->el[i].type == GE_END) end = i;
                g->alt_end[i] = end;
            }
            rc = gram_check(g, (const char *const *)p.names, p.deadline, err);
        }
    } else if (!rc) rc = TC_ERR_INVALID;
    if (rc == 0 && p.failed) rc = TC_ERR_INVALID;
    for (int i = 0; i < p.n_rules; i++) {
        free(p.rules[i].p);
        free(p.names[i]);
    }
    free(p.rules);
    free(p.names);
    free(p.defined);
    free(p.slots);
    if (rc) {
        gram_free(g);
        return err && err->code ? err->code : TC_ERR_INVALID;
    }
    *out = g;
    return 0;
}

gram *gram_ref(gram *g) {
    g->refs++;
    return g;
}

void gram_free(gram *g) {
    if (!g || --g->refs > 0) return;
    free(g->el);
    free(g->rule_off);
    free(g->alt_end);
    free(g);
}

int gram_n_rules(const gram *g) { return g->n_rules; }
int gram_n_elements(const gram *g) { return g->n_el; }
