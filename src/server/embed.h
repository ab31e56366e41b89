// /v1/embeddings: each input runs through the model as an engine request with an embedding output.
#ifndef TACHYON_SERVER_EMBED_H
#define TACHYON_SERVER_EMBED_H

#include "server/oai.h"

struct srv_model;
struct evhttp_request;

// The endpoint's handler (srv_endpoints.c): replies (now or when the engine answers) and writes the access
// line itself; returns 0.
int embed_handle(struct srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *ep_err);

#endif
