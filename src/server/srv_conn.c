// Connection-level defences for the evhttp server; libevent 2.1 has none of these built in:
//  - a TOTAL deadline for receiving each request (headers + body), counted from its first byte, so a client
//    trickling one byte a second cannot hold a connection (evhttp's own timeout restarts on every byte) → 408;
//    and a request whose bytes stop for http_timeout → 408 (evhttp would close it without a word);
//  - strict framing (srv_http_strict.c) on each request head before evhttp parses it → 400;
//  - no idle timeout while a reply is pending: a queued or preempted stream is not cut (gen.c sends
//    ": ping" comments instead), and the request's deadline governs how long it may take; but a client that
//    stops reading its reply (nothing acknowledged for http_timeout) is cut and its request cancelled;
//  - at most max_connections open connections: beyond, the slowest partial request makes room (408), else
//    the new connection is accepted, answered 503 and closed; near the cap, a limit per client address;
//  - lingering close (srv_linger.c) after an early refusal, so a client still uploading reads its reply;
//  - a cap on request bytes buffered across all connections (max_body_buffer) → 503;
//  - OpenAI-shaped JSON in place of the HTML pages evhttp writes on its own (400, 413, 501, ...);
//  - accept back-off when the process runs out of descriptors (EMFILE/ENFILE), instead of a busy loop;
//  - RLIMIT_NOFILE raised to its hard limit; repeated errors logged at most once a second per kind.
//
// The hooks are public libevent API: evhttp_set_bevcb hands us each new connection's bufferevent before it
// reads a byte, and evbuffer callbacks on its input and output buffers tell us when request bytes arrive and
// when evhttp queues a reply we did not write. The evhttp_connection is the cbarg evhttp installs on that
// bufferevent (bufferevent_getcb): we pick it up in the "attach" pass, later in the same loop turn as the
// accept. A connection is IDLE (between requests), READING (first byte of a request seen, not yet
// dispatched) or BUSY (route_cb has it, until its reply is written). Actions that free a connection never
// run inside libevent's callbacks for it: they are queued and done by the sweep event.
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "server/srv_conn.h"
#include "server/srv_http_strict.h"
#include "server/srv_linger.h"
#include "server/srv_log.h"
#include "server/srv_reply.h"

enum { CONN_IDLE = 0, CONN_READING, CONN_BUSY };
enum { KILL_CLOSE = -1 }; // srv_conn.kill: close without a reply (else the HTTP status to answer)

typedef struct srv_conn {
    struct srv_conns *cs;
    struct bufferevent *bev;         // borrowed: evhttp owns it
    struct evhttp_connection *evcon; // borrowed; NULL until attached
    evutil_socket_t fd;
    int state;     // CONN_*
    double t_read; // monotonic seconds: first byte of the request being read (READING)
    double t_byte; // monotonic seconds: its last byte (READING); a stall past --http-timeout → 408
    int head_done;    // READING: the request's head has arrived and passed srv_http_head_check
    size_t head_scan; // READING: bytes of the head searched for its end so far
    int chunked;      // the request being read has a chunked body
    size_t req_bytes; // bytes of the request being read that arrived so far
    unsigned char addr[16]; // the client's address (IPv4: 4 bytes, IPv6: 16), for the per-client limit
    int addr_len;           // 0: unknown (not limited)
    uint64_t out_total;     // bytes ever queued on the output buffer
    uint64_t out_delivered; // of those, bytes the client acknowledged (neither buffered nor in the socket)
    double t_progress;      // BUSY: monotonic seconds when out_delivered last grew or nothing was pending
    size_t inbuf;  // bytes in bev's input buffer, counted in cs->buffered
    int kill;      // 0, KILL_CLOSE or an HTTP status: answer it and close at the next sweep
    int lib_reply; // evhttp queued a reply of its own: rewrite it as JSON at the next sweep
    int rewritten; // ... and it was (the connection closes after it): ignore further output
    void (*closecb)(struct evhttp_connection *, void *); // gen.c's close callback, chained
    void *closecb_arg;
    struct srv_conn *prev, *next; // cs->all
    struct srv_conn *next_pending; // cs->pending (not yet attached)
} srv_conn;

