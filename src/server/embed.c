// /v1/embeddings: each input is run through the model as an engine request with an embedding output (no
// generation); the engine pools the final-normed hidden states (mean, or the last token's: --pooling) and
// L2-normalises them, as llama-server does for decoder models. All inputs of a request are submitted at once
// so the engine batches them. Response in OpenAI's shape, floats or base64 of little-endian float32.
#include <event2/buffer.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/timeutil.h"
#include "server/embed.h"
#include "server/gen_launch.h"
#include "server/srv_conn.h"
#include "server/srv_log.h"
#include "server/srv_model.h"
#include "server/srv_reply.h"
#include "server/srv_tenants.h"

#define EMB_MAX_INPUTS 256 // per request (the engine's queue bounds what can wait at once)

typedef struct emb_item {
    srv_ev_sink sink; // first member: engine events come back through it
    struct emb_req *q;
    uint64_t id;      // engine request id
    int live;         // submitted, FINISH not yet received
    float *vec;       // (dim) owned once finished, or NULL
} emb_item;

typedef struct emb_req {
    srv_model *s;
    struct evhttp_request *req; // NULL once the client went away
    struct evhttp_connection *conn;
    emb_item *items; // (n_items) owned
    int n_items, n_live;
    int n_tokens; // usage: prompt tokens over all inputs
    srv_tenant_ref tn; // rate limits, fair share, prefix-cache salt (released in emb_free)
    int base64;
    int error;    // 0 or the HTTP status to answer with
    char errmsg[160];
    double t_recv; // monotonic seconds
    int writing;  // 1: the reply is queued and not yet written; q lives (and the drain waits) until it is
    struct emb_req *prev, *next; // s->emb_inflight
} emb_req;

static void emb_link(emb_req *q) {
    srv_model *s = q->s;
    q->next = s->emb_inflight;
    if (q->next) q->next->prev = q;
    s->emb_inflight = q;
}

static void emb_unlink(emb_req *q) {
    srv_model *s = q->s;
    if (q->prev) q->prev->next = q->next;
    else if (s->emb_inflight == q) s->emb_inflight = q->next;
    if (q->next) q->next->prev = q->prev;
    q->prev = q->next = NULL;
}

static void emb_free(emb_req *q) {
    emb_unlink(q);
    srv_tenant_end(q->s->fe, &q->tn, q->n_tokens, 0); // (nothing when not admitted)
    q->s->n_inflight--;
    for (int i = 0; i < q->n_items; i++) free(q->items[i].vec);
    free(q->items);
    free(q);
}

static void on_close(struct evhttp_connection *conn, void *arg) {
    (void)conn;
    emb_req *q = arg;
    if (q->writing) { // libevent leaves a request it detached mid-reply to us (as gen_on_close does)
        if (q->req && !evhttp_request_get_connection(q->req)) evhttp_request_free(q->req);
        emb_free(q);
        return;
    }
    q->req = NULL;
    q->conn = NULL;
    for (int i = 0; i < q->n_items && q->s->eng; i++)
        if (q->items[i].live) engine_cancel(q->s->eng, q->items[i].id, ENGINE_FINISH_CANCELLED);
}

// The reply is written: q's last reference.
static void on_reply_done(struct evhttp_request *req, void *arg) {
    emb_req *q = arg;
    srv_model *s = q->s;
    if (q->conn) srv_conn_set_closecb(s->fe, q->conn, NULL, NULL);
    emb_free(q);
    srv_conn_reply_done(req, s->fe);
}

void embed_check_disconnects(srv_model *s) {
    emb_req *next;
    for (emb_req *q = s->emb_inflight; q; q = next) {
        next = q->next;
        struct evhttp_connection *conn = q->conn;
        if (!conn || !q->req || q->writing || !srv_conn_peer_gone(conn)) continue;
        srv_conn_set_closecb(s->fe, conn, NULL, NULL);
        on_close(conn, q); // the engine's FINISH events free q
        evhttp_connection_free(conn);
    }
}

void embed_cancel_all(srv_model *s, engine_finish why) {
    for (emb_req *q = s->emb_inflight; q; q = q->next)
        for (int i = 0; i < q->n_items && s->eng; i++)
            if (q->items[i].live) engine_cancel(s->eng, q->items[i].id, why);
}

