// Jinja expressions: slices, operators with Python's semantics, calls, filters and tests. A call to a macro
// goes up to the statement layer through c->hooks.
#include <math.h>
#include <stdio.h>

#include "jinja/jinja_int.h"

// --- slices

static int64_t slice_bound(jinja_ctx *c, jv v, int64_t def, int64_t len, int64_t step) {
    if (v.t == JV_NONE || v.t == JV_UNDEF) return def;
    if (v.t != JV_INT && v.t != JV_BOOL) jinja_err(c, "slice indices must be integers or None");
    int64_t i = v.u.i;
    if (i < 0) {
        i += len;
        if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= len) i = step < 0 ? len - 1 : len;
    return i;
}

static jv eval_slice(jinja_ctx *c, jinja_frame *f, const jnode *n) {
    jv obj = jinja_eval(c, f, n->a);
    jv a = n->b ? jinja_eval(c, f, n->b) : JV_MK(JV_NONE), b = n->c ? jinja_eval(c, f, n->c) : JV_MK(JV_NONE);
    jv s = n->d ? jinja_eval(c, f, n->d) : JV_MK(JV_NONE);
    int64_t step = s.t == JV_NONE ? 1 : s.t == JV_INT ? s.u.i : 0;
    if (step == 0) jinja_err(c, "slice step must be a non-zero integer");
    int is_str = obj.t == JV_STR;
    if (obj.t == JV_UNDEF) jinja_undefined_err(c, obj);
    if (!is_str && obj.t != JV_LIST && obj.t != JV_TUPLE) jinja_err(c, "'%s' object is not subscriptable", jinja_type_name(obj));
    int64_t len = is_str ? (int64_t)jinja_u8_len(obj.u.s, obj.n) : obj.u.l->n;
    int64_t lo = slice_bound(c, a, step > 0 ? 0 : len - 1, len, step);
    int64_t hi = slice_bound(c, b, step > 0 ? len : -1, len, step);
    if (is_str && step == 1) {
        if (hi <= lo) return jinja_str("", 0);
        size_t x = jinja_u8_off(obj.u.s, obj.n, (size_t)lo), y = jinja_u8_off(obj.u.s, obj.n, (size_t)hi);
        return jinja_taint(c, jinja_str(obj.u.s + x, y - x), jinja_has_user(obj));
    }
    jinja_list *src = is_str ? jinja_iter_list(c, obj) : obj.u.l;
    jinja_list *l = jinja_list_new(c, 0);
    for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) jinja_list_push(c, l, src->v[i]);
    if (!is_str) return (jv){.t = obj.t, .u.l = l};
    jinja_buf out = {0};
    for (uint32_t i = 0; i < l->n; i++) jinja_buf_add(c, &out, l->v[i].u.s, l->v[i].n);
    return jinja_taint(c, jinja_buf_take(&out), jinja_has_user(obj));
}

// --- operators

static int is_num(jv v) { return v.t == JV_INT || v.t == JV_BOOL || v.t == JV_FLOAT; }
static double num(jv v) { return v.t == JV_FLOAT ? v.u.f : (double)v.u.i; }

_Noreturn static void type_err(jinja_ctx *c, const char *op, jv a, jv b) {
    if (a.t == JV_UNDEF) jinja_undefined_err(c, a);
    if (b.t == JV_UNDEF) jinja_undefined_err(c, b);
    jinja_err(c, "unsupported operand type(s) for %s: '%s' and '%s'", op, jinja_type_name(a), jinja_type_name(b));
}

static jv repeat(jinja_ctx *c, jv seq, int64_t k) {
    if (k < 0) k = 0;
    if (seq.t == JV_STR) {
        if (seq.n && (uint64_t)k > c->max_output / seq.n) jinja_fail(&c->fault, TC_ERR_INVALID, "string too long");
        jinja_buf b = {0};
        for (int64_t i = 0; i < k; i++) jinja_buf_addv(c, &b, seq);
        return jinja_buf_take(&b);
    }
    if (seq.u.l->n && (uint64_t)k > c->max_steps / seq.u.l->n) jinja_fail(&c->fault, TC_ERR_INVALID, "list too long");
    jinja_list *l = jinja_list_new(c, 0);
    for (int64_t i = 0; i < k; i++)
        for (uint32_t j = 0; j < seq.u.l->n; j++) jinja_list_push(c, l, seq.u.l->v[j]);
    return (jv){.t = seq.t, .u.l = l};
}

