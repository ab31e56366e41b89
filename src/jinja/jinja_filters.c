// Jinja filters with jinja2's semantics (and transformers' tojson). Arguments come positional and by keyword;
// arg() finds one by position or name.
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "jinja/jinja_int.h"

typedef struct fargs {
    int npos, nkw;
    const jv *pos, *kwn, *kwv;
} fargs;

// Argument i (0-based, after the filtered value) or the keyword name; def when absent.
static jv arg(const fargs *a, int i, const char *name, jv def) {
    for (int k = 0; k < a->nkw; k++)
        if (jinja_eq(a->kwn[k].u.s, a->kwn[k].n, name)) return a->kwv[k];
    return i >= 0 && i < a->npos ? a->pos[i] : def;
}

static jv need_str(jinja_ctx *c, jv v) { return jinja_to_str(c, v); }

// --- sorting (stable merge sort; keys compared case-insensitively unless case_sensitive)

typedef struct sortctx {
    jinja_ctx *c;
    int case_sensitive;
} sortctx;

static jv fold(jinja_ctx *c, jv v, int cs) { return !cs && v.t == JV_STR ? jinja_case(c, v, 'l') : v; }

static void merge_sort(sortctx *s, jv *keys, jv *vals, jv *tk, jv *tv, uint32_t n) {
    if (n < 2) return;
    uint32_t h = n / 2;
    merge_sort(s, keys, vals, tk, tv, h);
    merge_sort(s, keys + h, vals + h, tk, tv, n - h);
    uint32_t i = 0, j = h, k = 0;
    while (i < h || j < n) {
        int take_left = j >= n || (i < h && jinja_compare(s->c, fold(s->c, keys[i], s->case_sensitive),
                                                          fold(s->c, keys[j], s->case_sensitive)) <= 0);
        uint32_t from = take_left ? i++ : j++;
        tk[k] = keys[from], tv[k++] = vals[from];
    }
    memcpy(keys, tk, n * sizeof *keys);
    memcpy(vals, tv, n * sizeof *vals);
}

static jinja_list *sorted(jinja_ctx *c, jinja_list *keys, jinja_list *vals, int cs, int reverse) {
    uint32_t n = keys->n;
    jv *k = jinja_alloc(&c->ar, (n + 1) * sizeof(jv) * 4);
    jv *v = k + n, *tk = v + n, *tv = tk + n;
    memcpy(k, keys->v, n * sizeof(jv));
    memcpy(v, vals->v, n * sizeof(jv));
    sortctx s = {c, cs};
    merge_sort(&s, k, v, tk, tv, n);
    jinja_list *out = jinja_list_new(c, n);
    for (uint32_t i = 0; i < n; i++) jinja_list_push(c, out, v[reverse ? n - 1 - i : i]);
    return out;
}

static jv attr_path(jinja_ctx *c, jv v, jv attr) { // "a.b" or an integer index
    if (attr.t != JV_STR) return jinja_getitem(c, v, attr);
    size_t i = 0;
    while (i <= attr.n) {
        size_t j = i;
        while (j < attr.n && attr.u.s[j] != '.') j++;
        const char *p = attr.u.s + i;
        size_t len = j - i;
        int digits = len > 0;
        for (size_t k = 0; k < len; k++) digits &= isdigit((unsigned char)p[k]) != 0;
        v = digits ? jinja_getitem(c, v, jinja_int(strtoll(p, NULL, 10))) : jinja_getitem(c, v, jinja_str(p, len));
        i = j + 1;
    }
    return v;
}

// --- the filters

static jv f_tojson(jinja_ctx *c, jv in, const fargs *a) {
    jv ascii = arg(a, 0, "ensure_ascii", jinja_bool(0)), ind = arg(a, 1, "indent", JV_MK(JV_NONE));
    jv seps = arg(a, 2, "separators", JV_MK(JV_NONE)), sk = arg(a, 3, "sort_keys", jinja_bool(0));
    int indent = ind.t == JV_INT ? (int)(ind.u.i < 0 ? 0 : ind.u.i > 64 ? 64 : ind.u.i) : -1;
    if (ind.t == JV_STR) jinja_err(c, "tojson: a string indent is not supported");
    char isep[64] = ", ", ksep[64] = ": ";
    if (indent >= 0) strcpy(isep, ",");
    if (seps.t == JV_LIST || seps.t == JV_TUPLE) {
        if (seps.u.l->n != 2 || seps.u.l->v[0].t != JV_STR || seps.u.l->v[1].t != JV_STR) jinja_err(c, "tojson: bad separators");
        snprintf(isep, sizeof isep, "%.*s", (int)seps.u.l->v[0].n, seps.u.l->v[0].u.s);
        snprintf(ksep, sizeof ksep, "%.*s", (int)seps.u.l->v[1].n, seps.u.l->v[1].u.s);
    }
    jinja_buf b = {0};
    c->json_ascii = jinja_truthy(ascii);
    jinja_tojson(c, &b, in, indent, isep, ksep, jinja_truthy(sk), 0);
    c->json_ascii = 0;
    return jinja_buf_take(&b);
}