typedef struct srv_rl {
    double t_last; // monotonic seconds of the last line printed
    long suppressed;
    int level;
    char last[200]; // the last suppressed message, for the summary line
} srv_rl;

struct srv_conns {
    server *s;
    srv_conn *all, *pending;
    srv_conn **by_fd; // (n_by_fd) live attached connections by descriptor
    int n_by_fd;
    int n_conns, max_conns;
    size_t buffered; // bytes in the input buffers of all connections
    struct evconnlistener *lev;
    struct event *ev_attach, *ev_sweep, *ev_resume;
    srv_lingerer *linger; // owned: refused connections still draining what their client sends
    srv_rl rl[SRV_RL_N];
};

// libevent's log callback and the listener's error callback carry no pointer of ours: one server per process.
static server *g_srv;

// --- rate-limited logging ----------------------------------------------------------------------------

static void rl_flush(server *s, srv_rl *r, double now) {
    if (r->suppressed > 0 && now - r->t_last >= 1.0) {
        srv_log(&s->o, r->level, "%s (%ld suppressed)", r->last, r->suppressed);
        r->suppressed = 0;
        r->t_last = now;
    }
}

void srv_log_limited(server *s, int kind, int level, const char *fmt, ...) {
    if (level < s->o.log_level || !s->conns || kind < 0 || kind >= SRV_RL_N) return;
    srv_rl *r = &s->conns->rl[kind];
    double now = tc_now();
    char buf[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (r->t_last > 0 && now - r->t_last < 1.0) {
        r->suppressed++;
        r->level = level;
        memcpy(r->last, buf, sizeof buf);
        return;
    }
    if (r->suppressed) srv_log(&s->o, level, "%s (%ld suppressed)", buf, r->suppressed);
    else srv_log(&s->o, level, "%s", buf);
    r->suppressed = 0;
    r->t_last = now;
}

static void libevent_log_cb(int severity, const char *msg) {
    if (!g_srv) return;
    int level = severity >= EVENT_LOG_ERR ? SRV_LOG_ERROR : severity >= EVENT_LOG_WARN ? SRV_LOG_WARN : SRV_LOG_DEBUG;
    srv_log_limited(g_srv, SRV_RL_LIBEVENT, level, "libevent: %s", msg);
}

// --- replies written by this layer -------------------------------------------------------------------

// Writes the error straight to the socket (the connection is about to be freed, so nothing would flush a
// bufferevent). A reply this small fits the socket buffer of a fresh connection; if not, it is dropped.
static void conn_send_now(srv_conn *c, int status) {
    struct evbuffer *b = evbuffer_new();
    if (!b) return;
    srv_http_format_error(b, status);
    size_t n = evbuffer_get_length(b);
    const char *p = (const char *)evbuffer_pullup(b, -1);
    if (p && c->fd >= 0) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)w;
        // what the client still sends is discarded by the lingering close (conn_close_cb)
    }
    evbuffer_free(b);
}

