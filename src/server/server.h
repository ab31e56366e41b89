// The OpenAI-compatible HTTP server: one libevent loop thread for the network (HTTP/1.1 keep-alive, SSE),
// the engine in its own thread, joined through the engine's event fd. The model loads after the socket
// listens, so /health answers 503 while loading.
#ifndef TACHYON_SERVER_H
#define TACHYON_SERVER_H

#include <stddef.h>

#include "common/err.h"
#include "server/srv_opts.h"

// Listens, loads the model, serves until SIGTERM/SIGINT, drains and frees everything. Returns 0 on a clean
// shutdown, 128 + the signal number when a second signal cut the drain short (streams were cut), or a
// negative TC_ERR_* (message in err) when listening or loading fails.
int server_run(const server_opts *o, tc_err *err);

#endif
