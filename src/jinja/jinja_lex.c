// Jinja lexer: splits a template into text and tag tokens, applying jinja2's whitespace control as
// transformers configures it: `{%-`/`-%}` strip all whitespace on that side, trim_blocks drops the newline
// after a block or comment tag, lstrip_blocks drops spaces and tabs before a block or comment tag that starts its
// line, and `+` disables either. Newlines are normalised to \n and one trailing newline of the source is
// dropped (keep_trailing_newline=False).
#include <stdlib.h>

#include "jinja/jinja_int.h"

typedef struct lexer {
    jinja_arena *a;
    const char *s; // normalised source
    size_t n, pos;
    int line;
    jtok *t;
    int nt, cap;
} lexer;

static int is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }
static int is_alpha(unsigned char c) { return (c | 32) >= 'a' && (c | 32) <= 'z'; }
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

_Noreturn static void lex_fail(lexer *L, const char *msg) {
    jinja_fail(L->a->fault, TC_ERR_FORMAT, "template syntax error (line %d): %s", L->line, msg);
}

static jtok *push(lexer *L, int type) {
    if (L->nt == L->cap) {
        int cap = L->cap ? L->cap * 2 : 256;
        jtok *nt = jinja_alloc(L->a, (size_t)cap * sizeof *nt);
        if (L->nt) memcpy(nt, L->t, (size_t)L->nt * sizeof *nt);
        L->t = nt, L->cap = cap;
    }
    jtok *t = &L->t[L->nt++];
    memset(t, 0, sizeof *t);
    t->type = type;
    t->line = L->line;
    return t;
}

static void count_lines(lexer *L, size_t from, size_t to) {
    for (size_t i = from; i < to; i++) L->line += L->s[i] == '\n';
}

static int hexval(char c) {
    if (is_digit((unsigned char)c)) return c - '0';
    if ((c | 32) >= 'a' && (c | 32) <= 'f') return (c | 32) - 'a' + 10;
    return -1;
}

static size_t put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 63)), 2;
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 63)), o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | ((cp >> 12) & 63));
    o[2] = (char)(0x80 | ((cp >> 6) & 63)), o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

// A string literal at L->pos, unescaped as Python's unicode-escape does.
static void lex_string(lexer *L) {
    char q = L->s[L->pos];
    size_t i = L->pos + 1;
    while (i < L->n && L->s[i] != q) i += L->s[i] == '\\' ? 2 : 1;
    if (i >= L->n) lex_fail(L, "unterminated string");
    char *o = jinja_alloc(L->a, i - L->pos + 1);
    size_t k = 0;
    for (size_t j = L->pos + 1; j < i; j++) {
        char ch = L->s[j];
        if (ch != '\\') {
            o[k++] = ch;
            continue;
        }
        char e = L->s[++j];
        static const char from[] = "nrtabfv\\'\"0", to[] = "\n\r\t\a\b\f\v\\'\"\0";
        const char *f = memchr(from, e, sizeof from - 1);
        int hexn = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (f) o[k++] = to[f - from];
        else if (e == '\n') continue;
        else if (hexn && j + hexn < i) {
            uint32_t cp = 0;
            int ok = 1;
            for (int h = 1; h <= hexn; h++) {
                int hv = hexval(L->s[j + h]);
                ok &= hv >= 0;
                cp = cp * 16 + (uint32_t)(hv < 0 ? 0 : hv);
            }
            if (!ok || cp > 0x10FFFF) lex_fail(L, "bad escape in string");
            char u[4];
            size_t m = put_utf8(u, cp);
            if (m > (size_t)hexn + 2) lex_fail(L, "bad escape in string"); // cannot happen: 6 bytes of \uXXXX
            memcpy(o + k, u, m), k += m;
            j += (size_t)hexn;
        } else o[k++] = '\\', o[k++] = e;
    }
    jtok *t = push(L, JT_STRING);
    t->s = o, t->n = k;
    count_lines(L, L->pos, i);
    L->pos = i + 1;
}

