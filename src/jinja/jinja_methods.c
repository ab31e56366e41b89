// Methods of strings, dicts and the loop variable that templates call (Python's str/dict methods the sandbox
// allows), jinja2's tests (`is defined`, `is string` …) and the global functions transformers provides.
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "jinja/jinja_int.h"

static const char *const str_methods[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith",
                                          "replace", "upper", "lower", "title", "capitalize", "find", "rfind",
                                          "count", "join", "isdigit", "isalpha", "isalnum", "isspace", "isupper",
                                          "islower", "splitlines", "removeprefix", "removesuffix", "format", NULL};
static const char *const dict_methods[] = {"items", "keys", "values", "get", NULL};

static int in_list(const char *const *l, const char *s, size_t n) {
    for (; *l; l++)
        if (jinja_eq(s, n, *l)) return 1;
    return 0;
}

int jinja_has_method(jv self, const char *name, size_t n) {
    if (self.t == JV_STR) return in_list(str_methods, name, n);
    if (self.t == JV_DICT) return in_list(dict_methods, name, n);
    return 0;
}

static jv str_format(jinja_ctx *c, jv s, int npos, const jv *pos, int nkw, const jv *kwn, const jv *kwv);

static jv list_of(jinja_list *l) { return (jv){.t = JV_LIST, .u.l = l}; }

// str.split / str.rsplit with Python's rules (no separator: runs of whitespace, no empty parts).
static jv str_split(jinja_ctx *c, jv s, jv sep, int64_t maxsplit, int from_right) {
    jinja_list *out = jinja_list_new(c, 0);
    if (sep.t == JV_STR && sep.n == 0) jinja_err(c, "empty separator");
    if (from_right && maxsplit >= 0) { // split from the right: collect reversed, then flip
        jinja_list *rev = jinja_list_new(c, 0);
        size_t end = s.n;
        int64_t done = 0;
        if (sep.t == JV_STR) {
            for (;;) {
                const char *hit = NULL;
                if (done < maxsplit && end >= sep.n)
                    for (size_t i = end - sep.n + 1; i-- > 0;)
                        if (!memcmp(s.u.s + i, sep.u.s, sep.n)) { hit = s.u.s + i; break; }
                if (!hit) { jinja_list_push(c, rev, jinja_str(s.u.s, end)); break; }
                size_t at = (size_t)(hit - s.u.s);
                jinja_list_push(c, rev, jinja_str(s.u.s + at + sep.n, end - at - sep.n));
                end = at, done++;
            }
        } else {
            while (end > 0 && jinja_is_ws((unsigned char)s.u.s[end - 1])) end--;
            while (end > 0) {
                size_t b = end;
                while (b > 0 && !jinja_is_ws((unsigned char)s.u.s[b - 1])) b--;
                size_t a = b;
                while (a > 0 && jinja_is_ws((unsigned char)s.u.s[a - 1])) a--;
                if (done == maxsplit || a == 0) { jinja_list_push(c, rev, jinja_str(s.u.s, end)); break; }
                jinja_list_push(c, rev, jinja_str(s.u.s + b, end - b));
                end = a, done++;
            }
        }
        for (uint32_t i = rev->n; i-- > 0;) jinja_list_push(c, out, rev->v[i]);
        return list_of(out);
    }
    size_t i = 0;
    int64_t done = 0;
    if (sep.t == JV_STR) {
        for (;;) {
            const char *hit = maxsplit < 0 || done < maxsplit ? memmem(s.u.s + i, s.n - i, sep.u.s, sep.n) : NULL;
            if (!hit) { jinja_list_push(c, out, jinja_str(s.u.s + i, s.n - i)); break; }
            jinja_list_push(c, out, jinja_str(s.u.s + i, (size_t)(hit - s.u.s) - i));
            i = (size_t)(hit - s.u.s) + sep.n, done++;
        }
        return list_of(out);
    }
    for (;;) {
        while (i < s.n && jinja_is_ws((unsigned char)s.u.s[i])) i++;
        if (i >= s.n) break;
        if (maxsplit >= 0 && done == maxsplit) {
            size_t e = s.n;
            while (e > i && jinja_is_ws((unsigned char)s.u.s[e - 1])) e--;
            jinja_list_push(c, out, jinja_str(s.u.s + i, e - i));
            break;
        }
        size_t j = i;
        while (j < s.n && !jinja_is_ws((unsigned char)s.u.s[j])) j++;
        jinja_list_push(c, out, jinja_str(s.u.s + i, j - i));
        i = j, done++;
    }
    return list_of(out);
}

