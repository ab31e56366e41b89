// Replies (see srv_reply.h).
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/srv_reply.h"
#include "server/wire.h"

// --- replies -----------------------------------------------------------------------------------------

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

void srv_send_body(const server_opts *o, struct evhttp_request *req, int status, const char *ctype, const char *body,
                      size_t len) {
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", ctype);
    srv_add_common_headers(o, req);
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

void srv_send_json(const server_opts *o, struct evhttp_request *req, int status, json_t *j) {
    char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (!t) {
        srv_send_body(o, req, 500, "application/json",
                  "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}",
                  84);
    } else {
        srv_send_body(o, req, status, "application/json", t, strlen(t));
    }
    free(t);
    json_decref(j);
}

void srv_send_error(const server_opts *o, struct evhttp_request *req, const oai_err *e) {
    const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
    const wire_ops *wo = wire_get(wire_of_path(u ? evhttp_uri_get_path(u) : NULL)); // the API's error shape
    char *t = wo ? wo->error_json(e) : oai_err_json(e);
    if (e->status == 503) {
        char ra[24];
        snprintf(ra, sizeof ra, "%.0f", e->retry_after > 1 ? ceil(e->retry_after) : 1.0);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", ra);
    }
    if (e->status == 401) evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate", "Bearer");
    srv_send_body(o, req, e->status, "application/json", t ? t : "{}", t ? strlen(t) : 2);
    free(t);
}

void srv_sse_start(const server_opts *o, struct evhttp_request *req) {
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", "text/event-stream");
    evhttp_add_header(h, "Cache-Control", "no-cache");
    evhttp_add_header(h, "X-Accel-Buffering", "no");
    srv_add_common_headers(o, req);
    evhttp_send_reply_start(req, 200, "OK");
}

// --- CORS and comma lists ----------------------------------------------------------------------------

// 1 if the comma-separated list holds item (n bytes), compared case-insensitively (or with strcmp when cs).
int srv_list_has(const char *list, const char *item, size_t n, int cs) {
    for (const char *p = list; p && *p;) {
        const char *q = strchr(p, ',');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        while (len && *p == ' ') p++, len--;
        while (len && p[len - 1] == ' ') len--;
        if (len == n && (cs ? !strncmp(p, item, n) : !strncasecmp(p, item, n))) return 1;
        p = q ? q + 1 : NULL;
    }
    return 0;
}

// The value for Access-Control-Allow-Origin, or NULL when CORS is off or the Origin is not listed.
const char *srv_cors_origin(const server_opts *o, struct evhttp_request *req) {
    const char *c = o->cors;
    if (!c) return NULL;
    if (!strcmp(c, "*")) return "*";
    const char *origin = evhttp_find_header(evhttp_request_get_input_headers(req), "Origin");
    if (!origin) return NULL;
    size_t n = strlen(origin);
    while (n && origin[n - 1] == '/') n--;
    return srv_list_has(c, origin, n, 0) ? origin : NULL;
}

void srv_add_common_headers(const server_opts *o, struct evhttp_request *req) {
    if (!o->cors) return;
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    if (strcmp(o->cors, "*")) evhttp_add_header(h, "Vary", "Origin"); // the answer depends on Origin
    const char *origin = srv_cors_origin(o, req);
    if (!origin) return;
    evhttp_add_header(h, "Access-Control-Allow-Origin", origin);
    evhttp_add_header(h, "Access-Control-Allow-Headers", "Authorization, Content-Type, x-api-key, anthropic-version");
    evhttp_add_header(h, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
}
