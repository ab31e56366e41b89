// The Anthropic Messages API (/v1/messages) as a wire format over the chat path (see wire.h). Not implemented yet: every request is refused
// with 501 and the OpenAI error shape.
#include <stdlib.h>

#include "server/wire.h"

static int to_chat(const json_t *in, json_t **out, oai_err *e) {
    (void)in;
    *out = NULL;
    return oai_err_set(e, 501, "invalid_request_error", "not_implemented", NULL,
                       "The Anthropic Messages API (/v1/messages) is not implemented by this server");
}

static json_t *from_chat(const json_t *chat, const json_t *in) {
    (void)in;
    return json_deep_copy(chat);
}

static wire_stream *stream_new(const json_t *in) {
    (void)in;
    return NULL;
}

static void stream_chunk(wire_stream *st, const json_t *chunk, struct evbuffer *out) { (void)st, (void)chunk, (void)out; }
static void stream_end(wire_stream *st, struct evbuffer *out) { (void)st, (void)out; }
static void stream_error(wire_stream *st, const oai_err *e, struct evbuffer *out) { (void)st, (void)e, (void)out; }
static void stream_free(wire_stream *st) { (void)st; }

const wire_ops wire_anthropic_ops = {
    .name = "anthropic",
    .to_chat = to_chat,
    .from_chat = from_chat,
    .stream_new = stream_new,
    .stream_chunk = stream_chunk,
    .stream_end = stream_end,
    .stream_error = stream_error,
    .stream_free = stream_free,
    .error_json = oai_err_json,
};
