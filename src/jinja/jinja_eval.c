// Jinja expressions: names and scopes, attribute and item access with jinja2's sandbox rules, operators with
// Python's semantics, calls, filters and tests.
#include <math.h>
#include <stdio.h>

#include "jinja/jinja_int.h"

// --- scopes

jinja_frame *jinja_frame_new(jinja_ctx *c, jinja_frame *parent) {
    jinja_frame *f = jinja_alloc(&c->ar, sizeof *f);
    f->parent = parent;
    return f;
}

void jinja_frame_set(jinja_ctx *c, jinja_frame *f, const char *name, size_t n, jv v) {
    for (uint32_t i = 0; i < f->n; i++)
        if (f->vars[i].n == n && !memcmp(f->vars[i].name, name, n)) {
            f->vars[i].v = v;
            return;
        }
    if (f->n == f->cap) {
        uint32_t cap = f->cap ? f->cap * 2 : 8;
        jinja_var *nv = jinja_alloc(&c->ar, cap * sizeof *nv);
        if (f->n) memcpy(nv, f->vars, f->n * sizeof *nv);
        f->vars = nv, f->cap = cap;
    }
    f->vars[f->n++] = (jinja_var){name, (uint32_t)n, v};
}

jv jinja_lookup(jinja_ctx *c, jinja_frame *f, const char *name, size_t n) {
    (void)c;
    for (; f; f = f->parent)
        for (uint32_t i = f->n; i-- > 0;)
            if (f->vars[i].n == n && !memcmp(f->vars[i].name, name, n)) return f->vars[i].v;
    int fn = jinja_global_fn(name, n);
    if (fn >= 0) return (jv){.t = JV_FUNC, .u.i = fn};
    return (jv){.t = JV_UNDEF, .n = (uint32_t)n, .u.s = name};
}

_Noreturn static void undefined_err(jinja_ctx *c, jv u) {
    if (u.u.s) jinja_err(c, "'%.*s' is undefined", (int)(u.n < 200 ? u.n : 200), u.u.s);
    jinja_err(c, "a value is undefined");
}

// --- attribute and item access

static jv undef_named(jv obj, const char *name, size_t n) {
    (void)obj;
    return (jv){.t = JV_UNDEF, .n = (uint32_t)n, .u.s = name};
}

static jv bound(jinja_ctx *c, jv self, const char *name, size_t n) {
    jinja_method *m = jinja_alloc(&c->ar, sizeof *m);
    m->self = self, m->name = name, m->n = (uint32_t)n;
    return (jv){.t = JV_METHOD, .u.bm = m};
}

static jv loop_attr(jinja_ctx *c, jv obj, const char *name, size_t n) {
    jinja_loop *l = obj.u.lp;
#define IS(w) jinja_eq(name, n, w)
    if (IS("index")) return jinja_int(l->index0 + 1);
    if (IS("index0")) return jinja_int(l->index0);
    if (IS("revindex")) return jinja_int(l->length - l->index0);
    if (IS("revindex0")) return jinja_int(l->length - l->index0 - 1);
    if (IS("first")) return jinja_bool(l->index0 == 0);
    if (IS("last")) return jinja_bool(l->index0 == l->length - 1);
    if (IS("length")) return jinja_int(l->length);
    if (IS("depth")) return jinja_int(1);
    if (IS("depth0")) return jinja_int(0);
    if (IS("previtem")) return l->has_prev ? l->prev : undef_named(obj, name, n);
    if (IS("nextitem")) return l->has_next ? l->next : undef_named(obj, name, n);
    if (IS("cycle")) return bound(c, obj, name, n);
#undef IS
    return undef_named(obj, name, n);
}

jv jinja_getattr(jinja_ctx *c, jv obj, const char *name, size_t n) {
    switch (obj.t) {
    case JV_UNDEF: undefined_err(c, obj);
    case JV_DICT:
        if (jinja_has_method(obj, name, n)) return bound(c, obj, name, n);
        /* fall through */
    case JV_NS: {
        int i = jinja_dict_find(obj.u.d, name, n);
        return i >= 0 ? obj.u.d->v[i] : undef_named(obj, name, n);
    }
    case JV_LOOP: return loop_attr(c, obj, name, n);
    case JV_STR:
    case JV_LIST:
    case JV_TUPLE:
        if (jinja_has_method(obj, name, n)) return bound(c, obj, name, n);
        if (obj.t == JV_LIST &&
            (jinja_eq(name, n, "append") || jinja_eq(name, n, "pop") || jinja_eq(name, n, "extend") ||
             jinja_eq(name, n, "insert") || jinja_eq(name, n, "remove") || jinja_eq(name, n, "clear") ||
             jinja_eq(name, n, "sort") || jinja_eq(name, n, "reverse")))
            jinja_err(c, "access to attribute '%.*s' of 'list' object is unsafe.", (int)n, name);
        return undef_named(obj, name, n);
    default: return undef_named(obj, name, n);
    }
}

