// Who may talk to the server, checked for every request before routing:
//  - Host: a web page on another site can reach a server on 127.0.0.1 by pointing its own domain at
//    127.0.0.1 (DNS rebinding); the browser then sends that domain as Host. Only loopback names, the bind
//    address and --allowed-hosts are accepted (any Host when bound to a wildcard address and no list given).
//  - API key: with --api-key every route needs it except the public ones of the endpoint table (/health, the
//    dashboard shell: static HTML with no server data that asks for the key and sends it on its own fetches)
//    and --public-routes.
//  - POST bodies must be application/json: a cross-site form or fetch can send text/plain without a CORS
//    preflight ("simple request"); application/json always needs one, which --cors controls (the CORS
//    headers themselves are srv_reply.c's).
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "server/srv_access.h"
#include "server/srv_reply.h"
#include "server/srv_tenants.h"

static int wildcard_bind(const char *host) {
    return !host || !host[0] || !strcmp(host, "0.0.0.0") || !strcmp(host, "::") || !strcmp(host, "[::]");
}

// The host name of a Host header value ("name", "name:port", "[v6]:port" → "[v6]"), without a trailing dot.
static size_t host_name(const char *h, const char **out) {
    *out = h;
    size_t n;
    if (h[0] == '[') {
        const char *e = strchr(h, ']');
        n = e ? (size_t)(e - h) + 1 : strlen(h);
    } else {
        const char *c = strchr(h, ':');
        n = c ? (size_t)(c - h) : strlen(h);
    }
    if (n > 1 && h[n - 1] == '.') n--;
    return n;
}

static int host_ok(const server *s, const char *h) {
    if (!h) return 1; // HTTP/1.0 without Host: not a browser, nothing to rebind
    const char *a = s->o.allowed_hosts;
    if (a && srv_list_has(a, "*", 1, 1)) return 1;
    if (!a && wildcard_bind(s->o.host)) return 1;
    const char *name;
    size_t n = host_name(h, &name);
    static const char *const local[] = {"localhost", "127.0.0.1", "[::1]"};
    for (size_t i = 0; i < sizeof local / sizeof *local; i++)
        if (strlen(local[i]) == n && !strncasecmp(name, local[i], n)) return 1;
    if (s->o.host && !wildcard_bind(s->o.host)) {
        const char *b = s->o.host;
        size_t bn = strlen(b);
        int v6 = strchr(b, ':') && b[0] != '['; // "::1" binds, "[::1]" is how it appears in Host
        if (v6 ? (n == bn + 2 && name[0] == '[' && !strncasecmp(name + 1, b, bn)) : (bn == n && !strncasecmp(name, b, n)))
            return 1;
    }
    return a && srv_list_has(a, name, n, 0);
}

static int auth_ok(server *s, struct evhttp_request *req) {
    if (s->tenants) return srv_tenants_auth_ok(s, req); // --api-key-file (and --api-key with it): srv_tenants.c
    if (!s->o.api_key) return 1;
    const char *k = srv_request_key(req), *want = s->o.api_key;
    if (!k) return 0;
    size_t a = strlen(k), b = strlen(want);
    unsigned diff = (unsigned)(a != b);
    for (size_t i = 0; i < a && i < b; i++) diff |= (unsigned)(k[i] ^ want[i]);
    return diff == 0;
}

static int is_public(const server *s, const char *path, int public_route) {
    if (public_route) return 1;
    return s->o.public_routes && srv_list_has(s->o.public_routes, path, strlen(path), 1);
}

static int json_ctype(const char *ct) {
    if (!ct) return 0;
    while (*ct == ' ') ct++;
    size_t n = strcspn(ct, "; ");
    return n == 16 && !strncasecmp(ct, "application/json", 16);
}

int srv_access_check(server *s, struct evhttp_request *req, const char *path, int public_route, oai_err *e) {
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *host = evhttp_find_header(in, "Host");
    if (!host_ok(s, host))
        return oai_err_set(e, 403, "invalid_request_error", "host_not_allowed", NULL,
                           "Host '%.100s' is not allowed; start the server with --allowed-hosts NAME to accept it",
                           host);
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    if (cmd == EVHTTP_REQ_OPTIONS) return 0; // CORS preflights carry no credentials; route_cb answers them
    if (!is_public(s, path, public_route) && !auth_ok(s, req))
        return oai_err_set(e, 401, "invalid_request_error", "invalid_api_key", NULL,
                           "Incorrect or missing API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'");
    if (cmd == EVHTTP_REQ_POST && !json_ctype(evhttp_find_header(in, "Content-Type")))
        return oai_err_set(e, 415, "invalid_request_error", "unsupported_media_type", NULL,
                           "Content-Type must be application/json, got '%.100s'",
                           evhttp_find_header(in, "Content-Type") ? evhttp_find_header(in, "Content-Type") : "");
    return 0;
}
