// Strict HTTP/1.x request framing, checked on the raw header block before evhttp parses it. evhttp (libevent
// 2.1) takes the first of two Content-Length headers and reads the rest of the body as a second, smuggled
// request; it also accepts two Host headers, HTTP/1.1 without Host and NUL bytes in header lines. A request
// with any of these is refused with 400, as nginx and HAProxy do (RFC 9112 sections 3.2 and 6.3).
// Also the error replies this layer writes itself (OpenAI JSON, "Connection: close").
#include <ctype.h>
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/srv_http_strict.h"
#include "server/oai_err.h"
#include "server/srv_reply.h"

long srv_http_head_end(const char *p, size_t n, size_t from) {
    size_t i = from >= 2 ? from - 2 : 0; // an end that began in the last two bytes searched is not found yet
    // leading empty lines before the request line are allowed (RFC 9112 section 2.2): skip them
    size_t start = 0;
    while (start < n && (p[start] == '\r' || p[start] == '\n')) start++;
    if (i < start) i = start;
    for (; i < n; i++) {
        if (p[i] != '\n') continue;
        if (i + 1 < n && p[i + 1] == '\n') return (long)(i + 2);
        if (i + 2 < n && p[i + 1] == '\r' && p[i + 2] == '\n') return (long)(i + 3);
    }
    return -1;
}

// Header line [p, e) named `name` (case-insensitive, followed by ':')?
static int is_header(const char *p, const char *e, const char *name) {
    size_t k = strlen(name);
    return (size_t)(e - p) > k && !strncasecmp(p, name, k) && p[k] == ':';
}

static int all_digits(const char *p, const char *e) {
    while (p < e && (*p == ' ' || *p == '\t')) p++;
    while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) e--;
    if (p == e) return 0;
    for (; p < e; p++)
        if (!isdigit((unsigned char)*p)) return 0;
    return 1;
}

int srv_http_head_check(const char *p, size_t n, srv_http_head *h, char *why, size_t whyn) {
    memset(h, 0, sizeof *h);
    if (memchr(p, '\0', n)) return snprintf(why, whyn, "a NUL byte in the request head"), -1;
    const char *end = p + n, *line = p;
    while (line < end && (*line == '\r' || *line == '\n')) line++;
    const char *eol = memchr(line, '\n', (size_t)(end - line));
    if (!eol) return snprintf(why, whyn, "no request line"), -1;
    // "METHOD SP target SP HTTP/1.x": the version is the last word of the line
    const char *v = eol;
    while (v > line && (v[-1] == '\r' || v[-1] == ' ')) v--;
    const char *ve = v;
    while (v > line && v[-1] != ' ') v--;
    h->http11 = ve - v == 8 && !strncmp(v, "HTTP/1.1", 8);
    int n_cl = 0, n_host = 0, n_te = 0;
    for (line = eol + 1; line < end; line = eol + 1) {
        eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol) eol = end;
        const char *le = eol > line && eol[-1] == '\r' ? eol - 1 : eol;
        if (le == line) break; // the empty line that ends the head
        if (is_header(line, le, "Content-Length")) {
            if (++n_cl > 1) return snprintf(why, whyn, "more than one Content-Length header"), -1;
            if (!all_digits(line + 15, le))
                return snprintf(why, whyn, "a Content-Length that is not a number"), -1;
        } else if (is_header(line, le, "Host")) {
            if (++n_host > 1) return snprintf(why, whyn, "more than one Host header"), -1;
        } else if (is_header(line, le, "Transfer-Encoding")) {
            n_te++;
            h->chunked = 1;
        }
    }
    if (n_te && n_cl) return snprintf(why, whyn, "both Transfer-Encoding and Content-Length"), -1;
    if (h->http11 && !n_host) return snprintf(why, whyn, "an HTTP/1.1 request without a Host header"), -1;
    return 0;
}

// --- replies written by the connection layer ------------------------------------------------------------

const char *srv_http_reason(int status) {
    switch (status) {
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 505: return "HTTP Version Not Supported";
    default: return srv_reason(status);
    }
}

static void http_error_for(int status, oai_err *e) {
    switch (status) {
    case 408:
        oai_err_set(e, 408, "invalid_request_error", "request_timeout", NULL,
                    "The request was not received in time (--request-read-timeout, or --http-timeout "
                    "without a byte)");
        break;
    case 413:
        oai_err_set(e, 413, "invalid_request_error", "request_too_large", NULL,
                    "The request body is larger than the server accepts (--max-body)");
        break;
    case 501:
        oai_err_set(e, 501, "invalid_request_error", "method_not_supported", NULL, "HTTP method not supported");
        break;
    case 503:
        oai_err_set(e, 503, "server_error", "server_busy", NULL,
                    "The server is at its connection or request-buffer limit; retry after a moment");
        break;
    default:
        oai_err_set(e, status >= 400 && status < 600 ? status : 400, "invalid_request_error", NULL, NULL,
                    "Malformed HTTP request (%d %s)", status, srv_http_reason(status));
        break;
    }
}

// A complete "Connection: close" HTTP/1.1 response with an OpenAI error body, added to out.
void srv_http_format_error(struct evbuffer *out, int status) {
    oai_err e;
    http_error_for(status, &e);
    char *j = oai_err_json(&e);
    const char *body = j ? j : "{}";
    evbuffer_add_printf(out,
                        "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n%s"
                        "Connection: close\r\n\r\n%s",
                        e.status, srv_http_reason(e.status), strlen(body), e.status == 503 ? "Retry-After: 1\r\n" : "",
                        body);
    free(j);
}
