// OpenAI response JSON, logprobs, SSE framing and the stop-string holdback buffer.
#include <stdlib.h>
#include <string.h>

#include "server/oai.h"

// --- responses -------------------------------------------------------------------------------------

static const char *obj_name(oai_kind kind, int chunk) {
    if (kind == OAI_COMPLETION) return "text_completion";
    return chunk ? "chat.completion.chunk" : "chat.completion";
}

json_t *oai_chunk(oai_kind kind, const char *id, long created, const char *model, int index, const char *role,
                  const char *content, size_t content_len, const char *finish_reason, json_t *logprobs) {
    json_t *c = json_object();
    json_object_set_new(c, "index", json_integer(index));
    if (kind == OAI_CHAT) {
        json_t *delta = json_object();
        if (role) json_object_set_new(delta, "role", json_string(role));
        if (content) json_object_set_new(delta, "content", oai_json_text(content, content_len));
        json_object_set_new(c, "delta", delta);
    } else {
        json_object_set_new(c, "text", oai_json_text(content ? content : "", content ? content_len : 0));
    }
    json_object_set_new(c, "logprobs", logprobs ? logprobs : json_null());
    json_object_set_new(c, "finish_reason", finish_reason ? json_string(finish_reason) : json_null());
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(id));
    json_object_set_new(o, "object", json_string(obj_name(kind, 1)));
    json_object_set_new(o, "created", json_integer(created));
    json_object_set_new(o, "model", json_string(model));
    json_object_set_new(o, "system_fingerprint", json_null());
    json_object_set_new(o, "choices", json_pack("[o]", c));
    return o;
}

json_t *oai_usage(int prompt_tokens, int completion_tokens, int cached_tokens) {
    return json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", prompt_tokens, "completion_tokens", completion_tokens,
                     "total_tokens", prompt_tokens + completion_tokens, "prompt_tokens_details", "cached_tokens",
                     cached_tokens);
}

void oai_usage_prediction(json_t *usage, int accepted, int rejected) {
    if (!usage) return;
    json_object_set_new(usage, "completion_tokens_details",
                        json_pack("{s:i,s:i}", "accepted_prediction_tokens", accepted, "rejected_prediction_tokens",
                                  rejected));
}

void oai_usage_truncated(json_t *usage, int truncated) {
    json_t *d = json_object_get(usage, "prompt_tokens_details");
    if (d) json_object_set_new(d, "truncated_tokens", json_integer(truncated));
}

json_t *oai_usage_chunk(oai_kind kind, const char *id, long created, const char *model, json_t *usage) {
    return json_pack("{s:s,s:s,s:I,s:s,s:n,s:[],s:o}", "id", id, "object", obj_name(kind, 1), "created",
                     (json_int_t)created, "model", model, "system_fingerprint", "choices", "usage", usage);
}

json_t *oai_choice(oai_kind kind, int index, const char *text, size_t len, const char *finish_reason,
                   json_t *logprobs) {
    json_t *c = json_object();
    json_object_set_new(c, "index", json_integer(index));
    if (kind == OAI_CHAT)
        json_object_set_new(c, "message", json_pack("{s:s,s:o,s:n}", "role", "assistant", "content",
                                                    oai_json_text(text, len), "refusal"));
    else json_object_set_new(c, "text", oai_json_text(text, len));
    json_object_set_new(c, "logprobs", logprobs ? logprobs : json_null());
    json_object_set_new(c, "finish_reason", finish_reason ? json_string(finish_reason) : json_null());
    return c;
}

json_t *oai_response(oai_kind kind, const char *id, long created, const char *model, json_t *choices,
                     json_t *usage) {
    return json_pack("{s:s,s:s,s:I,s:s,s:n,s:o,s:o}", "id", id, "object", obj_name(kind, 0), "created",
                     (json_int_t)created, "model", model, "system_fingerprint", "choices", choices, "usage", usage);
}

// --- logprobs --------------------------------------------------------------------------------------

static json_t *bytes_array(const char *s, int len) {
    json_t *a = json_array();
    for (int i = 0; i < len; i++) json_array_append_new(a, json_integer((unsigned char)s[i]));
    return a;
}

static json_t *lp_tok(const oai_lp_tok *t) {
    return json_pack("{s:o,s:f,s:o}", "token", oai_json_text(t->text, (size_t)t->len), "logprob", (double)t->logprob,
                     "bytes", bytes_array(t->text, t->len));
}

