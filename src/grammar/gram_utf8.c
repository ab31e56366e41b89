// Byte-at-a-time UTF-8 (see gram_utf8.h).
#include "grammar/gram_utf8.h"

int gram_utf8_feed(gram_utf8 *s, uint8_t b, uint32_t *cp) {
    if (!s->need) { // a lead byte
        if (b < 0x80) {
            *cp = b;
            return GRAM_UTF8_CHAR;
        }
        // C0, C1: overlong forms of ASCII; F5..FF: above U+10FFFF; 80..BF: a continuation with no lead
        if (b < 0xC2 || b > 0xF4) return GRAM_UTF8_BAD;
        int len = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
        s->value = b & (0x7Fu >> len);
        s->len = (uint8_t)len;
        s->need = (uint8_t)(len - 1);
        return GRAM_UTF8_MORE;
    }
    if ((b & 0xC0) != 0x80) return GRAM_UTF8_BAD;
    if (s->need == s->len - 1) { // the second byte: where overlong forms, surrogates and > U+10FFFF start
        uint32_t lead = s->value;
        if (s->len == 3 && lead == 0x0 && b < 0xA0) return GRAM_UTF8_BAD; // E0 80..9F: overlong
        if (s->len == 3 && lead == 0xD && b > 0x9F) return GRAM_UTF8_BAD; // ED A0..BF: surrogates
        if (s->len == 4 && lead == 0x0 && b < 0x90) return GRAM_UTF8_BAD; // F0 80..8F: overlong
        if (s->len == 4 && lead == 0x4 && b > 0x8F) return GRAM_UTF8_BAD; // F4 90..BF: above U+10FFFF
    }
    s->value = (s->value << 6) | (b & 0x3Fu);
    if (--s->need) return GRAM_UTF8_MORE;
    *cp = s->value;
    s->value = 0;
    s->len = 0;
    return GRAM_UTF8_CHAR;
}

int gram_utf8_range(const gram_utf8 *s, uint32_t *lo, uint32_t *hi) {
    if (!s->need) return 0;
    static const uint32_t min_of_len[5] = {0, 0, 0x80, 0x800, 0x10000};
    int shift = 6 * s->need;
    uint32_t a = s->value << shift, z = a | ((1u << shift) - 1);
    // only the lead byte seen: its range still holds the forms its second byte will refuse
    if (a < min_of_len[s->len]) a = min_of_len[s->len];
    if (z > 0x10FFFF) z = 0x10FFFF;
    if (z >= 0xD800 && z <= 0xDFFF) z = 0xD7FF; // ED alone: D000..DFFF, whose upper half is surrogates
    *lo = a;
    *hi = z;
    return 1;
}
