// /v1/embeddings: each input runs through the model as an engine request with an embedding output.
#ifndef TACHYON_SERVER_EMBED_H
#define TACHYON_SERVER_EMBED_H

#include "engine/engine.h"
#include "server/oai.h"

struct srv_model;
struct evhttp_request;

// The endpoint's handler (srv_endpoints.c): replies (now or when the engine answers) and writes the access
// line itself; returns 0.
int embed_handle(struct srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *ep_err);
void embed_check_disconnects(struct srv_model *s);            // timer: cancel the requests whose client went away
void embed_cancel_all(struct srv_model *s, engine_finish why); // engine_cancel every live input (each is answered)
void embed_free_all(struct srv_model *s); // after engine_free: drop every request, no callback left

#endif