// evhttp queued a reply of its own (an HTML error page): replace it by the same status as JSON. A leading
// "100 Continue" interim response is kept. Nothing is written before the next loop turn, so the whole page
// is in the buffer when the sweep runs.
static void conn_rewrite_lib_reply(srv_conn *c) {
    struct evbuffer *out = bufferevent_get_output(c->bev);
    size_t len = evbuffer_get_length(out), off = 0;
    for (;;) {
        char head[16] = {0};
        if (len - off < 12) return;
        struct evbuffer_ptr at;
        evbuffer_ptr_set(out, &at, off, EVBUFFER_PTR_SET);
        if (evbuffer_copyout_from(out, &at, head, 12) != 12 || strncmp(head, "HTTP/1.", 7)) return;
        int status = atoi(head + 9);
        // evhttp answers a malformed chunk size as if the body were too long
        if (status == 413 && c->chunked && c->req_bytes <= c->cs->s->o.max_body) status = 400;
        if (status != 100) {
            c->rewritten = 1;
            evbuffer_drain(out, len); // the interim part (if any) is re-added below
            if (off) evbuffer_add_printf(out, "HTTP/1.1 100 Continue\r\n\r\n");
            srv_http_format_error(out, status);
            srv_log_limited(c->cs->s, SRV_RL_HTTP, SRV_LOG_INFO, "http: %d %s from the HTTP layer", status,
                            srv_http_reason(status));
            return;
        }
        struct evbuffer_ptr end = evbuffer_search(out, "\r\n\r\n", 4, &at);
        if (end.pos < 0) return;
        off = (size_t)end.pos + 4;
    }
}

// --- connection records ------------------------------------------------------------------------------

static struct timeval tv_of(double sec) {
    struct timeval tv = {(time_t)sec, (suseconds_t)((sec - (double)(time_t)sec) * 1e6)};
    return tv;
}

static void conn_buffered_set(srv_conn *c, size_t len) {
    c->cs->buffered -= c->inbuf;
    c->cs->buffered += len;
    c->inbuf = len;
}

static void conn_condemn(srv_conn *c, int status) {
    if (c->kill) return;
    c->kill = status;
    // Stop evhttp from parsing or answering this connection before the sweep frees it.
    bufferevent_setcb(c->bev, NULL, NULL, NULL, NULL);
    bufferevent_disable(c->bev, EV_READ | EV_WRITE);
    event_active(c->cs->ev_sweep, EV_TIMEOUT, 0);
}

// The first byte of a request: its read deadline starts, its head is checked once it is complete. evhttp's
// own read timeout (which closes without a word) is moved past --http-timeout: the sweep answers 408 first.
static void conn_start_request(srv_conn *c) {
    double now = tc_now();
    c->state = CONN_READING;
    c->t_read = c->t_byte = now;
    c->head_done = 0;
    c->head_scan = 0;
    c->chunked = 0;
    c->req_bytes = 0;
    struct timeval rt = tv_of(c->cs->s->o.http_timeout + 2.0), wt = tv_of(c->cs->s->o.http_timeout);
    bufferevent_set_timeouts(c->bev, &rt, &wt);
}

// Strict framing (srv_http_strict.c) on the head of the request being read, before evhttp parses it.
// 0: not complete yet, or fine; -1: refused (the connection is condemned with 400).
static int conn_check_head(srv_conn *c, struct evbuffer *buf) {
    server *s = c->cs->s;
    size_t len = evbuffer_get_length(buf), lim = s->o.max_headers + 4;
    if (len > lim) len = lim; // a longer head is evhttp's to refuse (431)
    const char *p = len ? (const char *)evbuffer_pullup(buf, (ev_ssize_t)len) : NULL;
    long end = p ? srv_http_head_end(p, len, c->head_scan) : -1;
    if (end < 0) {
        c->head_scan = len;
        return 0;
    }
    c->head_done = 1;
    srv_http_head h;
    char why[96];
    if (srv_http_head_check(p, (size_t)end, &h, why, sizeof why) == 0) {
        c->chunked = h.chunked;
        return 0;
    }
    srv_log_limited(s, SRV_RL_HTTP, SRV_LOG_INFO, "http: 400 for %s", why);
    evbuffer_drain(buf, evbuffer_get_length(buf)); // nothing of it may be parsed as a request
    conn_condemn(c, 400);
    return -1;
}