static jv f_indent(jinja_ctx *c, jv in, const fargs *a) {
    jv w = arg(a, 0, "width", jinja_int(4)), first = arg(a, 1, "first", jinja_bool(0));
    int blank = jinja_truthy(arg(a, 2, "blank", jinja_bool(0)));
    jv ind = w;
    if (w.t != JV_STR) {
        int64_t k = w.t == JV_INT ? w.u.i : 4;
        if (k < 0) k = 0;
        if (k > 4096) jinja_err(c, "indent too wide");
        char *sp = jinja_alloc(&c->ar, (size_t)k + 1);
        memset(sp, ' ', (size_t)k);
        ind = jinja_str(sp, (size_t)k);
    }
    jv s = need_str(c, in);
    jinja_buf b = {0};
    if (jinja_truthy(first)) jinja_buf_add(c, &b, ind.u.s, ind.n);
    // the lines of (s + "\n").splitlines(), i.e. s split at each line break
    for (size_t i = 0, line = 0;; line++) {
        size_t j = i;
        while (j < s.n && s.u.s[j] != '\n' && s.u.s[j] != '\r') j++;
        if (line > 0) {
            jinja_buf_add(c, &b, "\n", 1);
            if (j > i || blank) jinja_buf_add(c, &b, ind.u.s, ind.n);
        }
        jinja_buf_add(c, &b, s.u.s + i, j - i);
        if (j >= s.n) break;
        if (s.u.s[j] == '\r' && j + 1 < s.n && s.u.s[j + 1] == '\n') j++;
        i = j + 1;
    }
    return jinja_buf_take(&b);
}

static jv f_join(jinja_ctx *c, jv in, const fargs *a) {
    jv sep = arg(a, 0, "d", jinja_str("", 0)), attr = arg(a, 1, "attribute", JV_MK(JV_NONE));
    jinja_list *l = jinja_iter_list(c, in);
    jinja_buf b = {0};
    for (uint32_t i = 0; i < l->n; i++) {
        if (i) jinja_buf_str(c, &b, sep);
        jinja_buf_str(c, &b, attr.t == JV_NONE ? l->v[i] : attr_path(c, l->v[i], attr));
    }
    return jinja_buf_take(&b);
}

// map / select / reject / selectattr / rejectattr
static jv f_map_select(jinja_ctx *c, const char *name, jv in, const fargs *a) {
    jinja_list *l = jinja_truthy(in) ? jinja_iter_list(c, in) : jinja_list_new(c, 0), *out = jinja_list_new(c, 0);
    int is_map = name[0] == 'm', by_attr = strstr(name, "attr") != NULL, reject = name[0] == 'r';
    jv attr = arg(a, -1, "attribute", JV_MK(JV_UNDEF));
    if (is_map && attr.t != JV_UNDEF) {
        jv def = arg(a, -1, "default", JV_MK(JV_UNDEF));
        for (uint32_t i = 0; i < l->n; i++) {
            jv v = attr_path(c, l->v[i], attr);
            jinja_list_push(c, out, v.t == JV_UNDEF && def.t != JV_UNDEF ? def : v);
        }
        return (jv){.t = JV_GEN, .u.l = out};
    }
    int first = by_attr ? 1 : 0; // index of the filter/test name among the positional arguments
    if (by_attr && a->npos < 1) jinja_err(c, "%s needs an attribute", name);
    if (is_map && a->npos < 1) jinja_err(c, "map needs a filter name or attribute=");
    for (uint32_t i = 0; i < l->n; i++) {
        jv item = l->v[i], subject = by_attr ? attr_path(c, item, a->pos[0]) : item;
        if (is_map) {
            jv fname = a->pos[0];
            if (fname.t != JV_STR) jinja_err(c, "map: filter name must be a string");
            jinja_list_push(c, out, jinja_filter(c, fname.u.s, fname.n, subject, a->npos - 1, a->pos + 1, a->nkw, a->kwn, a->kwv));
            continue;
        }
        int ok;
        if (a->npos > first) {
            jv tname = a->pos[first];
            if (tname.t != JV_STR) jinja_err(c, "%s: test name must be a string", name);
            ok = jinja_test(c, tname.u.s, tname.n, subject, a->npos - first - 1, a->pos + first + 1);
        } else ok = jinja_truthy(subject);
        if (ok != reject) jinja_list_push(c, out, item);
    }
    return (jv){.t = JV_GEN, .u.l = out};
}

