// Jinja parser: tokens to a syntax tree, with jinja2's grammar and operator precedence (or < and < not <
// comparisons < + - < ~ < * / // % < ** < unary < postfix . [] () and filters | / tests is).
#include <stdlib.h>

#include "jinja/jinja_int.h"

typedef struct parser {
    jinja_arena *a;
    jtok *t;
    int nt, pos, depth, max_depth;
} parser;

_Noreturn static void perr(parser *P, const char *fmt, const char *arg) {
    char m[200];
    snprintf(m, sizeof m, fmt, arg);
    jinja_fail(P->a->fault, TC_ERR_FORMAT, "template syntax error (line %d): %s", P->t[P->pos].line, m);
}

static jtok *cur(parser *P) { return &P->t[P->pos]; }
static jtok *nxt(parser *P) { return &P->t[P->pos < P->nt - 1 ? P->pos++ : P->pos]; }
static int is_op(parser *P, int op) { return cur(P)->type == JT_OP && cur(P)->op == op; }
static int is_name(parser *P, const char *w) { return cur(P)->type == JT_NAME && jinja_eq(cur(P)->s, cur(P)->n, w); }
static int accept_op(parser *P, int op) { return is_op(P, op) ? (nxt(P), 1) : 0; }
static int accept_name(parser *P, const char *w) { return is_name(P, w) ? (nxt(P), 1) : 0; }

static void expect_op(parser *P, int op) {
    if (!accept_op(P, op)) {
        char s[2] = {(char)op, 0};
        perr(P, "expected '%s'", op == JT_EOF ? "end" : s);
    }
}

static void expect_type(parser *P, int type, const char *what) {
    if (cur(P)->type != type) perr(P, "expected %s", what);
    nxt(P);
}

static jnode *node(parser *P, int kind) {
    jnode *n = jinja_alloc(P->a, sizeof *n);
    n->kind = kind;
    n->line = cur(P)->line;
    return n;
}

// Growable child array of a node being built.
typedef struct kids {
    jnode **v;
    int n, cap;
} kids;

static void kid(parser *P, kids *k, jnode *c) {
    if (k->n == k->cap) {
        int cap = k->cap ? k->cap * 2 : 4;
        jnode **nv = jinja_alloc(P->a, (size_t)cap * sizeof *nv);
        if (k->n) memcpy(nv, k->v, (size_t)k->n * sizeof *nv);
        k->v = nv, k->cap = cap;
    }
    k->v[k->n++] = c;
}

static void enter(parser *P) {
    if (++P->depth > P->max_depth) perr(P, "%s", "template nested too deeply");
}

static jnode *parse_expr(parser *P);

static jnode *parse_unary(parser *P, int with_filter);
static jnode *parse_tuple(parser *P);

// --- expressions

static jnode *parse_call_args(parser *P, jnode *n) { // after '(' ; fills n->v
    kids k = {0};
    while (!accept_op(P, ')')) {
        if (k.n) expect_op(P, ',');
        if (accept_op(P, ')')) break;
        if (cur(P)->type == JT_NAME && P->t[P->pos + 1].type == JT_OP && P->t[P->pos + 1].op == '=') {
            jnode *kw = node(P, JN_KWARG);
            kw->s = cur(P)->s, kw->n = cur(P)->n;
            P->pos += 2;
            kw->a = parse_expr(P);
            kid(P, &k, kw);
        } else {
            if (is_op(P, '*') || is_op(P, JOP_POW)) perr(P, "%s", "*args and **kwargs are not supported");
            kid(P, &k, parse_expr(P));
        }
    }
    n->v = k.v, n->nv = k.n;
    return n;
}

