// The Anthropic Messages request (/v1/messages, /v1/messages/count_tokens) as a chat completions body. Every
// top-level field is in the table below: mapped onto a chat field, refused with a 400 naming it, or accepted
// and ignored with the reason. Blocks map as: system string/text blocks → a system message; user text blocks →
// text parts; tool_result blocks → "tool" messages (tool_call_id, text content; is_error prefixes "Error: ");
// assistant text → content, tool_use → tool_calls with JSON-encoded arguments, thinking blocks dropped (as
// Anthropic drops earlier turns' thinking from the context). The chat path then checks every value again.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/wire_anthropic.h"

#define BAD(e, param, ...) oai_err_set(e, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

typedef enum { AF_MAPPED, AF_REFUSED, AF_IGNORED } anth_field_status;

static const struct {
    const char *name;
    anth_field_status st;
    const char *why; // refused or ignored: the reason
} anth_fields[] = {
    {"model", AF_MAPPED, NULL},
    {"messages", AF_MAPPED, NULL},
    {"system", AF_MAPPED, NULL},
    {"max_tokens", AF_MAPPED, NULL},
    {"stop_sequences", AF_MAPPED, NULL},
    {"stream", AF_MAPPED, NULL},
    {"temperature", AF_MAPPED, NULL},
    {"top_p", AF_MAPPED, NULL},
    {"top_k", AF_MAPPED, NULL},
    {"tools", AF_MAPPED, NULL},
    {"tool_choice", AF_MAPPED, NULL},
    {"thinking", AF_MAPPED, NULL}, // the template's enable_thinking switch; budget_tokens is not enforced
    {"grammar", AF_MAPPED, NULL},       // tachyon's (llama.cpp's) GBNF extension, as on the chat path
    {"output_config", AF_MAPPED, NULL}, // format → response_format json_schema; effort refused
    {"metadata", AF_IGNORED, "metadata.user_id identifies the end user for abuse monitoring"},
    {"service_tier", AF_IGNORED, "one processing tier"},
    {"speed", AF_IGNORED, "one inference speed"},
    {"inference_geo", AF_IGNORED, "one location: this server"},
    {"cache_control", AF_IGNORED, "prefix caching is automatic"},
    {"diagnostics", AF_IGNORED, "prompt-cache diagnostics are not reported (prefix caching is automatic)"},
    {"user_profile_id", AF_IGNORED, "attribution to a user profile of Anthropic's platform"},
    {"workspace_id", AF_IGNORED, "workspaces of Anthropic's platform"},
    {"container", AF_REFUSED, "code-execution containers are not available"},
    {"mcp_servers", AF_REFUSED, "remote MCP servers are not available: pass the tools in 'tools'"},
    {"context_management", AF_REFUSED, "server-side context editing is not available"},
};

int wire_anth_field_ok(const char *key, const json_t *v) {
    size_t i, n = sizeof anth_fields / sizeof anth_fields[0];
    for (i = 0; i < n && strcmp(anth_fields[i].name, key); i++) {}
    return i < n && (anth_fields[i].st != AF_REFUSED || json_is_null(v));
}

static int check_fields(const json_t *in, oai_err *e) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)in, key, v) {
        size_t i, n = sizeof anth_fields / sizeof anth_fields[0];
        for (i = 0; i < n && strcmp(anth_fields[i].name, key); i++) {}
        if (i == n) return BAD(e, key, "%.60s: Extra inputs are not permitted", key);
        if (anth_fields[i].st == AF_REFUSED && !json_is_null(v))
            return BAD(e, key, "%.60s: not supported by this server: %s", key, anth_fields[i].why);
    }
    json_t *md = json_object_get(in, "metadata");
    if (md && !json_is_null(md) && !json_is_object(md)) return BAD(e, "metadata", "metadata: must be an object");
    return 0;
}

// --- content blocks ----------------------------------------------------------------------------------

// A block's "text" (a string) or NULL with *e filled; where names the block.
static const char *block_text(json_t *b, const char *where, oai_err *e) {
    const char *t = json_string_value(json_object_get(b, "text"));
    if (!t) BAD(e, where, "%s.text: Field required (a string)", where);
    return t;
}