static void conn_input_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg) {
    srv_conn *c = arg;
    struct srv_conns *cs = c->cs;
    conn_buffered_set(c, evbuffer_get_length(buf));
    if (info->n_added == 0 || c->kill) return;
    if (c->state == CONN_IDLE) conn_start_request(c);
    if (c->state == CONN_READING) {
        c->t_byte = tc_now();
        c->req_bytes += info->n_added;
        if (!c->head_done && conn_check_head(c, buf)) return; // condemned: 400
    }
    size_t cap = cs->s->o.max_body_buffer;
    if (cap > 0 && cs->buffered > cap) {
        srv_log_limited(cs->s, SRV_RL_BUFFER, SRV_LOG_WARN,
                        "request bytes buffered across %d connections over --max-body-buffer (%zu > %zu): refusing "
                        "one holding %zu",
                        cs->n_conns, cs->buffered, cap, c->inbuf);
        conn_condemn(c, c->state == CONN_BUSY ? KILL_CLOSE : 503);
    }
}

static void conn_output_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg) {
    (void)buf;
    srv_conn *c = arg;
    c->out_total += info->n_added;
    if (info->n_added == 0 || c->state == CONN_BUSY || c->kill || c->lib_reply || c->rewritten) return;
    c->lib_reply = 1;
    event_active(c->cs->ev_sweep, EV_TIMEOUT, 0);
}

static void conn_unlink(srv_conn *c) {
    struct srv_conns *cs = c->cs;
    if (c->prev) c->prev->next = c->next;
    else if (cs->all == c) cs->all = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

// evhttp is freeing the connection (its descriptor is still open): drop the record, then tell gen.c.
static void conn_close_cb(struct evhttp_connection *evcon, void *arg) {
    srv_conn *c = arg;
    struct srv_conns *cs = c->cs;
    void (*cb)(struct evhttp_connection *, void *) = c->closecb;
    void *cb_arg = c->closecb_arg;
    conn_buffered_set(c, 0);
    // refused early (our reply or evhttp's): the client may still be uploading; read it off before closing
    if ((c->kill > 0 || c->rewritten) && c->fd >= 0)
        srv_linger_fd(cs->linger, dup(c->fd), cs->s->o.max_body + cs->s->o.max_headers, 5.0, 2.0);
    // bufferevent_free (after this) runs no evbuffer callbacks; unhook anyway so none can see a freed record
    evbuffer_remove_cb(bufferevent_get_input(c->bev), conn_input_cb, c);
    evbuffer_remove_cb(bufferevent_get_output(c->bev), conn_output_cb, c);
    conn_unlink(c);
    if (c->fd >= 0 && c->fd < cs->n_by_fd && cs->by_fd[c->fd] == c) cs->by_fd[c->fd] = NULL;
    cs->n_conns--;
    free(c);
    if (cb) cb(evcon, cb_arg);
}

static srv_conn *conn_find(struct srv_conns *cs, struct evhttp_connection *evcon) {
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    if (fd < 0 || fd >= cs->n_by_fd) return NULL;
    srv_conn *c = cs->by_fd[fd];
    return c && c->evcon == evcon ? c : NULL;
}

static void conn_set_idle_timeouts(srv_conn *c, int busy) {
    struct timeval t = tv_of(c->cs->s->o.http_timeout);
    bufferevent_set_timeouts(c->bev, busy ? NULL : &t, &t);
}

// evhttp_set_bevcb: a new connection, before evhttp has set its descriptor or read a byte.
static struct bufferevent *conn_new_bev(struct event_base *base, void *arg) {
    struct srv_conns *cs = arg;
    struct bufferevent *bev = bufferevent_socket_new(base, -1, 0); // what evhttp would make itself
    srv_conn *c = bev ? calloc(1, sizeof *c) : NULL;
    if (!c) return bev; // evhttp handles a NULL bev; a connection without a record is only unlimited
    c->cs = cs;
    c->bev = bev;
    c->fd = -1;
    evbuffer_add_cb(bufferevent_get_input(bev), conn_input_cb, c);
    evbuffer_add_cb(bufferevent_get_output(bev), conn_output_cb, c);
    c->next = cs->all;
    if (cs->all) cs->all->prev = c;
    cs->all = c;
    c->next_pending = cs->pending;
    cs->pending = c;
    cs->n_conns++;
    event_active(cs->ev_attach, EV_TIMEOUT, 0);
    return bev;
}

static int conn_index(struct srv_conns *cs, srv_conn *c) {
    if (c->fd < 0) return -1;
    if (c->fd >= cs->n_by_fd) {
        int n = cs->n_by_fd ? cs->n_by_fd : 64;
        while (n <= c->fd) n *= 2;
        srv_conn **p = realloc(cs->by_fd, (size_t)n * sizeof *p);
        if (!p) return -1;
        memset(p + cs->n_by_fd, 0, (size_t)(n - cs->n_by_fd) * sizeof *p);
        cs->by_fd = p;
        cs->n_by_fd = n;
    }
    cs->by_fd[c->fd] = c;
    return 0;
}

static void conn_peer_addr(srv_conn *c) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getpeername(c->fd, (struct sockaddr *)&ss, &sl) < 0) return;
    if (ss.ss_family == AF_INET) {
        memcpy(c->addr, &((struct sockaddr_in *)&ss)->sin_addr, 4);
        c->addr_len = 4;
    } else if (ss.ss_family == AF_INET6) {
        memcpy(c->addr, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
        c->addr_len = 16;
    }
}