static int64_t norm_index(int64_t i, int64_t len) { return i < 0 ? i + len : i; }

jv jinja_getitem(jinja_ctx *c, jv obj, jv key) {
    switch (obj.t) {
    case JV_UNDEF: undefined_err(c, obj);
    case JV_DICT:
    case JV_NS: {
        int i = jinja_dict_findv(obj.u.d, key);
        if (i >= 0) return obj.u.d->v[i];
        if (key.t == JV_STR && obj.t == JV_DICT && jinja_has_method(obj, key.u.s, key.n))
            return bound(c, obj, key.u.s, key.n);
        return key.t == JV_STR ? undef_named(obj, key.u.s, key.n) : JV_MK(JV_UNDEF);
    }
    case JV_LIST:
    case JV_TUPLE:
        if (key.t == JV_INT || key.t == JV_BOOL) {
            int64_t i = norm_index(key.u.i, obj.u.l->n);
            return i >= 0 && i < obj.u.l->n ? obj.u.l->v[i] : JV_MK(JV_UNDEF);
        }
        break;
    case JV_STR:
        if (key.t == JV_INT || key.t == JV_BOOL) {
            int64_t len = (int64_t)jinja_u8_len(obj.u.s, obj.n), i = norm_index(key.u.i, len);
            if (i < 0 || i >= len) return JV_MK(JV_UNDEF);
            size_t a = jinja_u8_off(obj.u.s, obj.n, (size_t)i), b = jinja_u8_off(obj.u.s, obj.n, (size_t)i + 1);
            return jinja_str(obj.u.s + a, b - a);
        }
        break;
    default: break;
    }
    if (key.t == JV_STR) return jinja_getattr(c, obj, key.u.s, key.n);
    return JV_MK(JV_UNDEF);
}

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
    if (obj.t == JV_UNDEF) undefined_err(c, obj);
    if (!is_str && obj.t != JV_LIST && obj.t != JV_TUPLE) jinja_err(c, "'%s' object is not subscriptable", jinja_type_name(obj));
    int64_t len = is_str ? (int64_t)jinja_u8_len(obj.u.s, obj.n) : obj.u.l->n;
    int64_t lo = slice_bound(c, a, step > 0 ? 0 : len - 1, len, step);
    int64_t hi = slice_bound(c, b, step > 0 ? len : -1, len, step);
    if (is_str && step == 1) {
        if (hi <= lo) return jinja_str("", 0);
        size_t x = jinja_u8_off(obj.u.s, obj.n, (size_t)lo), y = jinja_u8_off(obj.u.s, obj.n, (size_t)hi);
        return jinja_str(obj.u.s + x, y - x);
    }
    jinja_list *src = is_str ? jinja_iter_list(c, obj) : obj.u.l;
    jinja_list *l = jinja_list_new(c, 0);
    for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) jinja_list_push(c, l, src->v[i]);
    if (!is_str) return (jv){.t = obj.t, .u.l = l};
    jinja_buf out = {0};
    for (uint32_t i = 0; i < l->n; i++) jinja_buf_add(c, &out, l->v[i].u.s, l->v[i].n);
    return jinja_buf_take(&out);
}

// --- operators

static int is_num(jv v) { return v.t == JV_INT || v.t == JV_BOOL || v.t == JV_FLOAT; }
static double num(jv v) { return v.t == JV_FLOAT ? v.u.f : (double)v.u.i; }

_Noreturn static void type_err(jinja_ctx *c, const char *op, jv a, jv b) {
    if (a.t == JV_UNDEF) undefined_err(c, a);
    if (b.t == JV_UNDEF) undefined_err(c, b);
    jinja_err(c, "unsupported operand type(s) for %s: '%s' and '%s'", op, jinja_type_name(a), jinja_type_name(b));
}

static jv repeat(jinja_ctx *c, jv seq, int64_t k) {
    if (k < 0) k = 0;
    if (seq.t == JV_STR) {
        if (seq.n && (uint64_t)k > c->max_output / seq.n) jinja_fail(&c->fault, TC_ERR_INVALID, "string too long");
        jinja_buf b = {0};
        for (int64_t i = 0; i < k; i++) jinja_buf_add(c, &b, seq.u.s, seq.n);
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
        jinja_buf_add(c, &o, a.u.s, a.n);
        jinja_buf_add(c, &o, b.u.s, b.n);
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
        if (a.t == JV_UNDEF) undefined_err(c, a);
        if (b.t == JV_UNDEF) undefined_err(c, b);
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
    case JV_MACRO: return jinja_call_macro(c, fn.u.m, npos, pos, nkw, kwnames, kwvals);
    case JV_FUNC: return jinja_global_call(c, (int)fn.u.i, npos, pos, nkw, kwnames, kwvals);
    case JV_METHOD: return jinja_method_call(c, fn.u.bm, npos, pos, nkw, kwnames, kwvals);
    case JV_UNDEF: undefined_err(c, fn);
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
        return jinja_getitem(c, obj, jinja_eval(c, f, n->b));
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
