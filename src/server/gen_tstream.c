// Releasing content while tools are in play: see gen_tstream.h.
#include <string.h>

#include "server/gen_tstream.h"

static int is_ws(char ch) { return ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r'; }

// A marker without its surrounding whitespace (as the parser matches it) into buf; "" when none.
static const char *trim(const char *s, char *buf, size_t cap) {
    if (!s) s = "";
    while (*s && is_ws(*s)) s++;
    size_t n = strlen(s);
    while (n && is_ws(s[n - 1])) n--;
    if (n >= cap) n = cap - 1;
    memcpy(buf, s, n);
    buf[n] = 0;
    return buf;
}

// Whether marker m (trimmed) can tell call markup from prose: two bytes at least, ASCII, and not starting
// like ordinary text or JSON (a letter, a digit, a brace, a quote).
static int distinctive(const char *m) {
    unsigned char c0 = (unsigned char)m[0];
    return strlen(m) >= 2 && c0 < 0x80 && !strchr("{\"", m[0]) && !(c0 >= 'a' && c0 <= 'z') &&
           !(c0 >= 'A' && c0 <= 'Z') && !(c0 >= '0' && c0 <= '9');
}

int gen_tstream_on(const tool_fmt_row *f) {
    char a[64], b[64];
    if (!f || f->prompt_opens) return 0;
    if (f->shape != TOOL_SHAPE_JSON_TAGGED && f->shape != TOOL_SHAPE_JSON_LIST && f->shape != TOOL_SHAPE_NAMED)
        return 0; // bare JSON and channels: a call starts like text
    const char *open = trim(f->open, a, sizeof a), *call = trim(f->call_open, b, sizeof b);
    if (f->shape == TOOL_SHAPE_JSON_LIST) return distinctive(open);
    // tagged and named: every call starts with call_open, or (named) with open first
    return distinctive(call) && (!*open || distinctive(open));
}

// The first offset in [from, limit) where m starts in text (len bytes), or where a prefix of m ends the text;
// limit when neither.
static size_t first_hit(const char *text, size_t len, size_t from, size_t limit, const char *m) {
    size_t ml = strlen(m);
    for (size_t i = from; ml && i < limit; i++) {
        size_t k = len - i < ml ? len - i : ml;
        if (!memcmp(text + i, m, k)) return i;
    }
    return limit;
}

void gen_tstream_take(gen_tstream *t, const tool_fmt_row *f, const char *text, size_t len, const char **p,
                      size_t *n) {
    *p = text, *n = 0;
    if (t->halted || !gen_tstream_on(f)) return;
    if (!t->started) {
        size_t s = 0;
        while (s < len && is_ws(text[s])) s++;
        if (s == len) return;
        t->started = 1, t->start = t->sent = s;
    }
    // every marker the parser reads as call markup (a cut one ending the text is dropped from content), and
    // the think tags (reasoning is split off before the calls)
    char b[4][64];
    const char *mk[] = {trim(f->open, b[0], sizeof b[0]), trim(f->call_open, b[1], sizeof b[1]),
                        trim(f->call_close, b[2], sizeof b[2]), trim(f->close, b[3], sizeof b[3]), "<think>",
                        "</think>"};
    size_t safe = len;
    for (size_t i = 0; i < sizeof mk / sizeof *mk; i++) safe = first_hit(text, len, t->sent, safe, mk[i]);
    for (size_t i = 0; i < sizeof mk / sizeof *mk; i++) { // a whole marker: the rest is decided at the end
        size_t ml = strlen(mk[i]);
        if (ml && len - safe >= ml && !memcmp(text + safe, mk[i], ml)) t->halted = 1;
    }
    while (safe > t->sent && is_ws(text[safe - 1])) safe--; // the parser trims trailing whitespace
    if (safe <= t->sent) return;
    *p = text + t->sent, *n = safe - t->sent;
    t->sent = safe;
}

void gen_tstream_rest(const gen_tstream *t, const char *text, const char *content, const char **p, size_t *n) {
    *p = content ? content : "", *n = 0;
    if (!content) return;
    size_t done = t->started ? t->sent - t->start : 0, cl = strlen(content);
    if (done > cl || memcmp(content, text + t->start, done)) return;
    *p = content + done, *n = cl - done;
}