static jv arith(jinja_ctx *c, int op, jv a, jv b) {
    if (op == '+' && a.t == JV_STR && b.t == JV_STR) { // Markup + str escapes the plain side, as jinja2's
        if (a.safe != b.safe) {
            if (a.safe) b = jinja_html_escape(c, b);
            else a = jinja_html_escape(c, a);
        }
        jinja_buf o = {0};
        jinja_buf_addv(c, &o, a);
        jinja_buf_addv(c, &o, b);
        jv r = jinja_buf_take(&o);
        r.safe = a.safe | b.safe;
        return r;
    }
    if (op == '%' && a.t == JV_STR) {
        if (b.t == JV_TUPLE) return jinja_printf(c, a, (int)b.u.l->n, b.u.l->v);
        return jinja_printf(c, a, 1, &b);
    }
    if (op == '+' && (a.t == JV_LIST || a.t == JV_TUPLE) && a.t == b.t) {
        jinja_list *l = jinja_list_new(c, a.u.l->n + b.u.l->n);
        for (uint32_t i = 0; i < a.u.l->n; i++) jinja_list_push(c, l, a.u.l->v[i]);
        for (uint32_t i = 0; i < b.u.l->n; i++) jinja_list_push(c, l, b.u.l->v[i]);
        return (jv){.t = a.t, .u.l = l};
    }
    if (op == '*' && (a.t == JV_STR || a.t == JV_LIST || a.t == JV_TUPLE) && (b.t == JV_INT || b.t == JV_BOOL))
        return repeat(c, a, b.u.i);
    if (op == '*' && (b.t == JV_STR || b.t == JV_LIST || b.t == JV_TUPLE) && (a.t == JV_INT || a.t == JV_BOOL))
        return repeat(c, b, a.u.i);
    static const char *const names[] = {"+", "-", "*", "/", "//", "%", "**"};
    const char *name = op == '+' ? names[0] : op == '-' ? names[1] : op == '*' ? names[2] : op == '/' ? names[3]
                     : op == JOP_FLOORDIV ? names[4] : op == '%' ? names[5] : names[6];
    if (!is_num(a) || !is_num(b)) type_err(c, name, a, b);
    int ints = a.t != JV_FLOAT && b.t != JV_FLOAT;
    if ((op == '/' || op == JOP_FLOORDIV || op == '%') && num(b) == 0) jinja_err(c, "division by zero");
    if (ints) {
        int64_t x = a.u.i, y = b.u.i, r;
        switch (op) {
        case '+': if (__builtin_add_overflow(x, y, &r)) break; return jinja_int(r);
        case '-': if (__builtin_sub_overflow(x, y, &r)) break; return jinja_int(r);
        case '*': if (__builtin_mul_overflow(x, y, &r)) break; return jinja_int(r);
        case '/': return jinja_float((double)x / (double)y);
        case JOP_FLOORDIV:
            if (x == INT64_MIN && y == -1) break;
            r = x / y;
            return jinja_int(r - ((x % y != 0) && ((x < 0) != (y < 0))));
        case '%':
            if (y == -1) return jinja_int(0);
            r = x % y;
            return jinja_int(r && ((r < 0) != (y < 0)) ? r + y : r);
        default:
            if (y >= 0) {
                int64_t p = 1;
                for (int64_t i = 0; i < y; i++)
                    if (__builtin_mul_overflow(p, x, &p)) jinja_err(c, "integer too large");
                return jinja_int(p);
            }
            return jinja_float(pow((double)x, (double)y));
        }
        jinja_err(c, "integer overflow");
    }
    double x = num(a), y = num(b);
    switch (op) {
    case '+': return jinja_float(x + y);
    case '-': return jinja_float(x - y);
    case '*': return jinja_float(x * y);
    case '/': return jinja_float(x / y);
    case JOP_FLOORDIV: return jinja_float(floor(x / y));
    case '%': {
        double r = fmod(x, y);
        return jinja_float(r != 0 && ((r < 0) != (y < 0)) ? r + y : r);
    }
    default: return jinja_float(pow(x, y));
    }
}