static void lex_number(lexer *L) {
    size_t i = L->pos;
    char buf[64];
    size_t k = 0;
    int is_float = 0;
    while (i < L->n && (is_digit((unsigned char)L->s[i]) || L->s[i] == '_')) {
        if (L->s[i] != '_' && k < sizeof buf - 8) buf[k++] = L->s[i];
        i++;
    }
    if (i + 1 < L->n && L->s[i] == '.' && is_digit((unsigned char)L->s[i + 1])) {
        is_float = 1;
        buf[k++] = '.', i++;
        while (i < L->n && (is_digit((unsigned char)L->s[i]) || L->s[i] == '_')) {
            if (L->s[i] != '_' && k < sizeof buf - 8) buf[k++] = L->s[i];
            i++;
        }
    }
    if (i < L->n && (L->s[i] | 32) == 'e') {
        size_t j = i + 1;
        if (j < L->n && (L->s[j] == '+' || L->s[j] == '-')) j++;
        if (j < L->n && is_digit((unsigned char)L->s[j])) {
            is_float = 1;
            buf[k++] = 'e';
            for (size_t m = i + 1; m < j; m++) buf[k++] = L->s[m];
            while (j < L->n && is_digit((unsigned char)L->s[j])) {
                if (k < sizeof buf - 1) buf[k++] = L->s[j];
                j++;
            }
            i = j;
        }
    }
    buf[k] = 0;
    jtok *t = push(L, is_float ? JT_FLOAT : JT_INT);
    if (is_float) t->f = strtod(buf, NULL);
    else t->i = strtoll(buf, NULL, 10); // saturates at INT64_MAX
    L->pos = i;
}

// Tokens of one tag up to its end marker (%} or }}); returns the end's strip sign ('-', '+' or 0).
static int lex_tag(lexer *L, int block) {
    int depth = 0; // open brackets: a } inside them is not the end of the tag
    for (;;) {
        while (L->pos < L->n && is_space((unsigned char)L->s[L->pos])) L->line += L->s[L->pos++] == '\n';
        if (L->pos >= L->n) lex_fail(L, block ? "missing '%}'" : "missing '}}'");
        const char *p = L->s + L->pos;
        size_t left = L->n - L->pos;
        char e = block ? '%' : '}';
        if (depth == 0 || block) {
            int sign = (p[0] == '-' || p[0] == '+') ? p[0] : 0;
            size_t o = sign ? 1 : 0;
            if (left >= o + 2 && p[o] == e && p[o + 1] == '}') {
                push(L, block ? JT_BLOCK_END : JT_VAR_END);
                L->pos += o + 2;
                return sign;
            }
        }
        unsigned char ch = (unsigned char)p[0];
        if (ch == '\'' || ch == '"') {
            lex_string(L);
        } else if (is_digit(ch)) {
            lex_number(L);
        } else if (is_alpha(ch) || ch == '_') {
            size_t i = L->pos;
            while (i < L->n && (is_alpha((unsigned char)L->s[i]) || is_digit((unsigned char)L->s[i]) || L->s[i] == '_'))
                i++;
            jtok *t = push(L, JT_NAME);
            t->s = p, t->n = i - L->pos;
            L->pos = i;
        } else {
            static const char two[][3] = {"==", "!=", "<=", ">=", "//", "**"};
            int op = 0;
            for (int k = 0; k < 6 && left >= 2; k++)
                if (p[0] == two[k][0] && p[1] == two[k][1]) op = JOP_EQ + k;
            if (!op && !strchr("+-*/%~<>=()[]{},.:|;", ch)) lex_fail(L, "unexpected character");
            if (!op) op = ch;
            if (op == '(' || op == '[' || op == '{') depth++;
            if ((op == ')' || op == ']' || op == '}') && depth > 0) depth--;
            jtok *t = push(L, JT_OP);
            t->op = op;
            L->pos += op > 255 ? 2 : 1;
        }
    }
}

// After a tag end: '-' strips all whitespace, otherwise trim_blocks drops one newline after a block/comment.
static void after_tag(lexer *L, int sign, int block, int *line_starting) {
    size_t start = L->pos;
    if (sign == '-') {
        while (L->pos < L->n && is_space((unsigned char)L->s[L->pos])) L->pos++;
    } else if (block && sign != '+' && L->pos < L->n && L->s[L->pos] == '\n') {
        L->pos++;
    }
    count_lines(L, start, L->pos);
    *line_starting = L->pos > 0 && L->s[L->pos - 1] == '\n';
}