static jv f_dictsort(jinja_ctx *c, jv in, const fargs *a) {
    if (in.t != JV_DICT) jinja_err(c, "dictsort: expected a mapping");
    int cs = jinja_truthy(arg(a, 0, "case_sensitive", jinja_bool(0)));
    jv by = arg(a, 1, "by", jinja_cstr("key"));
    int rev = jinja_truthy(arg(a, 2, "reverse", jinja_bool(0)));
    int by_value = by.t == JV_STR && jinja_eq(by.u.s, by.n, "value");
    jinja_list *keys = jinja_list_new(c, in.u.d->n), *pairs = jinja_list_new(c, in.u.d->n);
    for (uint32_t i = 0; i < in.u.d->n; i++) {
        jinja_list *p = jinja_list_new(c, 2);
        jinja_list_push(c, p, in.u.d->k[i]);
        jinja_list_push(c, p, in.u.d->v[i]);
        jinja_list_push(c, pairs, (jv){.t = JV_TUPLE, .u.l = p});
        jinja_list_push(c, keys, by_value ? in.u.d->v[i] : in.u.d->k[i]);
    }
    return (jv){.t = JV_LIST, .u.l = sorted(c, keys, pairs, cs, rev)};
}

static jv f_sort(jinja_ctx *c, jv in, const fargs *a) {
    int rev = jinja_truthy(arg(a, 0, "reverse", jinja_bool(0)));
    int cs = jinja_truthy(arg(a, 1, "case_sensitive", jinja_bool(0)));
    jv attr = arg(a, 2, "attribute", JV_MK(JV_NONE));
    jinja_list *l = jinja_iter_list(c, in), *keys = jinja_list_new(c, l->n);
    for (uint32_t i = 0; i < l->n; i++) jinja_list_push(c, keys, attr.t == JV_NONE ? l->v[i] : attr_path(c, l->v[i], attr));
    return (jv){.t = JV_LIST, .u.l = sorted(c, keys, l, cs, rev)};
}

static jv f_unique(jinja_ctx *c, jv in, const fargs *a) {
    int cs = jinja_truthy(arg(a, 0, "case_sensitive", jinja_bool(0)));
    jv attr = arg(a, 1, "attribute", JV_MK(JV_NONE));
    jinja_list *l = jinja_iter_list(c, in), *out = jinja_list_new(c, 0), *seen = jinja_list_new(c, 0);
    for (uint32_t i = 0; i < l->n; i++) {
        jv k = fold(c, attr.t == JV_NONE ? l->v[i] : attr_path(c, l->v[i], attr), cs);
        int dup = 0;
        for (uint32_t j = 0; j < seen->n && !dup; j++) dup = jinja_equal(seen->v[j], k);
        if (dup) continue;
        jinja_list_push(c, seen, k);
        jinja_list_push(c, out, l->v[i]);
    }
    return (jv){.t = JV_LIST, .u.l = out};
}

static jv to_int(jinja_ctx *c, jv in, jv def) {
    if (in.t == JV_INT || in.t == JV_BOOL) return jinja_int(in.u.i);
    if (in.t == JV_FLOAT) return isfinite(in.u.f) && fabs(in.u.f) < 9.2e18 ? jinja_int((int64_t)in.u.f) : def;
    if (in.t != JV_STR) return def;
    char buf[64];
    jv s = jinja_strip(in, JV_MK(JV_NONE), 1, 1);
    if (s.n == 0 || s.n >= sizeof buf) return def;
    memcpy(buf, s.u.s, s.n), buf[s.n] = 0;
    char *end;
    long long v = strtoll(buf, &end, 10);
    if (!*end) return jinja_int(v);
    double d = strtod(buf, &end);
    (void)c;
    return !*end && isfinite(d) && fabs(d) < 9.2e18 ? jinja_int((int64_t)d) : def;
}

static jv to_float(jv in, jv def) {
    if (in.t == JV_INT || in.t == JV_BOOL) return jinja_float((double)in.u.i);
    if (in.t == JV_FLOAT) return in;
    if (in.t != JV_STR || in.n >= 63 || in.n == 0) return def;
    char buf[64], *end;
    memcpy(buf, in.u.s, in.n), buf[in.n] = 0;
    double d = strtod(buf, &end);
    return *end ? def : jinja_float(d);
}

