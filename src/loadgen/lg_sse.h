// Incremental Server-Sent-Events parser for OpenAI-style streams, plus the interpretation of one event's
// JSON (content delta, usage, error). Bytes may arrive split anywhere; events are delivered whole.
#ifndef TACHYON_LOADGEN_SSE_H
#define TACHYON_LOADGEN_SSE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

// Called once per event with the event's data (data: lines joined by '\n', NUL-terminated, borrowed until the
// callback returns). A non-zero return stops parsing and is returned by lg_sse_feed.
typedef int (*lg_sse_cb)(void *ud, const char *data, size_t len);

typedef struct lg_sse {
    lg_sse_cb cb;
    void *ud;
    char *line; // owned, the current partial line (line_len bytes)
    size_t line_len, line_cap;
    char *data; // owned, the current event's data so far
    size_t data_len, data_cap;
    int has_data;   // a data: field was seen in the current event
    int skip_lf;    // the previous byte was '\r' (a following '\n' belongs to it)
    size_t max_len; // bytes; a longer line or event is an error (malformed stream)
} lg_sse;

void lg_sse_init(lg_sse *p, lg_sse_cb cb, void *ud);
void lg_sse_free(lg_sse *p);
// Feeds n bytes. Returns 0, the callback's non-zero value, or TC_ERR_FORMAT / TC_ERR_NOMEM.
int lg_sse_feed(lg_sse *p, const char *buf, size_t n, tc_err *err);
// End of stream: dispatches a pending event that lacked its final blank line. Returns like feed.
int lg_sse_finish(lg_sse *p, tc_err *err);

// --- one event of an OpenAI completion stream

typedef struct lg_chunk {
    int done;                 // the event was "[DONE]"
    const char *content;      // borrowed from the parsed JSON (valid until lg_chunk_clear); NULL if none
    size_t content_len;       // bytes of content (0 = no content in this chunk)
    int has_usage;            // a non-null "usage" object was present
    int64_t prompt_tokens;    // from usage
    int64_t completion_tokens;
    int has_pred;             // usage.completion_tokens_details had accepted/rejected_prediction_tokens
    int64_t accepted_pred, rejected_pred;
    const char *id;           // borrowed, the chunk's "id" or NULL
    const char *model;        // borrowed, the chunk's "model" (the model that answered) or NULL
    void *json_;              // private: the parsed root
} lg_chunk;

// Parses one event's data. chat: read choices[0].delta.content (or .reasoning_content) instead of
// choices[0].text. An {"error": ...} object or invalid JSON is TC_ERR_FORMAT with the message in err.
int lg_chunk_parse(lg_chunk *out, const char *data, size_t len, int chat, tc_err *err);
void lg_chunk_clear(lg_chunk *c);

#endif