static int affix(jinja_ctx *c, jv s, jv x, int end) {
    if (x.t == JV_TUPLE || x.t == JV_LIST) {
        for (uint32_t i = 0; i < x.u.l->n; i++)
            if (affix(c, s, x.u.l->v[i], end)) return 1;
        return 0;
    }
    if (x.t != JV_STR) jinja_err(c, "%s arg must be str or a tuple of str", end ? "endswith" : "startswith");
    return x.n <= s.n && !memcmp(s.u.s + (end ? s.n - x.n : 0), x.u.s, x.n);
}

static jv str_find(jinja_ctx *c, jv s, jv x, int last) {
    if (x.t != JV_STR) jinja_err(c, "find: must be str");
    const char *hit = NULL;
    if (!last) hit = x.n ? memmem(s.u.s, s.n, x.u.s, x.n) : s.u.s;
    else if (x.n <= s.n)
        for (size_t i = s.n - x.n + 1; i-- > 0;)
            if (!memcmp(s.u.s + i, x.u.s, x.n)) { hit = s.u.s + i; break; }
    return jinja_int(hit ? (int64_t)jinja_u8_len(s.u.s, (size_t)(hit - s.u.s)) : -1);
}

static int all_chars(jv s, int (*pred)(int)) {
    if (!s.n) return 0;
    for (size_t i = 0; i < s.n; i++)
        if (!pred((unsigned char)s.u.s[i])) return 0;
    return 1;
}

static jv str_method(jinja_ctx *c, jv s, const char *name, size_t n, int np, const jv *p) {
    jv none = JV_MK(JV_NONE), a0 = np > 0 ? p[0] : none, a1 = np > 1 ? p[1] : none;
#define IS(w) jinja_eq(name, n, w)
    if (IS("strip") || IS("lstrip") || IS("rstrip")) return jinja_strip(s, a0, name[0] != 'r', name[0] != 'l');
    if (IS("split") || IS("rsplit")) return str_split(c, s, a0, a1.t == JV_INT ? a1.u.i : -1, name[0] == 'r');
    if (IS("startswith") || IS("endswith")) return jinja_bool(affix(c, s, a0, name[0] == 'e'));
    if (IS("replace")) return jinja_replace(c, s, a0, a1, np > 2 && p[2].t == JV_INT ? p[2].u.i : -1);
    if (IS("upper") || IS("lower") || IS("title") || IS("capitalize"))
        return jinja_case(c, s, name[0] == 'u' ? 'u' : name[0] == 'l' ? 'l' : name[0] == 't' ? 't' : 'c');
    if (IS("find") || IS("rfind")) return str_find(c, s, a0, name[0] == 'r');
    if (IS("count")) {
        if (a0.t != JV_STR) jinja_err(c, "count: must be str");
        int64_t k = 0;
        if (!a0.n) return jinja_int((int64_t)jinja_u8_len(s.u.s, s.n) + 1);
        for (const char *q = s.u.s; (q = memmem(q, s.n - (size_t)(q - s.u.s), a0.u.s, a0.n)); q += a0.n) k++;
        return jinja_int(k);
    }
    if (IS("join")) {
        jinja_list *l = jinja_iter_list(c, a0);
        jinja_buf b = {0};
        for (uint32_t i = 0; i < l->n; i++) {
            if (l->v[i].t != JV_STR) jinja_err(c, "sequence item %u: expected str instance", (unsigned)i);
            if (i) jinja_buf_add(c, &b, s.u.s, s.n);
            jinja_buf_add(c, &b, l->v[i].u.s, l->v[i].n);
        }
        return jinja_buf_take(&b);
    }
    if (IS("isdigit")) return jinja_bool(all_chars(s, isdigit));
    if (IS("isalpha")) return jinja_bool(all_chars(s, isalpha));
    if (IS("isalnum")) return jinja_bool(all_chars(s, isalnum));
    if (IS("isspace")) return jinja_bool(all_chars(s, isspace));
    if (IS("isupper") || IS("islower")) {
        int cased = 0, ok = 1;
        for (size_t i = 0; i < s.n; i++) {
            int ch = (unsigned char)s.u.s[i];
            if (isupper(ch)) cased = 1, ok &= name[2] == 'u';
            if (islower(ch)) cased = 1, ok &= name[2] == 'l';
        }
        return jinja_bool(cased && ok);
    }
    if (IS("splitlines")) {
        jinja_list *out = jinja_list_new(c, 0);
        for (size_t i = 0; i < s.n;) {
            size_t j = i;
            while (j < s.n && s.u.s[j] != '\n' && s.u.s[j] != '\r') j++;
            jinja_list_push(c, out, jinja_str(s.u.s + i, j - i));
            if (j < s.n && s.u.s[j] == '\r' && j + 1 < s.n && s.u.s[j + 1] == '\n') j++;
            i = j + 1;
        }
        return list_of(out);
    }
    if (IS("removeprefix") || IS("removesuffix")) {
        int end = name[6] == 's';
        if (a0.t != JV_STR) jinja_err(c, "%.*s: must be str", (int)n, name);
        if (!affix(c, s, a0, end)) return s;
        return jinja_str(s.u.s + (end ? 0 : a0.n), s.n - a0.n);
    }
#undef IS
    jinja_err(c, "'str' object has no attribute '%.*s'", (int)n, name);
}

