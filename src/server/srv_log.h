// Logging, a leaf that every server file may call and that calls nothing of the server: one line per event
// on stderr with a timestamp and a level, and the access log (one line per request).
#ifndef TACHYON_SERVER_SRV_LOG_H
#define TACHYON_SERVER_SRV_LOG_H

#include <stddef.h>

#include "server/srv_opts.h"

struct evhttp_request;

// One line at `level` (SRV_LOG_*) when o->log_level lets it through.
void srv_log(const server_opts *o, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void srv_log_time(char *buf, size_t n); // the log's timestamp: ISO 8601 local time with milliseconds
const char *srv_method_name(struct evhttp_request *req); // "GET", "POST", …, "OTHER" (static string)
// The access line of one request (req may be NULL; id NULL = "-"); /stats, /metrics and /health at debug.
void srv_access_log(const server_opts *o, struct evhttp_request *req, const char *id, int status, int n_prompt,
                    int n_out, double ttft, double e2e, const char *finish);

#endif
