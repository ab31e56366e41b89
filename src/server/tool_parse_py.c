// LFM2's pythonic tool calls (see tool_fmt.h): <|tool_call_start|>[name(key=value, …), …]<|tool_call_end|>,
// values as Python literals ('text', 1.5, True, None, [..], {..}) or JSON (what the forced grammar writes).
#include <stdlib.h>
#include <string.h>

#include "server/tool_parse_impl.h"

#define PY_DEPTH 32 // nesting of lists and dicts in one value

static int is_ident(char ch, int first) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
           (!first && ((ch >= '0' && ch <= '9') || ch == '-' || ch == '.'));
}

// A quoted string ('…' or "…", backslash escapes as Python's common ones); NULL when cut or malformed.
static json_t *py_string(const char **pp, const char *end) {
    const char *p = *pp;
    char q = *p++;
    tc_strbuf b = {0};
    while (p < end && *p != q) {
        if (*p != '\\') {
            tc_strbuf_add(&b, p++, 1);
            continue;
        }
        if (++p >= end) break;
        char e = *p++, ch = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
        if (e == 'u' && end - p >= 4) { // \uXXXX: through JSON's decoder, which knows UTF-8
            char j[9] = {'"', '\\', 'u', p[0], p[1], p[2], p[3], '"', 0};
            json_t *s = json_loads(j, JSON_DECODE_ANY, NULL);
            if (s) tc_strbuf_add(&b, json_string_value(s), json_string_length(s));
            json_decref(s);
            p += 4;
            continue;
        }
        tc_strbuf_add(&b, &ch, 1);
    }
    json_t *s = p < end && !b.oom ? json_stringn(b.p ? b.p : "", b.n) : NULL;
    free(b.p);
    if (s) *pp = p + 1;
    return s;
}

static json_t *py_value(const char **pp, const char *end, int depth);

// [v, …] or {k: v, …}; NULL when cut or malformed.
static json_t *py_container(const char **pp, const char *end, int depth) {
    const char *p = *pp;
    int dict = *p++ == '{';
    json_t *out = dict ? json_object() : json_array();
    for (int first = 1;; first = 0) {
        p = tp_skip_ws(p, end);
        if (p < end && *p == (dict ? '}' : ']')) {
            *pp = p + 1;
            return out;
        }
        if (!first && (p >= end || *p++ != ',')) break;
        p = tp_skip_ws(p, end);
        if (!first && p < end && *p == (dict ? '}' : ']')) continue; // a trailing comma
        json_t *k = NULL, *v;
        if (dict) {
            k = py_value(&p, end, depth + 1);
            int key_ok = k && json_is_string(k);
            if (key_ok) {
                p = tp_skip_ws(p, end);
                key_ok = p < end && *p++ == ':';
            }
            if (!key_ok) {
                json_decref(k);
                break;
            }
        }
        if (!(v = py_value(&p, end, depth + 1))) {
            json_decref(k);
            break;
        }
        int bad = dict ? json_object_set_new(out, json_string_value(k), v) : json_array_append_new(out, v);
        json_decref(k);
        if (bad) break;
    }
    json_decref(out);
    return NULL;
}

// One Python literal (or JSON value) at *pp; *pp is moved past it. NULL when cut or malformed.
static json_t *py_value(const char **pp, const char *end, int depth) {
    const char *p = tp_skip_ws(*pp, end);
    if (p >= end || depth > PY_DEPTH) return NULL;
    json_t *v = NULL;
    if (*p == '\'' || *p == '"')
        v = py_string(&p, end);
    else if (*p == '[' || *p == '{')
        v = py_container(&p, end, depth);
    else if (is_ident(*p, 1)) {
        static const char *const W[] = {"True", "true", "False", "false", "None", "null"};
        const char *e = p;
        while (e < end && is_ident(*e, 0))
            e++;
        for (int i = 0; i < 6 && !v; i++)
            if ((size_t)(e - p) == strlen(W[i]) && !memcmp(p, W[i], (size_t)(e - p)))
                v = i < 2 ? json_true() : i < 4 ? json_false() : json_null();
        if (v && e >= end) json_decref(v), v = NULL; // "Tru" and "True" alike may be cut: wait for the rest
        if (v) p = e;
    } else {
        const char *e = p;
        while (e < end && strchr("+-.0123456789eE", *e))
            e++;
        if (e < end && e > p) { // a number the text goes on after (else it may be cut)
            v = json_loadb(p, (size_t)(e - p), JSON_DECODE_ANY, NULL);
            if (v && !json_is_number(v)) json_decref(v), v = NULL;
            if (v) p = e;
        }
    }
    if (v) *pp = p;
    return v;
}

// name(key=value, …) at *pp: appends the call, *pp past ')'. 0, or -1 when cut or malformed.
static int py_call(tp_ctx *c, const char **pp, const char *end) {
    const char *p = tp_skip_ws(*pp, end), *n = p;
    while (p < end && is_ident(*p, p == n))
        p++;
    if (p >= end || p == n || *p != '(') return -1;
    size_t nl = (size_t)(p - n);
    json_t *args = json_object();
    for (p++;;) {
        p = tp_skip_ws(p, end);
        if (p < end && *p == ')') break;
        if (json_object_size(args) && (p >= end || *p++ != ',')) goto bad;
        const char *k = p = tp_skip_ws(p, end);
        if (p < end && *p == ')') break; // a trailing comma
        while (p < end && is_ident(*p, p == k))
            p++;
        char key[257];
        if (p == k || (size_t)(p - k) >= sizeof key) goto bad;
        memcpy(key, k, (size_t)(p - k));
        key[p - k] = 0;
        p = tp_skip_ws(p, end);
        json_t *v = p < end && *p++ == '=' ? py_value(&p, end, 0) : NULL;
        if (!v || json_object_set_new(args, key, v)) goto bad;
    }
    *pp = p + 1;
    return tp_add_call(c, n, nl, args);
bad:
    json_decref(args);
    return -1;
}

void tp_parse_pythonic(tp_ctx *c, const char *p, const char *end) {
    char ob[96], cb[96];
    const char *open = tp_trim_marker(c->row->open, ob, sizeof ob),
               *close = tp_trim_marker(c->row->close, cb, sizeof cb);
    ob[strlen(open) - 1] = 0; // the start marker without its '[' (whitespace may come between)
    while (p < end) {
        const char *o = tp_find(p, end, ob);
        if (!o) break;
        const char *q = tp_skip_ws(o + strlen(ob), end);
        if (q < end && *q != '[') { // the marker, then no list: text
            tc_strbuf_add(&c->content, p, (size_t)(q - p));
            p = q;
            continue;
        }
        tc_strbuf_add(&c->content, p, (size_t)(o - p));
        if (q++ >= end) return; // cut after the marker
        for (;;) {
            if (py_call(c, &q, end)) return; // cut (or not a call): dropped
            q = tp_skip_ws(q, end);
            if (q < end && *q == ',') {
                q++;
                continue;
            }
            if (q < end && *q == ']') q++;
            break;
        }
        q = tp_skip_ws(q, end);
        size_t cl = strlen(close) - 1, r = (size_t)(end - q); // the end marker without its ']'
        if (r >= cl && !memcmp(q, close + 1, cl))
            q += cl;
        else if (!memcmp(q, close + 1, r))
            q = end; // cut inside the end marker
        p = q;
    }
    if (p < end) tc_strbuf_add(&c->content, p, (size_t)(end - p));
}