// At the cap, room for a new connection: the partial request arriving the slowest (bytes per second, after at
// least a second of it) is answered 408. 1 if one was chosen. Idle connections are left to --http-timeout.
static int conn_evict(struct srv_conns *cs, srv_conn *nc, double now) {
    srv_conn *slow = NULL;
    double slow_rate = 0;
    for (srv_conn *c = cs->all; c; c = c->next) {
        if (c == nc || c->kill || !c->evcon) continue;
        if (c->state != CONN_READING || now - c->t_read < 1.0) continue;
        double rate = (double)c->req_bytes / (now - c->t_read);
        if (!slow || rate < slow_rate) slow = c, slow_rate = rate;
    }
    if (slow) conn_condemn(slow, 408);
    return slow != NULL;
}

// A new connection against the cap and, from 3/4 of it, the per-client-address limit.
static void conn_admit(struct srv_conns *cs, srv_conn *c) {
    server *s = cs->s;
    if (cs->n_conns > cs->max_conns) {
        if (conn_evict(cs, c, tc_now())) {
            srv_log_limited(s, SRV_RL_REFUSED, SRV_LOG_INFO, "at --max-connections %d: answered the slowest "
                            "partial connection for a new one", cs->max_conns);
            return;
        }
        srv_log_limited(s, SRV_RL_REFUSED, SRV_LOG_WARN,
                        "connection refused: %d open connections (--max-connections %d)", cs->n_conns - 1,
                        cs->max_conns);
        conn_condemn(c, 503);
        return;
    }
    int per = s->o.max_conn_per_client;
    if (per <= 0) per = cs->max_conns / 8 > 16 ? cs->max_conns / 8 : 16;
    if (!c->addr_len || (double)cs->n_conns < 0.75 * cs->max_conns) return;
    int same = 0;
    for (srv_conn *o = cs->all; o; o = o->next)
        if (!o->kill && o->addr_len == c->addr_len && !memcmp(o->addr, c->addr, (size_t)c->addr_len)) same++;
    if (same <= per) return;
    srv_log_limited(s, SRV_RL_REFUSED, SRV_LOG_WARN,
                    "connection refused: %d open connections from one client address (--max-connections-per-client "
                    "%d, applied from 3/4 of --max-connections %d)", same - 1, per, cs->max_conns);
    conn_condemn(c, 503);
}

