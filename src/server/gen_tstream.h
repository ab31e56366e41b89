// Streaming text while tools are in play: which part of a choice's text may go out as content deltas now,
// before the choice ends and its text is split into content and calls (tool_fmt_parse). Text is released up
// to the first place a tool-call marker (or a <think> tag) starts, or may start, so call markup never reaches
// content; leading whitespace is skipped and trailing whitespace held, as the parser trims its content. What
// is released is therefore always a prefix of the content the parser returns at the end (streamed content +
// tool_calls == the non-streamed message). Formats without a distinctive call marker (Llama 3's bare JSON,
// gpt-oss's channels) release nothing before the end. Pure functions: tests/unit/test_gen_tstream.c.
#ifndef TACHYON_SERVER_GEN_TSTREAM_H
#define TACHYON_SERVER_GEN_TSTREAM_H

#include <stddef.h>

#include "server/tool_fmt.h"

typedef struct gen_tstream {
    size_t start; // offset of the first non-whitespace byte (valid once found)
    size_t sent;  // end of the bytes released so far (offset into the text); 0 before any
    int started;  // 1 once a non-whitespace byte was seen
    int halted;   // 1 once a marker was seen: nothing more is released before the end
} gen_tstream;

// Whether format f can stream text before its end (it has a distinctive marker that starts every call).
int gen_tstream_on(const tool_fmt_row *f);
// text[0..len) is the choice's text that may be released so far (stop strings already held back). On return
// *p/*n are the new bytes to send as content (borrowed from text; *n may be 0).
void gen_tstream_take(gen_tstream *t, const tool_fmt_row *f, const char *text, size_t len, const char **p,
                      size_t *n);
// At the end: the rest of the parsed content (content: the parser's whole content, may be NULL) that was not
// streamed yet, given the streamed bytes text[start..sent). *p/*n borrow from content; *n = 0 when nothing is
// left or the streamed prefix does not match (then nothing more is sent rather than repeat text).
void gen_tstream_rest(const gen_tstream *t, const char *text, const char *content, const char **p, size_t *n);

#endif
