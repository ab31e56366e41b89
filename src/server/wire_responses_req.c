// The OpenAI Responses API request → a chat completions body. Every top-level field of the request is in the
// table below: passed to the chat path unchanged (which validates it as it does for /v1/chat/completions),
// translated here, refused with a 400 naming it, or ignored with the reason. A field in no row is refused.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/oai_text.h"
#include "server/wire_responses_impl.h"

enum { WR_PASS, WR_OWN, WR_REFUSE, WR_IGNORE };

static const struct {
    const char *name;
    int how;
    json_type type; // WR_IGNORE: the documented type (null is always accepted)
    const char *why;
} fields[] = {
    // --- passed to the chat path as they are --------------------------------------------------------------
    {"model", WR_PASS, 0, NULL},
    {"stream", WR_PASS, 0, NULL},
    {"temperature", WR_PASS, 0, NULL},
    {"top_p", WR_PASS, 0, NULL},
    {"parallel_tool_calls", WR_PASS, 0, NULL},
    {"truncation", WR_PASS, 0, NULL}, // "disabled" | "auto": the chat path's context-overflow policy
    // tachyon's sampling and scheduling extensions, as on /v1/chat/completions
    {"seed", WR_PASS, 0, NULL},
    {"top_k", WR_PASS, 0, NULL},
    {"min_p", WR_PASS, 0, NULL},
    {"priority", WR_PASS, 0, NULL},
    {"timeout", WR_PASS, 0, NULL},
    {"grammar", WR_PASS, 0, NULL}, // llama.cpp's GBNF text (the model's answer, not text.format)
    // --- translated here ----------------------------------------------------------------------------------
    {"input", WR_OWN, 0, NULL},
    {"instructions", WR_OWN, 0, NULL},
    {"max_output_tokens", WR_OWN, 0, NULL},
    {"tools", WR_OWN, 0, NULL},
    {"tool_choice", WR_OWN, 0, NULL},
    {"text", WR_OWN, 0, NULL},
    {"reasoning", WR_OWN, 0, NULL},
    {"include", WR_OWN, 0, NULL},
    {"stream_options", WR_OWN, 0, NULL},
    {"store", WR_OWN, 0, NULL},
    {"background", WR_OWN, 0, NULL},
    // --- refused ------------------------------------------------------------------------------------------
    {"previous_response_id", WR_REFUSE, 0, "this server does not store responses: send the whole conversation in 'input'"},
    {"conversation", WR_REFUSE, 0, "this server does not store conversations: send the whole conversation in 'input'"},
    {"prompt", WR_REFUSE, 0, "stored prompt templates are an OpenAI platform feature"},
    {"max_tool_calls", WR_REFUSE, 0, "only function tools run here, and the client runs them"},
    {"top_logprobs", WR_REFUSE, 0, "log probabilities are returned by /v1/chat/completions only"},
    // --- ignored: they do not change the generated tokens -----------------------------------------------------
    {"metadata", WR_IGNORE, JSON_OBJECT, "tags for stored responses"},
    {"user", WR_IGNORE, JSON_STRING, "end-user identifier for abuse monitoring"},
    {"safety_identifier", WR_IGNORE, JSON_STRING, "end-user identifier for abuse monitoring"},
    {"prompt_cache_key", WR_IGNORE, JSON_STRING, "prefix caching is automatic"},
    {"prompt_cache_retention", WR_IGNORE, JSON_STRING, "prefix caching is automatic"},
    {"service_tier", WR_IGNORE, JSON_STRING, "one processing tier"},
};

#define BAD(e, param, ...) oai_err_set(e, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

static const char *jtype(const json_t *v) { return oai_jtype(v); } // short for the messages below

static int is(const json_t *v, const char *s) { return json_is_string(v) && !strcmp(json_string_value(v), s); }

int wresp_field_ok(const char *key, const json_t *v) {
    size_t i = 0, n = sizeof fields / sizeof fields[0];
    while (i < n && strcmp(fields[i].name, key)) i++;
    return i < n && (fields[i].how != WR_REFUSE || json_is_null(v));
}