static jnode *parse_primary(parser *P) {
    jtok *t = cur(P);
    jnode *n;
    if (t->type == JT_NAME) {
        nxt(P);
        n = node(P, JN_LIT);
        if (jinja_eq(t->s, t->n, "true") || jinja_eq(t->s, t->n, "True")) n->lit = jinja_bool(1);
        else if (jinja_eq(t->s, t->n, "false") || jinja_eq(t->s, t->n, "False")) n->lit = jinja_bool(0);
        else if (jinja_eq(t->s, t->n, "none") || jinja_eq(t->s, t->n, "None")) n->lit = JV_MK(JV_NONE);
        else n->kind = JN_NAME, n->s = t->s, n->n = t->n;
        return n;
    }
    if (t->type == JT_STRING) { // adjacent literals concatenate
        n = node(P, JN_LIT);
        size_t len = 0;
        int i = P->pos;
        for (; P->t[i].type == JT_STRING; i++) len += P->t[i].n;
        char *s = jinja_alloc(P->a, len + 1);
        len = 0;
        for (; P->t[P->pos].type == JT_STRING; P->pos++) memcpy(s + len, P->t[P->pos].s, P->t[P->pos].n), len += P->t[P->pos].n;
        n->lit = jinja_str(s, len);
        return n;
    }
    if (t->type == JT_INT || t->type == JT_FLOAT) {
        nxt(P);
        n = node(P, JN_LIT);
        n->lit = t->type == JT_INT ? jinja_int(t->i) : jinja_float(t->f);
        return n;
    }
    if (accept_op(P, '(')) {
        if (accept_op(P, ')')) return node(P, JN_TUPLE);
        jnode *e = parse_expr(P);
        if (is_op(P, ',')) {
            kids k = {0};
            kid(P, &k, e);
            while (accept_op(P, ',') && !is_op(P, ')')) kid(P, &k, parse_expr(P));
            e = node(P, JN_TUPLE);
            e->v = k.v, e->nv = k.n;
        }
        expect_op(P, ')');
        return e;
    }
    if (accept_op(P, '[')) {
        n = node(P, JN_LIST);
        kids k = {0};
        while (!accept_op(P, ']')) {
            if (k.n) expect_op(P, ',');
            if (accept_op(P, ']')) break;
            kid(P, &k, parse_expr(P));
        }
        n->v = k.v, n->nv = k.n;
        return n;
    }
    if (accept_op(P, '{')) {
        n = node(P, JN_DICT);
        kids k = {0};
        while (!accept_op(P, '}')) {
            if (k.n) expect_op(P, ',');
            if (accept_op(P, '}')) break;
            jnode *pr = node(P, JN_PAIR);
            pr->a = parse_expr(P);
            expect_op(P, ':');
            pr->b = parse_expr(P);
            kid(P, &k, pr);
        }
        n->v = k.v, n->nv = k.n;
        return n;
    }
    perr(P, "%s", t->type == JT_EOF || t->type == JT_BLOCK_END || t->type == JT_VAR_END ? "expected an expression"
                                                                                         : "unexpected token");
}

static jnode *parse_subscript(parser *P, jnode *obj) { // after '['
    jnode *parts[3] = {0};
    int np = 0, slice = 0;
    for (;;) {
        if (!is_op(P, ':') && !is_op(P, ']')) parts[np] = parse_expr(P);
        if (accept_op(P, ':')) {
            slice = 1;
            if (++np > 2) perr(P, "%s", "bad slice");
            continue;
        }
        break;
    }
    expect_op(P, ']');
    jnode *n = node(P, slice ? JN_SLICE : JN_ITEM);
    n->a = obj;
    n->b = parts[0], n->c = parts[1], n->d = parts[2];
    if (!slice && !n->b) perr(P, "%s", "expected a subscript");
    return n;
}

static jnode *parse_postfix(parser *P, jnode *n) {
    for (;;) {
        if (accept_op(P, '.')) {
            jnode *at = node(P, JN_ATTR);
            at->a = n;
            if (cur(P)->type == JT_NAME) at->s = cur(P)->s, at->n = cur(P)->n, nxt(P);
            else if (cur(P)->type == JT_INT) {
                at->kind = JN_ITEM;
                at->b = node(P, JN_LIT);
                at->b->lit = jinja_int(cur(P)->i);
                nxt(P);
            } else perr(P, "%s", "expected an attribute name");
            n = at;
        } else if (accept_op(P, '[')) {
            n = parse_subscript(P, n);
        } else if (accept_op(P, '(')) {
            jnode *call = node(P, JN_CALL);
            call->a = n;
            n = parse_call_args(P, call);
        } else return n;
    }
}

