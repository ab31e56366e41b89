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

int gen_prompt_ids_at(srv_model *s, const oai_req *q, int pi, int32_t **ids, int *n, oai_err *e) {
    tc_err err = {0};
    const oai_prompt *p = q->kind == OAI_CHAT ? NULL : &q->prompts[pi];
    if (q->kind == OAI_CHAT) {
        // message text is plain text: only the template's own markers become control tokens
        const chat_msg *msgs = q->msgs;
        int n_msgs = q->n_msgs, n_owned = 0;
        chat_msg *tmsgs = NULL;
        char **owned = NULL;
        if (oai_tools_needed(q)) { // tool definitions, calls and results in the family's format (oai_tools_fmt.c)
            if (oai_tools_messages(q, s->chat, &tmsgs, &n_msgs, &owned, &n_owned, e)) return -1;
            msgs = tmsgs;
        }
        if (q->enable_thinking >= 0 && !chat_family_has_thinking_switch(s->chat)) {
            if (tmsgs) oai_tools_msgs_free(tmsgs, owned, n_owned);
            return oai_err_set(e, 400, NULL, NULL, "chat_template_kwargs", "'chat_template_kwargs.enable_thinking' is "
                               "not supported: this model's chat template (%s) has no thinking switch",
                               chat_family_name(s->chat));
        }
        chat_opts co = {.enable_thinking = q->enable_thinking != 0};
        int rc = chat_encode_opts(s->vocab, s->chat, s->chat_src, msgs, n_msgs, 1, s->bos_text, &co, ids, n, &err);
        if (tmsgs) oai_tools_msgs_free(tmsgs, owned, n_owned);
        if (rc) return oai_err_set(e, 400, NULL, NULL, "messages", "%s", err.msg);
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
