// The small endpoints, answered on the loop thread from what the server already holds: /health, the
// dashboard shell, /v1/models, /tokenize and /detokenize. Each is a handler of the endpoint table
// (srv_endpoints.c): it replies and returns the status, or returns -1 with *e filled (the table replies).
#ifndef TACHYON_SERVER_SRV_SIMPLE_H
#define TACHYON_SERVER_SRV_SIMPLE_H

#include "server/oai_err.h"
#include "server/oai.h"

struct srv_model;
struct evhttp_request;

int srv_ep_health(struct srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *e);    // 200 or 503
int srv_ep_dashboard(struct srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *e); // static HTML
int srv_ep_models(struct srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *e);    // every model
int srv_ep_tokenize(struct srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *e);
int srv_ep_detokenize(struct srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *e);

#endif