// The table's verdict on each top-level field: WR_PASS fields are copied into out.
static int check_fields(const json_t *in, json_t *out, oai_err *e) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)in, key, v) {
        size_t i = 0, n = sizeof fields / sizeof fields[0];
        while (i < n && strcmp(fields[i].name, key)) i++;
        if (i == n)
            return oai_err_set(e, 400, "invalid_request_error", "unknown_parameter", key,
                               "Unrecognized request argument supplied: %.64s", key);
        if (fields[i].how == WR_PASS) json_object_set(out, key, v);
        if (json_is_null(v)) continue; // an explicit null is the default: nothing asked for
        if (fields[i].how == WR_REFUSE)
            return oai_err_set(e, 400, "invalid_request_error", "unsupported_parameter", key,
                               "'%s' is not supported by this server: %s", key, fields[i].why);
        if (fields[i].how == WR_IGNORE && json_typeof(v) != fields[i].type)
            return oai_err_set(e, 400, "invalid_request_error", "invalid_type", key, "'%s' must be %s", key,
                               fields[i].type == JSON_OBJECT ? "an object" : "a string");
    }
    return 0;
}

// --- input -------------------------------------------------------------------------------------------------

// A message's content: a string, or parts input_text / output_text / refusal joined into one string (new
// reference in *out). Images, files and audio are refused: the models served here read text only.
static int text_of(const json_t *c, const char *param, json_t **out, oai_err *e) {
    if (json_is_string(c)) {
        *out = json_incref((json_t *)c);
        return 0;
    }
    if (!json_is_array(c)) return BAD(e, param, "'%s' must be a string or an array of parts, got %s", param, jtype(c));
    size_t k, total = 0;
    json_t *part;
    json_array_foreach(c, k, part) {
        json_t *ty = json_object_get(part, "type");
        json_t *tx = json_object_get(part, is(ty, "refusal") ? "refusal" : "text");
        if (!json_is_object(part) || !json_is_string(ty))
            return BAD(e, param, "%s[%zu] must be an object with a 'type'", param, k);
        if (!is(ty, "input_text") && !is(ty, "output_text") && !is(ty, "refusal"))
            return BAD(e, param, "%s[%zu]: parts of type '%.32s' are not supported: this server reads text only",
                       param, k, json_string_value(ty));
        if (!json_is_string(tx)) return BAD(e, param, "%s[%zu] must have a string text", param, k);
        total += json_string_length(tx);
    }
    char *s = malloc(total + 1);
    if (!s) return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
    size_t off = 0;
    json_array_foreach(c, k, part) {
        json_t *tx = json_object_get(part, is(json_object_get(part, "type"), "refusal") ? "refusal" : "text");
        memcpy(s + off, json_string_value(tx), json_string_length(tx));
        off += json_string_length(tx);
    }
    *out = json_stringn(s, off);
    free(s);
    return *out ? 0 : oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
}

static int item_message(const json_t *it, const char *param, json_t *msgs, oai_err *e) {
    json_t *role = json_object_get(it, "role"), *content = json_object_get(it, "content");
    if (!is(role, "user") && !is(role, "assistant") && !is(role, "system") && !is(role, "developer"))
        return BAD(e, param, "%s.role must be 'user', 'assistant', 'system' or 'developer'", param);
    char p[64];
    snprintf(p, sizeof p, "%.48s.content", param);
    if (!content) return BAD(e, p, "Missing required parameter: '%s'", p);
    json_t *text;
    if (text_of(content, p, &text, e)) return -1;
    json_array_append_new(msgs, json_pack("{s:O,s:o}", "role", role, "content", text));
    return 0;
}

