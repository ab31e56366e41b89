// Wire formats: one request path (the chat completions path in gen_launch.c / gen.c), several APIs on the
// wire. An API other than OpenAI Chat Completions is a wire_ops: it translates its request body into a chat
// completions body before anything else runs, and translates what the chat path produces (the final
// chat.completion JSON, each chat.completion.chunk, errors) into its own shapes. Everything the chat endpoint
// has (scheduling, priorities, tenants, speculation, grammar, truncation, metrics, cancellation, pings)
// therefore applies unchanged. The functions are pure (no I/O, no server state): unit-testable.
//
// A leaf: includes only jansson, libevent's buffer and oai_err.
#ifndef TACHYON_SERVER_WIRE_H
#define TACHYON_SERVER_WIRE_H

#include <jansson.h>

#include "server/oai_err.h"

struct evbuffer;

typedef enum {
    WIRE_OPENAI = 0,    // /v1/chat/completions, /v1/completions: the chat path's own JSON, untouched
    WIRE_RESPONSES = 1, // /v1/responses (OpenAI Responses API): wire_responses.c
    WIRE_ANTHROPIC = 2, // /v1/messages (Anthropic Messages API): wire_anthropic.c
} wire_kind;

typedef struct wire_stream wire_stream; // per-request streaming state, owned by the wire's functions

typedef struct wire_ops {
    const char *name; // "responses", "anthropic" (metrics label, logs)
    // The request: `in` is the API's parsed body (borrowed). On success *out is a new chat completions body
    // (owned by the caller; "stream_options": {"include_usage": true} is set when streaming so the usage
    // reaches stream_chunk) and 0 is returned; on a bad request -1 with *e filled (status 400 and a message
    // naming the field, as every other endpoint does).
    int (*to_chat)(const json_t *in, json_t **out, oai_err *e);
    // --lenient: whether a top-level field of the API's body is accepted (in its field table and not refused,
    // or null). The server drops the fields it does not accept before to_chat, as it drops unknown and refused
    // fields of a chat completions body, and logs them.
    int (*field_ok)(const char *key, const json_t *v);
    // The whole reply of a non-streamed request: chat is the chat.completion object (borrowed), in the API's
    // request (borrowed, for echoed fields such as model, instructions, tools). Returns a new object.
    json_t *(*from_chat)(const json_t *chat, const json_t *in);
    // Streaming: one state per request. stream_chunk gets each chat.completion.chunk (borrowed) in order
    // (deltas with content / reasoning_content / tool_calls, the finish_reason chunk, the usage chunk) and
    // appends the API's SSE events (with their "event:" lines) to out; stream_end replaces OpenAI's
    // "data: [DONE]"; stream_error turns an error that ends a started stream into the API's error event.
    wire_stream *(*stream_new)(const json_t *in);
    void (*stream_chunk)(wire_stream *st, const json_t *chunk, struct evbuffer *out);
    void (*stream_end)(wire_stream *st, struct evbuffer *out);
    void (*stream_error)(wire_stream *st, const oai_err *e, struct evbuffer *out);
    void (*stream_free)(wire_stream *st);
    // The body of an error reply (before streaming starts, or a whole non-streamed error), malloc'd compact
    // JSON owned by the caller. The status code stays e->status.
    char *(*error_json)(const oai_err *e);
} wire_ops;

// The ops of a wire; NULL for WIRE_OPENAI (the chat path's JSON goes out as it is).
const wire_ops *wire_get(wire_kind k);
// The wire whose errors a request path gets: /v1/responses… → WIRE_RESPONSES, /v1/messages… → WIRE_ANTHROPIC,
// anything else WIRE_OPENAI. NULL path: WIRE_OPENAI.
wire_kind wire_of_path(const char *path);
// --lenient: removes the top-level fields of in that w does not accept (field_ok) and appends their names,
// comma-separated, to dropped (a NUL-terminated string of cap bytes, truncated when full).
void wire_drop_unaccepted(const wire_ops *w, json_t *in, char *dropped, size_t cap);

extern const wire_ops wire_responses_ops; // wire_responses.c
extern const wire_ops wire_anthropic_ops; // wire_anthropic.c

#endif