// The type of block b, or NULL with *e filled.
static const char *block_type(json_t *b, const char *where, oai_err *e) {
    const char *t = json_is_object(b) ? json_string_value(json_object_get(b, "type")) : NULL;
    if (!t) BAD(e, where, "%s: must be a content block object with a 'type'", where);
    return t;
}

static int refuse_block(const char *type, const char *where, oai_err *e) {
    if (!strcmp(type, "image") || !strcmp(type, "document"))
        return BAD(e, where, "%s: '%s' blocks are not supported: this server reads text only", where, type);
    return BAD(e, where, "%s: unsupported content block type '%.40s'", where, type);
}

// Text content (a string or text blocks) as chat content: the string, or an array of text parts.
static json_t *text_content(json_t *c, const char *where, oai_err *e) {
    if (json_is_string(c)) return json_incref(c);
    if (!json_is_array(c)) return BAD(e, where, "%s: must be a string or an array of text blocks", where), NULL;
    json_t *parts = json_array();
    size_t i;
    json_t *b;
    json_array_foreach(c, i, b) {
        char w[128];
        snprintf(w, sizeof w, "%.96s.%zu", where, i);
        const char *ty = block_type(b, w, e), *t = NULL;
        if (!ty || (strcmp(ty, "text") ? (refuse_block(ty, w, e), 1) : !(t = block_text(b, w, e)))) {
            json_decref(parts);
            return NULL;
        }
        json_array_append_new(parts, json_pack("{s:s,s:s}", "type", "text", "text", t));
    }
    return parts;
}

// tool_result → {"role":"tool","tool_call_id","content"}; an error result's text is prefixed "Error: ".
static json_t *tool_message(json_t *b, const char *where, oai_err *e) {
    const char *id = json_string_value(json_object_get(b, "tool_use_id"));
    if (!id) return BAD(e, where, "%s.tool_use_id: Field required (a string)", where), NULL;
    json_t *c = json_object_get(b, "content"), *err = json_object_get(b, "is_error");
    if (err && !json_is_null(err) && !json_is_boolean(err))
        return BAD(e, where, "%s.is_error: must be a boolean", where), NULL;
    char w[128];
    snprintf(w, sizeof w, "%.96s.content", where);
    json_t *content = c && !json_is_null(c) ? text_content(c, w, e) : json_string("");
    if (!content) return NULL;
    if (json_is_true(err)) {
        json_t *parts = json_array();
        json_array_append_new(parts, json_pack("{s:s,s:s}", "type", "text", "text", "Error: "));
        if (json_is_string(content)) json_array_append_new(parts, json_pack("{s:s,s:O}", "type", "text", "text", content));
        else json_array_extend(parts, content);
        json_decref(content);
        content = parts;
    }
    return json_pack("{s:s,s:s,s:o}", "role", "tool", "tool_call_id", id, "content", content);
}

// tool_use → a chat tool call with the input JSON-encoded as arguments.
static json_t *tool_call(json_t *b, const char *where, oai_err *e) {
    const char *id = json_string_value(json_object_get(b, "id")), *name = json_string_value(json_object_get(b, "name"));
    json_t *input = json_object_get(b, "input");
    if (!id || !name) return BAD(e, where, "%s: a tool_use block needs 'id' and 'name' (strings)", where), NULL;
    if (!json_is_object(input)) return BAD(e, where, "%s.input: must be an object", where), NULL;
    char *args = json_dumps(input, JSON_COMPACT);
    if (!args) return oai_err_set(e, 500, "api_error", NULL, NULL, "out of memory"), NULL;
    json_t *tc = json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", id, "type", "function", "function", "name", name, "arguments", args);
    free(args);
    return tc;
}