// Text before a tag, with the tag's strip sign and lstrip_blocks applied.
static void emit_text(lexer *L, size_t from, size_t to, char kind, int sign, int line_starting) {
    const char *s = L->s + from;
    size_t n = to - from;
    if (sign == '-') {
        while (n && is_space((unsigned char)s[n - 1])) n--;
    } else if (sign != '+' && kind != '{') {
        size_t l = n;
        while (l && s[l - 1] != '\n') l--;
        if (l > 0 || line_starting) {
            size_t k = l;
            while (k < n && is_space((unsigned char)s[k])) k++;
            if (k == n) n = l;
        }
    }
    if (n) {
        jtok *t = push(L, JT_DATA);
        t->s = s, t->n = n;
    }
    count_lines(L, from, to);
}

static int match_word(const char *p, size_t left, const char *w, size_t *len) {
    size_t i = 0, wl = strlen(w);
    if (i < left && (p[i] == '-' || p[i] == '+')) i++;
    while (i < left && is_space((unsigned char)p[i])) i++;
    if (left - i < wl || memcmp(p + i, w, wl)) return 0;
    i += wl;
    while (i < left && is_space((unsigned char)p[i])) i++;
    if (i < left && (p[i] == '-' || p[i] == '+')) i++;
    if (left - i < 2 || p[i] != '%' || p[i + 1] != '}') return 0;
    *len = i + 2;
    return 1;
}

// {% raw %} … {% endraw %}: the text in between is data, verbatim.
static void lex_raw(lexer *L, size_t body) {
    for (size_t i = body; i + 1 < L->n; i++) {
        size_t len;
        if (L->s[i] == '{' && L->s[i + 1] == '%' && match_word(L->s + i + 2, L->n - i - 2, "endraw", &len)) {
            int sign = L->s[i + 2] == '-' ? '-' : 0;
            emit_text(L, body, i, '{', sign, 0);
            L->pos = i + 2 + len;
            int ls;
            after_tag(L, L->s[L->pos - 3] == '-' ? '-' : 0, 1, &ls);
            return;
        }
    }
    lex_fail(L, "missing endraw");
}

jtok *jinja_lex(jinja_arena *a, const char *src, size_t n, int *ntok) {
    lexer L = {.a = a, .line = 1};
    char *s = jinja_alloc(a, n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            s[k++] = '\n';
            if (i + 1 < n && src[i + 1] == '\n') i++;
        } else s[k++] = src[i];
    }
    if (k && s[k - 1] == '\n') k--;
    L.s = s, L.n = k;
    int line_starting = 1;
    while (L.pos < L.n) {
        size_t i = L.pos;
        while (i + 1 < L.n && !(L.s[i] == '{' && (L.s[i + 1] == '{' || L.s[i + 1] == '%' || L.s[i + 1] == '#'))) i++;
        if (i + 1 >= L.n) {
            emit_text(&L, L.pos, L.n, '{', 0, 0);
            break;
        }
        char kind = L.s[i + 1];
        int sign = (i + 2 < L.n && (L.s[i + 2] == '-' || L.s[i + 2] == '+')) ? L.s[i + 2] : 0;
        size_t rawlen;
        int raw = kind == '%' && match_word(L.s + i + 2, L.n - i - 2, "raw", &rawlen);
        emit_text(&L, L.pos, i, kind, sign, line_starting);
        L.pos = i + 2 + (sign ? 1 : 0);
        if (raw) {
            lex_raw(&L, i + 2 + rawlen);
            line_starting = L.pos > 0 && L.s[L.pos - 1] == '\n';
            continue;
        }
        if (kind == '#') {
            size_t j = L.pos;
            while (j + 1 < L.n && !(L.s[j] == '#' && L.s[j + 1] == '}')) j++;
            if (j + 1 >= L.n) lex_fail(&L, "unterminated comment");
            int esign = j > L.pos && (L.s[j - 1] == '-' || L.s[j - 1] == '+') ? L.s[j - 1] : 0;
            count_lines(&L, L.pos, j);
            L.pos = j + 2;
            after_tag(&L, esign, 1, &line_starting);
            continue;
        }
        push(&L, kind == '%' ? JT_BLOCK_BEGIN : JT_VAR_BEGIN);
        int esign = lex_tag(&L, kind == '%');
        after_tag(&L, esign, kind == '%', &line_starting);
    }
    push(&L, JT_EOF);
    *ntok = L.nt;
    return L.t;
}
