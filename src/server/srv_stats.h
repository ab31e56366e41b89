// /metrics (Prometheus text) and /stats (JSON for the dashboard): handlers of the endpoint table
// (srv_endpoints.c) over every model; each replies and returns 200.
#ifndef TACHYON_SERVER_SRV_STATS_H
#define TACHYON_SERVER_SRV_STATS_H

#include "server/oai.h"

struct srv_model;
struct evhttp_request;

int srv_handle_metrics(struct srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *e);
int srv_handle_stats(struct srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *e);

#endif
