// JSON in and out of the interpreter: request data (messages, tools) become values, and tojson writes values
// exactly as Python's json.dumps(ensure_ascii=False) does, which is how transformers defines the filter.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "jinja/jinja_int.h"

jv jinja_from_json(jinja_ctx *c, const json_t *j, int user) {
    jinja_step(c);
    switch (json_typeof(j)) {
    case JSON_NULL: return JV_MK(JV_NONE);
    case JSON_TRUE: return jinja_bool(1);
    case JSON_FALSE: return jinja_bool(0);
    case JSON_INTEGER: return jinja_int(json_integer_value(j));
    case JSON_REAL: return jinja_float(json_real_value(j));
    case JSON_STRING: {
        size_t n = json_string_length(j);
        char *s = jinja_strndup(&c->ar, json_string_value(j), n);
        jv r = jinja_str(s, n);
        if (user) r.pv = &jinja_prov_all;
        return r;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        jinja_list *l = jinja_list_new(c, (uint32_t)n);
        for (size_t i = 0; i < n; i++) jinja_list_push(c, l, jinja_from_json(c, json_array_get(j, i), user));
        return (jv){.t = JV_LIST, .u.l = l};
    }
    case JSON_OBJECT: {
        jinja_dict *d = jinja_dict_new(c, (uint32_t)json_object_size(j));
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)j, k, v) {
            size_t n = strlen(k);
            char *s = jinja_strndup(&c->ar, k, n);
            jv key = jinja_str(s, n);
            if (user) key.pv = &jinja_prov_all;
            jinja_dict_set(c, d, key, jinja_from_json(c, v, user));
        }
        return (jv){.t = JV_DICT, .u.d = d};
    }
    }
    return JV_MK(JV_NONE);
}

static void json_str(jinja_ctx *c, jinja_buf *b, const char *s, size_t n);

// A string with untrusted bytes is untrusted text as a whole, quotes and escapes included.
static void json_strv(jinja_ctx *c, jinja_buf *b, jv v) {
    size_t at = b->n;
    json_str(c, b, v.u.s, v.n);
    if (jinja_has_user(v)) jinja_buf_mark(c, b, at);
}

static void json_str(jinja_ctx *c, jinja_buf *b, const char *s, size_t n) {
    jinja_buf_add(c, b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char tmp[16];
        const char *esc = NULL;
        if (ch == '"') esc = "\\\"";
        else if (ch == '\\') esc = "\\\\";
        else if (ch == '\n') esc = "\\n";
        else if (ch == '\r') esc = "\\r";
        else if (ch == '\t') esc = "\\t";
        else if (ch == '\b') esc = "\\b";
        else if (ch == '\f') esc = "\\f";
        else if (ch < 0x20) snprintf(tmp, sizeof tmp, "\\u%04x", ch), esc = tmp;
        else if (ch >= 0x80 && c->json_ascii) {
            uint32_t cp = 0;
            size_t len = jinja_u8_off(s + i, n - i, 1);
            cp = ch >= 0xF0 ? ch & 7 : ch >= 0xE0 ? ch & 15 : ch & 31;
            for (size_t k = 1; k < len; k++) cp = cp << 6 | ((unsigned char)s[i + k] & 63);
            jinja_buf_add(c, b, s + run, i - run);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(tmp, sizeof tmp, "\\u%04x", 0xD800 + (cp >> 10));
                jinja_buf_add(c, b, tmp, 6);
                cp = 0xDC00 + (cp & 0x3FF);
            }
            snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            jinja_buf_add(c, b, tmp, 6);
            i += len - 1;
            run = i + 1;
            continue;
        }
        if (!esc) continue;
        jinja_buf_add(c, b, s + run, i - run);
        jinja_buf_add(c, b, esc, strlen(esc));
        run = i + 1;
    }
    jinja_buf_add(c, b, s + run, n - run);
    jinja_buf_add(c, b, "\"", 1);
}

static void newline_indent(jinja_ctx *c, jinja_buf *b, int indent, int level) {
    jinja_buf_add(c, b, "\n", 1);
    for (int i = 0; i < indent * level; i++) jinja_buf_add(c, b, " ", 1);
}