static int contains(jinja_ctx *c, jv item, jv seq) {
    switch (seq.t) {
    case JV_STR:
        if (item.t != JV_STR) jinja_err(c, "'in <string>' requires string as left operand");
        return item.n == 0 || memmem(seq.u.s, seq.n, item.u.s, item.n) != NULL;
    case JV_LIST:
    case JV_TUPLE:
    case JV_GEN:
        for (uint32_t i = 0; i < seq.u.l->n; i++)
            if (jinja_equal(item, seq.u.l->v[i])) return 1;
        return 0;
    case JV_DICT:
    case JV_NS: return jinja_dict_findv(seq.u.d, item) >= 0;
    case JV_UNDEF: return 0;
    default: jinja_err(c, "argument of type '%s' is not iterable", jinja_type_name(seq));
    }
}

static jv compare(jinja_ctx *c, int op, jv a, jv b) {
    switch (op) {
    case JOP_EQ: return jinja_bool(jinja_equal(a, b));
    case JOP_NE: return jinja_bool(!jinja_equal(a, b));
    case 'i': return jinja_bool(contains(c, a, b));
    case 'I': return jinja_bool(!contains(c, a, b));
    default: {
        if (a.t == JV_UNDEF) jinja_undefined_err(c, a);
        if (b.t == JV_UNDEF) jinja_undefined_err(c, b);
        int r = jinja_compare(c, a, b);
        return jinja_bool(op == '<' ? r < 0 : op == '>' ? r > 0 : op == JOP_LE ? r <= 0 : r >= 0);
    }
    }
}

// --- calls

typedef struct args {
    int npos, nkw;
    jv pos[16], kwn[16], kwv[16];
} args;

static void eval_args(jinja_ctx *c, jinja_frame *f, const jnode *n, args *a) {
    a->npos = a->nkw = 0;
    for (int i = 0; i < n->nv; i++) {
        const jnode *x = n->v[i];
        if (x->kind == JN_KWARG) {
            if (a->nkw == 16) jinja_err(c, "too many keyword arguments");
            a->kwn[a->nkw] = jinja_str(x->s, x->n);
            a->kwv[a->nkw++] = jinja_eval(c, f, x->a);
        } else {
            if (a->npos == 16) jinja_err(c, "too many arguments");
            a->pos[a->npos++] = jinja_eval(c, f, x);
        }
    }
}

jv jinja_call_value(jinja_ctx *c, jv fn, int npos, const jv *pos, int nkw, const jv *kwnames, const jv *kwvals) {
    switch (fn.t) {
    case JV_MACRO: return c->hooks->run_macro(c, fn.u.m, npos, pos, nkw, kwnames, kwvals);
    case JV_FUNC: return jinja_global_call(c, (int)fn.u.i, npos, pos, nkw, kwnames, kwvals);
    case JV_METHOD: return jinja_method_call(c, fn.u.bm, npos, pos, nkw, kwnames, kwvals);
    case JV_UNDEF: jinja_undefined_err(c, fn);
    default: jinja_err(c, "'%s' object is not callable", jinja_type_name(fn));
    }
}

// --- the evaluator

static jv eval_seq(jinja_ctx *c, jinja_frame *f, const jnode *n, int type) {
    jinja_list *l = jinja_list_new(c, (uint32_t)n->nv);
    for (int i = 0; i < n->nv; i++) jinja_list_push(c, l, jinja_eval(c, f, n->v[i]));
    return (jv){.t = (uint32_t)type, .u.l = l};
}

