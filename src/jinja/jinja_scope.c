// Jinja scopes and access: frames of names (jinja_exec.c decides when a new one starts, as jinja2 does),
// name lookup falling back to the global functions, and attribute and item access with jinja2's sandbox
// rules (a string's or dict's allowed methods come back bound; a list's mutating methods are refused).
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

_Noreturn void jinja_undefined_err(jinja_ctx *c, jv u) {
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
    case JV_UNDEF: jinja_undefined_err(c, obj);
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
    case JV_UNDEF: jinja_undefined_err(c, obj);
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