// The assistant message that a function call joins: the last message when it is the assistant's (a reply
// whose text came before its calls, or parallel calls), else a new one with null content.
static json_t *assistant_for_calls(json_t *msgs) {
    json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
    if (last && is(json_object_get(last, "role"), "assistant")) {
        const char *c = json_string_value(json_object_get(last, "content"));
        if (c && !*c) json_object_set_new(last, "content", json_null());
        return last;
    }
    json_t *m = json_pack("{s:s,s:n}", "role", "assistant", "content");
    json_array_append_new(msgs, m);
    return m;
}

static int item_function_call(const json_t *it, const char *param, json_t *msgs, oai_err *e) {
    json_t *id = json_object_get(it, "call_id"), *name = json_object_get(it, "name");
    json_t *args = json_object_get(it, "arguments");
    if (!json_is_string(id) || !json_is_string(name) || !json_is_string(args))
        return BAD(e, param, "%s: a function_call needs string 'call_id', 'name' and 'arguments'", param);
    json_t *m = assistant_for_calls(msgs), *calls = json_object_get(m, "tool_calls");
    if (!calls) json_object_set_new(m, "tool_calls", calls = json_array());
    json_array_append_new(calls, json_pack("{s:O,s:s,s:{s:O,s:O}}", "id", id, "type", "function", "function", "name",
                                           name, "arguments", args));
    return 0;
}

static int item_function_output(const json_t *it, const char *param, json_t *msgs, oai_err *e) {
    json_t *id = json_object_get(it, "call_id"), *output = json_object_get(it, "output");
    if (!json_is_string(id)) return BAD(e, param, "%s: a function_call_output needs a string 'call_id'", param);
    char p[64];
    snprintf(p, sizeof p, "%.48s.output", param);
    if (!output) return BAD(e, p, "Missing required parameter: '%s'", p);
    json_t *text;
    if (text_of(output, p, &text, e)) return -1;
    json_array_append_new(msgs, json_pack("{s:s,s:O,s:o}", "role", "tool", "tool_call_id", id, "content", text));
    return 0;
}

// input: a string (one user message) or a list of items → chat messages appended to msgs.
static int input_items(const json_t *input, json_t *msgs, oai_err *e) {
    if (!input || json_is_null(input)) return BAD(e, "input", "Missing required parameter: 'input'");
    if (json_is_string(input)) {
        json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", "user", "content", input));
        return 0;
    }
    if (!json_is_array(input)) return BAD(e, "input", "'input' must be a string or an array of items, got %s", jtype(input));
    size_t i;
    json_t *it;
    json_array_foreach(input, i, it) {
        char param[64];
        snprintf(param, sizeof param, "input[%zu]", i);
        if (!json_is_object(it)) return BAD(e, param, "'%s' must be an object, got %s", param, jtype(it));
        json_t *ty = json_object_get(it, "type");
        int rc;
        if (!ty || is(ty, "message")) rc = item_message(it, param, msgs, e);
        else if (is(ty, "function_call")) rc = item_function_call(it, param, msgs, e);
        else if (is(ty, "function_call_output")) rc = item_function_output(it, param, msgs, e);
        else if (is(ty, "reasoning")) rc = 0; // earlier reasoning: chat templates drop it from the prompt too
        else if (is(ty, "item_reference"))
            rc = BAD(e, param, "%s: item references need stored responses, which this server does not keep", param);
        else if (json_is_string(ty))
            rc = BAD(e, param, "%s: items of type '%.48s' are not supported (message, function_call, "
                               "function_call_output and reasoning are)", param, json_string_value(ty));
        else rc = BAD(e, param, "%s.type must be a string", param);
        if (rc) return rc;
    }
    return 0;
}

// --- tools, tool_choice, text.format -----------------------------------------------------------------------