// Runs later in the loop turn that accepted the connections: evhttp has set them up by now.
static void conn_attach_cb(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct srv_conns *cs = arg;
    server *s = cs->s;
    srv_conn *c = cs->pending;
    cs->pending = NULL;
    for (srv_conn *p = c; p; p = p->next_pending) // every address first: connections accepted together count
        if ((p->fd = bufferevent_getfd(p->bev)) >= 0) conn_peer_addr(p);
    while (c) {
        srv_conn *next = c->next_pending;
        c->next_pending = NULL;
        void *cbarg = NULL;
        bufferevent_getcb(c->bev, NULL, NULL, NULL, &cbarg);
        c->evcon = cbarg;
        c->fd = bufferevent_getfd(c->bev);
        if (!c->evcon || c->fd < 0 || conn_index(cs, c)) {
            // not an evhttp connection we understand (or out of memory): leave it unlimited
            conn_buffered_set(c, 0);
            evbuffer_remove_cb(bufferevent_get_input(c->bev), conn_input_cb, c);
            evbuffer_remove_cb(bufferevent_get_output(c->bev), conn_output_cb, c);
            conn_unlink(c);
            cs->n_conns--;
            free(c);
        } else {
            evhttp_connection_set_closecb(c->evcon, conn_close_cb, c);
            // one request's bytes at most (evhttp needs a whole body in the buffer, and answers 413 beyond)
            bufferevent_setwatermark(c->bev, EV_READ, 0, s->o.max_body + s->o.max_headers + 65536);
            conn_admit(cs, c);
        }
        c = next;
    }
}

static void conn_kill(srv_conn *c) {
    if (c->kill > 0 && evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) conn_send_now(c, c->kill);
    evhttp_connection_free(c->evcon); // calls conn_close_cb, which frees c
}

// The write deadline of a reply: the client must keep reading. Progress is what left both the output buffer
// and the socket's send queue (SIOCOUTQ: bytes the peer has not acknowledged), so a full socket buffer does
// not count as read, and queuing more chunks does not restart the clock (as libevent's write timeout does).
static int conn_write_stalled(srv_conn *c, double now) {
    int outq = 0;
    if (c->fd < 0 || ioctl(c->fd, SIOCOUTQ, &outq) < 0) outq = 0;
    uint64_t pending = evbuffer_get_length(bufferevent_get_output(c->bev)) + (uint64_t)(outq > 0 ? outq : 0);
    uint64_t delivered = c->out_total > pending ? c->out_total - pending : 0;
    if (pending == 0 || delivered != c->out_delivered) {
        c->out_delivered = delivered;
        c->t_progress = now;
        return 0;
    }
    return now - c->t_progress > c->cs->s->o.http_timeout;
}

// Periodic (and on demand): read deadlines, condemned connections, evhttp's own replies, log summaries.
static void conn_sweep_cb(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct srv_conns *cs = arg;
    server *s = cs->s;
    double now = tc_now();
    srv_conn *next;
    for (srv_conn *c = cs->all; c; c = next) {
        next = c->next;
        if (!c->evcon) continue; // attached later this turn
        if (c->lib_reply) {
            c->lib_reply = 0;
            if (!c->kill) conn_rewrite_lib_reply(c);
        }
        if (!c->kill && c->state == CONN_READING && s->o.read_timeout > 0 && now - c->t_read > s->o.read_timeout) {
            srv_log_limited(s, SRV_RL_TIMEOUT, SRV_LOG_INFO,
                            "request not received within %.1f s (--request-read-timeout): 408, closing",
                            s->o.read_timeout);
            c->kill = 408;
        }
        if (!c->kill && c->state == CONN_READING && now - c->t_byte > s->o.http_timeout) {
            srv_log_limited(s, SRV_RL_TIMEOUT, SRV_LOG_INFO,
                            "request stalled: no byte for %d s (--http-timeout): 408, closing", s->o.http_timeout);
            c->kill = 408;
        }
        if (!c->kill && c->state == CONN_BUSY && conn_write_stalled(c, now)) {
            srv_log_limited(s, SRV_RL_TIMEOUT, SRV_LOG_INFO,
                            "client stopped reading its reply for %d s (--http-timeout): cancelling, closing",
                            s->o.http_timeout);
            c->kill = KILL_CLOSE;
        }
        if (c->kill) conn_kill(c);
    }
    for (int k = 0; k < SRV_RL_N; k++) rl_flush(s, &cs->rl[k], now);
}

