// HTTP routing: the one table of endpoints, and the callback that walks it for every request (see
// srv_endpoints.h). The request's path picks a row; the row says which method it takes, which API kind its
// handler serves, whether it needs the API key and a loaded model, and whether the body's "model" picks the
// served model (several models). Checks run in one order for every row: Host / key / Content-Type
// (srv_access.c), CORS preflight, unknown path (404), loading or draining (503), method (405), model (404).
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>

#include "server/embed.h"
#include "server/gen_launch.h"
#include "server/srv_access.h"
#include "server/srv_conn.h"
#include "server/srv_endpoints.h"
#include "server/srv_front.h"
#include "server/srv_log.h"
#include "server/srv_model.h"
#include "server/srv_reply.h"
#include "server/srv_route.h"
#include "server/srv_simple.h"
#include "server/srv_stats.h"
#include "server/wire_anthropic.h"

enum {
    EP_PUBLIC = 1 << 0, // served without the API key (--public-routes adds paths at run time)
    EP_READY = 1 << 1,  // needs the models loaded: 503 while loading or draining
    EP_MODEL = 1 << 2,  // with several models, the JSON body's "model" picks the model (srv_route_pick)
    EP_SELF_LOG = 1 << 3, // the handler writes the access line itself (it may answer later, from the engine)
    EP_PREFIX = 1 << 4,   // the path is a prefix: the row serves every path under it (a resource id follows)
};

typedef enum { EP_GET, EP_POST } ep_method; // EP_GET also answers HEAD

// A handler answers one request on one model (the first model for endpoints without EP_MODEL): it replies and
// returns the HTTP status, or returns -1 with *e filled for this table to reply; with EP_SELF_LOG it may
// return 0 when the reply comes later.
typedef int (*ep_handler)(srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *e);

typedef struct ep_row {
    ep_method method;
    const char *path;
    oai_kind kind; // passed to the handler (0: none)
    ep_handler handler;
    int flags;     // EP_*
} ep_row;

// Every endpoint, each path once. To add one: write its handler (one new file, with its header, holding the
// handler with the ep_handler signature above) and add its row here; nothing else changes.
static const ep_row endpoints[] = {
    {EP_GET, "/health", 0, srv_ep_health, EP_PUBLIC},
    {EP_GET, "/", 0, srv_ep_dashboard, EP_PUBLIC},
    {EP_GET, "/index.html", 0, srv_ep_dashboard, EP_PUBLIC},
    {EP_POST, "/v1/chat/completions", OAI_CHAT, gen_handle, EP_READY | EP_MODEL | EP_SELF_LOG},
    {EP_POST, "/v1/completions", OAI_COMPLETION, gen_handle, EP_READY | EP_MODEL | EP_SELF_LOG},
    {EP_POST, "/v1/responses", OAI_CHAT, gen_handle_responses, EP_READY | EP_MODEL | EP_SELF_LOG},
    {EP_POST, "/v1/messages", OAI_CHAT, gen_handle_messages, EP_READY | EP_MODEL | EP_SELF_LOG},
    {EP_POST, "/v1/messages/count_tokens", 0, wire_anth_count_tokens, EP_READY | EP_MODEL},
    {EP_POST, "/v1/embeddings", OAI_EMBEDDING, embed_handle, EP_READY | EP_MODEL | EP_SELF_LOG},
    {EP_GET, "/v1/models", 0, srv_ep_models, EP_READY},
    {EP_GET, "/v1/models/", 0, srv_ep_models, EP_READY | EP_PREFIX},
    {EP_POST, "/tokenize", 0, srv_ep_tokenize, EP_READY | EP_MODEL},
    {EP_POST, "/detokenize", 0, srv_ep_detokenize, EP_READY | EP_MODEL},
    {EP_GET, "/metrics", 0, srv_handle_metrics, EP_READY},
    {EP_GET, "/stats", 0, srv_handle_stats, EP_READY},
};

static const ep_row *find_row(const char *path) {
    size_t n = sizeof endpoints / sizeof *endpoints;
    for (size_t i = 0; i < n; i++)
        if (!(endpoints[i].flags & EP_PREFIX) && !strcmp(endpoints[i].path, path)) return &endpoints[i];
    for (size_t i = 0; i < n; i++) {
        size_t k = strlen(endpoints[i].path);
        if ((endpoints[i].flags & EP_PREFIX) && !strncmp(endpoints[i].path, path, k) && path[k]) return &endpoints[i];
    }
    return NULL;
}

static void set_nodelay(struct evhttp_request *req) {
    struct evhttp_connection *c = evhttp_request_get_connection(req);
    struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    int one = 1;
    if (fd >= 0) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// A CORS preflight: 204 with the CORS headers when the Origin is allowed. 0, or -1 with *e filled.
static int preflight(server *s, struct evhttp_request *req, oai_err *e) {
    if (!srv_cors_origin(&s->o, req))
        return oai_err_set(e, s->o.cors ? 403 : 405, NULL, NULL, NULL,
                           s->o.cors ? "This Origin is not allowed (see --cors)"
                                     : "OPTIONS is not allowed (CORS is disabled; start with --cors ORIGIN)");
    srv_add_common_headers(&s->o, req);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Access-Control-Max-Age", "86400");
    evhttp_send_reply(req, 204, "No Content", NULL);
    return 0;
}

static void route_cb(struct evhttp_request *req, void *arg) {
    server *s = arg;
    srv_conn_dispatch(s, req);
    set_nodelay(req);
    const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
    const char *path = u ? evhttp_uri_get_path(u) : NULL;
    if (!path || !path[0]) path = "/";
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    const ep_row *r = find_row(path);
    oai_err e = {0};
    int status = -1;
    srv_model *t = s->models[0]; // the model this request goes to

    if (srv_access_check(s, req, path, r && (r->flags & EP_PUBLIC), &e)) goto done;
    if (cmd == EVHTTP_REQ_OPTIONS) {
        if (!preflight(s, req, &e)) status = 204;
        goto done;
    }
    if (!r) {
        oai_err_set(&e, 404, "invalid_request_error", "not_found", NULL, "Unknown endpoint: %s %.200s",
                    srv_method_name(req), path);
        goto done;
    }
    if ((r->flags & EP_READY) && s->state != SRV_READY) {
        if (s->state == SRV_LOADING) oai_err_set(&e, 503, "unavailable_error", "model_loading", NULL, "Loading model");
        else oai_err_set(&e, 503, "unavailable_error", "shutting_down", NULL, "The server is shutting down");
        goto done;
    }
    int method_ok = r->method == EP_POST ? cmd == EVHTTP_REQ_POST : cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_HEAD;
    if (!method_ok) {
        oai_err_set(&e, 405, NULL, NULL, NULL, "Method %s is not allowed on %.200s", srv_method_name(req), path);
        goto done;
    }
    if ((r->flags & EP_MODEL) && s->multi && srv_route_pick(s, req, path, &t, &e)) goto done;
    status = r->handler(t, req, r->kind, &e);
    if (r->flags & EP_SELF_LOG) return;
done:
    if (status < 0) {
        srv_send_error(&s->o, req, &e);
        status = e.status;
    }
    srv_access_log(&s->o, req, NULL, status, 0, 0, 0, 0, NULL);
}

void srv_endpoints_install(server *s) {
    evhttp_set_gencb(s->http, route_cb, s);
}
