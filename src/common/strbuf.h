// A growable, always NUL-terminated byte string for building text (grammars, prompts). Appends never fail
// loudly: an allocation failure sets `oom` and later appends do nothing, so a builder checks once at the end.
#ifndef TACHYON_COMMON_STRBUF_H
#define TACHYON_COMMON_STRBUF_H

#include <stddef.h>

typedef struct tc_strbuf {
    char *p;    // owned, free with free(); NULL until the first append
    size_t n;   // bytes used (p[n] == 0)
    size_t cap; // bytes allocated
    int oom;    // an append failed to allocate
} tc_strbuf;

void tc_strbuf_add(tc_strbuf *b, const char *s, size_t n); // n bytes of s
void tc_strbuf_str(tc_strbuf *b, const char *s);           // a C string

#endif
