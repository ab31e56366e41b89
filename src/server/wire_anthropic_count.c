// POST /v1/messages/count_tokens: the number of prompt tokens a Messages body renders to (the same
// translation as /v1/messages, then the chat path's rendering and tokenizing, as /tokenize does). It runs on
// the event loop, so bodies are bounded as /tokenize's are.
#include <event2/buffer.h>
#include <event2/http.h>
#include <stdlib.h>
#include <string.h>

#include "server/gen_prompt.h"
#include "server/srv_model.h"
#include "server/srv_reply.h"
#include "server/wire_anthropic.h"

#define ANTH_COUNT_MAX_BODY (1u << 20) // bytes

// The chat request the body translates to, parsed once (*q, free with oai_req_free); lenient drops the fields
// the Messages table does not accept, as /v1/messages does. 0, or -1 with *e filled.
static int parse(struct evhttp_request *req, int lenient, oai_req *q, oai_err *e) {
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    if (len > ANTH_COUNT_MAX_BODY)
        return oai_err_set(e, 413, "invalid_request_error", NULL, NULL,
                           "count_tokens takes bodies of at most %u bytes, got %zu", ANTH_COUNT_MAX_BODY, len);
    json_error_t je;
    json_t *body = json_loadb(len ? (const char *)evbuffer_pullup(in, -1) : "", len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(body)) {
        json_decref(body);
        return oai_err_set(e, 400, "invalid_request_error", NULL, NULL, "The request body must be a JSON object%s%s",
                           body ? "" : ": ", body ? "" : je.text);
    }
    char dropped[64] = "";
    if (lenient) wire_drop_unaccepted(&wire_anthropic_ops, body, dropped, sizeof dropped);
    json_t *chat = NULL;
    int rc = wire_anth_to_chat(body, 1, &chat, e);
    json_decref(body);
    if (rc) return -1;
    return oai_parse_json(OAI_CHAT, chat, lenient, q, e);
}

int wire_anth_count_tokens(srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *e) {
    (void)kind;
    oai_req q;
    if (parse(req, s->o.lenient, &q, e)) return -1;
    if (!srv_model_serves(s, q.model)) {
        oai_err_set(e, 404, "invalid_request_error", "model_not_found", "model",
                    "The model `%.200s` does not exist or you do not have access to it.", q.model);
        oai_req_free(&q);
        return -1;
    }
    int32_t *ids = NULL;
    int n = 0;
    int rc = gen_prompt_ids(s, &q, &ids, &n, e);
    oai_req_free(&q);
    if (rc) return -1;
    free(ids);
    srv_send_json(&s->o, req, 200, json_pack("{s:i}", "input_tokens", n));
    return 200;
}
