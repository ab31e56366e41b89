// The Anthropic Messages API (/v1/messages) as a wire format over the chat path (see wire.h): the whole reply
// and the error bodies here; the request in wire_anthropic_req.c, the SSE events in wire_anthropic_stream.c.
//
// Usage follows Anthropic's meaning: input_tokens are the prompt tokens not read from the prefix cache
// (cache_read_input_tokens), so input_tokens + cache_read_input_tokens is the whole prompt. stop_reason
// "stop_sequence" comes from the chat choice's "stop_reason" (the matched stop string, which gen.c adds for
// wires); a plain end of text is "end_turn".
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/wire_anthropic.h"

const char *wire_anth_stop_reason(const char *finish_reason, const char *matched) {
    if (!finish_reason) return "end_turn";
    if (!strcmp(finish_reason, "length")) return "max_tokens";
    if (!strcmp(finish_reason, "tool_calls")) return "tool_use";
    if (!strcmp(finish_reason, "stop") && matched) return "stop_sequence";
    return "end_turn";
}

void wire_anth_msg_id(const char *chat_id, char *buf, size_t n) {
    const char *p = chat_id ? chat_id : "";
    if (!strncmp(p, "chatcmpl-", 9)) p += 9;
    snprintf(buf, n, "msg_%s", p);
}

// A tool call's arguments (a JSON string) as the tool_use input object; {} when they are not an object.
static json_t *tool_input(const char *args) {
    json_t *v = args ? json_loads(args, JSON_DECODE_ANY, NULL) : NULL;
    if (json_is_object(v)) return v;
    json_decref(v);
    return json_object();
}

// Anthropic's usage from the chat usage object (borrowed; NULL gives zeros).
static json_t *usage_of(const json_t *u) {
    json_int_t pt = json_integer_value(json_object_get(u, "prompt_tokens"));
    json_int_t ct = json_integer_value(json_object_get(u, "completion_tokens"));
    json_int_t cached = json_integer_value(json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens"));
    if (cached > pt) cached = pt;
    return json_pack("{s:I,s:I,s:I,s:I}", "input_tokens", pt - cached, "output_tokens", ct,
                     "cache_read_input_tokens", cached, "cache_creation_input_tokens", (json_int_t)0);
}

json_t *wire_anth_usage(const json_t *chat_usage) { return usage_of(chat_usage); }

static json_t *from_chat(const json_t *chat, const json_t *in) {
    json_t *ch = json_array_get(json_object_get(chat, "choices"), 0), *msg = json_object_get(ch, "message");
    json_t *content = json_array();
    const char *rs = json_string_value(json_object_get(msg, "reasoning_content"));
    if (rs && *rs) json_array_append_new(content, json_pack("{s:s,s:s,s:s}", "type", "thinking", "thinking", rs, "signature", ""));
    json_t *text = json_object_get(msg, "content");
    if (json_is_string(text) && json_string_length(text))
        json_array_append_new(content, json_pack("{s:s,s:O}", "type", "text", "text", text));
    size_t i;
    json_t *tc;
    json_array_foreach(json_object_get(msg, "tool_calls"), i, tc) {
        json_t *fn = json_object_get(tc, "function");
        json_array_append_new(content, json_pack("{s:s,s:O,s:O,s:o}", "type", "tool_use", "id", json_object_get(tc, "id"),
                                                 "name", json_object_get(fn, "name"), "input",
                                                 tool_input(json_string_value(json_object_get(fn, "arguments")))));
    }
    const char *matched = json_string_value(json_object_get(ch, "stop_reason"));
    const char *sr = wire_anth_stop_reason(json_string_value(json_object_get(ch, "finish_reason")), matched);
    char id[96];
    wire_anth_msg_id(json_string_value(json_object_get(chat, "id")), id, sizeof id);
    json_t *model = json_object_get(in, "model");
    if (!json_is_string(model)) model = json_object_get(chat, "model");
    json_t *r = json_pack("{s:s,s:s,s:s,s:O,s:o,s:s}", "id", id, "type", "message", "role", "assistant", "model",
                          model ? model : json_null(), "content", content, "stop_reason", sr);
    if (!r) return NULL;
    json_object_set_new(r, "stop_sequence", !strcmp(sr, "stop_sequence") ? json_string(matched) : json_null());
    json_object_set_new(r, "usage", usage_of(json_object_get(chat, "usage")));
    return r;
}

// --- errors ------------------------------------------------------------------------------------------

// Anthropic's error type for an HTTP status (its documented table; 503 is this server's "overloaded").
static const char *error_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 402: return "billing_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503:
    case 529: return "overloaded_error";
    case 504: return "timeout_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

// Chat fields that the translation produced (an error from the chat path names them) and the Messages field
// each came from, which the message then starts with.
static const char *const field_origin[][2] = {
    {"stop", "stop_sequences"},
    {"chat_template_kwargs", "thinking"},
    {"parallel_tool_calls", "tool_choice.disable_parallel_tool_use"},
    {"response_format", "output_config.format"},
};

json_t *wire_anth_error_obj(const oai_err *e) {
    const char *from = NULL;
    for (size_t i = 0; i < sizeof field_origin / sizeof field_origin[0]; i++)
        if (!strcmp(e->param, field_origin[i][0])) from = field_origin[i][1];
    char msg[sizeof e->msg + 64];
    snprintf(msg, sizeof msg, "%s%s%s", from ? from : "", from ? ": " : "", e->msg);
    return json_pack("{s:s,s:{s:s,s:s}}", "type", "error", "error", "type", error_type(e->status), "message", msg);
}

static char *error_json(const oai_err *e) {
    json_t *j = wire_anth_error_obj(e);
    char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return t;
}

static int to_chat(const json_t *in, json_t **out, oai_err *e) { return wire_anth_to_chat(in, 0, out, e); }

const wire_ops wire_anthropic_ops = {
    .name = "anthropic",
    .to_chat = to_chat,
    .field_ok = wire_anth_field_ok,
    .from_chat = from_chat,
    .stream_new = wire_anth_stream_new,
    .stream_chunk = wire_anth_stream_chunk,
    .stream_end = wire_anth_stream_end,
    .stream_error = wire_anth_stream_error,
    .stream_free = wire_anth_stream_free,
    .error_json = error_json,
};
