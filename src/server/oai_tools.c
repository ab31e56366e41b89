// Structured outputs and tool calling (see oai_tools.h). Tool formats per family:
//   Hermes (ChatML: SmolLM2, Qwen, and the fallback for others): tools as JSON lines inside <tools></tools>
//     in the system message; calls as <tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>; results as a
//     user turn wrapped in <tool_response></tool_response> (Qwen2.5's template).
//   Llama 3.1+: tools as JSON in the first user message; a call is {"name": …, "parameters": {…}}; results
//     in an "ipython" turn.
//   Mistral: [AVAILABLE_TOOLS] […] [/AVAILABLE_TOOLS] before the last user message's text, calls as
//     [TOOL_CALLS] [{"name": …, "arguments": {…}}], results as [TOOL_RESULTS] {…} [/TOOL_RESULTS]. These are
//     control tokens in Mistral's v3 vocabulary but here they are message text (plain), like everything that
//     comes from the request: the model reads them spelled out, and nothing a user sends becomes a marker.
#include "server/oai_tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram.h"
#include "grammar/gram_schema.h"
#include "server/oai.h"

#define BAD(e, param, ...) oai_err_set(e, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

oai_tool_style oai_tool_style_of(chat_family f) {
    return f == CHAT_LLAMA3 ? OAI_TS_LLAMA3 : f == CHAT_MISTRAL ? OAI_TS_MISTRAL : OAI_TS_HERMES;
}

// --- parsing the request -------------------------------------------------------------------------------

static int parse_response_format(oai_req *r, oai_err *e) {
    json_t *rf = json_object_get(r->root, "response_format");
    if (!rf || json_is_null(rf)) return 0;
    if (!json_is_object(rf)) return BAD(e, "response_format", "'response_format' must be an object");
    const char *type = json_string_value(json_object_get(rf, "type"));
    if (!type) return BAD(e, "response_format.type", "'response_format.type' must be a string");
    tc_err err = {0};
    if (!strcmp(type, "text")) return 0;
    r->ext.grammar_param = "response_format";
    if (!strcmp(type, "json_object")) {
        if (gram_json_object_gbnf(&r->ext.grammar, &err)) return oai_err_set(e, 500, "server_error", NULL, NULL, "%s", err.msg);
        return 0;
    }
    if (strcmp(type, "json_schema"))
        return BAD(e, "response_format.type", "'response_format.type' must be text, json_object or json_schema, got '%.40s'", type);
    json_t *js = json_object_get(rf, "json_schema");
    if (!json_is_object(js)) return BAD(e, "response_format.json_schema", "'response_format.json_schema' must be an object");
    json_t *name = json_object_get(js, "name"), *schema = json_object_get(js, "schema"), *strict = json_object_get(js, "strict");
    if (name && !json_is_string(name)) return BAD(e, "response_format.json_schema.name", "'name' must be a string");
    if (strict && !json_is_null(strict) && !json_is_boolean(strict))
        return BAD(e, "response_format.json_schema.strict", "'strict' must be a boolean");
    if (!schema || json_is_null(schema)) { // no schema: any JSON object
        if (gram_json_object_gbnf(&r->ext.grammar, &err)) return oai_err_set(e, 500, "server_error", NULL, NULL, "%s", err.msg);
        return 0;
    }
    r->ext.grammar_param = "response_format.json_schema.schema";
    if (gram_schema_gbnf(schema, json_is_true(strict), &r->ext.grammar, &err))
        return err.code == TC_ERR_NOMEM ? oai_err_set(e, 500, "server_error", NULL, NULL, "%s", err.msg)
                                        : BAD(e, "response_format.json_schema.schema", "%s", err.msg);
    return 0; // compiled later, off the event loop (srv_grammar.c)
}

static int valid_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 64) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