static jnode *parse_filter_expr(parser *P, jnode *n) {
    for (;;) {
        if (accept_op(P, '|')) {
            jnode *f = node(P, JN_FILTER);
            f->a = n;
            if (cur(P)->type != JT_NAME) perr(P, "%s", "expected a filter name");
            f->s = cur(P)->s, f->n = cur(P)->n;
            nxt(P);
            if (accept_op(P, '(')) parse_call_args(P, f);
            n = f;
        } else if (accept_name(P, "is")) {
            jnode *t = node(P, JN_TEST);
            t->a = n;
            t->op = accept_name(P, "not");
            if (cur(P)->type != JT_NAME) perr(P, "%s", "expected a test name");
            t->s = cur(P)->s, t->n = cur(P)->n;
            nxt(P);
            jtok *c = cur(P);
            if (accept_op(P, '(')) parse_call_args(P, t);
            else if ((c->type == JT_NAME || c->type == JT_STRING || c->type == JT_INT || c->type == JT_FLOAT ||
                      is_op(P, '[') || is_op(P, '{')) &&
                     !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and") && !is_name(P, "is")) {
                kids k = {0};
                kid(P, &k, parse_postfix(P, parse_primary(P)));
                t->v = k.v, t->nv = k.n;
            }
            n = t;
        } else if (accept_op(P, '(')) {
            jnode *call = node(P, JN_CALL);
            call->a = n;
            n = parse_call_args(P, call);
        } else return n;
    }
}

static jnode *parse_unary(parser *P, int with_filter) {
    enter(P);
    jnode *n;
    if (is_op(P, '-') || is_op(P, '+')) {
        n = node(P, JN_UNARY);
        n->op = nxt(P)->op;
        n->a = parse_unary(P, 0);
    } else n = parse_primary(P);
    n = parse_postfix(P, n);
    if (with_filter) n = parse_filter_expr(P, n);
    P->depth--;
    return n;
}

static jnode *binary(parser *P, int kind, int op, jnode *a, jnode *b) {
    jnode *n = node(P, kind);
    n->op = op, n->a = a, n->b = b;
    return n;
}

static jnode *parse_pow(parser *P) {
    jnode *n = parse_unary(P, 1);
    while (accept_op(P, JOP_POW)) n = binary(P, JN_BINARY, JOP_POW, n, parse_unary(P, 1));
    return n;
}

static jnode *parse_math2(parser *P) {
    jnode *n = parse_pow(P);
    while (is_op(P, '*') || is_op(P, '/') || is_op(P, JOP_FLOORDIV) || is_op(P, '%')) {
        int op = nxt(P)->op;
        n = binary(P, JN_BINARY, op, n, parse_pow(P));
    }
    return n;
}

static jnode *parse_concat(parser *P) {
    jnode *n = parse_math2(P);
    while (accept_op(P, '~')) n = binary(P, JN_BINARY, '~', n, parse_math2(P));
    return n;
}

static jnode *parse_math1(parser *P) {
    jnode *n = parse_concat(P);
    while (is_op(P, '+') || is_op(P, '-')) {
        int op = nxt(P)->op;
        n = binary(P, JN_BINARY, op, n, parse_concat(P));
    }
    return n;
}

