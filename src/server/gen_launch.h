// Generation requests (/v1/chat/completions, /v1/completions), first half: parse, prepare the prompt,
// submit to the engine (gen.c streams the replies).
#ifndef TACHYON_SERVER_GEN_LAUNCH_H
#define TACHYON_SERVER_GEN_LAUNCH_H

#include "server/oai.h"

struct srv_model;
struct evhttp_request;

// The endpoint's handler (srv_endpoints.c) for kind OAI_CHAT or OAI_COMPLETION: replies (errors now, the
// completion as the engine produces it) and writes the access line itself; returns 0.
int gen_handle(struct srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *ep_err);
// The same request path for other APIs on the wire (wire.h): /v1/responses and /v1/messages.
int gen_handle_responses(struct srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *ep_err);
int gen_handle_messages(struct srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *ep_err);
// --lenient: logs the fields a request dropped (at most one line per 10 s over the whole server).
void gen_log_dropped(struct srv_model *s, const oai_req *q);

#endif
