// Jinja chat templates: a small interpreter with the semantics of transformers' apply_chat_template
// (jinja2's ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and loop controls; the globals
// raise_exception and strftime_now; tojson as json.dumps(ensure_ascii=False); {% generation %} renders its
// body). A template is parsed once into a tree and rendered any number of times, from any thread (rendering
// only reads the tree). Templates are untrusted input: every render is bounded in steps, recursion depth,
// memory and output size, and fails with a message instead of hanging or aborting.
#ifndef TACHYON_JINJA_H
#define TACHYON_JINJA_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct jinja_template jinja_template;

// Bounds of one parse or render; a zero field takes the default in brackets.
typedef struct jinja_limits {
    size_t max_template; // bytes of template source [1 MiB]
    size_t max_output;   // bytes of rendered text [8 MiB]
    size_t max_memory;   // bytes of values one render may allocate [256 MiB]
    uint64_t max_steps;  // statements, expression nodes and loop iterations evaluated [20 000 000]
    int max_depth;       // nesting of expressions, statements and macro calls [200]
} jinja_limits;

// Parses src (n bytes, not necessarily NUL-terminated). On success *out is owned by the caller, free with
// jinja_free; on error returns TC_ERR_FORMAT (syntax) or TC_ERR_INVALID (a limit) with the message in err.
int jinja_parse(const char *src, size_t n, const jinja_limits *lim, jinja_template **out, tc_err *err);

void jinja_free(jinja_template *t);

// Renders t with the variables of vars (a JSON object, borrowed; may be NULL). now is the time that
// strftime_now formats (seconds since the epoch, local time zone); a negative value takes the current time.
// On success *out (owned, free with free()) holds *out_n bytes plus a terminating NUL. On error returns
// TC_ERR (a template error, raise_exception's message, an undefined value misused) or TC_ERR_INVALID (a
// limit) with the message in err and *out NULL.
int jinja_render(const jinja_template *t, const json_t *vars, const jinja_limits *lim, int64_t now, char **out,
                 size_t *out_n, tc_err *err);

#endif