// One user message: its tool_result blocks become tool messages (in order), its text blocks one user message.
static int user_blocks(json_t *c, const char *where, json_t *msgs, oai_err *e) {
    json_t *parts = json_array();
    size_t i;
    json_t *b;
    json_array_foreach(c, i, b) {
        char w[128];
        snprintf(w, sizeof w, "%.96s.%zu", where, i);
        const char *ty = block_type(b, w, e), *t;
        json_t *tm;
        if (!ty) goto fail;
        if (!strcmp(ty, "text")) {
            if (!(t = block_text(b, w, e))) goto fail;
            json_array_append_new(parts, json_pack("{s:s,s:s}", "type", "text", "text", t));
        } else if (!strcmp(ty, "tool_result")) {
            if (!(tm = tool_message(b, w, e))) goto fail;
            json_array_append_new(msgs, tm);
        } else {
            refuse_block(ty, w, e);
            goto fail;
        }
    }
    if (json_array_size(parts)) json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", "user", "content", parts));
    else json_decref(parts);
    return 0;
fail:
    json_decref(parts);
    return -1;
}

// One assistant message: text blocks joined into content, tool_use blocks as tool_calls, thinking dropped.
static int assistant_blocks(json_t *c, const char *where, json_t *msgs, oai_err *e) {
    json_t *text = json_string(""), *calls = json_array();
    size_t i;
    json_t *b;
    json_array_foreach(c, i, b) {
        char w[128];
        snprintf(w, sizeof w, "%.96s.%zu", where, i);
        const char *ty = block_type(b, w, e), *t;
        json_t *tc;
        if (!ty) goto fail;
        if (!strcmp(ty, "text")) {
            if (!(t = block_text(b, w, e))) goto fail;
            size_t n0 = json_string_length(text), n1 = strlen(t);
            char *joined = malloc(n0 + n1 + 1);
            if (!joined) goto fail;
            memcpy(joined, json_string_value(text), n0);
            memcpy(joined + n0, t, n1 + 1);
            json_string_setn(text, joined, n0 + n1);
            free(joined);
        } else if (!strcmp(ty, "tool_use")) {
            if (!(tc = tool_call(b, w, e))) goto fail;
            json_array_append_new(calls, tc);
        } else if (strcmp(ty, "thinking") && strcmp(ty, "redacted_thinking")) {
            refuse_block(ty, w, e);
            goto fail;
        }
    }
    json_t *m = json_pack("{s:s}", "role", "assistant");
    json_object_set_new(m, "content", json_array_size(calls) && !json_string_length(text) ? json_null() : text);
    if (json_array_size(calls)) json_object_set_new(m, "tool_calls", calls);
    else json_decref(calls);
    if (json_is_null(json_object_get(m, "content"))) json_decref(text);
    json_array_append_new(msgs, m);
    return 0;
fail:
    json_decref(text), json_decref(calls);
    return -1;
}

static int map_messages(const json_t *in, json_t *chat, oai_err *e) {
    json_t *msgs = json_array(), *sys = json_object_get(in, "system");
    json_object_set_new(chat, "messages", msgs);
    if (sys && !json_is_null(sys)) {
        json_t *c = text_content(sys, "system", e);
        if (!c) return -1;
        json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", "system", "content", c));
    }
    json_t *m = json_object_get(in, "messages");
    if (!m) return BAD(e, "messages", "messages: Field required");
    if (!json_is_array(m)) return BAD(e, "messages", "messages: must be an array");
    size_t i;
    json_t *msg;
    json_array_foreach(m, i, msg) {
        char w[64];
        snprintf(w, sizeof w, "messages.%zu", i);
        const char *role = json_is_object(msg) ? json_string_value(json_object_get(msg, "role")) : NULL;
        if (!role || (strcmp(role, "user") && strcmp(role, "assistant")))
            return BAD(e, w, "%s.role: must be 'user' or 'assistant'", w);
        json_t *c = json_object_get(msg, "content");
        snprintf(w, sizeof w, "messages.%zu.content", i);
        if (json_is_string(c)) json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", role, "content", c));
        else if (!json_is_array(c)) return BAD(e, w, "%s: must be a string or an array of content blocks", w);
        else if ((!strcmp(role, "user") ? user_blocks : assistant_blocks)(c, w, msgs, e)) return -1;
    }
    return 0;
}

