// String helpers shared by the filters, the methods and the operators: Python's strip, case mapping and
// replace, HTML escaping, and printf-style formatting (`fmt % args`). They call only the value layer.
#include <ctype.h>

#include "jinja/jinja_int.h"

int jinja_is_ws(unsigned char ch) { return ch == ' ' || (ch >= '\t' && ch <= '\r') || (ch >= 0x1c && ch <= 0x1f); }

// Python's str.strip/lstrip/rstrip: whitespace, or any of the characters in chars (bytes of UTF-8 text
// compared code point by code point).
jv jinja_strip(jv s, jv chars, int left, int right) {
    size_t a = 0, b = s.n;
    if (chars.t == JV_STR) {
        for (;;) {
            int moved = 0;
            if (left && a < b) {
                size_t l = jinja_u8_off(s.u.s + a, b - a, 1);
                if (memmem(chars.u.s, chars.n, s.u.s + a, l)) a += l, moved = 1;
            }
            if (right && b > a) {
                size_t l = 1;
                while (l < b - a && ((unsigned char)s.u.s[b - l] & 0xC0) == 0x80) l++;
                if (memmem(chars.u.s, chars.n, s.u.s + b - l, l)) b -= l, moved = 1;
            }
            if (!moved) break;
        }
    } else {
        while (left && a < b && jinja_is_ws((unsigned char)s.u.s[a])) a++;
        while (right && b > a && jinja_is_ws((unsigned char)s.u.s[b - 1])) b--;
    }
    return jinja_str(s.u.s + a, b - a);
}

jv jinja_case(jinja_ctx *c, jv s, int mode) { // 'u' upper, 'l' lower, 'c' capitalize, 't' title
    char *o = jinja_alloc(&c->ar, s.n + 1);
    int word_start = 1;
    for (size_t i = 0; i < s.n; i++) {
        unsigned char ch = (unsigned char)s.u.s[i];
        int up = mode == 'u' || (mode == 'c' && i == 0) || (mode == 't' && word_start);
        o[i] = (char)(ch < 0x80 ? (up ? toupper(ch) : mode == 'u' ? ch : tolower(ch)) : ch);
        word_start = !isalnum(ch) && ch < 0x80;
    }
    return jinja_str(o, s.n);
}

jv jinja_replace(jinja_ctx *c, jv s, jv old, jv rep, int64_t count) {
    if (s.t != JV_STR || old.t != JV_STR || rep.t != JV_STR) jinja_err(c, "replace() arguments must be strings");
    jinja_buf b = {0};
    size_t i = 0;
    int64_t done = 0;
    if (old.n == 0) {
        for (; i < s.n && (count < 0 || done < count); done++) {
            jinja_buf_add(c, &b, rep.u.s, rep.n);
            size_t l = jinja_u8_off(s.u.s + i, s.n - i, 1);
            jinja_buf_add(c, &b, s.u.s + i, l), i += l;
        }
        if (count < 0 || done < count) jinja_buf_add(c, &b, rep.u.s, rep.n);
    } else {
        const char *p;
        while ((count < 0 || done < count) && (p = memmem(s.u.s + i, s.n - i, old.u.s, old.n))) {
            jinja_buf_add(c, &b, s.u.s + i, (size_t)(p - s.u.s) - i);
            jinja_buf_add(c, &b, rep.u.s, rep.n);
            i = (size_t)(p - s.u.s) + old.n;
            done++;
        }
    }
    jinja_buf_add(c, &b, s.u.s + i, s.n - i);
    return jinja_buf_take(&b);
}

jv jinja_html_escape(jinja_ctx *c, jv s) {
    jinja_buf b = {0};
    for (size_t i = 0; i < s.n; i++) {
        char ch = s.u.s[i];
        const char *e = ch == '&' ? "&amp;" : ch == '<' ? "&lt;" : ch == '>' ? "&gt;" : ch == '"' ? "&#34;"
                      : ch == '\'' ? "&#39;" : NULL;
        if (e) jinja_buf_add(c, &b, e, strlen(e));
        else jinja_buf_add(c, &b, &ch, 1);
    }
    return jinja_taint(c, jinja_buf_take(&b), jinja_has_user(s));
}

// --- printf-style formatting: `fmt % args` and the format filter

static jv printf_impl(jinja_ctx *c, jv fmt, int nargs, const jv *args);

jv jinja_printf(jinja_ctx *c, jv fmt, int nargs, const jv *args) {
    return jinja_taint(c, printf_impl(c, fmt, nargs, args), jinja_args_user(fmt, nargs, args, 0, NULL));
}

static jv printf_impl(jinja_ctx *c, jv fmt, int nargs, const jv *args) {
    jinja_buf b = {0};
    int k = 0;
    for (size_t i = 0; i < fmt.n; i++) {
        char ch = fmt.u.s[i];
        if (ch != '%') {
            jinja_buf_add(c, &b, &ch, 1);
            continue;
        }
        if (++i >= fmt.n) jinja_err(c, "incomplete format");
        char conv = fmt.u.s[i];
        if (conv == '%') {
            jinja_buf_add(c, &b, "%", 1);
            continue;
        }
        if (k >= nargs) jinja_err(c, "not enough arguments for format string");
        jv a = args[k++];
        if (conv == 's') jinja_buf_str(c, &b, a);
        else if (conv == 'r') jinja_buf_repr(c, &b, a);
        else if ((conv == 'd' || conv == 'i') && (a.t == JV_INT || a.t == JV_BOOL || a.t == JV_FLOAT))
            jinja_buf_str(c, &b, jinja_int(a.t == JV_FLOAT ? (int64_t)a.u.f : a.u.i));
        else jinja_err(c, "unsupported format character '%c'", conv);
    }
    if (k < nargs) jinja_err(c, "not all arguments converted during string formatting");
    return jinja_buf_take(&b);
}
