// HTTP plumbing: listening socket, routing, auth, CORS, limits, simple endpoints, model loading in the
// background, signals and draining.
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "server/srv_internal.h"

void server_opts_default(server_opts *o) {
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->max_body = 8u << 20;
    o->max_headers = 16384;
    o->http_timeout = 10;
    o->read_timeout = 30;
    o->max_connections = 0;
    o->max_body_buffer = 64u << 20;
    o->sse_ping = 5;
    o->request_timeout = 0;
    o->shutdown_grace = 10;
    o->log_level = SRV_LOG_INFO;
    o->pooling = ENGINE_EMBED_MEAN;
    engine_opts_default(&o->eng);
}

// --- logging and replies -----------------------------------------------------------------------------

void srv_log(const server *s, int level, const char *fmt, ...) {
    if (level < s->o.log_level) return;
    static const char *names[] = {"debug", "info", "warn", "error"};
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char ts[48];
    srv_log_time(ts, sizeof ts);
    fprintf(stderr, "%s %s: %s\n", ts, names[level & 3], buf);
}

// ISO 8601 local time with milliseconds and the UTC offset: "2026-11-23T10:15:02.123+0100".
void srv_log_time(char *buf, size_t n) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    localtime_r(&now.tv_sec, &tm);
    char date[32] = "", zone[8] = "";
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    strftime(zone, sizeof zone, "%z", &tm);
    snprintf(buf, n, "%s.%03ld%s", date, now.tv_nsec / 1000000, zone);
}

const char *srv_reason(int status) {
    switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Error";
    }
}

static void send_body(server *s, struct evhttp_request *req, int status, const char *ctype, const char *body,
                      size_t len) {
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", ctype);
    srv_add_common_headers(s, req);
    if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) { // the length a GET would get, and no body
        char n[32];
        snprintf(n, sizeof n, "%zu", body ? len : 0);
        evhttp_add_header(h, "Content-Length", n);
        evhttp_send_reply(req, status, srv_reason(status), NULL);
        return;
    }
    struct evbuffer *b = evbuffer_new();
    if (b && body) evbuffer_add(b, body, len);
    evhttp_send_reply(req, status, srv_reason(status), b);
    if (b) evbuffer_free(b);
}

void srv_send_json(server *s, struct evhttp_request *req, int status, json_t *j) {
    char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (!t) {
        send_body(s, req, 500, "application/json",
                  "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}",
                  84);
    } else {
        send_body(s, req, status, "application/json", t, strlen(t));
    }
    free(t);
    json_decref(j);
}

void srv_send_error(server *s, struct evhttp_request *req, const oai_err *e) {
    char *t = oai_err_json(e);
    if (e->status == 503) {
        char ra[24];
        snprintf(ra, sizeof ra, "%.0f", e->retry_after > 1 ? ceil(e->retry_after) : 1.0);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", ra);
    }
    if (e->status == 401) evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate", "Bearer");
    send_body(s, req, e->status, "application/json", t ? t : "{}", t ? strlen(t) : 2);
    free(t);
}

static const char *method_name(struct evhttp_request *req) {
    switch (evhttp_request_get_command(req)) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    default: return "OTHER";
    }
}

void srv_access_log(server *s, struct evhttp_request *req, const char *id, int status, int n_prompt, int n_out,
                    double ttft, double e2e, const char *finish) {
    const char *uri = req ? evhttp_request_get_uri(req) : "-";
    int quiet = uri && (!strncmp(uri, "/stats", 6) || !strncmp(uri, "/metrics", 8) || !strncmp(uri, "/health", 7));
    srv_log(s, quiet ? SRV_LOG_DEBUG : SRV_LOG_INFO,
            "access id=%s status=%d prompt_tokens=%d output_tokens=%d ttft=%.4f e2e=%.4f finish=%s %s %s",
            id ? id : "-", status, n_prompt, n_out, ttft, e2e, finish ? finish : "-", req ? method_name(req) : "-",
            uri ? uri : "-");
}

int srv_model_ok(const server *s, const char *name) {
    if (!name || !name[0]) return 1;
    if (srv_route_is_alias(s, name)) return 1; // srv_route_pick chose this model for the alias
    // the served name or the file's basename (with or without .gguf); never a path: the model's location
    // on disk is not the client's business
    if (!strcmp(name, s->name) || !strcmp(name, s->basename)) return 1;
    size_t n = strlen(s->basename);
    if (n > 5 && !strcmp(s->basename + n - 5, ".gguf") && strlen(name) == n - 5 && !strncmp(name, s->basename, n - 5))
        return 1;
    return 0;
}