static jv f_items(jinja_ctx *c, jv in) {
    if (in.t == JV_UNDEF) return (jv){.t = JV_LIST, .u.l = jinja_list_new(c, 0)};
    if (in.t != JV_DICT) jinja_err(c, "items: expected a mapping");
    jinja_list *out = jinja_list_new(c, in.u.d->n);
    for (uint32_t i = 0; i < in.u.d->n; i++) {
        jinja_list *p = jinja_list_new(c, 2);
        jinja_list_push(c, p, in.u.d->k[i]);
        jinja_list_push(c, p, in.u.d->v[i]);
        jinja_list_push(c, out, (jv){.t = JV_TUPLE, .u.l = p});
    }
    return (jv){.t = JV_LIST, .u.l = out};
}

static jv f_minmax(jinja_ctx *c, jv in, const fargs *a, int want_max) {
    int cs = jinja_truthy(arg(a, 0, "case_sensitive", jinja_bool(0)));
    jv attr = arg(a, 1, "attribute", JV_MK(JV_NONE));
    jinja_list *l = jinja_iter_list(c, in);
    if (!l->n) return JV_MK(JV_UNDEF);
    jv best = l->v[0];
    for (uint32_t i = 1; i < l->n; i++) {
        jv x = attr.t == JV_NONE ? l->v[i] : attr_path(c, l->v[i], attr);
        jv y = attr.t == JV_NONE ? best : attr_path(c, best, attr);
        int r = jinja_compare(c, fold(c, x, cs), fold(c, y, cs));
        if (want_max ? r > 0 : r < 0) best = l->v[i];
    }
    return best;
}

static jv filter_impl(jinja_ctx *c, const char *name, size_t nn, jv in, int npos, const jv *pos, int nkw,
                      const jv *kwnames, const jv *kwvals);

// A filter's text is untrusted when any of its input was, except where it kept exact ranges itself (tojson,
// join, and filters that return an input as it is). A filter that cuts a string (trim, truncate …) makes a
// new value without ranges, which is then untrusted as a whole.
jv jinja_filter(jinja_ctx *c, const char *name, size_t nn, jv in, int npos, const jv *pos, int nkw,
                const jv *kwnames, const jv *kwvals) {
    jv r = filter_impl(c, name, nn, in, npos, pos, nkw, kwnames, kwvals);
    if (r.t == JV_STR && r.pv) return r;
    return jinja_taint(c, r, jinja_args_user(in, npos, pos, nkw, kwvals));
}