// --- tools, sampling, thinking -----------------------------------------------------------------------

static int map_tools(const json_t *in, json_t *chat, oai_err *e) {
    json_t *tools = json_object_get(in, "tools"), *tc = json_object_get(in, "tool_choice");
    if (tools && !json_is_null(tools)) {
        if (!json_is_array(tools)) return BAD(e, "tools", "tools: must be an array");
        json_t *out = json_array(), *t;
        json_object_set_new(chat, "tools", out);
        size_t i;
        json_array_foreach(tools, i, t) {
            char w[64];
            snprintf(w, sizeof w, "tools.%zu", i);
            const char *name = json_string_value(json_object_get(t, "name")), *ty = json_string_value(json_object_get(t, "type"));
            if (ty && strcmp(ty, "custom"))
                return BAD(e, w, "%s.type: server tool '%.60s' is not available: define a custom tool with input_schema", w, ty);
            json_t *schema = json_object_get(t, "input_schema"), *desc = json_object_get(t, "description");
            if (!name) return BAD(e, w, "%s.name: Field required (a string)", w);
            if (!json_is_object(schema)) return BAD(e, w, "%s.input_schema: Field required (a JSON schema object)", w);
            if (desc && !json_is_null(desc) && !json_is_string(desc)) return BAD(e, w, "%s.description: must be a string", w);
            json_t *fn = json_pack("{s:s,s:O}", "name", name, "parameters", schema);
            if (json_is_string(desc)) json_object_set(fn, "description", desc);
            json_array_append_new(out, json_pack("{s:s,s:o}", "type", "function", "function", fn));
        }
    }
    if (!tc || json_is_null(tc)) return 0;
    const char *ty = json_is_object(tc) ? json_string_value(json_object_get(tc, "type")) : NULL;
    if (!ty) return BAD(e, "tool_choice", "tool_choice: must be an object with a 'type' (auto, any, tool or none)");
    if (!strcmp(ty, "auto") || !strcmp(ty, "none")) json_object_set_new(chat, "tool_choice", json_string(ty));
    else if (!strcmp(ty, "any")) json_object_set_new(chat, "tool_choice", json_string("required"));
    else if (!strcmp(ty, "tool")) {
        const char *name = json_string_value(json_object_get(tc, "name"));
        if (!name) return BAD(e, "tool_choice", "tool_choice.name: Field required for type 'tool'");
        json_object_set_new(chat, "tool_choice", json_pack("{s:s,s:{s:s}}", "type", "function", "function", "name", name));
    } else return BAD(e, "tool_choice", "tool_choice.type: must be auto, any, tool or none, got '%.40s'", ty);
    json_t *dp = json_object_get(tc, "disable_parallel_tool_use");
    if (dp && !json_is_null(dp)) {
        if (!json_is_boolean(dp)) return BAD(e, "tool_choice", "tool_choice.disable_parallel_tool_use: must be a boolean");
        if (strcmp(ty, "none")) json_object_set_new(chat, "parallel_tool_calls", json_boolean(!json_is_true(dp)));
    } else if (!strcmp(ty, "tool")) {
        // one named tool: one call, as Claude answers it (a small model otherwise repeats the same call until
        // max_tokens); an explicit disable_parallel_tool_use: false still allows several
        json_object_set_new(chat, "parallel_tool_calls", json_false());
    }
    return 0;
}

// thinking {type: enabled, budget_tokens} | {type: disabled} → chat_template_kwargs.enable_thinking.
static int map_thinking(const json_t *in, json_t *chat, oai_err *e) {
    json_t *th = json_object_get(in, "thinking");
    if (!th || json_is_null(th)) return 0;
    const char *ty = json_is_object(th) ? json_string_value(json_object_get(th, "type")) : NULL;
    if (!ty || (strcmp(ty, "enabled") && strcmp(ty, "disabled")))
        return BAD(e, "thinking", "thinking.type: must be 'enabled' or 'disabled'");
    json_t *b = json_object_get(th, "budget_tokens");
    if (!strcmp(ty, "enabled") && (!json_is_integer(b) || json_integer_value(b) < 1))
        return BAD(e, "thinking", "thinking.budget_tokens: Field required (a positive integer) when thinking is enabled");
    json_object_set_new(chat, "chat_template_kwargs", json_pack("{s:b}", "enable_thinking", !strcmp(ty, "enabled")));
    return 0;
}

