// Generation requests, second half (gen.c): engine events → text → SSE chunks or one JSON reply, and the
// lifetime of the requests in flight. The front end drives these from its loop.
#ifndef TACHYON_SERVER_GEN_H
#define TACHYON_SERVER_GEN_H

#include "engine/engine.h"
#include "server/srv_model.h"

void gen_on_engine_events(srv_model *s); // drains engine_poll and flushes dirty streams
void gen_check_disconnects(srv_model *s);               // timer: notice clients that left, ping idle streams
void gen_cancel_all(srv_model *s, engine_finish why); // engine_cancel every live request
void gen_free_all(srv_model *s);                        // after engine_free: drop every request

#endif
