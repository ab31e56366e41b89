// UTF-8 text as JSON strings (see oai_text.h).
#include <stdlib.h>
#include <string.h>

#include "server/oai_text.h"

// Length of the valid UTF-8 sequence at s (n bytes available), 0 if invalid, -k if it is a valid
// but truncated prefix of a k-byte sequence.
static int utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    int k;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80) return 1;
    else if (c >= 0xC2 && c <= 0xDF) k = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        k = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F; // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    for (int i = 1; i < k; i++) {
        if ((size_t)i >= n) return -k;
        unsigned b = s[i];
        if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return 0;
    }
    return k;
}

size_t oai_utf8_complete_prefix(const char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        int k = utf8_seq((const unsigned char *)s + i, len - i);
        if (k < 0) return i; // incomplete tail
        i += k > 0 ? (size_t)k : 1; // invalid bytes count as complete (they become U+FFFD)
    }
    return len;
}

json_t *oai_json_text(const char *s, size_t len) {
    size_t i = 0;
    int clean = 1;
    while (i < len && clean) {
        int k = utf8_seq((const unsigned char *)s + i, len - i);
        if (k <= 0 || s[i] == 0) clean = 0;
        else i += (size_t)k;
    }
    if (clean) return json_stringn(s, len);
    char *t = malloc(len * 3 + 1);
    if (!t) return NULL;
    size_t o = 0;
    i = 0;
    while (i < len) {
        int k = utf8_seq((const unsigned char *)s + i, len - i);
        if (k > 0 && s[i] != 0) {
            memcpy(t + o, s + i, (size_t)k);
            o += (size_t)k;
            i += (size_t)k;
        } else {
            memcpy(t + o, "\xEF\xBF\xBD", 3); // U+FFFD
            o += 3;
            i += 1;
        }
    }
    json_t *j = json_stringn(t, o);
    free(t);
    return j;
}

const char *oai_jtype(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}
