// Several models in one server and router aliases (see srv_route.c and docs/MULTI_MODEL.md): the front end's
// models[] and routers, and the pick of a request's model.
#ifndef TACHYON_SERVER_SRV_ROUTE_H
#define TACHYON_SERVER_SRV_ROUTE_H

#include <event2/http.h>
#include "common/err.h"
#include "engine/engine.h"
#include "server/oai_err.h"
#include "server/srv_model.h"

// Creates the other models' records from o.cfg (the first model's options are set from cfg->models[0]
// first) and the routers. fe->models[0] exists already.
int srv_models_init(server *fe, tc_err *err);
void srv_models_free(server *fe); // every model's record, the last first (after their engines are freed)
int srv_models_metrics(server *fe, tc_err *err); // the routers' counters, once fe->reg exists
// The model a request on `path` goes to: its JSON body's "model" names a model or a router alias (empty or
// absent: the first model). 0 with *out set (and x-tachyon-routed-model added), or -1 with *e (404
// model_not_found for an unknown name). Only called when fe->multi.
int srv_route_pick(server *fe, struct evhttp_request *req, const char *path, srv_model **out, oai_err *e);
void srv_route_models(server *fe, struct evhttp_request *req); // GET /v1/models: every model and router
// GET /v1/models/{id}: the model object of a served model or router alias named id (decoded), or 404 with *e
// filled (returns -1); 200 when replied.
int srv_route_model_one(server *fe, struct evhttp_request *req, const char *id, oai_err *e);
// Loader thread: engine_new for s with its threads pinned to s->cpus when s->pinned (threads inherit the
// creating thread's affinity; the loader's own is restored after).
int srv_model_engine_new(srv_model *s, const engine_opts *eo, tc_err *err);

#endif
