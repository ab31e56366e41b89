// Replies, a leaf that every handler may call and that calls nothing of the server: a JSON body, an error in
// OpenAI's shape, the start of an SSE stream, and the headers every reply carries (CORS from --cors). The
// options are the front end's (server-wide: --cors); the request is borrowed and gets its reply sent.
#ifndef TACHYON_SERVER_SRV_REPLY_H
#define TACHYON_SERVER_SRV_REPLY_H

#include <jansson.h>
#include <stddef.h>

#include "server/oai_err.h"
#include "server/srv_opts.h"

struct evhttp_request;

const char *srv_reason(int status); // "OK", "Not Found", … (static string)
// The whole reply: body (len bytes, may be NULL) with Content-Type ctype; HEAD gets the length and no body.
void srv_send_body(const server_opts *o, struct evhttp_request *req, int status, const char *ctype,
                   const char *body, size_t len);
void srv_send_json(const server_opts *o, struct evhttp_request *req, int status, json_t *j); // steals j
// {"error": …} with e->status; 503 adds Retry-After, 401 WWW-Authenticate.
void srv_send_error(const server_opts *o, struct evhttp_request *req, const oai_err *e);
// Starts a 200 text/event-stream reply (no caching, no proxy buffering, CORS); chunks follow.
void srv_sse_start(const server_opts *o, struct evhttp_request *req);
// The value for Access-Control-Allow-Origin, or NULL when CORS is off or the request's Origin is not listed.
const char *srv_cors_origin(const server_opts *o, struct evhttp_request *req);
void srv_add_common_headers(const server_opts *o, struct evhttp_request *req); // CORS headers on a reply
// 1 if the comma-separated list holds item (n bytes), compared case-insensitively (or with strcmp when cs).
int srv_list_has(const char *list, const char *item, size_t n, int cs);

#endif
