// Log lines and the access log (see srv_log.h).
#include <event2/http.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "server/srv_log.h"

void srv_log(const server_opts *o, int level, const char *fmt, ...) {
    if (level < o->log_level) return;
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

const char *srv_method_name(struct evhttp_request *req) {
    switch (evhttp_request_get_command(req)) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    default: return "OTHER";
    }
}

void srv_access_log(const server_opts *o, struct evhttp_request *req, const char *id, int status, int n_prompt, int n_out,
                    double ttft, double e2e, const char *finish) {
    const char *uri = req ? evhttp_request_get_uri(req) : "-";
    int quiet = uri && (!strncmp(uri, "/stats", 6) || !strncmp(uri, "/metrics", 8) || !strncmp(uri, "/health", 7));
    srv_log(o, quiet ? SRV_LOG_DEBUG : SRV_LOG_INFO,
            "access id=%s status=%d prompt_tokens=%d output_tokens=%d ttft=%.4f e2e=%.4f finish=%s %s %s",
            id ? id : "-", status, n_prompt, n_out, ttft, e2e, finish ? finish : "-", req ? srv_method_name(req) : "-",
            uri ? uri : "-");
}