// --- listener ----------------------------------------------------------------------------------------

static void conn_resume_cb(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct srv_conns *cs = arg;
    if (cs->lev && cs->s->bound) evconnlistener_enable(cs->lev); // s->bound is NULL once draining
}

// accept() failed with a non-transient error (EMFILE, ENFILE, ENOBUFS, ENOMEM): the pending connection
// stays in the backlog and the socket stays readable, so retrying at once would spin. Pause instead.
static void conn_accept_error_cb(struct evconnlistener *lev, void *arg) {
    (void)arg;
    int err = EVUTIL_SOCKET_ERROR();
    server *s = g_srv;
    if (!s || !s->conns) return;
    struct srv_conns *cs = s->conns;
    evconnlistener_disable(lev);
    struct timeval tv = {0, 100000}; // 100 ms
    event_add(cs->ev_resume, &tv);
    srv_log_limited(s, SRV_RL_ACCEPT, SRV_LOG_WARN, "accept failed: %s (%d open connections); pausing 100 ms",
                    evutil_socket_error_to_string(err), cs->n_conns);
}

struct evhttp_bound_socket *srv_conn_listen(server *s, tc_err *err) {
    struct srv_conns *cs = s->conns;
    struct evutil_addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    hints.ai_flags = EVUTIL_AI_PASSIVE | EVUTIL_AI_ADDRCONFIG;
    char port[16];
    snprintf(port, sizeof port, "%d", s->o.port);
    int rc = evutil_getaddrinfo(s->o.host, port, &hints, &ai);
    if (rc || !ai) {
        tc_err_set(err, TC_ERR_IO, "cannot listen on %s:%d: %s", s->o.host, s->o.port, evutil_gai_strerror(rc));
        return NULL;
    }
    errno = 0;
    cs->lev = evconnlistener_new_bind(s->base, NULL, NULL,
                                      LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 1024,
                                      ai->ai_addr, (int)ai->ai_addrlen);
    evutil_freeaddrinfo(ai);
    if (!cs->lev) {
        tc_err_set(err, TC_ERR_IO, "cannot listen on %s:%d: %s", s->o.host, s->o.port, strerror(errno));
        return NULL;
    }
    struct evhttp_bound_socket *b = evhttp_bind_listener(s->http, cs->lev); // evhttp sets the accept cb
    if (!b) {
        evconnlistener_free(cs->lev);
        cs->lev = NULL;
        tc_err_set(err, TC_ERR_NOMEM, "libevent: cannot bind the listener");
        return NULL;
    }
    evconnlistener_set_error_cb(cs->lev, conn_accept_error_cb);
    return b;
}

// --- dispatch ----------------------------------------------------------------------------------------

void srv_conn_dispatch(server *s, struct evhttp_request *req) {
    srv_conn *c = s->conns ? conn_find(s->conns, evhttp_request_get_connection(req)) : NULL;
    if (!c) return;
    c->state = CONN_BUSY;
    c->t_read = 0;
    c->t_progress = tc_now();
    conn_set_idle_timeouts(c, 1);
    evhttp_request_set_on_complete_cb(req, srv_conn_reply_done, s);
}

void srv_conn_reply_done(struct evhttp_request *req, void *arg) {
    server *s = arg;
    srv_conn *c = s->conns ? conn_find(s->conns, evhttp_request_get_connection(req)) : NULL;
    if (!c || c->kill) return;
    conn_set_idle_timeouts(c, 0);
    // pipelined bytes of the next request may be waiting: their deadline starts now, and their head is checked
    // before evhttp (which reads them in a deferred callback after this) parses it
    if (c->inbuf > 0) {
        conn_start_request(c);
        struct evbuffer *in = bufferevent_get_input(c->bev);
        c->req_bytes = evbuffer_get_length(in);
        conn_check_head(c, in);
    } else {
        c->state = CONN_IDLE;
    }
}

