// Tool calling formats (see oai_tools.c for the per-family conventions): rendering the conversation, the
// grammar that forces a call, parsing calls out of generated text, and the response / stream shapes.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strbuf.h"
#include "grammar/gram_schema.h"
#include "server/oai.h"
#include "server/oai_tools.h"

static void tb_json(tc_strbuf *b, const json_t *j, size_t flags) {
    char *t = json_dumps(j, flags | JSON_ENCODE_ANY);
    if (!t) b->oom = 1;
    else tc_strbuf_str(b, t);
    free(t);
}
// A call's arguments as the model writes them: the JSON re-serialized, or the string as given.
static void tb_args(tc_strbuf *b, const char *args) {
    json_t *j = json_loads(args, JSON_DECODE_ANY, NULL);
    if (j) tb_json(b, j, 0);
    else tc_strbuf_str(b, args);
    json_decref(j);
}

// --- rendering ---------------------------------------------------------------------------------------

static json_t *tools_json(const oai_req *r) { return json_object_get(r->root, "tools"); }

static void tools_block(const oai_req *r, oai_tool_style st, tc_strbuf *b) {
    json_t *tools = tools_json(r), *t;
    size_t i;
    if (st == OAI_TS_HERMES) {
        tc_strbuf_str(b, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided "
                  "with function signatures within <tools></tools> XML tags:\n<tools>");
        json_array_foreach(tools, i, t) {
            tc_strbuf_str(b, "\n");
            tb_json(b, t, 0);
        }
        tc_strbuf_str(b, "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                  "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
                  "<args-json-object>}\n</tool_call>");
    } else if (st == OAI_TS_LLAMA3) {
        tc_strbuf_str(b, "Given the following functions, please respond with a JSON for a function call with its proper "
                  "arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, "
                  "\"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n");
        json_array_foreach(tools, i, t) {
            tb_json(b, t, JSON_INDENT(4));
            tc_strbuf_str(b, "\n\n");
        }
    } else {
        tc_strbuf_str(b, "[AVAILABLE_TOOLS] ");
        tb_json(b, tools, 0);
        tc_strbuf_str(b, "[/AVAILABLE_TOOLS]");
    }
}

static void calls_text(oai_tool_style st, const json_t *calls, tc_strbuf *b) {
    size_t k;
    json_t *c;
    if (st == OAI_TS_MISTRAL) tc_strbuf_str(b, "[TOOL_CALLS] [");
    json_array_foreach(calls, k, c) {
        json_t *fn = json_object_get(c, "function");
        json_t *name = json_object_get(fn, "name");
        if (k) tc_strbuf_str(b, st == OAI_TS_MISTRAL ? ", " : "\n");
        if (st == OAI_TS_HERMES) tc_strbuf_str(b, "<tool_call>\n");
        tc_strbuf_str(b, "{\"name\": ");
        tb_json(b, name, 0);
        tc_strbuf_str(b, st == OAI_TS_LLAMA3 ? ", \"parameters\": " : ", \"arguments\": ");
        tb_args(b, json_string_value(json_object_get(fn, "arguments")));
        tc_strbuf_str(b, "}");
        if (st == OAI_TS_HERMES) tc_strbuf_str(b, "\n</tool_call>");
    }
    if (st == OAI_TS_MISTRAL) tc_strbuf_str(b, "]");
}

void oai_tools_msgs_free(chat_msg *msgs, char **owned, int n_owned) {
    for (int i = 0; i < n_owned; i++) free(owned[i]);
    free(owned);
    free(msgs);
}

