// Values of the Jinja interpreter: the arena they live in, Python's truthiness, equality, ordering, str() and
// repr() (templates print lists and dicts the way Python does), and UTF-8 code point counting (len() and slices
// count code points, as Python strings do).
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "jinja/jinja_int.h"

// --- faults and arena

void jinja_fail(jinja_fault *f, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->msg, sizeof f->msg, fmt, ap);
    va_end(ap);
    f->code = code;
    longjmp(f->jb, 1);
}

struct jinja_chunk {
    jinja_chunk *next;
    size_t size;
    _Alignas(16) char data[];
};

void jinja_arena_init(jinja_arena *a, size_t max_bytes, jinja_fault *f) {
    memset(a, 0, sizeof *a);
    a->max_bytes = max_bytes;
    a->fault = f;
}

void *jinja_alloc(jinja_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    if ((size_t)(a->end - a->cur) < n || !a->cur) {
        size_t sz = n > 32768 ? n : 32768;
        if (a->used + sz > a->max_bytes || n > a->max_bytes)
            jinja_fail(a->fault, TC_ERR_INVALID, "template uses more than %zu bytes of memory", a->max_bytes);
        jinja_chunk *ch = malloc(sizeof *ch + sz);
        if (!ch) jinja_fail(a->fault, TC_ERR_NOMEM, "out of memory");
        ch->next = a->head, ch->size = sz;
        a->head = ch;
        a->used += sz;
        a->cur = ch->data, a->end = ch->data + sz;
    }
    void *p = a->cur;
    a->cur += n;
    memset(p, 0, n);
    return p;
}

char *jinja_strndup(jinja_arena *a, const char *s, size_t n) {
    char *d = jinja_alloc(a, n + 1); // zeroed: the NUL is there
    if (n) memcpy(d, s, n);
    return d;
}

void jinja_arena_free(jinja_arena *a) {
    for (jinja_chunk *c = a->head, *nx; c; c = nx) nx = c->next, free(c);
    a->head = NULL;
    a->cur = a->end = NULL;
    a->used = 0;
}

void jinja_err(jinja_ctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->fault.msg, sizeof c->fault.msg, fmt, ap);
    va_end(ap);
    c->fault.code = TC_ERR;
    longjmp(c->fault.jb, 1);
}

void jinja_step(jinja_ctx *c) {
    if (++c->steps > c->max_steps)
        jinja_fail(&c->fault, TC_ERR_INVALID, "template exceeded %llu evaluation steps",
                   (unsigned long long)c->max_steps);
}

// --- constructors

jv jinja_str(const char *s, size_t n) { return (jv){.t = JV_STR, .n = (uint32_t)n, .u.s = s}; }
jv jinja_cstr(const char *s) { return jinja_str(s, strlen(s)); }
jv jinja_int(int64_t i) { return (jv){.t = JV_INT, .u.i = i}; }
jv jinja_float(double f) { return (jv){.t = JV_FLOAT, .u.f = f}; }
jv jinja_bool(int b) { return (jv){.t = JV_BOOL, .u.i = !!b}; }

jinja_list *jinja_list_new(jinja_ctx *c, uint32_t cap) {
    jinja_list *l = jinja_alloc(&c->ar, sizeof *l);
    if (cap) l->v = jinja_alloc(&c->ar, cap * sizeof(jv)), l->cap = cap;
    return l;
}

void jinja_list_push(jinja_ctx *c, jinja_list *l, jv v) {
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? l->cap * 2 : 4;
        jv *nv = jinja_alloc(&c->ar, (size_t)cap * sizeof(jv));
        if (l->n) memcpy(nv, l->v, l->n * sizeof(jv));
        l->v = nv, l->cap = cap;
    }
    l->v[l->n++] = v;
}

jinja_dict *jinja_dict_new(jinja_ctx *c, uint32_t cap) {
    jinja_dict *d = jinja_alloc(&c->ar, sizeof *d);
    if (cap) {
        d->k = jinja_alloc(&c->ar, cap * sizeof(jv));
        d->v = jinja_alloc(&c->ar, cap * sizeof(jv));
        d->cap = cap;
    }
    return d;
}