static int tools(const json_t *in, json_t *out, oai_err *e) {
    json_t *t = json_object_get(in, "tools");
    if (!t || json_is_null(t)) return 0;
    if (!json_is_array(t)) return BAD(e, "tools", "'tools' must be an array, got %s", jtype(t));
    json_t *chat = json_array(), *tool;
    size_t k;
    json_object_set_new(out, "tools", chat);
    json_array_foreach(t, k, tool) {
        json_t *ty = json_object_get(tool, "type"), *name = json_object_get(tool, "name");
        if (!json_is_object(tool) || !json_is_string(ty))
            return BAD(e, "tools", "tools[%zu] must be an object with a 'type'", k);
        if (!is(ty, "function"))
            return BAD(e, "tools", "tools[%zu]: tools of type '%.48s' are not supported: this server runs function "
                                   "tools only", k, json_string_value(ty));
        if (!json_is_string(name)) return BAD(e, "tools", "tools[%zu].name must be a string", k);
        json_t *fn = json_pack("{s:O}", "name", name);
        static const char *const keep[] = {"description", "parameters", "strict"};
        for (size_t j = 0; j < 3; j++) {
            json_t *v = json_object_get(tool, keep[j]);
            if (v && !json_is_null(v)) json_object_set(fn, keep[j], v);
        }
        json_array_append_new(chat, json_pack("{s:s,s:o}", "type", "function", "function", fn));
    }
    return 0;
}

static int tool_choice(const json_t *in, json_t *out, oai_err *e) {
    json_t *c = json_object_get(in, "tool_choice");
    if (!c || json_is_null(c)) return 0;
    if (is(c, "auto") || is(c, "none") || is(c, "required")) {
        json_object_set(out, "tool_choice", c);
        return 0;
    }
    json_t *ty = json_object_get(c, "type"), *name = json_object_get(c, "name");
    if (json_is_object(c) && is(ty, "function") && json_is_string(name)) {
        json_object_set_new(out, "tool_choice", json_pack("{s:s,s:{s:O}}", "type", "function", "function", "name", name));
        return 0;
    }
    if (json_is_object(c) && json_is_string(ty))
        return BAD(e, "tool_choice", "tool_choice of type '%.48s' is not supported (auto, none, required or "
                                     "{\"type\": \"function\", \"name\": …})", json_string_value(ty));
    return BAD(e, "tool_choice", "'tool_choice' must be 'auto', 'none', 'required' or {\"type\": \"function\", "
                                 "\"name\": …}");
}

// text: {format: {type: text | json_object | json_schema (name, schema, strict, description)}, verbosity}
static int text_format(const json_t *in, json_t *out, oai_err *e) {
    json_t *t = json_object_get(in, "text");
    if (!t || json_is_null(t)) return 0;
    if (!json_is_object(t)) return BAD(e, "text", "'text' must be an object, got %s", jtype(t));
    const char *key;
    json_t *v;
    json_object_foreach(t, key, v) {
        if (!strcmp(key, "format")) continue;
        if (!strcmp(key, "verbosity") && (json_is_null(v) || is(v, "medium"))) continue; // the default
        if (!strcmp(key, "verbosity")) return BAD(e, "text.verbosity", "this model has no verbosity control");
        return BAD(e, "text", "text.%.32s is not supported (format and verbosity are)", key);
    }
    json_t *f = json_object_get(t, "format");
    if (!f || json_is_null(f)) return 0;
    json_t *ty = json_object_get(f, "type");
    if (!json_is_object(f) || !json_is_string(ty))
        return BAD(e, "text.format", "'text.format' must be an object with a 'type'");
    if (is(ty, "text") || is(ty, "json_object")) {
        json_object_set_new(out, "response_format", json_pack("{s:O}", "type", ty));
        return 0;
    }
    if (!is(ty, "json_schema"))
        return BAD(e, "text.format.type", "text.format.type must be 'text', 'json_object' or 'json_schema'");
    json_t *js = json_object();
    static const char *const keep[] = {"name", "schema", "strict", "description"};
    for (size_t j = 0; j < 4; j++) {
        json_t *x = json_object_get(f, keep[j]);
        if (x && !json_is_null(x)) json_object_set(js, keep[j], x);
    }
    json_object_set_new(out, "response_format", json_pack("{s:s,s:o}", "type", "json_schema", "json_schema", js));
    return 0;
}

// --- the rest ----------------------------------------------------------------------------------------------

