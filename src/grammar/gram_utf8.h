// UTF-8 decoded one byte at a time, for tokens that carry part of a character (byte-level BPE vocabularies
// hold many characters only as fragments: "｜" U+FF5C as EF BD + BC). The state is the character begun
// and not yet finished; each byte either finishes it, extends it, or is refused. Only well-formed UTF-8
// (Unicode's table 3-7) gets through: no overlong forms, no surrogates, nothing above U+10FFFF, so a
// sequence refused here is never valid whatever follows.
#ifndef TACHYON_GRAMMAR_UTF8_H
#define TACHYON_GRAMMAR_UTF8_H

#include <stdint.h>

typedef struct gram_utf8 {
    uint32_t value; // the pending character's bits so far (the lead byte's payload, then 6 bits per byte)
    uint8_t len;    // its length in bytes (2..4); 0: no character pending
    uint8_t need;   // continuation bytes still to come (1..3 while pending, 0 otherwise)
} gram_utf8;

enum { GRAM_UTF8_BAD = -1, GRAM_UTF8_MORE = 0, GRAM_UTF8_CHAR = 1 };

// Feeds byte b to *s. GRAM_UTF8_CHAR: a character is complete (*cp, *s pending nothing); GRAM_UTF8_MORE: a
// character is pending; GRAM_UTF8_BAD: no valid UTF-8 continues this way (*s unchanged).
int gram_utf8_feed(gram_utf8 *s, uint8_t b, uint32_t *cp);

// The code points the pending character of *s can still become, [*lo, *hi] (a contiguous range once the
// forms refused by gram_utf8_feed are left out). 0 when nothing is pending.
int gram_utf8_range(const gram_utf8 *s, uint32_t *lo, uint32_t *hi);

#endif
