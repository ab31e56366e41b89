// Shared by the tool-call parsers (tool_parse.c: the JSON shapes and the entry point; tool_parse_xml.c: the
// XML parameter formats and gpt-oss's harmony channels; tool_parse_py.c: LFM2's pythonic calls); the helpers are
// in tool_parse_util.c. Internal to src/server.
#ifndef TACHYON_SERVER_TOOL_PARSE_IMPL_H
#define TACHYON_SERVER_TOOL_PARSE_IMPL_H

#include <jansson.h>
#include <stddef.h>

#include "common/strbuf.h"
#include "server/tool_fmt.h"

typedef struct tp_ctx {
    const tool_fmt_row *row;
    const tool_parse_opts *o;
    json_t *calls;                // owned array being filled
    tc_strbuf content, reasoning; // owned
    int oom;
} tp_ctx;

int tp_is_ws(char ch); // space, tab, CR or LF
// A function name: 1-64 of [A-Za-z0-9_.-]
int tp_valid_name(const char *s, size_t n);
// Appends a call; args is stolen (an object, or NULL for {}). Returns 0, or -1 when name is not a function
// name (the text is then not a call).
int tp_add_call(tp_ctx *c, const char *name, size_t name_len, json_t *args);
// First occurrence of the NUL-terminated s in [p, end), or NULL.
const char *tp_find(const char *p, const char *end, const char *s);
const char *tp_skip_ws(const char *p, const char *end);
// s with leading and trailing whitespace removed, into buf (cap bytes); the marker a parser searches for
// ("<tool_call>" for the grammar's "<tool_call>\n").
const char *tp_trim_marker(const char *s, char *buf, size_t cap);
// The schema of parameter `key` of the request's tool `name` (o->tools), or NULL.
const json_t *tp_param_schema(const tp_ctx *c, const char *name, const char *key);

void tp_parse_xml(tp_ctx *c, const char *p, const char *end);
void tp_parse_harmony(tp_ctx *c, const char *p, const char *end);
void tp_parse_pythonic(tp_ctx *c, const char *p, const char *end);

#endif
