// The small endpoints: /health, the dashboard, /v1/models, /tokenize and /detokenize (see srv_simple.h).
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdlib.h>
#include <string.h>

#include "common/timeutil.h"
#include "server/dashboard_html.h"
#include "server/gen_prompt.h"
#include "server/srv_model.h"
#include "server/srv_reply.h"
#include "server/srv_route.h"
#include "server/srv_simple.h"

static int body_json(struct evhttp_request *req, json_t **out, oai_err *e) {
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    const char *p = len ? (const char *)evbuffer_pullup(in, -1) : "";
    json_error_t je;
    *out = json_loadb(p, len, 0, &je);
    if (!*out) return oai_err_set(e, 400, NULL, NULL, NULL, "We could not parse the JSON body of your request: %s", je.text);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return oai_err_set(e, 400, NULL, NULL, NULL, "The request body must be a JSON object");
    }
    return 0;
}

static void send_ids(srv_model *s, struct evhttp_request *req, int32_t *ids, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(ids[i]));
    srv_send_json(&s->o, req, 200, json_pack("{s:o}", "tokens", a));
}

// /tokenize {"messages": [...]}: the prompt ids a chat completion with these messages would use.
static int tokenize_chat(srv_model *s, struct evhttp_request *req, oai_err *e) {
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    oai_req q;
    if (oai_parse(OAI_CHAT, len ? (const char *)evbuffer_pullup(in, -1) : "", len, &q, e)) return -1;
    int32_t *ids = NULL;
    int n = 0;
    int rc = gen_prompt_ids(s, &q, &ids, &n, e);
    oai_req_free(&q);
    if (rc) return -1;
    send_ids(s, req, ids, n);
    free(ids);
    return 200;
}

// /tokenize runs on the event loop: a body this large takes ~150 ms to tokenize there (every stream stalls
// meanwhile), so larger ones are refused. Generation tokenizes large prompts on the worker (gen_launch.c).
#define SRV_TOKENIZE_MAX_BODY (1u << 20) // bytes

int srv_ep_tokenize(srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *e) {
    (void)kind;
    size_t len = evbuffer_get_length(evhttp_request_get_input_buffer(req));
    if (len > SRV_TOKENIZE_MAX_BODY)
        return oai_err_set(e, 413, "invalid_request_error", "request_too_large", NULL,
                           "/tokenize takes bodies of at most %u bytes, got %zu", SRV_TOKENIZE_MAX_BODY, len);
    json_t *b;
    if (body_json(req, &b, e)) return -1;
    if (json_object_get(b, "messages") && !json_object_get(b, "content")) {
        json_decref(b);
        return tokenize_chat(s, req, e);
    }
    json_t *c = json_object_get(b, "content"), *as = json_object_get(b, "add_special"),
           *ps = json_object_get(b, "parse_special");
    if (!json_is_string(c)) {
        json_decref(b);
        return oai_err_set(e, 400, NULL, NULL, "content", "'content' must be a string");
    }
    if ((as && !json_is_boolean(as)) || (ps && !json_is_boolean(ps))) {
        json_decref(b);
        return oai_err_set(e, 400, NULL, NULL, as && !json_is_boolean(as) ? "add_special" : "parse_special",
                           "must be a boolean");
    }
    int flags = (json_is_true(as) ? TOK_ENC_ADD_BOS : 0) | (ps && json_is_false(ps) ? 0 : TOK_ENC_PARSE_SPECIAL);
    int32_t *ids = NULL;
    int n = 0;
    tc_err err = {0};
    if (tok_encode(s->vocab, json_string_value(c), json_string_length(c), flags, &ids, &n, &err)) {
        json_decref(b);
        return oai_err_set(e, 400, NULL, NULL, "content", "%s", err.msg);
    }
    send_ids(s, req, ids, n);
    free(ids);
    json_decref(b);
    return 200;
}

int srv_ep_detokenize(srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *e) {
    (void)kind;
    json_t *b;
    if (body_json(req, &b, e)) return -1;
    json_t *t = json_object_get(b, "tokens");
    if (!json_is_array(t)) {
        json_decref(b);
        return oai_err_set(e, 400, NULL, NULL, "tokens", "'tokens' must be an array of token ids");
    }
    size_t n = json_array_size(t);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    int nv = tok_n_vocab(s->vocab);
    for (size_t i = 0; ids && i < n; i++) {
        json_t *x = json_array_get(t, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= nv) {
            free(ids);
            json_decref(b);
            return oai_err_set(e, 400, NULL, NULL, "tokens", "token %zu is not a valid id (0..%d)", i, nv - 1);
        }
        ids[i] = (int32_t)json_integer_value(x);
    }
    char *text = NULL;
    size_t len = 0;
    tc_err err = {0};
    if (!ids || tok_decode(s->vocab, ids, (int)n, 0, &text, &len, &err)) {
        free(ids);
        json_decref(b);
        return oai_err_set(e, 500, "server_error", NULL, NULL, "detokenize failed: %s", err.msg);
    }
    free(ids);
    json_decref(b);
    srv_send_json(&s->o, req, 200, json_pack("{s:o}", "content", oai_json_text(text, len)));
    free(text);
    return 200;
}

int srv_ep_models(srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *e) {
    (void)kind;
    const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
    const char *path = u ? evhttp_uri_get_path(u) : NULL;
    if (path && !strncmp(path, "/v1/models/", 11)) { // one model: /v1/models/{id}, the id percent-decoded
        char *id = evhttp_uridecode(path + 11, 0, NULL);
        int rc = id ? srv_route_model_one(s->fe, req, id, e) : oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
        free(id);
        return rc;
    }
    if (s->fe->multi) {
        srv_route_models(s->fe, req);
        return 200;
    }
    json_t *m = json_pack("{s:s,s:s,s:I,s:s,s:i}", "id", s->name, "object", "model", "created", (json_int_t)tc_wall(),
                          "owned_by", "tachyon", "max_model_len", s->ctx_size);
    srv_send_json(&s->o, req, 200, json_pack("{s:s,s:[o]}", "object", "list", "data", m));
    return 200;
}

int srv_ep_health(srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *e) {
    (void)kind, (void)e;
    if (s->fe->state == SRV_READY) {
        srv_send_json(&s->o, req, 200, json_pack("{s:s}", "status", "ok"));
        return 200;
    }
    const char *st = s->fe->state == SRV_LOADING ? "loading" : "draining";
    json_t *j = json_pack("{s:s,s:{s:s,s:s,s:n,s:n}}", "status", st, "error", "message",
                          s->fe->state == SRV_LOADING ? "Loading model" : "Shutting down", "type",
                          "unavailable_error", "param", "code");
    evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
    srv_send_json(&s->o, req, 503, j);
    return 503;
}

int srv_ep_dashboard(srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *e) {
    (void)kind, (void)e;
    srv_send_body(&s->o, req, 200, "text/html; charset=utf-8", srv_dashboard_html, srv_dashboard_html_len);
    return 200;
}
