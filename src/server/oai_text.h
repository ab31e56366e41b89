// UTF-8 text as JSON strings: a leaf under the request parser, the replies and the error bodies.
#ifndef TACHYON_SERVER_OAI_TEXT_H
#define TACHYON_SERVER_OAI_TEXT_H

#include <jansson.h>
#include <stddef.h>

// A JSON string from len bytes of text; invalid UTF-8 sequences become U+FFFD. New reference; NULL on OOM.
json_t *oai_json_text(const char *s, size_t len);
// Length of the longest prefix of s[0..len) that does not end inside an incomplete UTF-8 sequence.
size_t oai_utf8_complete_prefix(const char *s, size_t len);
// The JSON type of v as an error message names it: "an object", "an array", "a string", "an integer",
// "a number", "a boolean", "null" (static string).
const char *oai_jtype(const json_t *v);

#endif
