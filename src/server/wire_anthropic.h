// The Anthropic Messages API's pieces shared between its files (wire_anthropic*.c): the request translation
// with a switch for /v1/messages/count_tokens, the streaming functions, and the count_tokens handler.
#ifndef TACHYON_SERVER_WIRE_ANTHROPIC_H
#define TACHYON_SERVER_WIRE_ANTHROPIC_H

#include <jansson.h>

#include "server/oai.h"
#include "server/wire.h"

struct evhttp_request;
struct srv_model;

// The Messages body `in` (borrowed) as a chat completions body (*out, owned by the caller). counting=1 is the
// count_tokens body: max_tokens is not required and stream is refused. 0, or -1 with *e (400 naming the field).
int wire_anth_to_chat(const json_t *in, int counting, json_t **out, oai_err *e);
// Whether a top-level field is accepted (in the table and not refused, or null): wire_ops.field_ok.
int wire_anth_field_ok(const char *key, const json_t *v);

// Anthropic's stop_reason for a chat finish_reason; matched: the stop string the chat path reports as
// matched (NULL if none). "end_turn", "max_tokens", "stop_sequence" or "tool_use" (static strings).
const char *wire_anth_stop_reason(const char *finish_reason, const char *matched);

// The message id for a chat completion id: "msg_" followed by what comes after "chatcmpl-" (buf of n bytes).
void wire_anth_msg_id(const char *chat_id, char *buf, size_t n);

// Anthropic's usage {input_tokens (not read from the prefix cache), output_tokens, cache_read_input_tokens,
// cache_creation_input_tokens} from a chat usage object (borrowed; NULL gives zeros). New reference.
json_t *wire_anth_usage(const json_t *chat_usage);

// Streaming (wire_anthropic_stream.c), the wire_ops slots of wire.h.
wire_stream *wire_anth_stream_new(const json_t *in);
void wire_anth_stream_chunk(wire_stream *st, const json_t *chunk, struct evbuffer *out);
void wire_anth_stream_end(wire_stream *st, struct evbuffer *out);
void wire_anth_stream_error(wire_stream *st, const oai_err *e, struct evbuffer *out);
void wire_anth_stream_free(wire_stream *st);

// Anthropic's error object {"type":"error","error":{"type","message"}} for e (new reference).
json_t *wire_anth_error_obj(const oai_err *e);

// POST /v1/messages/count_tokens (wire_anthropic_count.c), an ep_handler (srv_endpoints.h): {"input_tokens": N}
// for the prompt the same Messages body renders to.
int wire_anth_count_tokens(struct srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *e);

#endif
