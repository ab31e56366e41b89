// JSON schema patterns as GBNF: see gram_regex.h. A recursive-descent reader of the pattern that writes the
// expression as it goes: alt := seq ('|' seq)*, seq := (atom quantifier?)*.
#include "grammar/gram_regex.h"

#include <stdio.h>
#include <string.h>

#define RX_MAX_DEPTH 32 // nested groups

// A JSON string character with no escape: what '.' and negated classes may produce.
#define RX_ANY "[^\"\\\\\\x7F\\x00-\\x1F]"

typedef struct rx {
    const char *start, *p, *end;
    tc_strbuf *o;
    tc_err *err;
    int depth;
} rx;

static int fail(rx *r, const char *what) {
    return tc_err_set(r->err, TC_ERR_INVALID, "'pattern': %s (at offset %d)", what, (int)(r->p - r->start));
}

static void put(rx *r, const char *s) { tc_strbuf_str(r->o, s); }

// One literal byte as JSON text in GBNF: a quote or backslash as its escape, other bytes as they are.
static void put_lit(rx *r, unsigned char c) {
    char t[16];
    if (c == '"') snprintf(t, sizeof t, "\"\\\\\\\"\"");
    else if (c == '\\') snprintf(t, sizeof t, "\"\\\\\\\\\"");
    else snprintf(t, sizeof t, "\"%c\"", c);
    put(r, t);
}

// A class member range [a, b] in GBNF class syntax, without '"' and '\' (JSON would escape them).
static void class_range(rx *r, unsigned a, unsigned b) {
    unsigned cut[3][2] = {{a, b < 0x21 ? b : 0x21}, {a > 0x23 ? a : 0x23, b < 0x5B ? b : 0x5B}, {a > 0x5D ? a : 0x5D, b}};
    for (int i = 0; i < 3; i++) {
        unsigned x = cut[i][0] < 0x20 ? 0x20 : cut[i][0], y = cut[i][1];
        if (i == 0 && x > 0x21) continue;
        if (x > y) continue;
        char t[24];
        if (x == y) snprintf(t, sizeof t, "\\x%02X", x);
        else snprintf(t, sizeof t, "\\x%02X-\\x%02X", x, y);
        put(r, t);
    }
}

// \d \w \s inside a class (s: the letter); 0 if not one of them.
static int class_escape(rx *r, char s) {
    if (s == 'd') class_range(r, '0', '9');
    else if (s == 'w') class_range(r, '0', '9'), class_range(r, 'A', 'Z'), class_range(r, 'a', 'z'), class_range(r, '_', '_');
    else if (s == 's') class_range(r, ' ', ' ');
    else return 0;
    return 1;
}

// [...] after the '['.
static int read_class(rx *r) {
    int neg = r->p < r->end && *r->p == '^';
    if (neg) r->p++;
    put(r, neg ? "[^\"\\\\\\x7F\\x00-\\x1F" : "[");
    int n = 0;
    while (r->p < r->end && (*r->p != ']' || n == 0)) {
        unsigned char a = (unsigned char)*r->p++;
        if (a == '\\') {
            if (r->p >= r->end) return fail(r, "a class ends inside an escape");
            char s = *r->p++;
            if (!neg && class_escape(r, s)) {
                n++;
                continue;
            }
            if (strchr("dwsDWSbB", s)) return fail(r, "this escape inside a negated class is not supported");
            a = (unsigned char)(s == 'n' ? '\n' : s == 't' ? '\t' : s);
        }
        unsigned b = a;
        if (r->p + 1 < r->end && *r->p == '-' && r->p[1] != ']') {
            r->p++;
            b = (unsigned char)*r->p++;
            if (b == '\\' && r->p < r->end) b = (unsigned char)*r->p++;
            if (b < a) return fail(r, "a class range runs backwards");
        }
        if (a >= 0x80 || b >= 0x80) return fail(r, "non-ASCII class members are not supported");
        if (neg) { // what the class excludes: plain members
            char t[24];
            snprintf(t, sizeof t, a == b ? "\\x%02X" : "\\x%02X-\\x%02X", a, b);
            put(r, t);
        } else class_range(r, a, b);
        n++;
    }
    if (r->p >= r->end) return fail(r, "a class has no closing ']'");
    r->p++;
    put(r, "]");
    return 0;
}

static int read_alt(rx *r);