// a < b < c chains as Python's (a < b) and (b < c).
static jnode *parse_compare(parser *P) {
    jnode *n = parse_math1(P), *last = NULL;
    for (;;) {
        int op = 0;
        jtok *t = cur(P);
        if (t->type == JT_OP && (t->op == JOP_EQ || t->op == JOP_NE || t->op == '<' || t->op == '>' ||
                                 t->op == JOP_LE || t->op == JOP_GE))
            op = t->op, nxt(P);
        else if (accept_name(P, "in")) op = 'i';
        else if (is_name(P, "not") && P->t[P->pos + 1].type == JT_NAME && jinja_eq(P->t[P->pos + 1].s, P->t[P->pos + 1].n, "in"))
            op = 'I', P->pos += 2;
        else return n;
        if (!last) n = last = binary(P, JN_COMPARE, op, n, parse_math1(P));
        else {
            last = binary(P, JN_COMPARE, op, last->b, parse_math1(P));
            n = binary(P, JN_AND, 0, n, last);
        }
    }
}

static jnode *parse_not(parser *P) {
    if (accept_name(P, "not")) {
        enter(P);
        jnode *n = node(P, JN_UNARY);
        n->op = 'n';
        n->a = parse_not(P);
        P->depth--;
        return n;
    }
    return parse_compare(P);
}

static jnode *parse_and(parser *P) {
    jnode *n = parse_not(P);
    while (accept_name(P, "and")) n = binary(P, JN_AND, 0, n, parse_not(P));
    return n;
}

static jnode *parse_or(parser *P) {
    jnode *n = parse_and(P);
    while (accept_name(P, "or")) n = binary(P, JN_OR, 0, n, parse_and(P));
    return n;
}

static jnode *parse_expr(parser *P) {
    enter(P);
    jnode *n = parse_or(P);
    while (accept_name(P, "if")) {
        jnode *c = node(P, JN_COND);
        c->a = n;
        c->b = parse_or(P);
        if (accept_name(P, "else")) c->c = parse_expr(P);
        n = c;
    }
    P->depth--;
    return n;
}

// An expression, or several separated by commas (a tuple), as jinja2 allows in {{ }} and set/for.
static jnode *parse_tuple(parser *P) {
    jnode *e = parse_expr(P);
    if (!is_op(P, ',')) return e;
    kids k = {0};
    kid(P, &k, e);
    while (accept_op(P, ',')) {
        if (cur(P)->type == JT_BLOCK_END || cur(P)->type == JT_VAR_END || is_name(P, "in") || is_op(P, '=')) break;
        kid(P, &k, parse_expr(P));
    }
    jnode *t = node(P, JN_TUPLE);
    t->v = k.v, t->nv = k.n;
    return t;
}

// An assignment target: a name, names separated by commas, or (for set) name.attr.
static jnode *parse_target(parser *P, int allow_attr) {
    kids k = {0};
    do {
        if (cur(P)->type != JT_NAME) perr(P, "%s", "expected a name to assign");
        jnode *n = node(P, JN_NAME);
        n->s = cur(P)->s, n->n = cur(P)->n;
        nxt(P);
        if (allow_attr && accept_op(P, '.')) {
            jnode *at = node(P, JN_ATTR);
            at->a = n;
            if (cur(P)->type != JT_NAME) perr(P, "%s", "expected an attribute name");
            at->s = cur(P)->s, at->n = cur(P)->n;
            nxt(P);
            n = at;
        }
        kid(P, &k, n);
    } while (accept_op(P, ',') && cur(P)->type == JT_NAME);
    if (k.n == 1) return k.v[0];
    jnode *t = node(P, JN_TUPLE);
    t->v = k.v, t->nv = k.n;
    return t;
}

// --- statements

static jnode *parse_body(parser *P, const char *const *ends);

static int at_end_tag(parser *P, const char *const *ends) {
    if (cur(P)->type != JT_BLOCK_BEGIN || !ends) return 0;
    jtok *t = &P->t[P->pos + 1];
    if (t->type != JT_NAME) return 0;
    for (; *ends; ends++)
        if (jinja_eq(t->s, t->n, *ends)) return 1;
    return 0;
}