static jv eval_inner(jinja_ctx *c, jinja_frame *f, const jnode *n) {
    args a;
    switch (n->kind) {
    case JN_LIT: return n->lit;
    case JN_NAME: return jinja_lookup(c, f, n->s, n->n);
    case JN_PLACEHOLDER: return jinja_lookup(c, f, "\x01", 1);
    case JN_LIST: return eval_seq(c, f, n, JV_LIST);
    case JN_TUPLE: return eval_seq(c, f, n, JV_TUPLE);
    case JN_DICT: {
        jinja_dict *d = jinja_dict_new(c, (uint32_t)n->nv);
        for (int i = 0; i < n->nv; i++)
            jinja_dict_set(c, d, jinja_eval(c, f, n->v[i]->a), jinja_eval(c, f, n->v[i]->b));
        return (jv){.t = JV_DICT, .u.d = d};
    }
    case JN_ATTR: return jinja_getattr(c, jinja_eval(c, f, n->a), n->s, n->n);
    case JN_ITEM: {
        jv obj = jinja_eval(c, f, n->a);
        jv r = jinja_getitem(c, obj, jinja_eval(c, f, n->b));
        return obj.t == JV_STR ? jinja_taint(c, r, jinja_has_user(obj)) : r; // a character of the string
    }
    case JN_SLICE: return eval_slice(c, f, n);
    case JN_CALL: {
        jv fn = jinja_eval(c, f, n->a);
        eval_args(c, f, n, &a);
        return jinja_call_value(c, fn, a.npos, a.pos, a.nkw, a.kwn, a.kwv);
    }
    case JN_FILTER: {
        jv in = jinja_eval(c, f, n->a);
        eval_args(c, f, n, &a);
        return jinja_filter(c, n->s, n->n, in, a.npos, a.pos, a.nkw, a.kwn, a.kwv);
    }
    case JN_TEST: {
        jv in = jinja_eval(c, f, n->a);
        eval_args(c, f, n, &a);
        int r = jinja_test(c, n->s, n->n, in, a.npos, a.pos);
        return jinja_bool(n->op ? !r : r);
    }
    case JN_UNARY: {
        jv v = jinja_eval(c, f, n->a);
        if (n->op == 'n') return jinja_bool(!jinja_truthy(v));
        if (!is_num(v)) type_err(c, n->op == '-' ? "unary -" : "unary +", v, v);
        if (n->op == '+') return v.t == JV_BOOL ? jinja_int(v.u.i) : v;
        if (v.t == JV_FLOAT) return jinja_float(-v.u.f);
        if (v.u.i == INT64_MIN) jinja_err(c, "integer overflow");
        return jinja_int(-v.u.i);
    }
    case JN_BINARY: {
        jv x = jinja_eval(c, f, n->a), y = jinja_eval(c, f, n->b);
        if (n->op != '~') return arith(c, n->op, x, y);
        jinja_buf o = {0};
        jinja_buf_str(c, &o, x);
        jinja_buf_str(c, &o, y);
        return jinja_buf_take(&o);
    }
    case JN_COMPARE: {
        jv x = jinja_eval(c, f, n->a);
        return compare(c, n->op, x, jinja_eval(c, f, n->b));
    }
    case JN_AND: {
        jv x = jinja_eval(c, f, n->a);
        return jinja_truthy(x) ? jinja_eval(c, f, n->b) : x;
    }
    case JN_OR: {
        jv x = jinja_eval(c, f, n->a);
        return jinja_truthy(x) ? x : jinja_eval(c, f, n->b);
    }
    case JN_COND:
        if (jinja_truthy(jinja_eval(c, f, n->b))) return jinja_eval(c, f, n->a);
        return n->c ? jinja_eval(c, f, n->c) : JV_MK(JV_UNDEF);
    default: jinja_err(c, "internal error: node %d is not an expression", n->kind);
    }
}

jv jinja_eval(jinja_ctx *c, jinja_frame *f, const jnode *n) {
    jinja_step(c);
    if (++c->depth > c->max_depth) jinja_fail(&c->fault, TC_ERR_INVALID, "template recursion too deep");
    jv v = eval_inner(c, f, n);
    c->depth--;
    return v;
}