int jinja_dict_find(const jinja_dict *d, const char *k, size_t n) {
    for (uint32_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].n == n && !memcmp(d->k[i].u.s, k, n)) return (int)i;
    return -1;
}

int jinja_dict_findv(const jinja_dict *d, jv k) {
    if (k.t == JV_STR) return jinja_dict_find(d, k.u.s, k.n);
    for (uint32_t i = 0; i < d->n; i++)
        if (jinja_equal(d->k[i], k)) return (int)i;
    return -1;
}

void jinja_dict_set(jinja_ctx *c, jinja_dict *d, jv k, jv v) {
    int i = jinja_dict_findv(d, k);
    if (i >= 0) {
        d->v[i] = v;
        return;
    }
    if (d->n == d->cap) {
        uint32_t cap = d->cap ? d->cap * 2 : 4;
        jv *nk = jinja_alloc(&c->ar, (size_t)cap * sizeof(jv)), *nv = jinja_alloc(&c->ar, (size_t)cap * sizeof(jv));
        if (d->n) memcpy(nk, d->k, d->n * sizeof(jv)), memcpy(nv, d->v, d->n * sizeof(jv));
        d->k = nk, d->v = nv, d->cap = cap;
    }
    d->k[d->n] = k, d->v[d->n] = v;
    d->n++;
}

// --- Python semantics

int jinja_truthy(jv v) {
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE: return 0;
    case JV_BOOL:
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0;
    case JV_STR: return v.n != 0;
    case JV_LIST:
    case JV_TUPLE: return v.u.l->n != 0;
    case JV_DICT: return v.u.d->n != 0;
    default: return 1;
    }
}

static int is_num(jv v) { return v.t == JV_INT || v.t == JV_BOOL || v.t == JV_FLOAT; }
static double num(jv v) { return v.t == JV_FLOAT ? v.u.f : (double)v.u.i; }

int jinja_equal(jv a, jv b) {
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) return a.u.i == b.u.i;
        return num(a) == num(b);
    }
    int la = a.t == JV_LIST || a.t == JV_TUPLE, lb = b.t == JV_LIST || b.t == JV_TUPLE;
    if (la && lb) {
        if (a.t != b.t || a.u.l->n != b.u.l->n) return 0;
        for (uint32_t i = 0; i < a.u.l->n; i++)
            if (!jinja_equal(a.u.l->v[i], b.u.l->v[i])) return 0;
        return 1;
    }
    if (a.t != b.t) return 0;
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE: return 1;
    case JV_STR: return a.n == b.n && !memcmp(a.u.s, b.u.s, a.n);
    case JV_DICT:
        if (a.u.d->n != b.u.d->n) return 0;
        for (uint32_t i = 0; i < a.u.d->n; i++) {
            int j = jinja_dict_findv(b.u.d, a.u.d->k[i]);
            if (j < 0 || !jinja_equal(a.u.d->v[i], b.u.d->v[j])) return 0;
        }
        return 1;
    default: return a.u.l == b.u.l; // identity for the rest
    }
}

int jinja_compare(jinja_ctx *c, jv a, jv b) {
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) return (a.u.i > b.u.i) - (a.u.i < b.u.i);
        return (num(a) > num(b)) - (num(a) < num(b));
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t m = a.n < b.n ? a.n : b.n;
        int r = memcmp(a.u.s, b.u.s, m);
        return r ? (r > 0) - (r < 0) : (a.n > b.n) - (a.n < b.n);
    }
    if ((a.t == JV_LIST && b.t == JV_LIST) || (a.t == JV_TUPLE && b.t == JV_TUPLE)) {
        for (uint32_t i = 0; i < a.u.l->n && i < b.u.l->n; i++) {
            if (jinja_equal(a.u.l->v[i], b.u.l->v[i])) continue;
            return jinja_compare(c, a.u.l->v[i], b.u.l->v[i]);
        }
        return (a.u.l->n > b.u.l->n) - (a.u.l->n < b.u.l->n);
    }
    jinja_err(c, "'<' not supported between instances of '%s' and '%s'", jinja_type_name(a), jinja_type_name(b));
}

