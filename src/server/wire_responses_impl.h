// The OpenAI Responses API (/v1/responses) over the chat path: the pieces shared by wire_responses*.c.
// wire_responses_req.c translates the request, wire_responses_out.c builds the Response object and its
// items, wire_responses_stream.c turns chat chunks into the Responses event stream. All pure (see wire.h).
#ifndef TACHYON_SERVER_WIRE_RESPONSES_IMPL_H
#define TACHYON_SERVER_WIRE_RESPONSES_IMPL_H

#include <stddef.h>

#include "server/wire.h"

// --- the request (wire_responses_req.c) ------------------------------------------------------------------

// A Responses body (borrowed) → a new chat completions body in *out (owned by the caller). 0, or -1 with a
// 400 in *e naming the field (unknown fields, refused fields, other tool types, non-text input parts).
int wresp_to_chat(const json_t *in, json_t **out, oai_err *e);
// Whether a top-level field is accepted (in the table and not refused, or null): wire_ops.field_ok.
int wresp_field_ok(const char *key, const json_t *v);

// --- the response (wire_responses_out.c) -----------------------------------------------------------------

// An item id: prefix ("resp", "msg", "fc", "rs") + "_" + the chat id without its "chatcmpl-" prefix, then
// "_k" when k >= 0 (the k-th function call). Written into buf (n bytes, truncated, NUL-terminated).
void wresp_id(char *buf, size_t n, const char *prefix, const char *chat_id, int k);
// The Response object without output items: id, created_at, model, status, the request's echoed fields
// (instructions, tools, tool_choice, text, …), "output": [] and "usage": null. Returns a new object.
json_t *wresp_base(const json_t *in, const char *id, long created, const char *model, const char *status);
// Chat usage (borrowed; NULL or not an object → null) → Responses usage. Returns a new reference.
json_t *wresp_usage(const json_t *chat_usage);
// Sets status "incomplete" and incomplete_details {reason: "max_output_tokens"} when cut is set, else
// status "completed" and incomplete_details null.
void wresp_set_status(json_t *resp, int cut);
// Output items (new objects). status: "in_progress", "completed" or "incomplete".
json_t *wresp_msg_item(const char *id, const char *text, const char *status); // text NULL: no content part yet
json_t *wresp_fc_item(const char *id, const char *call_id, const char *name, const char *args, const char *status);
json_t *wresp_rs_item(const char *id, const char *text, const char *status); // text NULL: no content part yet
// The whole non-streamed reply: chat.completion (borrowed) + the request (borrowed) → a Response object.
json_t *wresp_from_chat(const json_t *chat, const json_t *in);

// --- streaming (wire_responses_stream.c) -----------------------------------------------------------------

wire_stream *wresp_stream_new(const json_t *in);
void wresp_stream_chunk(wire_stream *st, const json_t *chunk, struct evbuffer *out);
void wresp_stream_end(wire_stream *st, struct evbuffer *out);
void wresp_stream_error(wire_stream *st, const oai_err *e, struct evbuffer *out);
void wresp_stream_free(wire_stream *st);

#endif
