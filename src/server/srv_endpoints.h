// HTTP routing: the endpoint table (srv_endpoints.c) and the libevent callback that answers every request
// by walking it. The top of the request path: it calls the handlers, and nothing below calls it.
#ifndef TACHYON_SERVER_SRV_ENDPOINTS_H
#define TACHYON_SERVER_SRV_ENDPOINTS_H

struct server;

// Sets the front end's HTTP callback (s->http) to the table's router; runs on the loop thread.
void srv_endpoints_install(struct server *s);

#endif