static void json_key(jinja_ctx *c, jinja_buf *b, jv k) {
    if (k.t == JV_STR) return json_strv(c, b, k);
    if (k.t == JV_BOOL) return json_str(c, b, k.u.i ? "true" : "false", k.u.i ? 4 : 5);
    if (k.t == JV_NONE) return json_str(c, b, "null", 4);
    if (k.t != JV_INT && k.t != JV_FLOAT) jinja_err(c, "keys must be str, int, float, bool or None, not %s", jinja_type_name(k));
    jv s = jinja_to_str(c, k);
    json_str(c, b, s.u.s, s.n);
}

static int key_order(const void *x, const void *y) {
    const jv *a = x, *b = y;
    size_t m = a->n < b->n ? a->n : b->n;
    int r = memcmp(a->u.s, b->u.s, m);
    return r ? r : (a->n > b->n) - (a->n < b->n);
}

static void json_dict(jinja_ctx *c, jinja_buf *b, jinja_dict *d, int indent, const char *isep, const char *ksep,
                      int sort_keys, int level) {
    if (!d->n) return jinja_buf_add(c, b, "{}", 2);
    uint32_t *order = jinja_alloc(&c->ar, d->n * sizeof *order);
    for (uint32_t i = 0; i < d->n; i++) order[i] = i;
    if (sort_keys) { // by key text (string keys, as Python requires for sorting)
        jv *pairs = jinja_alloc(&c->ar, d->n * sizeof *pairs);
        for (uint32_t i = 0; i < d->n; i++) {
            if (d->k[i].t != JV_STR) jinja_err(c, "sort_keys needs string keys");
            pairs[i] = d->k[i];
            pairs[i].t = i; // carries the index through the sort
        }
        qsort(pairs, d->n, sizeof *pairs, key_order);
        for (uint32_t i = 0; i < d->n; i++) order[i] = pairs[i].t;
    }
    jinja_buf_add(c, b, "{", 1);
    for (uint32_t i = 0; i < d->n; i++) {
        if (i) jinja_buf_add(c, b, isep, strlen(isep));
        if (indent >= 0) newline_indent(c, b, indent, level + 1);
        json_key(c, b, d->k[order[i]]);
        jinja_buf_add(c, b, ksep, strlen(ksep));
        jinja_tojson(c, b, d->v[order[i]], indent, isep, ksep, sort_keys, level + 1);
    }
    if (indent >= 0) newline_indent(c, b, indent, level);
    jinja_buf_add(c, b, "}", 1);
}

void jinja_tojson(jinja_ctx *c, jinja_buf *b, jv v, int indent, const char *isep, const char *ksep, int sort_keys,
                  int level) {
    char tmp[64];
    jinja_step(c);
    if (level > c->max_depth) jinja_fail(&c->fault, TC_ERR_INVALID, "tojson: value nested too deeply");
    switch (v.t) {
    case JV_NONE: jinja_buf_add(c, b, "null", 4); return;
    case JV_BOOL: jinja_buf_add(c, b, v.u.i ? "true" : "false", v.u.i ? 4 : 5); return;
    case JV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i), jinja_buf_add(c, b, tmp, strlen(tmp)); return;
    case JV_FLOAT:
        if (isnan(v.u.f)) snprintf(tmp, sizeof tmp, "NaN");
        else if (isinf(v.u.f)) snprintf(tmp, sizeof tmp, v.u.f > 0 ? "Infinity" : "-Infinity");
        else jinja_fmt_float(v.u.f, tmp, sizeof tmp);
        jinja_buf_add(c, b, tmp, strlen(tmp));
        return;
    case JV_STR: json_strv(c, b, v); return;
    case JV_LIST:
    case JV_TUPLE:
        if (!v.u.l->n) return jinja_buf_add(c, b, "[]", 2);
        jinja_buf_add(c, b, "[", 1);
        for (uint32_t i = 0; i < v.u.l->n; i++) {
            if (i) jinja_buf_add(c, b, isep, strlen(isep));
            if (indent >= 0) newline_indent(c, b, indent, level + 1);
            jinja_tojson(c, b, v.u.l->v[i], indent, isep, ksep, sort_keys, level + 1);
        }
        if (indent >= 0) newline_indent(c, b, indent, level);
        jinja_buf_add(c, b, "]", 1);
        return;
    case JV_DICT: json_dict(c, b, v.u.d, indent, isep, ksep, sort_keys, level); return;
    default: jinja_err(c, "Object of type %s is not JSON serializable", jinja_type_name(v));
    }
}