void embed_free_all(srv_model *s) {
    while (s->emb_inflight) {
        emb_req *q = s->emb_inflight;
        if (q->conn) srv_conn_set_closecb(s->fe, q->conn, NULL, NULL);
        if (q->writing && q->req) evhttp_request_set_on_complete_cb(q->req, srv_conn_reply_done, s->fe);
        emb_free(q);
    }
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// base64 of n floats as little-endian float32 (what the openai client decodes with numpy/frombuffer).
static json_t *b64_floats(const float *v, int n) {
    size_t nb = (size_t)n * 4, olen = (nb + 2) / 3 * 4;
    unsigned char *b = malloc(nb ? nb : 1);
    char *o = malloc(olen + 1);
    json_t *j = NULL;
    if (b && o) {
        for (int i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &v[i], 4);
            for (int k = 0; k < 4; k++) b[i * 4 + k] = (unsigned char)(u >> (8 * k));
        }
        size_t w = 0;
        for (size_t i = 0; i < nb; i += 3) {
            uint32_t x = (uint32_t)b[i] << 16 | (i + 1 < nb ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < nb ? b[i + 2] : 0);
            o[w++] = B64[x >> 18 & 63];
            o[w++] = B64[x >> 12 & 63];
            o[w++] = i + 1 < nb ? B64[x >> 6 & 63] : '=';
            o[w++] = i + 2 < nb ? B64[x & 63] : '=';
        }
        j = json_stringn(o, w);
    }
    free(b);
    free(o);
    return j;
}

// Queues the answer; 1 when q now waits for it to be written (on_reply_done or on_close frees it), else 0.
static int reply(emb_req *q) {
    srv_model *s = q->s;
    struct evhttp_request *req = q->req;
    if (!req) return 0;
    q->writing = 1;
    evhttp_request_set_on_complete_cb(req, on_reply_done, q);
    if (q->error) {
        oai_err e;
        oai_err_set(&e, q->error, "server_error", q->error == 503 ? "shutting_down" : NULL, NULL, "%s", q->errmsg);
        srv_send_error(&s->o, req, &e);
        srv_access_log(&s->o, req, NULL, q->error, q->n_tokens, 0, 0, tc_now() - q->t_recv, "error");
        return 1;
    }
    int dim = model_get_hparams(s->m)->dim;
    json_t *data = json_array();
    for (int i = 0; i < q->n_items; i++) {
        json_t *emb;
        if (q->base64) emb = b64_floats(q->items[i].vec, dim);
        else {
            emb = json_array();
            for (int d = 0; d < dim; d++) json_array_append_new(emb, json_real(q->items[i].vec[d]));
        }
        json_array_append_new(data, json_pack("{s:s,s:i,s:o}", "object", "embedding", "index", i, "embedding", emb));
    }
    json_t *resp = json_pack("{s:s,s:o,s:s,s:{s:i,s:i}}", "object", "list", "data", data, "model", s->name, "usage",
                             "prompt_tokens", q->n_tokens, "total_tokens", q->n_tokens);
    srv_access_log(&s->o, req, NULL, 200, q->n_tokens, 0, 0, tc_now() - q->t_recv, "stop");
    srv_send_json(&s->o, req, 200, resp);
    return 1;
}

static void on_event(srv_model *s, srv_ev_sink *self, const engine_event *ev) {
    (void)s;
    emb_item *it = (emb_item *)self;
    emb_req *q = it->q;
    if (ev->type != ENGINE_EV_FINISH || !it->live) {
        free(ev->embedding);
        return;
    }
    it->live = 0;
    q->n_live--;
    if (ev->embedding) it->vec = ev->embedding;
    else if (!q->error) {
        q->error = ev->finish == ENGINE_FINISH_SHUTDOWN || ev->finish == ENGINE_FINISH_SLO ? 503 : 500;
        snprintf(q->errmsg, sizeof q->errmsg, "embedding failed (%s)%s%.100s", engine_finish_name(ev->finish),
                 ev->msg[0] ? ": " : "", ev->msg);
    }
    if (q->n_live == 0 && !reply(q)) emb_free(q);
}