// --- simple endpoints --------------------------------------------------------------------------------

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

static void send_ids(server *s, struct evhttp_request *req, int32_t *ids, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(ids[i]));
    srv_send_json(s, req, 200, json_pack("{s:o}", "tokens", a));
}

// /tokenize {"messages": [...]}: the prompt ids a chat completion with these messages would use.
static int tokenize_chat(server *s, struct evhttp_request *req, oai_err *e) {
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

static int handle_tokenize(server *s, struct evhttp_request *req, oai_err *e) {
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

static int handle_detokenize(server *s, struct evhttp_request *req, oai_err *e) {
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
    srv_send_json(s, req, 200, json_pack("{s:o}", "content", oai_json_text(text, len)));
    free(text);
    return 200;
}

static int handle_models(server *s, struct evhttp_request *req) {
    if (s->multi) {
        srv_route_models(s, req);
        return 200;
    }
    json_t *m = json_pack("{s:s,s:s,s:I,s:s,s:i}", "id", s->name, "object", "model", "created", (json_int_t)tc_wall(),
                          "owned_by", "tachyon", "max_model_len", s->ctx_size);
    srv_send_json(s, req, 200, json_pack("{s:s,s:[o]}", "object", "list", "data", m));
    return 200;
}

// --- routing -----------------------------------------------------------------------------------------

static void set_nodelay(struct evhttp_request *req) {
    struct evhttp_connection *c = evhttp_request_get_connection(req);
    struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    int one = 1;
    if (fd >= 0) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void route_cb(struct evhttp_request *req, void *arg) {
    server *s = arg;
    srv_conn_dispatch(s, req);
    set_nodelay(req);
    const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
    const char *path = u ? evhttp_uri_get_path(u) : NULL;
    if (!path || !path[0]) path = "/";
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    int is_get = cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_HEAD, is_post = cmd == EVHTTP_REQ_POST;
    oai_err e = {0};
    int status = 0;

    if (srv_access_check(s, req, path, &e)) goto done;
    if (cmd == EVHTTP_REQ_OPTIONS) {
        if (srv_cors_origin(s, req)) {
            srv_add_common_headers(s, req);
            evhttp_add_header(evhttp_request_get_output_headers(req), "Access-Control-Max-Age", "86400");
            evhttp_send_reply(req, 204, "No Content", NULL);
            status = 204;
        } else {
            oai_err_set(&e, s->o.cors ? 403 : 405, NULL, NULL, NULL,
                        s->o.cors ? "This Origin is not allowed (see --cors)"
                                  : "OPTIONS is not allowed (CORS is disabled; start with --cors ORIGIN)");
        }
        goto done;
    }
    int is_tok = !strcmp(path, "/tokenize") || !strcmp(path, "/detokenize");
    if (!strcmp(path, "/health")) {
        if (!is_get) goto method;
        if (s->state == SRV_READY) {
            srv_send_json(s, req, 200, json_pack("{s:s}", "status", "ok"));
            status = 200;
        } else {
            const char *st = s->state == SRV_LOADING ? "loading" : "draining";
            json_t *j = json_pack("{s:s,s:{s:s,s:s,s:n,s:n}}", "status", st, "error", "message",
                                  s->state == SRV_LOADING ? "Loading model" : "Shutting down", "type",
                                  "unavailable_error", "param", "code");
            evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
            srv_send_json(s, req, 503, j);
            status = 503;
        }
        goto done;
    }
    if (!strcmp(path, "/") || !strcmp(path, "/index.html")) {
        if (!is_get) goto method;
        send_body(s, req, 200, "text/html; charset=utf-8", srv_dashboard_html, srv_dashboard_html_len);
        status = 200;
        goto done;
    }
    int known = !strcmp(path, "/v1/chat/completions") || !strcmp(path, "/v1/completions") ||
                !strcmp(path, "/v1/embeddings") || !strcmp(path, "/v1/models") || is_tok || !strcmp(path, "/metrics") || !strcmp(path, "/stats");
    if (!known) {
        oai_err_set(&e, 404, "invalid_request_error", "not_found", NULL, "Unknown endpoint: %s %.200s",
                    method_name(req), path);
        goto done;
    }
    if (s->state != SRV_READY) {
        if (s->state == SRV_LOADING) oai_err_set(&e, 503, "unavailable_error", "model_loading", NULL, "Loading model");
        else oai_err_set(&e, 503, "unavailable_error", "shutting_down", NULL, "The server is shutting down");
        goto done;
    }
    server *t = s; // the model this request goes to
    if (s->multi && is_post && (!strncmp(path, "/v1/", 4) || is_tok) && strcmp(path, "/v1/models") &&
        srv_route_pick(s, req, path, &t, &e))
        goto done;
    if (!strcmp(path, "/v1/chat/completions") || !strcmp(path, "/v1/completions")) {
        if (!is_post) goto method;
        gen_handle(t, req, path[4] == 'c' && path[5] == 'h' ? OAI_CHAT : OAI_COMPLETION);
        return; // gen.c logs
    }
    if (!strcmp(path, "/v1/embeddings")) {
        if (!is_post) goto method;
        embed_handle(t, req);
        return; // embed.c logs
    }
    if (!strcmp(path, "/v1/models")) {
        if (!is_get) goto method;
        status = handle_models(s, req);
    } else if (!strcmp(path, "/tokenize")) {
        if (!is_post) goto method;
        if ((status = handle_tokenize(t, req, &e)) < 0) goto done;
    } else if (!strcmp(path, "/detokenize")) {
        if (!is_post) goto method;
        if ((status = handle_detokenize(t, req, &e)) < 0) goto done;
    } else if (!strcmp(path, "/metrics")) {
        if (!is_get) goto method;
        srv_handle_metrics(s, req);
        status = 200;
    } else if (!strcmp(path, "/stats")) {
        if (!is_get) goto method;
        srv_handle_stats(s, req);
        status = 200;
    }
    goto done;
method:
    oai_err_set(&e, 405, NULL, NULL, NULL, "Method %s is not allowed on %.200s", method_name(req), path);
done:
    if (status <= 0) {
        srv_send_error(s, req, &e);
        status = e.status;
    }
    srv_access_log(s, req, NULL, status, 0, 0, 0, 0, NULL);
}

// --- loading -----------------------------------------------------------------------------------------

static int load_model(server *s, tc_err *err) {
    int rc = model_load(s->o.model_path, &s->m, err);
    if (!rc) rc = tok_load(model_gguf(s->m), &s->vocab, err);
    if (!rc) {
        const model_hparams *hp = model_get_hparams(s->m);
        int nv = tok_n_vocab(s->vocab);
        s->eog_ids = malloc((size_t)nv * sizeof(int32_t));
        if (!s->eog_ids) rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        for (int i = 0; !rc && i < nv; i++)
            if (tok_is_eog(s->vocab, i)) s->eog_ids[s->n_eog++] = i;
        if (!rc) rc = srv_grammar_vocab(s, err); // grammar-constrained decoding (srv_grammar.c)
        gguf_str ts = {0};
        if (!rc && s->o.chat_template && s->o.chat_template_file)
            rc = tc_err_set(err, TC_ERR_INVALID, "--chat-template and --chat-template-file exclude each other");
        if (!rc && s->o.chat_template_file) { // the file replaces the model's template
            rc = chat_tmpl_load_file(s->o.chat_template_file, s->vocab, &s->tmpl, err);
            if (!rc && !(s->chat_src = strdup(chat_tmpl_src(s->tmpl)))) rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        } else if (!rc && gguf_get_str(model_gguf(s->m), "tokenizer.chat_template", &ts) == 0) {
            s->chat_src = strndup(ts.ptr, ts.len);
            if (!s->o.chat_template && (rc = chat_tmpl_new(ts.ptr, ts.len, s->vocab, &s->tmpl, err)))
                tc_err_wrap(err, "the model's chat template (tokenizer.chat_template)");
        }
        s->chat = s->o.chat_template ? chat_family_from_name(s->o.chat_template)
                                     : chat_detect(s->chat_src ? s->chat_src : "");
        if (!rc && s->chat == CHAT_UNKNOWN) {
            if (s->o.chat_template) rc = tc_err_set(err, TC_ERR_INVALID, "unknown chat template '%s'", s->o.chat_template);
            else if (!s->chat_src && chat_family_for_arch(hp->arch) != CHAT_UNKNOWN) s->chat = chat_family_for_arch(hp->arch);
            else s->chat = CHAT_CHATML; // no or unrecognized template: ChatML (logged when ready)
        }
        int32_t b = tok_bos(s->vocab);
        if (!rc && b >= 0) {
            int n = tok_piece(s->vocab, b, 0, s->bos_text, sizeof s->bos_text - 1);
            s->bos_text[n > 0 && n < (int)sizeof s->bos_text ? n : 0] = 0;
        }
        engine_opts eo = s->o.eng;
        eo.eog_ids = s->eog_ids;
        eo.n_eog = s->n_eog;
        s->ctx_size = eo.ctx_size > 0 ? eo.ctx_size : hp->ctx_train;
        if (s->ctx_size > hp->ctx_train && hp->ctx_train > 0) s->ctx_size = hp->ctx_train;
        eo.ctx_size = s->ctx_size;
        if (!rc && s->o.draft_model_path) { // engine_new checks that the vocabularies match
            rc = model_load(s->o.draft_model_path, &s->draft_m, err);
            eo.draft_model = s->draft_m;
        }
        if (!rc) rc = srv_model_engine_new(s, &eo, err); // engine_new, on this model's cores
        s->ctx_asked = s->ctx_size;
        if (!rc) s->ctx_size = engine_ctx_limit(s->eng); // a small KV pool lowers it: report and enforce that
    }
    return rc;
}

// Loads every model in turn (the first is this server, the hub), stopping at the first failure.
static void *loader_main(void *arg) {
    server *s = arg;
    int rc = 0;
    for (int i = 0; !rc && i < s->n_models; i++) {
        server *t = s->models[i];
        rc = load_model(t, &t->load_err);
        if (rc && t != s) tc_err_set(&s->load_err, rc, "%s: %s", t->o.model_path, t->load_err.msg);
    }
    s->load_rc = rc;
    event_active(s->ev_loaded, EV_READ, 0); // thread-safe: evthread_use_pthreads
    return NULL;
}

static void engine_cb(evutil_socket_t fd, short what, void *arg) {
    (void)what;
    uint64_t v;
    while (read(fd, &v, sizeof v) == (ssize_t)sizeof v) {
    }
    gen_on_engine_events(arg);
}

static void log_ready(server *s);

static void loaded_cb(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    server *s = arg;
    if (s->load_rc) {
        srv_log(s, SRV_LOG_ERROR, "loading %s failed: %s", s->o.model_path, s->load_err.msg);
        s->exit_rc = s->load_rc;
        event_base_loopexit(s->base, NULL);
        return;
    }
    if (s->state == SRV_LOADING) s->state = SRV_READY;
    srv_models_sync_state(s);
    for (int i = 0; i < s->n_models; i++) {
        server *t = s->models[i];
        t->ev_engine = event_new(s->base, engine_event_fd(t->eng), EV_READ | EV_PERSIST, engine_cb, t);
        event_add(t->ev_engine, NULL);
        log_ready(t);
    }
    if (s->state == SRV_DRAINING) event_active(s->ev_drain, EV_TIMEOUT, 0);
}

static void log_ready(server *s) {
    const model_hparams *hp = model_get_hparams(s->m);
    srv_log(s, SRV_LOG_INFO, "model ready: %s (%s, %d layers, ctx %d, chat template %s%s, %d end-of-generation tokens)",
            s->name, hp->arch, hp->n_layers, s->ctx_size,
            s->tmpl ? (s->o.chat_template_file ? "from --chat-template-file" : "of the model (Jinja)")
                    : chat_family_name(s->chat),
            s->tmpl || s->o.chat_template || (s->chat_src && chat_detect(s->chat_src) != CHAT_UNKNOWN) ? ""
                                                                                         : " (fallback)",
            s->n_eog);
    if (s->ctx_size < s->ctx_asked)
        srv_log(s, SRV_LOG_WARN, "the KV cache (--kv-cache-mem %.2f MiB) holds only %d tokens: the per-request "
                "context is %d tokens, not %d", s->o.eng.kv_mem_bytes / 1048576.0, s->ctx_size, s->ctx_size,
                s->ctx_asked);
}

// --- shutdown ----------------------------------------------------------------------------------------

static void drain_cb(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    server *s = arg;
    double waited = tc_now() - s->t_start_drain;
    int n_inflight = 0, n_writing = 0;
    for (int i = 0; i < s->n_models; i++) n_inflight += s->models[i]->n_inflight, n_writing += s->models[i]->n_writing;
    if ((n_inflight == 0 && (n_writing <= 0 || waited > s->o.shutdown_grace)) ||
        (!s->eng && s->loader_started == 0)) {
        event_base_loopexit(s->base, NULL);
        return;
    }
    if (!s->ev_engine) return; // still loading: wait for it, then exit
    if (waited > s->o.shutdown_grace) {
        for (int i = 0; i < s->n_models; i++) {
            gen_cancel_all(s->models[i], ENGINE_FINISH_SHUTDOWN);
            embed_cancel_all(s->models[i], ENGINE_FINISH_SHUTDOWN);
        }
        if (waited > s->o.shutdown_grace + 2.0) { // the engine should have answered by now
            event_base_loopexit(s->base, NULL);
            return;
        }
    }
}

static void check_cb(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    server *s = arg;
    for (int i = 0; i < s->n_models; i++) {
        gen_check_disconnects(s->models[i]);
        embed_check_disconnects(s->models[i]);
    }
}

static void signal_cb(evutil_socket_t sig, short what, void *arg) {
    (void)what;
    server *s = arg;
    if (s->state == SRV_DRAINING) {
        srv_log(s, SRV_LOG_WARN, "second signal %d during the drain: exiting now, %d in-flight request(s) cut",
                (int)sig, s->n_inflight);
        s->exit_sig = (int)sig;
        for (int i = 0; i < s->n_models; i++) {
            gen_cancel_all(s->models[i], ENGINE_FINISH_SHUTDOWN);
            embed_cancel_all(s->models[i], ENGINE_FINISH_SHUTDOWN);
        }
        event_base_loopexit(s->base, NULL);
        return;
    }
    srv_log(s, SRV_LOG_INFO, "signal %d: stop accepting, draining %d request(s) for up to %.1f s", (int)sig,
            s->n_inflight, s->o.shutdown_grace);
    s->state = SRV_DRAINING;
    srv_models_sync_state(s);
    s->t_start_drain = tc_now();
    if (s->bound) evhttp_del_accept_socket(s->http, s->bound);
    s->bound = NULL;
    struct timeval tv = {0, 20000};
    event_add(s->ev_drain, &tv);
    if (s->ev_engine || !s->loader_started) event_active(s->ev_drain, EV_TIMEOUT, 0);
}

// --- run ---------------------------------------------------------------------------------------------

static void name_from_path(server *s) {
    const char *b = strrchr(s->o.model_path, '/');
    b = b ? b + 1 : s->o.model_path;
    snprintf(s->basename, sizeof s->basename, "%s", b);
    if (s->o.served_name) snprintf(s->name, sizeof s->name, "%s", s->o.served_name);
    else {
        snprintf(s->name, sizeof s->name, "%s", b);
        size_t n = strlen(s->name);
        if (n > 5 && !strcmp(s->name + n - 5, ".gguf")) s->name[n - 5] = 0;
    }
}

int server_run(const server_opts *o, tc_err *err) {
    server *s = calloc(1, sizeof *s);
    if (!s) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    int rc = 0;
    s->o = *o;
    s->hub = s;
    s->models[0] = s;
    s->n_models = 1;
    if ((rc = srv_models_init(s, err))) goto out; // several models: options per model, their servers
    name_from_path(s);
    signal(SIGPIPE, SIG_IGN);
    evthread_use_pthreads();
    if ((rc = s->multi ? srv_metrics_init_model(&s->mt, NULL, s->name, err) : srv_metrics_init(&s->mt, err))) goto out;
    s->base = event_base_new();
    s->http = s->base ? evhttp_new(s->base) : NULL;
    if (!s->http) {
        rc = tc_err_set(err, TC_ERR_NOMEM, "libevent: cannot create the HTTP server");
        goto out;
    }
    if ((rc = srv_conn_init(s, err)) || (rc = srv_work_init(s, err))) goto out;
    // SIGHUP reloads --api-key-file (srv_tenants.c installs that); without one it must not end the process
    if (!o->api_key_file) signal(SIGHUP, SIG_IGN);
    if ((rc = srv_tenants_init(s, err))) goto out; // API keys, tenants (srv_tenants.c)
    for (int i = 1; i < s->n_models; i++) { // the other models borrow the hub's loop, HTTP server, connections
        server *t = s->models[i];
        t->base = s->base, t->http = s->http, t->conns = s->conns, t->work = s->work;
        t->tenants = s->tenants; // borrowed: one set of keys and limits for every model
        if ((rc = srv_metrics_init_model(&t->mt, s->mt.reg, t->name, err))) goto out;
    }
    if ((rc = srv_models_metrics(s, err))) goto out;
    evhttp_set_gencb(s->http, route_cb, s);
    evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_OPTIONS);
    evhttp_set_max_body_size(s->http, (ev_ssize_t)o->max_body);
    evhttp_set_max_headers_size(s->http, (ev_ssize_t)o->max_headers);
    evhttp_set_timeout(s->http, o->http_timeout);
    s->bound = srv_conn_listen(s, err);
    if (!s->bound) {
        rc = TC_ERR_IO;
        goto out;
    }
    evutil_socket_t lfd = evhttp_bound_socket_get_fd(s->bound);
    int one = 1;
    setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); // inherited by accepted sockets on Linux
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int port = o->port;
    if (getsockname(lfd, (struct sockaddr *)&ss, &sl) == 0)
        port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                              : ((struct sockaddr_in *)&ss)->sin_port);
    srv_log(s, SRV_LOG_INFO, "listening on http://%s:%d (model %s loading)", o->host, port, s->name);
    for (int i = 1; i < s->n_models; i++) srv_log(s, SRV_LOG_INFO, "also serving model %s", s->models[i]->name);

    s->ev_loaded = event_new(s->base, -1, 0, loaded_cb, s);
    s->ev_drain = event_new(s->base, -1, EV_PERSIST, drain_cb, s);
    s->ev_sigterm = evsignal_new(s->base, SIGTERM, signal_cb, s);
    s->ev_sigint = evsignal_new(s->base, SIGINT, signal_cb, s);
    event_add(s->ev_sigterm, NULL);
    event_add(s->ev_sigint, NULL);
    s->ev_check = event_new(s->base, -1, EV_PERSIST, check_cb, s);
    struct timeval check_tv = {0, 20000}; // 20 ms
    event_add(s->ev_check, &check_tv);
    if (pthread_create(&s->loader, NULL, loader_main, s)) {
        rc = tc_err_set(err, TC_ERR, "cannot start the loader thread");
        goto out;
    }
    s->loader_started = 1;
    event_base_dispatch(s->base);
    rc = s->exit_rc;
    if (rc) tc_err_set(err, rc, "loading %s failed: %s", s->o.model_path, s->load_err.msg);
    else if (s->exit_sig) rc = 128 + s->exit_sig; // like a shell reports a process killed by that signal

out:
    if (s->loader_started) pthread_join(s->loader, NULL);
    for (int i = 0; i < s->n_models; i++) { // in-flight requests were drained or cut above
        if (s->models[i]->eng) engine_free(s->models[i]->eng, 0.5);
        s->models[i]->eng = NULL;
    }
    srv_work_free(s); // joins the worker: no job touches a request after this
    for (int i = 0; i < s->n_models; i++) { // before evhttp_free: no close callback may reach a freed engine
        gen_free_all(s->models[i]);
        embed_free_all(s->models[i]);
    }
    srv_tenants_free(s); // after gen_free_all: freed requests settle with their tenant
    gen_summ_free(s);
    if (s->http) evhttp_free(s->http);
    srv_conn_free(s);
    if (s->ev_engine) event_free(s->ev_engine);
    srv_models_free(s); // the other models' servers: their engine events, models, vocabularies, metrics
    if (s->ev_loaded) event_free(s->ev_loaded);
    if (s->ev_drain) event_free(s->ev_drain);
    if (s->ev_check) event_free(s->ev_check);
    if (s->ev_sigterm) event_free(s->ev_sigterm);
    if (s->ev_sigint) event_free(s->ev_sigint);
    if (s->base) event_base_free(s->base);
    if (s->vocab) tok_free(s->vocab);
    gram_vocab_free(s->gvocab);
    if (s->m) model_free(s->m);
    if (s->draft_m) model_free(s->draft_m);
    free(s->eog_ids);
    free(s->chat_src);
    chat_tmpl_free(s->tmpl);
    srv_metrics_free(&s->mt);
    free(s);
    return rc;
}
