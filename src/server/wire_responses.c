// The OpenAI Responses API (/v1/responses) as a wire format over the chat path (see wire.h): the request in
// wire_responses_req.c, the Response object in wire_responses_out.c, the event stream in
// wire_responses_stream.c. Errors keep OpenAI's error shape, as the Responses API does.
#include "server/wire_responses_impl.h"

const wire_ops wire_responses_ops = {
    .name = "responses",
    .to_chat = wresp_to_chat,
    .field_ok = wresp_field_ok,
    .from_chat = wresp_from_chat,
    .stream_new = wresp_stream_new,
    .stream_chunk = wresp_stream_chunk,
    .stream_end = wresp_stream_end,
    .stream_error = wresp_stream_error,
    .stream_free = wresp_stream_free,
    .error_json = oai_err_json,
};