static jv dict_method(jinja_ctx *c, jv d, const char *name, size_t n, int np, const jv *p) {
    if (jinja_eq(name, n, "get")) {
        if (np < 1) jinja_err(c, "get expected at least 1 argument");
        int i = jinja_dict_findv(d.u.d, p[0]);
        return i >= 0 ? d.u.d->v[i] : np > 1 ? p[1] : JV_MK(JV_NONE);
    }
    jinja_list *out = jinja_list_new(c, d.u.d->n);
    for (uint32_t i = 0; i < d.u.d->n; i++) {
        if (name[0] == 'k') jinja_list_push(c, out, d.u.d->k[i]);
        else if (name[0] == 'v') jinja_list_push(c, out, d.u.d->v[i]);
        else {
            jinja_list *pr = jinja_list_new(c, 2);
            jinja_list_push(c, pr, d.u.d->k[i]);
            jinja_list_push(c, pr, d.u.d->v[i]);
            jinja_list_push(c, out, (jv){.t = JV_TUPLE, .u.l = pr});
        }
    }
    return list_of(out);
}

static jv method_impl(jinja_ctx *c, jinja_method *m, int npos, const jv *pos, int nkw, const jv *kwnames,
                      const jv *kwvals);

// What a method computes from untrusted text is untrusted as a whole (strip, replace, split …).
jv jinja_method_call(jinja_ctx *c, jinja_method *m, int npos, const jv *pos, int nkw, const jv *kwnames,
                     const jv *kwvals) {
    jv r = method_impl(c, m, npos, pos, nkw, kwnames, kwvals);
    if (m->self.t == JV_DICT && jinja_eq(m->name, m->n, "get")) return r; // the stored value, as it is
    if (m->self.t == JV_LIST || m->self.t == JV_LOOP) return r;          // append, cycle: values as they are
    return jinja_taint(c, r, jinja_args_user(m->self, npos, pos, nkw, kwvals));
}

static jv method_impl(jinja_ctx *c, jinja_method *m, int npos, const jv *pos, int nkw, const jv *kwnames,
                      const jv *kwvals) {
    if (m->self.t == JV_STR && jinja_eq(m->name, m->n, "format"))
        return str_format(c, m->self, npos, pos, nkw, kwnames, kwvals);
    if (nkw) jinja_err(c, "%.*s() takes no keyword arguments", (int)m->n, m->name);
    if (m->self.t == JV_STR) return str_method(c, m->self, m->name, m->n, npos, pos);
    if (m->self.t == JV_DICT) return dict_method(c, m->self, m->name, m->n, npos, pos);
    if (m->self.t == JV_LOOP) { // loop.cycle(a, b, …)
        if (npos < 1) jinja_err(c, "no items for cycling given");
        return pos[m->self.u.lp->index0 % npos];
    }
    jinja_err(c, "'%s' object has no method '%.*s'", jinja_type_name(m->self), (int)m->n, m->name);
}

// --- str.format

static jv str_format(jinja_ctx *c, jv s, int npos, const jv *pos, int nkw, const jv *kwn, const jv *kwv) {
    jinja_buf b = {0};
    int auto_idx = 0;
    for (size_t i = 0; i < s.n; i++) {
        char ch = s.u.s[i];
        if ((ch == '{' || ch == '}') && i + 1 < s.n && s.u.s[i + 1] == ch) {
            jinja_buf_add(c, &b, &ch, 1), i++;
            continue;
        }
        if (ch == '}') jinja_err(c, "Single '}' encountered in format string");
        if (ch != '{') {
            jinja_buf_add(c, &b, &ch, 1);
            continue;
        }
        size_t j = i + 1;
        while (j < s.n && s.u.s[j] != '}') j++;
        if (j >= s.n) jinja_err(c, "Single '{' encountered in format string");
        const char *f = s.u.s + i + 1;
        size_t fn = j - i - 1;
        jv v = JV_MK(JV_UNDEF);
        if (fn == 0) v = auto_idx < npos ? pos[auto_idx++] : v;
        else if (isdigit((unsigned char)f[0])) {
            int idx = atoi(f);
            v = idx < npos ? pos[idx] : v;
        } else
            for (int k = 0; k < nkw; k++)
                if (kwn[k].n == fn && !memcmp(kwn[k].u.s, f, fn)) v = kwv[k];
        if (v.t == JV_UNDEF) jinja_err(c, "format: no argument for '{%.*s}'", (int)(fn < 50 ? fn : 50), f);
        jinja_buf_str(c, &b, v);
        i = j;
    }
    return jinja_buf_take(&b);
}