static int parse_tools(oai_req *r, oai_err *e) {
    json_t *tools = json_object_get(r->root, "tools");
    oai_ext *x = &r->ext;
    x->parallel = -1;
    if (tools && !json_is_null(tools)) {
        if (r->kind != OAI_CHAT) return BAD(e, "tools", "'tools' is only supported for chat completions");
        if (!json_is_array(tools)) return BAD(e, "tools", "'tools' must be an array");
        size_t n = json_array_size(tools);
        if (n > 128) return BAD(e, "tools", "at most 128 tools are supported");
        x->tools = calloc(n ? n : 1, sizeof *x->tools);
        if (!x->tools) return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
        for (size_t i = 0; i < n; i++) {
            json_t *t = json_array_get(tools, i), *fn = json_object_get(t, "function");
            char param[64];
            snprintf(param, sizeof param, "tools[%zu]", i);
            const char *type = json_string_value(json_object_get(t, "type"));
            if (!json_is_object(t) || !type || strcmp(type, "function") || !json_is_object(fn))
                return BAD(e, param, "'%s' must be {\"type\": \"function\", \"function\": {…}}", param);
            snprintf(param, sizeof param, "tools[%zu].function.name", i);
            json_t *name = json_object_get(fn, "name"), *desc = json_object_get(fn, "description");
            json_t *params = json_object_get(fn, "parameters"), *strict = json_object_get(fn, "strict");
            if (!json_is_string(name) || !valid_name(json_string_value(name)))
                return BAD(e, param, "'%s' must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -", param);
            for (int k = 0; k < x->n_tools; k++)
                if (!strcmp(x->tools[k].name, json_string_value(name)))
                    return BAD(e, param, "two tools are named '%s'", x->tools[k].name);
            oai_tool *tl = &x->tools[x->n_tools++];
            tl->name = json_string_value(name);
            tl->description = json_is_string(desc) ? json_string_value(desc) : NULL;
            tl->params = json_is_object(params) ? params : NULL;
            tl->strict = json_is_true(strict);
            snprintf(param, sizeof param, "tools[%zu].function.parameters", i);
            if (params && !json_is_null(params) && !json_is_object(params))
                return BAD(e, param, "'%s' must be a JSON schema object", param);
            if (tl->params) { // compile once now so that a bad schema is a 400 here, not later
                char *g = NULL;
                tc_err err = {0};
                int rc = gram_schema_gbnf(tl->params, tl->strict, &g, &err);
                free(g);
                if (rc) return BAD(e, param, "%s", err.msg);
            }
        }
    }
    json_t *tc = json_object_get(r->root, "tool_choice");
    if (tc && !json_is_null(tc)) {
        if (json_is_string(tc)) {
            const char *s = json_string_value(tc);
            if (!strcmp(s, "auto")) x->choice = OAI_TC_AUTO;
            else if (!strcmp(s, "none")) x->choice = OAI_TC_NONE;
            else if (!strcmp(s, "required")) x->choice = OAI_TC_REQUIRED;
            else return BAD(e, "tool_choice", "'tool_choice' must be auto, none, required or a function, got '%.40s'", s);
        } else if (json_is_object(tc)) {
            const char *type = json_string_value(json_object_get(tc, "type"));
            const char *name = json_string_value(json_object_get(json_object_get(tc, "function"), "name"));
            if (!type || strcmp(type, "function") || !name)
                return BAD(e, "tool_choice", "'tool_choice' must be {\"type\": \"function\", \"function\": {\"name\": …}}");
            x->choice = OAI_TC_NAMED;
            x->named = -1;
            for (int k = 0; k < x->n_tools; k++)
                if (!strcmp(x->tools[k].name, name)) x->named = k;
            if (x->named < 0) return BAD(e, "tool_choice", "tool_choice names '%.64s', which is not in 'tools'", name);
        } else return BAD(e, "tool_choice", "'tool_choice' must be a string or an object");
        if ((x->choice == OAI_TC_REQUIRED || x->choice == OAI_TC_NAMED) && x->n_tools == 0)
            return BAD(e, "tool_choice", "tool_choice '%s' needs 'tools'", x->choice == OAI_TC_NAMED ? "function" : "required");
    }
    json_t *par = json_object_get(r->root, "parallel_tool_calls");
    if (par && !json_is_null(par)) {
        if (!json_is_boolean(par)) return BAD(e, "parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
        x->parallel = json_is_true(par);
    }
    return 0;
}

// Tool messages need tool_call_id; assistant tool_calls need a function name and string arguments.
static int check_messages(oai_req *r, oai_err *e) {
    json_t *msgs = json_object_get(r->root, "messages");
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        char param[80];
        if (role && !strcmp(role, "tool")) {
            snprintf(param, sizeof param, "messages[%zu].tool_call_id", i);
            if (!json_is_string(json_object_get(m, "tool_call_id")))
                return BAD(e, param, "'%s' must be a string", param);
        }
        json_t *calls = json_object_get(m, "tool_calls");
        if (!calls || json_is_null(calls)) continue;
        snprintf(param, sizeof param, "messages[%zu].tool_calls", i);
        if (!role || strcmp(role, "assistant") || !json_is_array(calls))
            return BAD(e, param, "'%s' must be an array on an assistant message", param);
        size_t k;
        json_t *c;
        json_array_foreach(calls, k, c) {
            json_t *fn = json_object_get(c, "function");
            if (!json_is_string(json_object_get(fn, "name")) || !json_is_string(json_object_get(fn, "arguments")))
                return BAD(e, param, "tool call %zu needs function.name and function.arguments (a JSON string)", k);
        }
    }
    return 0;
}

int oai_ext_parse(oai_req *r, oai_err *e) {
    memset(&r->ext, 0, sizeof r->ext);
    if (parse_response_format(r, e) || parse_tools(r, e)) return -1;
    json_t *g = json_object_get(r->root, "grammar");
    if (g && !json_is_null(g)) {
        if (!json_is_string(g)) return BAD(e, "grammar", "'grammar' must be a string (GBNF)");
        if (r->ext.grammar) return BAD(e, "grammar", "'grammar' and 'response_format' cannot be combined");
        r->ext.grammar_param = "grammar"; // compiled later, off the event loop (srv_grammar.c)
        if (!(r->ext.grammar = strdup(json_string_value(g)))) return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    if (r->ext.grammar && oai_tools_active(r) && r->ext.choice != OAI_TC_AUTO)
        return BAD(e, "tool_choice", "a forced tool call cannot be combined with 'response_format' or 'grammar'");
    if (r->kind == OAI_CHAT && check_messages(r, e)) return -1;
    return 0;
}

void oai_ext_free(oai_ext *x) {
    free(x->grammar);
    free(x->tools);
    memset(x, 0, sizeof *x);
}

int oai_tools_active(const oai_req *r) { return r->ext.n_tools > 0 && r->ext.choice != OAI_TC_NONE; }

int oai_tools_needed(const oai_req *r) {
    if (oai_tools_active(r)) return 1;
    for (int i = 0; i < r->n_msgs; i++)
        if (!strcmp(r->msgs[i].role, "tool")) return 1;
    json_t *m;
    size_t i;
    json_array_foreach(json_object_get(r->root, "messages"), i, m) if (json_is_array(json_object_get(m, "tool_calls"))) return 1;
    return 0;
}