int oai_tools_messages(const oai_req *r, chat_family f, chat_msg **out, int *n_out, char ***owned_out,
                       int *n_owned_out, oai_err *e) {
    oai_tool_style st = oai_tool_style_of(f);
    int n = r->n_msgs;
    chat_msg *msgs = calloc((size_t)n + 1, sizeof *msgs);
    char **owned = calloc((size_t)n + 2, sizeof *owned);
    int k = 0, no = 0, oom = !msgs || !owned;
    json_t *jm = json_object_get(r->root, "messages");
    int active = oai_tools_active(r);
    int last_user = -1, first_user = -1;
    for (int i = 0; i < n; i++)
        if (!strcmp(r->msgs[i].role, "user")) last_user = i, first_user = first_user < 0 ? i : first_user;
    if (!oom && active && st == OAI_TS_HERMES) { // definitions go into the system message
        tc_strbuf b = {0};
        if (n > 0 && !strcmp(r->msgs[0].role, "system") && r->msgs[0].content[0]) {
            tc_strbuf_str(&b, r->msgs[0].content);
            tc_strbuf_str(&b, "\n\n");
        }
        tools_block(r, st, &b);
        oom |= b.oom;
        owned[no++] = b.p;
        msgs[k++] = (chat_msg){"system", b.p ? b.p : ""};
    }
    for (int i = 0; i < n && !oom; i++) {
        const chat_msg *m = &r->msgs[i];
        json_t *jmsg = json_array_get(jm, (size_t)i);
        json_t *calls = json_object_get(jmsg, "tool_calls");
        tc_strbuf b = {0};
        if (i == 0 && active && st == OAI_TS_HERMES && !strcmp(m->role, "system")) continue; // merged above
        if (!strcmp(m->role, "tool")) {
            if (st == OAI_TS_HERMES) { // consecutive results share one user turn
                int merge = k > 0 && i > 0 && !strcmp(r->msgs[i - 1].role, "tool");
                if (merge) {
                    tc_strbuf_str(&b, msgs[k - 1].content);
                    tc_strbuf_str(&b, "\n");
                }
                tc_strbuf_str(&b, "<tool_response>\n");
                tc_strbuf_str(&b, m->content);
                tc_strbuf_str(&b, "\n</tool_response>");
                if (merge) k--;
                msgs[k] = (chat_msg){"user", NULL};
            } else if (st == OAI_TS_LLAMA3) {
                tc_strbuf_str(&b, m->content);
                msgs[k] = (chat_msg){"ipython", NULL};
            } else {
                tc_strbuf_str(&b, "[TOOL_RESULTS] ");
                json_t *res = json_pack("{s:s,s:s}", "call_id", json_string_value(json_object_get(jmsg, "tool_call_id")),
                                        "content", m->content);
                tb_json(&b, res, 0);
                json_decref(res);
                tc_strbuf_str(&b, "[/TOOL_RESULTS]");
                msgs[k] = (chat_msg){"user", NULL};
            }
        } else if (!strcmp(m->role, "assistant") && json_is_array(calls) && json_array_size(calls)) {
            if (m->content[0]) {
                tc_strbuf_str(&b, m->content);
                tc_strbuf_str(&b, "\n");
            }
            calls_text(st, calls, &b);
            msgs[k] = (chat_msg){"assistant", NULL};
        } else if (active && !strcmp(m->role, "user") &&
                   ((st == OAI_TS_LLAMA3 && i == first_user) || (st == OAI_TS_MISTRAL && i == last_user))) {
            tools_block(r, st, &b);
            tc_strbuf_str(&b, m->content);
            msgs[k] = (chat_msg){"user", NULL};
        } else {
            msgs[k++] = *m;
            continue;
        }
        oom |= b.oom;
        owned[no++] = b.p;
        msgs[k++].content = b.p ? b.p : "";
    }
    if (oom) {
        oai_tools_msgs_free(msgs, owned, no);
        return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    *out = msgs, *n_out = k, *owned_out = owned, *n_owned_out = no;
    return 0;
}

// --- the forced-call grammar ---------------------------------------------------------------------------

int oai_wants_grammar(const oai_req *r) {
    return r->ext.grammar || (oai_tools_active(r) && r->ext.choice != OAI_TC_AUTO);
}

int oai_output_grammar(const oai_req *r, tool_fmt f, char **gbnf, oai_err *e) {
    *gbnf = NULL;
    if (r->ext.grammar) {
        if (!(*gbnf = strdup(r->ext.grammar))) return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
        return 0;
    }
    if (!oai_wants_grammar(r)) return 0;
    tool_gram_fn *fns = calloc((size_t)r->ext.n_tools, sizeof *fns);
    if (!fns) return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
    int n = 0;
    for (int i = 0; i < r->ext.n_tools; i++) {
        if (r->ext.choice == OAI_TC_NAMED && i != r->ext.named) continue;
        const oai_tool *t = &r->ext.tools[i];
        fns[n++] = (tool_gram_fn){t->name, t->params, t->strict};
    }
    tc_err err = {0};
    // one call unless the request asks for parallel calls (a forced choice means "call it", not "call it
    // again and again")
    int rc = tool_fmt_grammar(f, fns, n, r->ext.parallel == 1, gbnf, &err);
    free(fns);
    if (rc == TC_ERR_NOMEM) return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
    if (rc) return oai_err_set(e, 400, "invalid_request_error", NULL, "tools", "%s", err.msg);
    return 0;
}

// --- response shapes -----------------------------------------------------------------------------------

void oai_choice_set_tool_calls(json_t *choice, json_t *calls, const char *content) {
    json_t *msg = json_object_get(choice, "message");
    json_object_set_new(msg, "content", content ? json_string(content) : json_null());
    json_object_set_new(msg, "tool_calls", calls);
    json_object_set_new(choice, "finish_reason", json_string("tool_calls"));
}

static json_t *delta_chunk(const char *id, long created, const char *model, int choice_index, json_t *tc) {
    json_t *ch = oai_chunk(OAI_CHAT, id, created, model, choice_index, NULL, NULL, 0, NULL, NULL);
    json_t *delta = json_object_get(json_array_get(json_object_get(ch, "choices"), 0), "delta");
    json_object_set_new(delta, "tool_calls", json_pack("[o]", tc));
    return ch;
}

json_t *oai_tool_call_chunks(const char *id, long created, const char *model, int choice_index, const json_t *calls) {
    json_t *out = json_array();
    size_t k;
    json_t *c;
    json_array_foreach(calls, k, c) {
        json_t *fn = json_object_get(c, "function");
        json_array_append_new(out, delta_chunk(id, created, model, choice_index,
                                               json_pack("{s:i,s:O,s:s,s:{s:O,s:s}}", "index", (int)k, "id",
                                                         json_object_get(c, "id"), "type", "function", "function",
                                                         "name", json_object_get(fn, "name"), "arguments", "")));
        const char *a = json_string_value(json_object_get(fn, "arguments"));
        size_t n = a ? strlen(a) : 0;
        for (size_t off = 0; off < n;) { // fragments of about 16 bytes, cut between UTF-8 characters
            size_t m = n - off < 16 ? n - off : 16;
            while (off + m < n && ((unsigned char)a[off + m] & 0xC0) == 0x80) m++;
            json_t *frag = json_stringn(a + off, m);
            json_array_append_new(out, delta_chunk(id, created, model, choice_index,
                                                   json_pack("{s:i,s:{s:o}}", "index", (int)k, "function", "arguments", frag)));
            off += m;
        }
    }
    return out;
}
