// Numeric bounds in grammars: GBNF for the integers or JSON numbers between JSON schema's minimum / maximum /
// exclusiveMinimum / exclusiveMaximum, as digit patterns (the regex-range construction: one alternative per
// digit count and per differing leading digit, so an expression has O(digits^2) terms whatever the range).
// Numbers are written without an exponent when bounded; a bound that is not an integer is tightened to the
// next integer inward for the integer part, so every value the grammar allows lies within the bounds.
#ifndef TACHYON_GRAMMAR_RANGE_H
#define TACHYON_GRAMMAR_RANGE_H

#include "common/strbuf.h"

#define GRAM_RANGE_MAX 9999999999999999LL // the largest magnitude the schema grammar's numbers write (16 digits)

typedef struct gram_bounds {
    int has_lo, has_hi;   // 0: that side is open
    double lo, hi;        // the bounds (values beyond GRAM_RANGE_MAX count as open)
    int lo_excl, hi_excl; // 1: exclusiveMinimum / exclusiveMaximum (the bound itself is outside)
} gram_bounds;

// Appends a GBNF expression (a parenthesized group, no trailing space) matching exactly the integers
// (integer = 1) or the JSON numbers of b. Returns 0, or -1 when no value satisfies b (o unchanged).
int gram_range_expr(tc_strbuf *o, int integer, const gram_bounds *b);

#endif
