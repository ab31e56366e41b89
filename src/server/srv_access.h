// Who may talk to the server (Host, API key, JSON-only POST bodies), checked for every request before its
// handler runs (see srv_access.c).
#ifndef TACHYON_SERVER_SRV_ACCESS_H
#define TACHYON_SERVER_SRV_ACCESS_H

#include <event2/http.h>
#include "server/oai_err.h"
#include "server/srv_front.h"

// 0 if the request may go on; else -1 with *e filled (403 Host not allowed, 401 key, 415 Content-Type).
// public_route: the endpoint is served without the key (--public-routes adds paths).
int srv_access_check(server *s, struct evhttp_request *req, const char *path, int public_route, oai_err *e);

#endif
