// JSON schema `pattern` in grammars: the regular-expression subset that JSON schemas use (ECMA-262 syntax)
// translated into a GBNF expression for the content of a JSON string (between its quotes, as JSON text: a
// literal quote or backslash becomes its escape). Supported: literals, '.', classes with ranges and negation,
// \d \w \s \D \W \S and escaped punctuation, groups (capturing or (?:…)), alternation, the quantifiers
// * + ? {n} {n,} {n,m} (lazy forms read as greedy: same strings), ^ and $ at the ends (an end without its
// anchor allows any text there, as JSON schema's patterns match anywhere). '.' and \s match no character
// that JSON must escape, so every string the grammar allows matches the pattern. Lookarounds,
// backreferences, word boundaries and anchors inside the pattern are refused with a message.
#ifndef TACHYON_GRAMMAR_REGEX_H
#define TACHYON_GRAMMAR_REGEX_H

#include "common/err.h"
#include "common/strbuf.h"

// Appends to o the expression for re (NUL-terminated). 0, or TC_ERR_INVALID with a message in err.
int gram_regex_expr(const char *re, tc_strbuf *o, tc_err *err);

#endif
