// Strict HTTP/1.x request-head checks (srv_http_strict.c): srv_conn.c runs them on each request's raw head
// before evhttp parses it, and answers 400 when they fail.
#ifndef TACHYON_SRV_HTTP_STRICT_H
#define TACHYON_SRV_HTTP_STRICT_H

#include <event2/buffer.h>
#include <stddef.h>

typedef struct srv_http_head {
    int http11;  // the request line says HTTP/1.1
    int chunked; // a Transfer-Encoding header is present
} srv_http_head;

// The offset just past the empty line that ends the request head in p[0, n), or -1 if it has not arrived.
// from: bytes already searched by an earlier call on the same head (0 the first time).
long srv_http_head_end(const char *p, size_t n, size_t from);

// Checks a complete head p[0, n) (request line and header lines, up to and including the empty line).
// 0 with *h filled; -1 with a reason in why: a NUL byte, two Content-Length or Host headers, a non-numeric
// Content-Length, Transfer-Encoding with Content-Length, or HTTP/1.1 without Host.
int srv_http_head_check(const char *p, size_t n, srv_http_head *h, char *why, size_t whyn);

// The reason phrase of an HTTP status, including those only this layer sends (408, 411, 414, 431, 501, ...).
const char *srv_http_reason(int status);
// A complete "Connection: close" HTTP/1.1 response with an OpenAI error body for status, added to out.
void srv_http_format_error(struct evbuffer *out, int status);

#endif
