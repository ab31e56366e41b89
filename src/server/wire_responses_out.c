// The OpenAI Responses API's Response object and its output items, built from what the chat path produced.
// The Response echoes the request's settings (the SDK's Response model requires tools, tool_choice and
// parallel_tool_calls); `store` is always false: this server keeps no responses.
#include <stdio.h>
#include <string.h>

#include "server/wire_responses_impl.h"

void wresp_id(char *buf, size_t n, const char *prefix, const char *chat_id, int k) {
    const char *base = chat_id ? chat_id : "";
    if (!strncmp(base, "chatcmpl-", 9)) base += 9;
    if (k >= 0) snprintf(buf, n, "%s_%.80s_%d", prefix, base, k);
    else snprintf(buf, n, "%s_%.80s", prefix, base);
}

// The request's value of key (a new reference), or dflt (stolen) when absent or null.
static json_t *echo(const json_t *in, const char *key, json_t *dflt) {
    json_t *v = json_object_get(in, key);
    if (!v || json_is_null(v)) return dflt;
    json_decref(dflt);
    return json_incref(v);
}

json_t *wresp_base(const json_t *in, const char *id, long created, const char *model, const char *status) {
    json_t *r = json_object();
    json_object_set_new(r, "id", json_string(id));
    json_object_set_new(r, "object", json_string("response"));
    json_object_set_new(r, "created_at", json_integer(created));
    json_object_set_new(r, "status", json_string(status));
    json_object_set_new(r, "error", json_null());
    json_object_set_new(r, "incomplete_details", json_null());
    json_object_set_new(r, "instructions", echo(in, "instructions", json_null()));
    json_object_set_new(r, "max_output_tokens", echo(in, "max_output_tokens", json_null()));
    json_object_set_new(r, "model", json_string(model ? model : ""));
    json_object_set_new(r, "output", json_array());
    json_object_set_new(r, "parallel_tool_calls", echo(in, "parallel_tool_calls", json_true()));
    json_object_set_new(r, "previous_response_id", json_null());
    json_object_set_new(r, "reasoning", echo(in, "reasoning", json_null()));
    json_object_set_new(r, "store", json_false());
    json_object_set_new(r, "background", json_false());
    json_object_set_new(r, "temperature", echo(in, "temperature", json_real(1.0)));
    json_object_set_new(r, "top_p", echo(in, "top_p", json_real(1.0)));
    json_object_set_new(r, "text", echo(in, "text", json_pack("{s:{s:s}}", "format", "type", "text")));
    json_object_set_new(r, "tool_choice", echo(in, "tool_choice", json_string("auto")));
    json_object_set_new(r, "tools", echo(in, "tools", json_array()));
    json_object_set_new(r, "truncation", echo(in, "truncation", json_string("disabled")));
    json_object_set_new(r, "metadata", echo(in, "metadata", json_object()));
    json_object_set_new(r, "user", echo(in, "user", json_null()));
    json_object_set_new(r, "usage", json_null());
    return r;
}

json_t *wresp_usage(const json_t *u) {
    if (!json_is_object(u)) return json_null();
    json_int_t in = json_integer_value(json_object_get(u, "prompt_tokens"));
    json_int_t out = json_integer_value(json_object_get(u, "completion_tokens"));
    json_int_t cached = json_integer_value(json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens"));
    json_int_t rs = json_integer_value(json_object_get(json_object_get(u, "completion_tokens_details"), "reasoning_tokens"));
    return json_pack("{s:I,s:{s:I},s:I,s:{s:I},s:I}", "input_tokens", in, "input_tokens_details", "cached_tokens", cached,
                     "output_tokens", out, "output_tokens_details", "reasoning_tokens", rs, "total_tokens", in + out);
}

void wresp_set_status(json_t *resp, int cut) {
    json_object_set_new(resp, "status", json_string(cut ? "incomplete" : "completed"));
    json_object_set_new(resp, "incomplete_details",
                        cut ? json_pack("{s:s}", "reason", "max_output_tokens") : json_null());
}

json_t *wresp_msg_item(const char *id, const char *text, const char *status) {
    json_t *content = json_array();
    if (text)
        json_array_append_new(content, json_pack("{s:s,s:s,s:[]}", "type", "output_text", "text", text, "annotations"));
    return json_pack("{s:s,s:s,s:s,s:s,s:o}", "type", "message", "id", id, "status", status, "role", "assistant",
                     "content", content);
}

json_t *wresp_fc_item(const char *id, const char *call_id, const char *name, const char *args, const char *status) {
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", "function_call", "id", id, "call_id", call_id, "name", name,
                     "arguments", args, "status", status);
}

json_t *wresp_rs_item(const char *id, const char *text, const char *status) {
    json_t *content = json_array();
    if (text) json_array_append_new(content, json_pack("{s:s,s:s}", "type", "reasoning_text", "text", text));
    return json_pack("{s:s,s:s,s:s,s:[],s:o}", "type", "reasoning", "id", id, "status", status, "summary", "content",
                     content);
}

json_t *wresp_from_chat(const json_t *chat, const json_t *in) {
    const char *cid = json_string_value(json_object_get(chat, "id"));
    char id[112];
    wresp_id(id, sizeof id, "resp", cid, -1);
    json_t *r = wresp_base(in, id, (long)json_integer_value(json_object_get(chat, "created")),
                           json_string_value(json_object_get(chat, "model")), "completed");
    json_t *ch = json_array_get(json_object_get(chat, "choices"), 0), *msg = json_object_get(ch, "message");
    const char *fr = json_string_value(json_object_get(ch, "finish_reason"));
    int cut = fr && !strcmp(fr, "length");
    wresp_set_status(r, cut);
    const char *st = cut ? "incomplete" : "completed";
    json_t *output = json_object_get(r, "output");
    const char *reasoning = json_string_value(json_object_get(msg, "reasoning_content"));
    if (reasoning && *reasoning) {
        wresp_id(id, sizeof id, "rs", cid, -1);
        json_array_append_new(output, wresp_rs_item(id, reasoning, "completed"));
    }
    const char *text = json_string_value(json_object_get(msg, "content"));
    json_t *calls = json_object_get(msg, "tool_calls"), *c;
    if ((text && *text) || !json_array_size(calls)) { // a reply is a message, even an empty one
        wresp_id(id, sizeof id, "msg", cid, -1);
        json_array_append_new(output, wresp_msg_item(id, text ? text : "", st));
    }
    size_t k;
    json_array_foreach(calls, k, c) {
        json_t *fn = json_object_get(c, "function");
        wresp_id(id, sizeof id, "fc", cid, (int)k);
        const char *call_id = json_string_value(json_object_get(c, "id")), *name = json_string_value(json_object_get(fn, "name"));
        const char *args = json_string_value(json_object_get(fn, "arguments"));
        json_array_append_new(output, wresp_fc_item(id, call_id ? call_id : id, name ? name : "", args ? args : "",
                                                    "completed"));
    }
    json_object_set_new(r, "usage", wresp_usage(json_object_get(chat, "usage")));
    return r;
}