// Consumes {% word %} where word is the current name.
static void end_tag(parser *P, const char *word) {
    if (!accept_name(P, word)) perr(P, "expected '%s'", word);
    expect_type(P, JT_BLOCK_END, "'%}'");
}

static jnode *filter_chain(parser *P, jnode *in) { // name(args) | name(args) …
    do {
        jnode *f = node(P, JN_FILTER);
        f->a = in;
        if (cur(P)->type != JT_NAME) perr(P, "%s", "expected a filter name");
        f->s = cur(P)->s, f->n = cur(P)->n;
        nxt(P);
        if (accept_op(P, '(')) parse_call_args(P, f);
        in = f;
    } while (accept_op(P, '|'));
    return in;
}

static jnode *parse_params(parser *P) { // after '(' : name[=default], … ')'
    jnode *holder = node(P, JN_BODY);
    kids k = {0};
    while (!accept_op(P, ')')) {
        if (k.n) expect_op(P, ',');
        if (accept_op(P, ')')) break;
        if (cur(P)->type != JT_NAME) perr(P, "%s", "expected a parameter name");
        jnode *pm = node(P, JN_PARAM);
        pm->s = cur(P)->s, pm->n = cur(P)->n;
        nxt(P);
        if (accept_op(P, '=')) pm->a = parse_expr(P);
        kid(P, &k, pm);
    }
    holder->v = k.v, holder->nv = k.n;
    return holder;
}

static jnode *parse_if(parser *P) { // after 'if' / 'elif'
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    jnode *n = node(P, JN_IF);
    n->a = parse_tuple(P);
    expect_type(P, JT_BLOCK_END, "'%}'");
    n->b = parse_body(P, ends);
    nxt(P); // BLOCK_BEGIN
    if (accept_name(P, "elif")) {
        n->c = parse_if(P);
        return n;
    }
    if (accept_name(P, "else")) {
        static const char *const end[] = {"endif", NULL};
        expect_type(P, JT_BLOCK_END, "'%}'");
        n->c = parse_body(P, end);
        nxt(P);
    }
    end_tag(P, "endif");
    return n;
}

static jnode *parse_for(parser *P) {
    static const char *const ends[] = {"else", "endfor", NULL}, *const end[] = {"endfor", NULL};
    jnode *n = node(P, JN_FOR);
    n->a = parse_target(P, 0);
    if (!accept_name(P, "in")) perr(P, "%s", "expected 'in'");
    n->b = parse_or(P);
    if (accept_name(P, "if")) n->c = parse_expr(P);
    if (is_name(P, "recursive")) perr(P, "%s", "recursive loops are not supported");
    expect_type(P, JT_BLOCK_END, "'%}'");
    n->d = parse_body(P, ends);
    nxt(P);
    if (accept_name(P, "else")) {
        expect_type(P, JT_BLOCK_END, "'%}'");
        n->e = parse_body(P, end);
        nxt(P);
    }
    end_tag(P, "endfor");
    return n;
}

static jnode *parse_set(parser *P) {
    static const char *const end[] = {"endset", NULL};
    jnode *n = node(P, JN_SET);
    n->a = parse_target(P, 1);
    if (accept_op(P, '=')) {
        n->b = parse_tuple(P);
        expect_type(P, JT_BLOCK_END, "'%}'");
        return n;
    }
    if (n->a->kind != JN_NAME) perr(P, "%s", "a block set assigns one name");
    if (accept_op(P, '|')) n->c = filter_chain(P, node(P, JN_PLACEHOLDER));
    expect_type(P, JT_BLOCK_END, "'%}'");
    n->d = parse_body(P, end);
    nxt(P);
    end_tag(P, "endset");
    return n;
}

static jnode *parse_macro(parser *P) {
    static const char *const end[] = {"endmacro", NULL};
    jnode *n = node(P, JN_MACRO);
    if (cur(P)->type != JT_NAME) perr(P, "%s", "expected a macro name");
    n->s = cur(P)->s, n->n = cur(P)->n;
    nxt(P);
    expect_op(P, '(');
    jnode *ps = parse_params(P);
    n->v = ps->v, n->nv = ps->nv;
    expect_type(P, JT_BLOCK_END, "'%}'");
    n->d = parse_body(P, end);
    nxt(P);
    end_tag(P, "endmacro");
    return n;
}