const char *jinja_type_name(jv v) {
    static const char *const names[] = {"Undefined", "NoneType", "bool",   "int",      "float",
                                        "str",       "list",     "tuple",  "dict",     "Namespace",
                                        "Macro",     "function", "method", "LoopContext", "generator"};
    return v.t < sizeof names / sizeof *names ? names[v.t] : "object";
}

// --- UTF-8

size_t jinja_u8_len(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

size_t jinja_u8_off(const char *s, size_t n, size_t cp) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80) {
            if (k == cp) return i;
            k++;
        }
    }
    return n;
}

// --- text

void jinja_buf_add(jinja_ctx *c, jinja_buf *b, const char *s, size_t n) {
    if (!n) return;
    if (b->n + n + 1 > b->cap) {
        if (b->n + n > c->max_output)
            jinja_fail(&c->fault, TC_ERR_INVALID, "template output exceeds %zu bytes", c->max_output);
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = jinja_alloc(&c->ar, cap);
        if (b->n) memcpy(p, b->p, b->n);
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void buf_cstr(jinja_ctx *c, jinja_buf *b, const char *s) { jinja_buf_add(c, b, s, strlen(s)); }

// --- provenance

static int str_user(jv v) { return v.t == JV_STR && v.pv && v.pv->n; }

static const uint32_t prov_all_r[2] = {0, UINT32_MAX};
const jinja_prov jinja_prov_all = {1, prov_all_r};

// Adds [s, e) to b's ranges, merging with the last one when they touch (ranges arrive in order).
static void buf_range(jinja_ctx *c, jinja_buf *b, size_t s, size_t e) {
    if (e <= s) return;
    uint32_t nr = b->pv ? b->pv->n : 0;
    uint32_t *r = b->pv ? (uint32_t *)(b->pv + 1) : NULL;
    if (nr && r[2 * nr - 1] >= s) {
        if (e > r[2 * nr - 1]) r[2 * nr - 1] = (uint32_t)e;
        return;
    }
    if (nr == b->rcap) { // a taken string keeps the old array, so grow into a new one
        uint32_t cap = b->rcap ? b->rcap * 2 : 8;
        jinja_prov *pv = jinja_alloc(&c->ar, sizeof *pv + (size_t)cap * 2 * sizeof *r);
        uint32_t *nrr = (uint32_t *)(pv + 1);
        if (nr) memcpy(nrr, r, (size_t)nr * 2 * sizeof *r);
        pv->r = nrr, pv->n = nr;
        b->pv = pv, b->rcap = cap, r = nrr;
    }
    r[2 * nr] = (uint32_t)s, r[2 * nr + 1] = (uint32_t)e;
    b->pv->n = nr + 1;
}

void jinja_buf_mark(jinja_ctx *c, jinja_buf *b, size_t from) { buf_range(c, b, from, b->n); }

void jinja_buf_addv(jinja_ctx *c, jinja_buf *b, jv v) {
    size_t at = b->n;
    jinja_buf_add(c, b, v.u.s, v.n);
    if (!v.pv) return;
    for (uint32_t i = 0; i < v.pv->n; i++) {
        size_t s = v.pv->r[2 * i], e = v.pv->r[2 * i + 1];
        if (e > v.n) e = v.n;
        if (s < e) buf_range(c, b, at + s, at + e);
    }
}

// The string keeps a snapshot of the ranges: a later append to b only adds ranges past its end, or extends
// its last range past its end, and ranges are clamped to a string's length where read.
jv jinja_buf_take(jinja_buf *b) {
    jv r = jinja_str(b->p ? b->p : "", b->n);
    if (b->pv && b->pv->n) {
        r.pv = b->pv;
        b->rcap = b->pv->n; // the next range grows into a new array, leaving this snapshot's count alone
    }
    return r;
}

int jinja_has_user(jv v) {
    if (str_user(v)) return 1;
    if (v.t == JV_LIST || v.t == JV_TUPLE || v.t == JV_GEN) {
        for (uint32_t i = 0; i < v.u.l->n; i++)
            if (str_user(v.u.l->v[i])) return 1;
    } else if (v.t == JV_DICT) {
        for (uint32_t i = 0; i < v.u.d->n; i++)
            if (str_user(v.u.d->k[i]) || str_user(v.u.d->v[i])) return 1;
    }
    return 0;
}

int jinja_args_user(jv in, int npos, const jv *pos, int nkw, const jv *kwvals) {
    if (jinja_has_user(in)) return 1;
    for (int i = 0; i < npos; i++)
        if (jinja_has_user(pos[i])) return 1;
    for (int i = 0; i < nkw; i++)
        if (jinja_has_user(kwvals[i])) return 1;
    return 0;
}

jv jinja_taint(jinja_ctx *c, jv r, int any_user) {
    if (!any_user) return r;
    if (r.t == JV_STR) {
        r.pv = &jinja_prov_all; // whatever the operation kept or moved, all of it may be untrusted
    } else if (r.t == JV_LIST || r.t == JV_TUPLE || r.t == JV_GEN) { // a copy: r's list may be shared
        jinja_list *l = jinja_list_new(c, r.u.l->n);
        for (uint32_t i = 0; i < r.u.l->n; i++) jinja_list_push(c, l, jinja_taint(c, r.u.l->v[i], 1));
        r.u.l = l;
    }
    return r;
}
// Python's repr(float): the shortest digits that read back to the same double; exponent form outside
// 1e-4 <= |f| < 1e16.
void jinja_fmt_float(double f, char *out, size_t cap) {
    if (isnan(f)) {
        snprintf(out, cap, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, cap, f > 0 ? "inf" : "-inf");
        return;
    }
    char e[40];
    int p;
    for (p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    // e is d.ddddde±XX with p significant digits
    char digits[24];
    int nd = 0, neg = e[0] == '-';
    const char *q = e + neg;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') digits[nd++] = *q;
    int exp = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    char *o = out;
    size_t left = cap;
#define PUT(...) (o += snprintf(o, left, __VA_ARGS__), left = cap - (size_t)(o - out))
    if (neg) PUT("-");
    if (exp < -4 || exp >= 16) {
        PUT("%c", digits[0]);
        if (nd > 1) PUT(".%.*s", nd - 1, digits + 1);
        PUT("e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    } else if (exp < 0) {
        PUT("0.");
        for (int i = 0; i < -exp - 1; i++) PUT("0");
        PUT("%.*s", nd, digits);
    } else {
        for (int i = 0; i <= exp; i++) PUT("%c", i < nd ? digits[i] : '0');
        PUT(".");
        if (nd > exp + 1) PUT("%.*s", nd - exp - 1, digits + exp + 1);
        else PUT("0");
    }
#undef PUT
}

static void repr_str(jinja_ctx *c, jinja_buf *b, const char *s, size_t n) {
    int has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    jinja_buf_add(c, b, &q, 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[8];
        if (ch == '\\') esc = "\\\\";
        else if (ch == (unsigned char)q) esc = q == '\'' ? "\\'" : "\\\"";
        else if (ch == '\n') esc = "\\n";
        else if (ch == '\r') esc = "\\r";
        else if (ch == '\t') esc = "\\t";
        else if (ch < 0x20 || ch == 0x7f) snprintf(tmp, sizeof tmp, "\\x%02x", ch), esc = tmp;
        if (!esc) continue;
        jinja_buf_add(c, b, s + run, i - run);
        buf_cstr(c, b, esc);
        run = i + 1;
    }
    jinja_buf_add(c, b, s + run, n - run);
    jinja_buf_add(c, b, &q, 1);
}

static void str_or_repr(jinja_ctx *c, jinja_buf *b, jv v, int repr) {
    char tmp[64];
    jinja_step(c);
    switch (v.t) {
    case JV_UNDEF: return;
    case JV_NONE: buf_cstr(c, b, "None"); return;
    case JV_BOOL: buf_cstr(c, b, v.u.i ? "True" : "False"); return;
    case JV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i), buf_cstr(c, b, tmp); return;
    case JV_FLOAT: jinja_fmt_float(v.u.f, tmp, sizeof tmp), buf_cstr(c, b, tmp); return;
    case JV_STR:
        if (repr) {
            size_t at = b->n;
            repr_str(c, b, v.u.s, v.n);
            if (str_user(v)) jinja_buf_mark(c, b, at);
        } else {
            jinja_buf_addv(c, b, v);
        }
        return;
    case JV_LIST:
    case JV_TUPLE:
        buf_cstr(c, b, v.t == JV_LIST ? "[" : "(");
        for (uint32_t i = 0; i < v.u.l->n; i++) {
            if (i) buf_cstr(c, b, ", ");
            str_or_repr(c, b, v.u.l->v[i], 1);
        }
        buf_cstr(c, b, v.t == JV_LIST ? "]" : v.u.l->n == 1 ? ",)" : ")");
        return;
    case JV_DICT:
        buf_cstr(c, b, "{");
        for (uint32_t i = 0; i < v.u.d->n; i++) {
            if (i) buf_cstr(c, b, ", ");
            str_or_repr(c, b, v.u.d->k[i], 1);
            buf_cstr(c, b, ": ");
            str_or_repr(c, b, v.u.d->v[i], 1);
        }
        buf_cstr(c, b, "}");
        return;
    case JV_NS: buf_cstr(c, b, "<Namespace>"); return;
    case JV_MACRO: buf_cstr(c, b, "<Macro>"); return;
    case JV_LOOP: buf_cstr(c, b, "<LoopContext>"); return;
    case JV_GEN: buf_cstr(c, b, "<generator object>"); return;
    default: buf_cstr(c, b, "<built-in function>"); return;
    }
}

void jinja_buf_str(jinja_ctx *c, jinja_buf *b, jv v) { str_or_repr(c, b, v, 0); }
void jinja_buf_repr(jinja_ctx *c, jinja_buf *b, jv v) { str_or_repr(c, b, v, 1); }

jv jinja_to_str(jinja_ctx *c, jv v) {
    if (v.t == JV_STR) return v;
    jinja_buf b = {0};
    jinja_buf_str(c, &b, v);
    return jinja_buf_take(&b);
}

// --- iteration

int jinja_is_iterable(jv v) {
    return v.t == JV_UNDEF || v.t == JV_STR || v.t == JV_LIST || v.t == JV_TUPLE || v.t == JV_DICT || v.t == JV_GEN;
}

jinja_list *jinja_iter_list(jinja_ctx *c, jv v) {
    static jinja_list empty;
    switch (v.t) {
    case JV_UNDEF: return &empty;
    case JV_LIST:
    case JV_TUPLE:
    case JV_GEN: return v.u.l;
    case JV_DICT: {
        jinja_list *l = jinja_list_new(c, v.u.d->n);
        for (uint32_t i = 0; i < v.u.d->n; i++) jinja_list_push(c, l, v.u.d->k[i]);
        return l;
    }
    case JV_STR: {
        jinja_list *l = jinja_list_new(c, (uint32_t)jinja_u8_len(v.u.s, v.n));
        for (size_t i = 0; i < v.n;) {
            size_t j = i + 1;
            while (j < v.n && ((unsigned char)v.u.s[j] & 0xC0) == 0x80) j++;
            jinja_list_push(c, l, jinja_str(v.u.s + i, j - i));
            i = j;
        }
        return l;
    }
    default: jinja_err(c, "'%s' object is not iterable", jinja_type_name(v));
    }
}
