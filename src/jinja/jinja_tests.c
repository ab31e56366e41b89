// jinja2's tests: `x is defined`, `x is string`, `x is divisibleby 3` …
#include "jinja/jinja_int.h"

static const char *const test_names[] = {
    "defined", "undefined", "none", "string", "mapping", "iterable", "sequence", "number", "integer", "float",
    "boolean", "true", "false", "callable", "odd", "even", "divisibleby", "eq", "equalto", "==", "ne", "!=",
    "lt", "<", "lessthan", "gt", ">", "greaterthan", "le", "<=", "ge", ">=", "in", "sameas", "lower", "upper",
    "escaped", NULL};

int jinja_test_known(const char *name, size_t n) {
    for (const char *const *t = test_names; *t; t++)
        if (jinja_eq(name, n, *t)) return 1;
    return 0;
}

static int cmp_test(jinja_ctx *c, const char *name, size_t n, jv in, jv other) {
#define IS(w) jinja_eq(name, n, w)
    if (IS("eq") || IS("equalto") || IS("==")) return jinja_equal(in, other);
    if (IS("ne") || IS("!=")) return !jinja_equal(in, other);
    int r = jinja_compare(c, in, other);
    if (IS("lt") || IS("<") || IS("lessthan")) return r < 0;
    if (IS("gt") || IS(">") || IS("greaterthan")) return r > 0;
    if (IS("le") || IS("<=")) return r <= 0;
    return r >= 0;
#undef IS
}

int jinja_test(jinja_ctx *c, const char *name, size_t n, jv in, int nargs, const jv *args) {
    jv a0 = nargs > 0 ? args[0] : JV_MK(JV_UNDEF);
#define IS(w) jinja_eq(name, n, w)
    if (IS("defined")) return in.t != JV_UNDEF;
    if (IS("undefined")) return in.t == JV_UNDEF;
    if (IS("none")) return in.t == JV_NONE;
    if (IS("string")) return in.t == JV_STR;
    if (IS("mapping")) return in.t == JV_DICT;
    if (IS("iterable")) return jinja_is_iterable(in);
    if (IS("sequence")) return in.t == JV_STR || in.t == JV_LIST || in.t == JV_TUPLE || in.t == JV_DICT;
    if (IS("number")) return in.t == JV_INT || in.t == JV_FLOAT || in.t == JV_BOOL;
    if (IS("integer")) return in.t == JV_INT;
    if (IS("float")) return in.t == JV_FLOAT;
    if (IS("boolean")) return in.t == JV_BOOL;
    if (IS("true")) return in.t == JV_BOOL && in.u.i;
    if (IS("false")) return in.t == JV_BOOL && !in.u.i;
    if (IS("callable")) return in.t == JV_MACRO || in.t == JV_FUNC || in.t == JV_METHOD;
    if (IS("escaped")) return 0;
    if (IS("lower") || IS("upper")) {
        if (in.t != JV_STR) jinja_err(c, "test '%.*s' needs a string", (int)n, name);
        for (size_t i = 0; i < in.n; i++) {
            char ch = in.u.s[i];
            if (IS("lower") ? (ch >= 'A' && ch <= 'Z') : (ch >= 'a' && ch <= 'z')) return 0;
        }
        return 1;
    }
    if (IS("odd") || IS("even") || IS("divisibleby")) {
        if (in.t != JV_INT && in.t != JV_BOOL) jinja_err(c, "test '%.*s' needs an integer", (int)n, name);
        if (IS("odd")) return (in.u.i & 1) != 0;
        if (IS("even")) return (in.u.i & 1) == 0;
        if (a0.t != JV_INT || a0.u.i == 0) jinja_err(c, "divisibleby needs a non-zero integer");
        return a0.u.i == -1 || in.u.i % a0.u.i == 0;
    }
    if (nargs < 1) jinja_err(c, "test '%.*s' needs an argument", (int)n, name);
    if (IS("in")) {
        jv seq = a0;
        if (seq.t == JV_STR) return in.t == JV_STR && (in.n == 0 || memmem(seq.u.s, seq.n, in.u.s, in.n));
        if (seq.t == JV_DICT) return jinja_dict_findv(seq.u.d, in) >= 0;
        jinja_list *l = jinja_iter_list(c, seq);
        for (uint32_t i = 0; i < l->n; i++)
            if (jinja_equal(in, l->v[i])) return 1;
        return 0;
    }
    if (IS("sameas")) {
        if (in.t != a0.t) return 0;
        if (in.t == JV_NONE || in.t == JV_UNDEF) return 1;
        if (in.t == JV_BOOL || in.t == JV_INT) return in.u.i == a0.u.i;
        return in.u.s == a0.u.s && in.n == a0.n;
    }
#undef IS
    if (jinja_test_known(name, n)) return cmp_test(c, name, n, in, a0);
    jinja_err(c, "no test named '%.*s'", (int)(n < 100 ? n : 100), name);
}
