#include "common/strbuf.h"

#include <stdlib.h>
#include <string.h>

void tc_strbuf_add(tc_strbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void tc_strbuf_str(tc_strbuf *b, const char *s) { tc_strbuf_add(b, s, strlen(s)); }