// reasoning {effort, summary, generate_summary}: accepted and ignored, because the chat template's family
// decides whether the model reasons and no served model has an effort control; its text comes back as a
// reasoning item. include: only "reasoning.encrypted_content" (ignored: reasoning is returned as plain text).
static int options(const json_t *in, oai_err *e) {
    json_t *r = json_object_get(in, "reasoning"), *v;
    const char *key;
    if (r && !json_is_null(r)) {
        if (!json_is_object(r)) return BAD(e, "reasoning", "'reasoning' must be an object, got %s", jtype(r));
        json_object_foreach(r, key, v) if (strcmp(key, "effort") && strcmp(key, "summary") && strcmp(key, "generate_summary"))
            return BAD(e, "reasoning", "reasoning.%.32s is not supported (effort and summary are)", key);
    }
    json_t *inc = json_object_get(in, "include");
    if (inc && !json_is_null(inc)) {
        if (!json_is_array(inc)) return BAD(e, "include", "'include' must be an array, got %s", jtype(inc));
        size_t k;
        json_array_foreach(inc, k, v) if (!is(v, "reasoning.encrypted_content"))
            return BAD(e, "include", "include[%zu] %s%.64s%s is not supported: this server returns no extra output data",
                       k, json_is_string(v) ? "'" : "", json_is_string(v) ? json_string_value(v) : "(not a string)",
                       json_is_string(v) ? "'" : "");
    }
    json_t *so = json_object_get(in, "stream_options");
    if (so && !json_is_null(so)) { // include_obfuscation: no obfuscation padding is sent either way
        if (!json_is_object(so)) return BAD(e, "stream_options", "'stream_options' must be an object");
        json_object_foreach(so, key, v) if (strcmp(key, "include_obfuscation"))
            return BAD(e, "stream_options", "stream_options.%.32s is not supported", key);
    }
    json_t *st = json_object_get(in, "store");
    if (st && !json_is_null(st) && !json_is_boolean(st)) return BAD(e, "store", "'store' must be a boolean");
    json_t *bg = json_object_get(in, "background");
    if (json_is_true(bg)) return BAD(e, "background", "background responses are not supported: this server does not "
                                                      "store responses");
    if (bg && !json_is_null(bg) && !json_is_boolean(bg)) return BAD(e, "background", "'background' must be a boolean");
    return 0;
}

static int messages(const json_t *in, json_t *out, oai_err *e) {
    json_t *msgs = json_array();
    json_object_set_new(out, "messages", msgs);
    json_t *ins = json_object_get(in, "instructions");
    if (ins && !json_is_null(ins)) {
        if (!json_is_string(ins)) return BAD(e, "instructions", "'instructions' must be a string, got %s", jtype(ins));
        json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", "system", "content", ins));
    }
    size_t n0 = json_array_size(msgs);
    if (input_items(json_object_get(in, "input"), msgs, e)) return -1;
    if (json_array_size(msgs) == n0) return BAD(e, "input", "'input' must contain at least one message");
    return 0;
}

int wresp_to_chat(const json_t *in, json_t **out, oai_err *e) {
    json_t *o = json_object();
    *out = NULL;
    if (check_fields(in, o, e) || options(in, e) || messages(in, o, e) || tools(in, o, e) || tool_choice(in, o, e) ||
        text_format(in, o, e))
        goto err;
    json_t *m = json_object_get(in, "max_output_tokens");
    if (m && !json_is_null(m)) {
        if (!json_is_integer(m) || json_integer_value(m) < 1) {
            BAD(e, "max_output_tokens", "'max_output_tokens' must be a positive integer");
            goto err;
        }
        json_object_set(o, "max_tokens", m);
    }
    if (json_is_true(json_object_get(in, "stream"))) // the usage reaches the stream's final response
        json_object_set_new(o, "stream_options", json_pack("{s:b}", "include_usage", 1));
    *out = o;
    return 0;
err:
    json_decref(o);
    return -1;
}
