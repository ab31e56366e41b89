// Default server options (see srv_opts.h).
#include <string.h>

#include "server/srv_opts.h"

void server_opts_default(server_opts *o) {
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->max_body = 8u << 20;
    o->max_headers = 16384;
    o->http_timeout = 10;
    o->read_timeout = 30;
    o->max_connections = 0;
    o->max_body_buffer = 64u << 20;
    o->sse_ping = 5;
    o->request_timeout = 0;
    o->shutdown_grace = 10;
    o->log_level = SRV_LOG_INFO;
    o->pooling = ENGINE_EMBED_MEAN;
    engine_opts_default(&o->eng);
}