// --- request parsing ------------------------------------------------------------------------------

#define BAD(e, param, ...) oai_err_set(e, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

// One input as token ids (*ids malloc'd): a string (tokenized as a completions prompt) or an array of ids.
static int input_ids(srv_model *s, json_t *in, int32_t **ids, int *n, oai_err *e) {
    tc_err err = {0};
    if (json_is_string(in)) {
        size_t len = json_string_length(in);
        if (len == 0) return BAD(e, "input", "'input' must not contain empty strings");
        if (strlen(json_string_value(in)) != len) return BAD(e, "input", "'input' contains NUL");
        if (tok_encode(s->vocab, json_string_value(in), len, tok_add_bos(s->vocab) ? TOK_ENC_ADD_BOS : 0, ids, n, &err))
            return oai_err_set(e, 400, NULL, NULL, "input", "%s", err.msg);
        return 0;
    }
    size_t k = json_array_size(in);
    if (!json_is_array(in) || k == 0) return BAD(e, "input", "each input must be a non-empty string or array of token ids");
    if (!(*ids = malloc(k * sizeof **ids))) return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
    *n = (int)k;
    int nv = tok_n_vocab(s->vocab);
    for (size_t i = 0; i < k; i++) {
        json_t *t = json_array_get(in, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= nv)
            return BAD(e, "input", "token ids must be integers in [0, %d) (element %zu)", nv, i);
        (*ids)[i] = (int32_t)json_integer_value(t);
    }
    return 0;
}

static int parse(srv_model *s, const char *body, size_t len, oai_req *r, int *base64, oai_err *e) {
    memset(r, 0, sizeof *r);
    json_error_t je;
    if (!len) return BAD(e, NULL, "The request body is empty; expected a JSON object");
    if (!(r->root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je)))
        return BAD(e, NULL, "We could not parse the JSON body of your request: %s", je.text);
    if (!json_is_object(r->root)) return BAD(e, NULL, "The request body must be a JSON object");
    if (oai_check_fields(OAI_EMBEDDING, s->o.lenient, r, e)) return -1;
    gen_log_dropped(s, r);
    json_t *v = json_object_get(r->root, "model");
    if (v && !json_is_null(v) && !json_is_string(v)) return BAD(e, "model", "'model' must be a string");
    if (!srv_model_serves(s, json_string_value(v)))
        return oai_err_set(e, 404, "invalid_request_error", "model_not_found", "model",
                           "The model `%.200s` does not exist or you do not have access to it.", json_string_value(v));
    v = json_object_get(r->root, "encoding_format");
    *base64 = 0;
    if (v && !json_is_null(v)) {
        if (!json_is_string(v) || (strcmp(json_string_value(v), "float") && strcmp(json_string_value(v), "base64")))
            return BAD(e, "encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
        *base64 = !strcmp(json_string_value(v), "base64");
    }
    v = json_object_get(r->root, "dimensions");
    int dim = model_get_hparams(s->m)->dim;
    if (v && !json_is_null(v) && (!json_is_integer(v) || json_integer_value(v) != dim))
        return BAD(e, "dimensions", "'dimensions' must equal the model's embedding width (%d): shortening "
                   "embeddings is not supported", dim);
    v = json_object_get(r->root, "input");
    if (!v || json_is_null(v)) return BAD(e, "input", "Missing required parameter: 'input'");
    return 0;
}

