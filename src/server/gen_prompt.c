// Prompt token ids of generation requests: chat (template-rendered), completions text or token ids (one of
// several prompts), fill-in-the-middle with `suffix`; and the text a completions `echo` prepends.
#include <stdlib.h>
#include <string.h>

#include "server/gen_prompt.h"
#include "server/oai_tools.h"
#include "server/srv_model.h"

// Fill-in-the-middle: <fim_prefix>prompt<fim_suffix>suffix<fim_middle>, for models whose vocabulary has
// those tokens; the others refuse 'suffix' (silently dropping it would answer a different question).
static int fim_ids(srv_model *s, const oai_prompt *p, const char *suffix, int32_t **ids, int *n, oai_err *e) {
    int32_t pre = tok_find(s->vocab, "<fim_prefix>"), suf = tok_find(s->vocab, "<fim_suffix>"),
            mid = tok_find(s->vocab, "<fim_middle>");
    if (pre < 0 || suf < 0 || mid < 0)
        return oai_err_set(e, 400, NULL, NULL, "suffix", "'suffix' (fill-in-the-middle) is not supported: this "
                           "model's vocabulary has no <fim_prefix>/<fim_suffix>/<fim_middle> tokens");
    if (!p->text) return oai_err_set(e, 400, NULL, NULL, "suffix", "'suffix' needs a text prompt, not token ids");
    tc_err err = {0};
    int32_t *a = NULL, *b = NULL;
    int na = 0, nb = 0;
    if (tok_encode(s->vocab, p->text, p->len, 0, &a, &na, &err) ||
        tok_encode(s->vocab, suffix, strlen(suffix), 0, &b, &nb, &err)) {
        free(a);
        return oai_err_set(e, 400, NULL, NULL, "prompt", "%s", err.msg);
    }
    *ids = malloc((size_t)(na + nb + 3) * sizeof **ids);
    if (!*ids) {
        free(a);
        free(b);
        return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    int k = 0;
    (*ids)[k++] = pre;
    for (int i = 0; i < na; i++) (*ids)[k++] = a[i];
    (*ids)[k++] = suf;
    for (int i = 0; i < nb; i++) (*ids)[k++] = b[i];
    (*ids)[k++] = mid;
    *n = k;
    free(a);
    free(b);
    return 0;
}

// The request's messages as a chat template sees them (as vLLM passes them): role and content as parsed (text
// parts joined, unless the template tests whether content is a string: then it gets the parts as sent), the
// other fields as sent, and tool calls' arguments parsed into objects.
static json_t *tmpl_messages(const oai_req *q, int parts) {
    json_t *src = json_object_get(q->root, "messages"), *a = json_array();
    for (int i = 0; a && i < q->n_msgs; i++) {
        json_t *orig = json_array_get(src, (size_t)i), *c = json_deep_copy(orig);
        if (!c || json_array_append_new(a, c)) {
            json_decref(a);
            return NULL;
        }
        json_t *content = json_object_get(orig, "content");
        json_object_set_new(c, "role", json_string(q->msgs[i].role));
        if (!(parts && json_is_array(content)))
            json_object_set_new(c, "content", content && !json_is_null(content) ? json_string(q->msgs[i].content)
                                                                                 : json_null());
        size_t k;
        json_t *call;
        json_array_foreach(json_object_get(c, "tool_calls"), k, call) {
            json_t *fn = json_object_get(call, "function"), *args = json_object_get(fn, "arguments");
            json_t *parsed = json_is_string(args) ? json_loads(json_string_value(args), JSON_DECODE_ANY, NULL) : NULL;
            if (parsed) json_object_set_new(fn, "arguments", parsed);
        }
    }
    return a;
}

// A chat prompt through the model's Jinja template. A template that does not read `tools` gets tool
// definitions, calls and results written into the messages in the family's format (as the built-in
// renderers do); one that reads them gets the request's.
// chat_template_kwargs are the template's variables: one it does not read (enable_thinking on a template
// without a thinking switch) changes nothing, as with transformers.
static int tmpl_ids(srv_model *s, const oai_req *q, int32_t **ids, int *n, oai_err *e) {
    int own_tools = chat_tmpl_reads(s->tmpl, "tools");
    json_t *msgs = NULL;
    if (oai_tools_needed(q) && !own_tools) {
        chat_msg *tmsgs = NULL;
        char **owned = NULL;
        int n_msgs = 0, n_owned = 0;
        if (oai_tools_messages(q, s->chat, &tmsgs, &n_msgs, &owned, &n_owned, e)) return -1;
        msgs = chat_msgs_json(tmsgs, n_msgs);
        oai_tools_msgs_free(tmsgs, owned, n_owned);
    } else {
        msgs = tmpl_messages(q, chat_tmpl_reads(s->tmpl, "is string") || chat_tmpl_reads(s->tmpl, "is not string"));
    }
    if (!msgs) return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
    json_t *tools = own_tools ? json_object_get(q->root, "tools") : NULL;
    tc_err err = {0};
    int rc = chat_tmpl_encode(s->tmpl, s->vocab, msgs, tools && json_is_array(tools) ? tools : NULL,
                              json_object_get(q->root, "chat_template_kwargs"), 1, ids, n, &err);
    json_decref(msgs);
    if (rc == TC_ERR_NOMEM) return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
    if (rc) return oai_err_set(e, 400, NULL, NULL, "messages", "chat template: %s", err.msg);
    return 0;
}

// Chat prompt ids: message text is plain text, only the template's own markers become control tokens.
static int chat_ids(srv_model *s, const oai_req *q, int32_t **ids, int *n, oai_err *e) {
    if (s->tmpl) return tmpl_ids(s, q, ids, n, e);
    tc_err err = {0};
    const chat_msg *msgs = q->msgs;
    int n_msgs = q->n_msgs, n_owned = 0;
    chat_msg *tmsgs = NULL;
    char **owned = NULL;
    if (oai_tools_needed(q)) { // tool definitions, calls and results in the family's format (oai_tools_fmt.c)
        if (oai_tools_messages(q, s->chat, &tmsgs, &n_msgs, &owned, &n_owned, e)) return -1;
        msgs = tmsgs;
    }
    // a built-in family reads enable_thinking only if it has the switch; other kwargs have no template to read them
    chat_opts co = {.enable_thinking = q->enable_thinking != 0};
    int rc = chat_encode_opts(s->vocab, s->chat, s->chat_src, msgs, n_msgs, 1, s->bos_text, &co, ids, n, &err);
    if (tmsgs) oai_tools_msgs_free(tmsgs, owned, n_owned);
    if (rc) return oai_err_set(e, 400, NULL, NULL, "messages", "%s", err.msg);
    return 0;
}

int gen_prompt_ids_at(srv_model *s, const oai_req *q, int pi, int32_t **ids, int *n, oai_err *e) {
    tc_err err = {0};
    const oai_prompt *p = q->kind == OAI_CHAT ? NULL : &q->prompts[pi];
    if (q->kind == OAI_CHAT) {
        if (chat_ids(s, q, ids, n, e)) return -1;
    } else if (q->suffix) {
        if (fim_ids(s, p, q->suffix, ids, n, e)) return -1;
    } else if (p->text) {
        if (tok_encode(s->vocab, p->text, p->len, tok_add_bos(s->vocab) ? TOK_ENC_ADD_BOS : 0, ids, n, &err))
            return oai_err_set(e, 400, NULL, NULL, "prompt", "%s", err.msg);
    } else {
        int nv = tok_n_vocab(s->vocab);
        for (int i = 0; i < p->n_ids; i++)
            if (p->ids[i] >= nv)
                return oai_err_set(e, 400, NULL, NULL, "prompt", "token id %d at position %d is out of range (vocab %d)",
                                   p->ids[i], i, nv);
        *ids = malloc((size_t)p->n_ids * sizeof **ids);
        if (!*ids) return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
        memcpy(*ids, p->ids, (size_t)p->n_ids * sizeof **ids);
        *n = p->n_ids;
    }
    if (*n == 0) {
        int32_t bos = tok_bos(s->vocab);
        free(*ids);
        *ids = NULL;
        if (bos < 0) return oai_err_set(e, 400, NULL, NULL, q->kind == OAI_CHAT ? "messages" : "prompt", "empty prompt");
        *ids = malloc(sizeof **ids);
        if (!*ids) return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
        (*ids)[0] = bos;
        *n = 1;
    }
    return 0;
}

int gen_prompt_ids(srv_model *s, const oai_req *q, int32_t **ids, int *n, oai_err *e) {
    return gen_prompt_ids_at(s, q, 0, ids, n, e);
}

// The text echoed before a completions choice: the prompt as sent, or its token ids detokenized.
int gen_echo_text(srv_model *s, const oai_prompt *p, char **out, size_t *len) {
    if (p->text) {
        *out = malloc(p->len + 1);
        if (!*out) return -1;
        memcpy(*out, p->text, p->len);
        *len = p->len;
        return 0;
    }
    tc_err err = {0};
    return tok_decode(s->vocab, p->ids, p->n_ids, 0, out, len, &err) ? -1 : 0;
}