static jv filter_impl(jinja_ctx *c, const char *name, size_t nn, jv in, int npos, const jv *pos, int nkw,
                      const jv *kwnames, const jv *kwvals) {
    fargs A = {npos, nkw, pos, kwnames, kwvals}, *a = &A;
#define IS(w) jinja_eq(name, nn, w)
    if (IS("tojson")) return f_tojson(c, in, a);
    if (IS("safe")) {
        jv s = need_str(c, in);
        s.safe = 1;
        return s;
    }
    if (IS("string")) return need_str(c, in);
    if (IS("trim")) return jinja_strip(need_str(c, in), arg(a, 0, "chars", JV_MK(JV_NONE)), 1, 1);
    if (IS("length") || IS("count")) {
        if (in.t == JV_STR) return jinja_int((int64_t)jinja_u8_len(in.u.s, in.n));
        if (in.t == JV_LIST || in.t == JV_TUPLE) return jinja_int(in.u.l->n);
        if (in.t == JV_DICT || in.t == JV_NS) return jinja_int(in.u.d->n);
        if (in.t == JV_UNDEF) return jinja_int(0);
        jinja_err(c, "object of type '%s' has no len()", jinja_type_name(in));
    }
    if (IS("first") || IS("last")) {
        if (in.t == JV_GEN && IS("last")) jinja_err(c, "'generator' object is not reversible");
        jinja_list *l = jinja_iter_list(c, in);
        return l->n ? l->v[IS("first") ? 0 : l->n - 1] : JV_MK(JV_UNDEF);
    }
    if (IS("join")) return f_join(c, in, a);
    if (IS("map") || IS("select") || IS("reject") || IS("selectattr") || IS("rejectattr")) {
        char nm[16];
        snprintf(nm, sizeof nm, "%.*s", (int)nn, name);
        return f_map_select(c, nm, in, a);
    }
    if (IS("default") || IS("d")) {
        int boolean = jinja_truthy(arg(a, 1, "boolean", jinja_bool(0)));
        if (in.t == JV_UNDEF || (boolean && !jinja_truthy(in))) return arg(a, 0, "default_value", jinja_str("", 0));
        return in;
    }
    if (IS("list")) return (jv){.t = JV_LIST, .u.l = jinja_iter_list(c, in)};
    if (IS("int")) return to_int(c, in, arg(a, 0, "default", jinja_int(0)));
    if (IS("float")) return to_float(in, arg(a, 0, "default", jinja_float(0)));
    if (IS("upper")) return jinja_case(c, need_str(c, in), 'u');
    if (IS("lower")) return jinja_case(c, need_str(c, in), 'l');
    if (IS("capitalize")) return jinja_case(c, need_str(c, in), 'c');
    if (IS("title")) return jinja_case(c, need_str(c, in), 't');
    if (IS("indent")) return f_indent(c, in, a);
    if (IS("replace")) {
        jv cnt = arg(a, 2, "count", JV_MK(JV_NONE));
        return jinja_replace(c, need_str(c, in), arg(a, 0, "old", JV_MK(JV_UNDEF)), arg(a, 1, "new", JV_MK(JV_UNDEF)),
                             cnt.t == JV_INT ? cnt.u.i : -1);
    }
    if (IS("unique")) return f_unique(c, in, a);
    if (IS("dictsort")) return f_dictsort(c, in, a);
    if (IS("items")) return f_items(c, in);
    if (IS("sort")) return f_sort(c, in, a);
    if (IS("reverse")) {
        if (in.t == JV_STR) {
            jinja_list *l = jinja_iter_list(c, in);
            jinja_buf b = {0};
            for (uint32_t i = l->n; i-- > 0;) jinja_buf_add(c, &b, l->v[i].u.s, l->v[i].n);
            return jinja_buf_take(&b);
        }
        jinja_list *l = jinja_iter_list(c, in), *out = jinja_list_new(c, l->n);
        for (uint32_t i = l->n; i-- > 0;) jinja_list_push(c, out, l->v[i]);
        return (jv){.t = JV_LIST, .u.l = out};
    }
    if (IS("escape") || IS("e")) return jinja_html_escape(c, need_str(c, in));
    if (IS("abs")) {
        if (in.t == JV_FLOAT) return jinja_float(fabs(in.u.f));
        if (in.t == JV_INT || in.t == JV_BOOL) return jinja_int(in.u.i < 0 && in.u.i != INT64_MIN ? -in.u.i : in.u.i);
        jinja_err(c, "bad operand type for abs(): '%s'", jinja_type_name(in));
    }
    if (IS("round")) {
        jv prec = arg(a, 0, "precision", jinja_int(0));
        double x = in.t == JV_FLOAT ? in.u.f : (in.t == JV_INT || in.t == JV_BOOL) ? (double)in.u.i : NAN;
        if (isnan(x) || prec.t != JV_INT || prec.u.i > 15 || prec.u.i < 0) jinja_err(c, "round: bad arguments");
        double m = pow(10, (double)prec.u.i);
        return jinja_float(round(x * m) / m);
    }
    if (IS("sum")) {
        jv attr = arg(a, 0, "attribute", JV_MK(JV_NONE)), acc = arg(a, 1, "start", jinja_int(0));
        jinja_list *l = jinja_iter_list(c, in);
        for (uint32_t i = 0; i < l->n; i++) {
            jv x = attr.t == JV_NONE ? l->v[i] : attr_path(c, l->v[i], attr);
            if ((acc.t != JV_INT && acc.t != JV_FLOAT) || (x.t != JV_INT && x.t != JV_FLOAT && x.t != JV_BOOL))
                jinja_err(c, "sum: values must be numbers");
            acc = acc.t == JV_INT && x.t != JV_FLOAT ? jinja_int(acc.u.i + x.u.i)
                : jinja_float((acc.t == JV_FLOAT ? acc.u.f : (double)acc.u.i) + (x.t == JV_FLOAT ? x.u.f : (double)x.u.i));
        }
        return acc;
    }
    if (IS("min") || IS("max")) return f_minmax(c, in, a, IS("max"));
    if (IS("format")) return jinja_printf(c, need_str(c, in), npos, pos);
    if (IS("wordcount")) {
        jv s = need_str(c, in);
        int64_t k = 0;
        for (size_t i = 0; i < s.n; i++)
            k += !jinja_is_ws((unsigned char)s.u.s[i]) && (i == 0 || jinja_is_ws((unsigned char)s.u.s[i - 1]));
        return jinja_int(k);
    }
#undef IS
    jinja_err(c, "no filter named '%.*s'", (int)(nn < 100 ? nn : 100), name);
}