static jnode *parse_call_block(parser *P) {
    static const char *const end[] = {"endcall", NULL};
    jnode *n = node(P, JN_CALLBLOCK);
    if (accept_op(P, '(')) {
        jnode *ps = parse_params(P);
        n->v = ps->v, n->nv = ps->nv;
    }
    n->a = parse_expr(P);
    if (n->a->kind != JN_CALL) perr(P, "%s", "expected a call");
    expect_type(P, JT_BLOCK_END, "'%}'");
    n->d = parse_body(P, end);
    nxt(P);
    end_tag(P, "endcall");
    return n;
}

static jnode *parse_stmt(parser *P) {
    jtok *t = nxt(P);
    if (t->type != JT_NAME) perr(P, "%s", "expected a statement name");
    enter(P);
    jnode *n;
#define IS(w) jinja_eq(t->s, t->n, w)
    if (IS("if")) n = parse_if(P);
    else if (IS("for")) n = parse_for(P);
    else if (IS("set")) n = parse_set(P);
    else if (IS("macro")) n = parse_macro(P);
    else if (IS("call")) n = parse_call_block(P);
    else if (IS("filter")) {
        static const char *const end[] = {"endfilter", NULL};
        n = node(P, JN_FILTERBLOCK);
        n->a = filter_chain(P, node(P, JN_PLACEHOLDER));
        expect_type(P, JT_BLOCK_END, "'%}'");
        n->d = parse_body(P, end);
        nxt(P);
        end_tag(P, "endfilter");
    } else if (IS("break") || IS("continue")) {
        n = node(P, IS("break") ? JN_BREAK : JN_CONTINUE);
        expect_type(P, JT_BLOCK_END, "'%}'");
    } else if (IS("generation")) {
        static const char *const end[] = {"endgeneration", NULL};
        expect_type(P, JT_BLOCK_END, "'%}'");
        n = parse_body(P, end);
        nxt(P);
        end_tag(P, "endgeneration");
    } else {
        char w[64];
        snprintf(w, sizeof w, "%.*s", (int)(t->n < 60 ? t->n : 60), t->s);
        perr(P, "unknown or unsupported tag '%s'", w);
    }
#undef IS
    P->depth--;
    return n;
}

static jnode *parse_body(parser *P, const char *const *ends) {
    jnode *body = node(P, JN_BODY);
    kids k = {0};
    for (;;) {
        jtok *t = cur(P);
        if (t->type == JT_EOF) {
            if (ends) {
                int k = 0;
                while (ends[k + 1]) k++;
                perr(P, "unexpected end of template, expected '%s'", ends[k]);
            }
            break;
        }
        if (at_end_tag(P, ends)) break;
        if (t->type == JT_DATA) {
            jnode *d = node(P, JN_DATA);
            d->s = t->s, d->n = t->n;
            nxt(P);
            kid(P, &k, d);
        } else if (t->type == JT_VAR_BEGIN) {
            nxt(P);
            jnode *o = node(P, JN_OUTPUT);
            o->a = parse_tuple(P);
            expect_type(P, JT_VAR_END, "'}}'");
            kid(P, &k, o);
        } else if (t->type == JT_BLOCK_BEGIN) {
            nxt(P);
            kid(P, &k, parse_stmt(P));
        } else perr(P, "%s", "unexpected token");
    }
    body->v = k.v, body->nv = k.n;
    return body;
}

jnode *jinja_parse_tokens(jinja_arena *a, jtok *toks, int ntok, int max_depth) {
    parser P = {.a = a, .t = toks, .nt = ntok, .max_depth = max_depth};
    return parse_body(&P, NULL);
}