// output_config {format: {type: json_schema, schema}} → response_format json_schema (the grammar engine).
static int map_output(const json_t *in, json_t *chat, oai_err *e) {
    json_t *oc = json_object_get(in, "output_config");
    if (!oc || json_is_null(oc)) return 0;
    if (!json_is_object(oc)) return BAD(e, "output_config", "output_config: must be an object");
    const char *key;
    json_t *v;
    json_object_foreach(oc, key, v) {
        if (json_is_null(v)) continue;
        if (!strcmp(key, "effort"))
            return BAD(e, "output_config", "output_config.effort: not supported: this model has no effort control");
        if (strcmp(key, "format")) return BAD(e, "output_config", "output_config.%.40s: Extra inputs are not permitted", key);
        const char *ty = json_string_value(json_object_get(v, "type"));
        json_t *schema = json_object_get(v, "schema");
        if (!ty || strcmp(ty, "json_schema") || !json_is_object(schema))
            return BAD(e, "output_config", "output_config.format: must be {\"type\": \"json_schema\", \"schema\": {...}}");
        json_object_set_new(chat, "response_format", json_pack("{s:s,s:{s:s,s:O}}", "type", "json_schema", "json_schema",
                                                               "name", "output", "schema", schema));
    }
    return 0;
}

// Copies in[from] to chat[to] when present and not null (the chat path checks its type and range).
static void copy_field(const json_t *in, json_t *chat, const char *from, const char *to) {
    json_t *v = json_object_get(in, from);
    if (v && !json_is_null(v)) json_object_set(chat, to, v);
}

int wire_anth_to_chat(const json_t *in, int counting, json_t **out, oai_err *e) {
    *out = NULL;
    if (check_fields(in, e)) return -1;
    json_t *model = json_object_get(in, "model"), *mt = json_object_get(in, "max_tokens");
    if (!json_is_string(model)) return BAD(e, "model", "model: Field required (a string)");
    if (!counting && (!mt || json_is_null(mt))) return BAD(e, "max_tokens", "max_tokens: Field required");
    if (mt && !json_is_null(mt) && (!json_is_integer(mt) || json_integer_value(mt) < 1))
        return BAD(e, "max_tokens", "max_tokens: must be a positive integer");
    json_t *st = json_object_get(in, "stream");
    if (st && !json_is_null(st) && !json_is_boolean(st)) return BAD(e, "stream", "stream: must be a boolean");
    if (counting && json_is_true(st)) return BAD(e, "stream", "stream: not accepted by count_tokens");
    json_t *ss = json_object_get(in, "stop_sequences");
    if (ss && !json_is_null(ss) && !json_is_array(ss))
        return BAD(e, "stop_sequences", "stop_sequences: must be an array of strings");
    json_t *chat = json_pack("{s:O}", "model", model);
    if (map_messages(in, chat, e) || map_tools(in, chat, e) || map_thinking(in, chat, e) || map_output(in, chat, e)) {
        json_decref(chat);
        return -1;
    }
    if (!counting) copy_field(in, chat, "max_tokens", "max_tokens");
    copy_field(in, chat, "temperature", "temperature");
    copy_field(in, chat, "top_p", "top_p");
    copy_field(in, chat, "top_k", "top_k");
    copy_field(in, chat, "grammar", "grammar");
    if (json_array_size(ss)) copy_field(in, chat, "stop_sequences", "stop");
    if (json_is_true(st)) {
        json_object_set_new(chat, "stream", json_true());
        json_object_set_new(chat, "stream_options", json_pack("{s:b}", "include_usage", 1));
    }
    *out = chat;
    return 0;
}
