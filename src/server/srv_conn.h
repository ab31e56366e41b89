// Connection-level defences of the evhttp server: per-connection state, read deadlines, connection and
// buffer limits, accept back-off, rate-limited logging (see the top of srv_conn.c). Owned by the front end.
#ifndef TACHYON_SERVER_SRV_CONN_H
#define TACHYON_SERVER_SRV_CONN_H

#include <event2/http.h>
#include "common/err.h"
#include "server/srv_front.h"

enum { SRV_RL_ACCEPT = 0, SRV_RL_REFUSED, SRV_RL_TIMEOUT, SRV_RL_BUFFER, SRV_RL_HTTP, SRV_RL_LIBEVENT, SRV_RL_N };
// Raises RLIMIT_NOFILE, installs the evhttp hooks. 0 or a negative TC_ERR_* (message in err).
int srv_conn_init(server *s, tc_err *err);
// Listens on o.host:o.port through our own evconnlistener (accept back-off on EMFILE); NULL + err on failure.
struct evhttp_bound_socket *srv_conn_listen(server *s, tc_err *err);
void srv_conn_free(server *s); // after evhttp_free
// route_cb calls this first: the request is complete, so its read deadline stops and, while its reply is
// pending, the connection has no idle timeout (a stream may wait in the queue for as long as it needs).
void srv_conn_dispatch(server *s, struct evhttp_request *req);
// The reply to req is fully written (chained from gen.c's own completion callback).
void srv_conn_reply_done(struct evhttp_request *req, void *arg);
// The connection close callback (evhttp keeps one per connection, and srv_conn uses it): gen.c's is chained.
void srv_conn_set_closecb(server *s, struct evhttp_connection *conn,
                          void (*cb)(struct evhttp_connection *, void *), void *arg);
// 1 when the peer of conn has closed its side or the socket failed (a non-blocking peek; no bytes consumed).
int srv_conn_peer_gone(struct evhttp_connection *conn);
// At most one line per second per kind; the rest are counted and reported as "(N suppressed)".
void srv_log_limited(server *s, int kind, int level, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
