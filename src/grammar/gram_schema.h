// JSON schema → GBNF (the subset llama.cpp's json-schema-to-grammar covers): types object / array / string /
// number / integer / boolean / null (and lists of them), properties with required ones (optional ones may be
// left out, order kept), additionalProperties, enum, const, anyOf / oneOf, items with minItems / maxItems,
// $ref into $defs / definitions (recursion allowed), string minLength / maxLength, formats date / time /
// date-time / uuid / email / uri, `pattern` (gram_regex.h), and minimum / maximum / exclusiveMinimum /
// exclusiveMaximum (gram_range.h). JSON is generated compactly (at most one space after ':' and ',').
// Other keywords (allOf, multipleOf, …) are refused when strict and ignored otherwise; a pattern the
// translation cannot express is always refused; the message names the keyword and where it is.
#ifndef TACHYON_GRAMMAR_SCHEMA_H
#define TACHYON_GRAMMAR_SCHEMA_H

#include <jansson.h>

#include "common/err.h"

typedef struct gram_schema gram_schema; // a builder of rules; owned, free with gram_schema_free

gram_schema *gram_schema_new(int strict); // NULL on OOM
void gram_schema_free(gram_schema *b);
// Adds the rules for schema (with doc as the document $ref resolves in; NULL = schema itself) and writes
// the name of the rule that matches one value into name (NUL-terminated, cap >= 32). TC_ERR_INVALID with
// a message on unsupported or malformed schemas.
int gram_schema_add(gram_schema *b, const json_t *schema, const json_t *doc, char *name, size_t cap, tc_err *err);
// Adds a custom rule line "name ::= body".
int gram_schema_add_rule(gram_schema *b, const char *name, const char *body);
// The GBNF text: the built-in rules (space, string, number, value …), then every added rule. Borrowed
// until the builder is freed; NULL on OOM.
const char *gram_schema_text(gram_schema *b);

// A GBNF literal for the bytes s (quotes included, escapes as needed), appended to out (cap bytes);
// returns the length it needs.
size_t gram_literal(const char *s, size_t n, char *out, size_t cap);

// Whole grammars with `root`: any JSON object, or a value of the schema. *out malloc'd (caller frees).
int gram_json_object_gbnf(char **out, tc_err *err);
int gram_schema_gbnf(const json_t *schema, int strict, char **out, tc_err *err);

#endif