json_t *oai_lp_chat_entry(const oai_lp_tok *chosen, const oai_lp_tok *top, int n_top) {
    json_t *e = lp_tok(chosen);
    json_t *a = json_array();
    for (int i = 0; i < n_top; i++) json_array_append_new(a, lp_tok(&top[i]));
    json_object_set_new(e, "top_logprobs", a);
    return e;
}

json_t *oai_lp_chat_new(void) { return json_pack("{s:[],s:n}", "content", "refusal"); }

json_t *oai_lp_cmpl_new(void) {
    return json_pack("{s:[],s:[],s:[],s:[]}", "tokens", "token_logprobs", "top_logprobs", "text_offset");
}

void oai_lp_cmpl_append(json_t *lp, const oai_lp_tok *chosen, const oai_lp_tok *top, int n_top, long text_offset) {
    json_array_append_new(json_object_get(lp, "tokens"), oai_json_text(chosen->text, (size_t)chosen->len));
    json_array_append_new(json_object_get(lp, "token_logprobs"), json_real(chosen->logprob));
    json_t *d = json_object();
    for (int i = 0; i < n_top; i++) {
        json_t *k = oai_json_text(top[i].text, (size_t)top[i].len);
        if (k) json_object_set_new(d, json_string_value(k), json_real(top[i].logprob));
        json_decref(k);
    }
    json_array_append_new(json_object_get(lp, "top_logprobs"), d);
    json_array_append_new(json_object_get(lp, "text_offset"), json_integer(text_offset));
}

// --- SSE -------------------------------------------------------------------------------------------

char *oai_sse_frame(const json_t *j, size_t *len) {
    char *s = json_dumps(j, JSON_COMPACT);
    if (!s) return NULL;
    size_t n = strlen(s);
    char *f = malloc(n + 9);
    if (f) {
        memcpy(f, "data: ", 6);
        memcpy(f + 6, s, n);
        memcpy(f + 6 + n, "\n\n", 3);
        *len = n + 8;
    }
    free(s);
    return f;
}

// --- stop strings ----------------------------------------------------------------------------------

void oai_stopbuf_init(oai_stopbuf *b, const char *const *stops, int n_stops) {
    memset(b, 0, sizeof *b);
    b->stops = stops;
    b->n_stops = n_stops;
}

void oai_stopbuf_free(oai_stopbuf *b) {
    free(b->text);
    memset(b, 0, sizeof *b);
}

int oai_stopbuf_push(oai_stopbuf *b, const char *s, size_t n) {
    if (b->matched) return 0;
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        if (cap < 256) cap = 256;
        char *t = realloc(b->text, cap);
        if (!t) return -1;
        b->text = t;
        b->cap = cap;
    }
    memcpy(b->text + b->len, s, n);
    b->len += n;
    b->text[b->len] = 0;
    // A match can only start at or after b->emitted: everything before was released because no stop string
    // could start there. Take the earliest match over all stop strings.
    size_t best = (size_t)-1, best_len = 0, from = b->emitted > b->search_from ? b->emitted : b->search_from;
    const char *which = NULL;
    for (int i = 0; i < b->n_stops && from < b->len; i++) {
        const char *m = memmem(b->text + from, b->len - from, b->stops[i], strlen(b->stops[i]));
        if (m && (size_t)(m - b->text) < best)
            best = (size_t)(m - b->text), best_len = strlen(b->stops[i]), which = b->stops[i];
    }
    if (best != (size_t)-1) {
        b->len = best + (b->keep_stop ? best_len : 0);
        b->text[b->len] = 0;
        b->matched = 1;
        b->which = which;
        return 1;
    }
    return 0;
}

size_t oai_stopbuf_safe(const oai_stopbuf *b) {
    size_t safe = b->len;
    if (!b->matched) {
        // hold back the longest tail that is a proper prefix of some stop string
        for (int i = 0; i < b->n_stops; i++) {
            size_t sl = strlen(b->stops[i]);
            size_t kmax = sl - 1 < b->len - b->emitted ? sl - 1 : b->len - b->emitted;
            for (size_t k = kmax; k > 0; k--) {
                if (!memcmp(b->text + b->len - k, b->stops[i], k)) {
                    if (b->len - k < safe) safe = b->len - k;
                    break;
                }
            }
        }
    }
    return safe;
}

void oai_stopbuf_take(oai_stopbuf *b, int final, const char **p, size_t *n) {
    size_t safe = final ? b->len : oai_stopbuf_safe(b);
    *p = b->text ? b->text + b->emitted : "";
    *n = safe - b->emitted;
    b->emitted = safe;
}
