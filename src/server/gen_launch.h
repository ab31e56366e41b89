// Generation requests (/v1/chat/completions, /v1/completions), first half: parse, prepare the prompt,
// submit to the engine (gen.c streams the replies).
#ifndef TACHYON_SERVER_GEN_LAUNCH_H
#define TACHYON_SERVER_GEN_LAUNCH_H

#include "server/oai.h"

struct server;
struct evhttp_request;

// The endpoint's handler (srv_endpoints.c) for kind OAI_CHAT or OAI_COMPLETION: replies (errors now, the
// completion as the engine produces it) and writes the access line itself; returns 0.
int gen_handle(struct server *s, struct evhttp_request *req, oai_kind kind, oai_err *ep_err);

#endif