static int read_atom(rx *r) {
    char c = *r->p++;
    if (c == '(') {
        if (r->p < r->end && *r->p == '?') {
            if (r->p + 1 < r->end && r->p[1] == ':') r->p += 2;
            else return fail(r, "lookarounds and named groups are not supported");
        }
        if (++r->depth > RX_MAX_DEPTH) return fail(r, "groups nest too deeply");
        put(r, "(");
        int rc = read_alt(r);
        r->depth--;
        if (rc) return rc;
        if (r->p >= r->end || *r->p != ')') return fail(r, "a group has no closing ')'");
        r->p++;
        put(r, ")");
        return 0;
    }
    if (c == '[') return read_class(r);
    if (c == '.') return put(r, RX_ANY), 0;
    if (c == '^' || c == '$') return fail(r, "anchors are supported only at the ends of the pattern");
    if (c == ')' || c == '*' || c == '+' || c == '?' || c == '{') return fail(r, "a quantifier or ')' has nothing before it");
    if (c == '\\') {
        if (r->p >= r->end) return fail(r, "the pattern ends inside an escape");
        char s = *r->p++;
        if (s == 'd' || s == 'w' || s == 's') {
            put(r, "[");
            class_escape(r, s);
            put(r, "]");
            return 0;
        }
        if (s == 'D') return put(r, "[^0-9\"\\\\\\x7F\\x00-\\x1F]"), 0;
        if (s == 'W') return put(r, "[^0-9A-Za-z_\"\\\\\\x7F\\x00-\\x1F]"), 0;
        if (s == 'S') return put(r, "[^ \\t\"\\\\\\x7F\\x00-\\x1F]"), 0;
        if ((s >= 'a' && s <= 'z') || (s >= 'A' && s <= 'Z') || (s >= '0' && s <= '9'))
            return fail(r, "backreferences, word boundaries and letter escapes other than \\d \\w \\s are not supported");
        put_lit(r, (unsigned char)s);
        return 0;
    }
    if ((unsigned char)c < 0x20 || c == 0x7f) return fail(r, "control characters are not supported");
    if ((unsigned char)c >= 0x80) { // a UTF-8 sequence: one code point, as a literal
        const char *q = r->p - 1;
        while (r->p < r->end && ((unsigned char)*r->p & 0xC0) == 0x80) r->p++;
        put(r, "\"");
        tc_strbuf_add(r->o, q, (size_t)(r->p - q));
        put(r, "\"");
        return 0;
    }
    put_lit(r, (unsigned char)c);
    return 0;
}

// A quantifier after an atom, if any.
static int read_quant(rx *r) {
    if (r->p >= r->end) return 0;
    char c = *r->p;
    if (c == '*' || c == '+' || c == '?') {
        char t[2] = {c, 0};
        r->p++;
        put(r, t);
    } else if (c == '{') {
        int m = -1, n = -2, k = 0;
        if (sscanf(r->p, "{%d,%d}%n", &m, &n, &k) == 2 && k > 0) {
        } else if ((k = 0, sscanf(r->p, "{%d,}%n", &m, &k) == 1 && k > 0)) n = -1;
        else if ((k = 0, sscanf(r->p, "{%d}%n", &m, &k) == 1 && k > 0)) n = m;
        else return fail(r, "a '{' that is not a {n}, {n,} or {n,m} quantifier");
        if (m < 0 || m > 10000 || n > 10000 || (n >= 0 && n < m)) return fail(r, "a repetition count out of range (0 to 10000)");
        r->p += k;
        char t[48];
        if (n == -1) snprintf(t, sizeof t, "{%d,}", m);
        else snprintf(t, sizeof t, "{%d,%d}", m, n);
        put(r, t);
    } else return 0;
    if (r->p < r->end && *r->p == '?') r->p++; // lazy: the same strings
    if (r->p < r->end && (*r->p == '*' || *r->p == '+' || *r->p == '?' || *r->p == '{'))
        return fail(r, "possessive or stacked quantifiers are not supported");
    return 0;
}

static int read_seq(rx *r) {
    int n = 0;
    put(r, "(");
    while (r->p < r->end && *r->p != '|' && *r->p != ')') {
        if (r->depth == 0 && *r->p == '$' && r->p + 1 == r->end) break;
        if (n++) put(r, " ");
        put(r, "(");
        int rc = read_atom(r);
        put(r, ")");
        if (rc || (rc = read_quant(r))) return rc;
    }
    if (!n) put(r, "\"\"");
    put(r, ")");
    return 0;
}

static int read_alt(rx *r) {
    int rc = read_seq(r);
    while (!rc && r->p < r->end && *r->p == '|') {
        r->p++;
        put(r, " | ");
        rc = read_seq(r);
    }
    return rc;
}

int gram_regex_expr(const char *re, tc_strbuf *o, tc_err *err) {
    size_t n = strlen(re);
    rx r = {.start = re, .p = re, .end = re + n, .o = o, .err = err};
    int head = n && re[0] == '^', tail = n > (size_t)head && re[n - 1] == '$' && (n < 2 || re[n - 2] != '\\');
    if (head) r.p++;
    put(&r, "(");
    if (!head) put(&r, RX_ANY "* ");
    put(&r, "(");
    int rc = read_alt(&r);
    if (!rc && tail && r.p < r.end && *r.p == '$') r.p++;
    if (!rc && r.p < r.end) rc = fail(&r, *r.p == ')' ? "a ')' without its '('" : "unexpected text");
    put(&r, ")");
    if (!tail) put(&r, " " RX_ANY "*");
    put(&r, ")");
    return rc;
}
