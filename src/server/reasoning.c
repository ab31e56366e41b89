// The streaming <think> splitter (see reasoning.h).
#include "server/reasoning.h"

#include <string.h>

#define OPEN "<think>"
#define CLOSE "</think>"

static void emit(rsn_split *s, const char *p, size_t n, tc_strbuf *r, tc_strbuf *c) {
    if (s->skip_nl) {
        while (n && *p == '\n') p++, n--;
        if (n) s->skip_nl = 0;
    }
    if (n) tc_strbuf_add(s->state == RSN_THINK ? r : c, p, n);
}

void rsn_init(rsn_split *s, int in_think) {
    memset(s, 0, sizeof *s);
    s->state = in_think ? RSN_THINK : RSN_START;
    s->skip_nl = in_think; // the prompt's "<think>\n" may be followed by more newlines
}

// Length of the longest suffix of p[0..n) that is a proper prefix of tag.
static size_t partial_tag(const char *p, size_t n, const char *tag) {
    size_t t = strlen(tag);
    for (size_t k = n < t - 1 ? n : t - 1; k > 0; k--)
        if (!memcmp(p + n - k, tag, k)) return k;
    return 0;
}

void rsn_feed(rsn_split *s, const char *p, size_t n, int final, tc_strbuf *r, tc_strbuf *c) {
    // the held bytes go first: join them with the new piece (held bytes are at most a tag's length)
    char buf[256];
    while (s->n_hold && (n || final)) {
        size_t take = n < sizeof buf - (size_t)s->n_hold ? n : sizeof buf - (size_t)s->n_hold;
        memcpy(buf, s->hold, (size_t)s->n_hold);
        memcpy(buf + s->n_hold, p, take);
        size_t len = (size_t)s->n_hold + take;
        s->n_hold = 0;
        p += take, n -= take;
        rsn_feed(s, buf, len, final && !n, r, c);
        if (!n) return;
    }
    while (n) {
        if (s->state == RSN_START) {
            size_t k = strlen(OPEN);
            if (n >= k && !memcmp(p, OPEN, k)) {
                s->state = RSN_THINK, s->skip_nl = 1;
                p += k, n -= k;
                continue;
            }
            if (n < k && !memcmp(p, OPEN, n) && !final) { // could still become <think>
                memcpy(s->hold, p, n), s->n_hold = (int)n;
                return;
            }
            s->state = RSN_CONTENT;
        }
        if (s->state == RSN_CONTENT) {
            emit(s, p, n, r, c);
            return;
        }
        // RSN_THINK: reasoning up to </think>
        const char *e = NULL;
        for (const char *q = memchr(p, '<', n); q; q = memchr(q + 1, '<', n - (size_t)(q + 1 - p))) {
            if ((size_t)(p + n - q) >= strlen(CLOSE) && !memcmp(q, CLOSE, strlen(CLOSE))) {
                e = q;
                break;
            }
            if (q + 1 >= p + n) break;
        }
        if (e) {
            emit(s, p, (size_t)(e - p), r, c);
            s->state = RSN_CONTENT, s->skip_nl = 1;
            n -= (size_t)(e - p) + strlen(CLOSE), p = e + strlen(CLOSE);
            continue;
        }
        size_t k = final ? 0 : partial_tag(p, n, CLOSE);
        emit(s, p, n - k, r, c);
        if (k) memcpy(s->hold, p + n - k, k), s->n_hold = (int)k;
        return;
    }
}