int embed_handle(srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *ep_err) {
    (void)kind, (void)ep_err; // errors are replied here (the access line too)
    double t_recv = tc_now();
    oai_err e = {0};
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    oai_req r;
    emb_req *q = NULL;
    int base64 = 0;
    if (parse(s, len ? (const char *)evbuffer_pullup(in, -1) : "", len, &r, &base64, &e)) goto fail;
    // input: "text" | ["text", …] | [ids…] | [[ids…], …]
    json_t *input = json_object_get(r.root, "input");
    json_t *first = json_is_array(input) ? json_array_get(input, 0) : NULL;
    int several = first && (json_is_string(first) || json_is_array(first));
    int n = several ? (int)json_array_size(input) : 1;
    if (json_is_array(input) && json_array_size(input) == 0) {
        BAD(&e, "input", "'input' must not be empty");
        goto fail;
    }
    if (n > EMB_MAX_INPUTS) {
        BAD(&e, "input", "at most %d inputs per request, got %d", EMB_MAX_INPUTS, n);
        goto fail;
    }
    if (!(q = calloc(1, sizeof *q)) || !(q->items = calloc((size_t)n, sizeof *q->items))) {
        oai_err_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        goto fail;
    }
    q->s = s;
    q->t_recv = t_recv;
    q->base64 = base64;
    s->n_inflight++; // balanced in emb_free
    emb_link(q);
    engine_req ers[EMB_MAX_INPUTS];
    memset(ers, 0, sizeof ers);
    for (int i = 0; i < n; i++) { // all inputs are checked before any is submitted
        if (input_ids(s, several ? json_array_get(input, (size_t)i) : input, &ers[i].prompt, &ers[i].n_prompt, &e))
            goto fail_ids;
        if (ers[i].n_prompt + 1 > s->ctx_size) {
            oai_err_set(&e, 400, "invalid_request_error", "context_length_exceeded", "input",
                        "input %d has %d tokens; this model's maximum context length is %d tokens", i,
                        ers[i].n_prompt, s->ctx_size);
            goto fail_ids;
        }
        q->n_tokens += ers[i].n_prompt;
        samp_params_default(&ers[i].sp);
        ers[i].max_tokens = 1;
        ers[i].embed = s->o.pooling;
        ers[i].deadline = s->o.request_timeout > 0 ? t_recv + s->o.request_timeout : 0;
        q->items[i].sink.fn = on_event;
        q->items[i].q = q;
        ers[i].user = &q->items[i];
    }
    // the tenant's rate limits (1 request, its prompt tokens), then its fair share and cache namespace
    if (srv_tenant_admit(s->fe, req, &q->tn, q->n_tokens, &e)) goto fail_ids; // 401 / 429 with headers
    for (int i = 0; i < n; i++) {
        ers[i].cache_salt = srv_tenant_salt(&q->tn, NULL, 0);
        // embeddings are a fair-share group of their own (one per tenant), apart from generation: a batch of
        // inputs holds at most its share of the slots while a chat waits (sched_fair.c), and gives one back
        // (preempted, recomputed later) when every slot is taken
        ers[i].tenant = -1 - q->tn.id;
        ers[i].share = q->tn.share;
    }
    q->n_items = n;
    for (int i = 0; i < n; i++) {
        tc_err err = {0};
        int rc = engine_submit(s->eng, &ers[i], &q->items[i].id, &err);
        if (rc) {
            for (int k = i; k < n; k++) free(ers[k].prompt);
            if (rc == TC_ERR_FULL) {
                metric_inc(s->mt.rejected, 1);
                oai_err_set(&e, 503, "server_error", "queue_full", NULL, "The server is overloaded (%s)", err.msg);
            } else oai_err_set(&e, rc == TC_ERR_INVALID ? 400 : 500, NULL, NULL, NULL, "%s", err.msg);
            if (q->n_live == 0) goto fail; // nothing in flight
            for (int k = 0; k < q->n_items; k++) // the rest finishes through the engine, then q is freed
                if (q->items[k].live) engine_cancel(s->eng, q->items[k].id, ENGINE_FINISH_CANCELLED);
            srv_send_error(&s->o, req, &e);
            srv_access_log(&s->o, req, NULL, e.status, 0, 0, 0, tc_now() - t_recv, NULL);
            oai_req_free(&r);
            return 0;
        }
        q->items[i].live = 1;
        q->n_live++;
    }
    oai_req_free(&r);
    q->req = req;
    q->conn = evhttp_request_get_connection(req);
    srv_conn_set_closecb(s->fe, q->conn, on_close, q);
    return 0;

fail_ids:
    for (int k = 0; k < n; k++) free(ers[k].prompt);
fail:
    if (q) {
        if (q->items) q->n_items = 0;
        if (q->s) emb_free(q);
        else free(q);
    }
    oai_req_free(&r);
    srv_send_error(&s->o, req, &e);
    srv_access_log(&s->o, req, NULL, e.status, 0, 0, 0, tc_now() - t_recv, NULL);
    return 0;
}