int srv_conn_peer_gone(struct evhttp_connection *conn) {
    struct bufferevent *bev = evhttp_connection_get_bufferevent(conn);
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    if (fd < 0) return 0;
    char ch;
    ssize_t n = recv(fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

void srv_conn_set_closecb(server *s, struct evhttp_connection *conn,
                          void (*cb)(struct evhttp_connection *, void *), void *arg) {
    srv_conn *c = s->conns ? conn_find(s->conns, conn) : NULL;
    if (c) {
        c->closecb = cb;
        c->closecb_arg = arg;
    } else {
        evhttp_connection_set_closecb(conn, cb, arg);
    }
}

// --- setup -------------------------------------------------------------------------------------------

int srv_conn_init(server *s, tc_err *err) {
    struct srv_conns *cs = calloc(1, sizeof *cs);
    if (!cs) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    cs->s = s;
    s->conns = cs;
    g_srv = s;
    event_set_log_callback(libevent_log_cb);
    struct rlimit rl;
    long nofile = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        if (rl.rlim_cur < rl.rlim_max) {
            rlim_t want = rl.rlim_max == RLIM_INFINITY ? 1 << 20 : rl.rlim_max;
            struct rlimit r2 = {want, rl.rlim_max};
            if (setrlimit(RLIMIT_NOFILE, &r2) == 0) rl.rlim_cur = want;
        }
        nofile = rl.rlim_cur == RLIM_INFINITY ? 1 << 20 : (long)rl.rlim_cur;
    }
    // auto: leave room for the process's own descriptors (model, engine, libevent, logs)
    long auto_max = nofile > 128 ? nofile - 64 : nofile / 2;
    cs->max_conns = s->o.max_connections > 0 ? s->o.max_connections : (int)(auto_max > 1 << 20 ? 1 << 20 : auto_max);
    cs->ev_attach = event_new(s->base, -1, 0, conn_attach_cb, cs);
    cs->ev_sweep = event_new(s->base, -1, EV_PERSIST, conn_sweep_cb, cs);
    cs->ev_resume = event_new(s->base, -1, 0, conn_resume_cb, cs);
    cs->linger = srv_linger_new(s->base);
    if (!cs->ev_attach || !cs->ev_sweep || !cs->ev_resume || !cs->linger)
        return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    struct timeval tv = {0, 100000}; // 100 ms: the resolution of the read deadline
    event_add(cs->ev_sweep, &tv);
    evhttp_set_bevcb(s->http, conn_new_bev, cs);
    srv_log(&s->o, SRV_LOG_DEBUG, "descriptors: %ld; connections at most %d", nofile, cs->max_conns);
    if (s->o.max_body_buffer > 0 && s->o.max_body_buffer < s->o.max_body)
        srv_log(&s->o, SRV_LOG_WARN, "--max-body-buffer (%zu) is below --max-body (%zu): the largest bodies are refused",
                s->o.max_body_buffer, s->o.max_body);
    return 0;
}

void srv_conn_free(server *s) {
    struct srv_conns *cs = s->conns;
    if (!cs) return;
    // evhttp_free has closed every connection (conn_close_cb freed their records); the listener went with it
    while (cs->all) { // records never attached (the loop stopped first)
        srv_conn *c = cs->all;
        conn_unlink(c);
        free(c);
    }
    if (cs->ev_attach) event_free(cs->ev_attach);
    if (cs->ev_sweep) event_free(cs->ev_sweep);
    if (cs->ev_resume) event_free(cs->ev_resume);
    srv_linger_free(cs->linger);
    free(cs->by_fd);
    free(cs);
    s->conns = NULL;
    g_srv = NULL;
    event_set_log_callback(NULL);
}
