// The server's shared front end: the event loop, the HTTP server and its connections, the worker thread,
// API keys and tenants, the served models and router aliases, the summary cache, loading and draining. One
// per process, owned by server_run (server.c); every served model's record (srv_model.h) points back at it.
// Everything runs on its loop thread unless noted.
#ifndef TACHYON_SERVER_SRV_FRONT_H
#define TACHYON_SERVER_SRV_FRONT_H

#include <event2/event.h>
#include <event2/http.h>
#include <pthread.h>
#include <stdint.h>

#include "common/err.h"
#include "metrics/metrics.h"
#include "server/srv_config.h"
#include "server/srv_opts.h"

typedef enum { SRV_LOADING = 0, SRV_READY, SRV_DRAINING } srv_state;

struct srv_model;
struct srv_conns;
struct srv_work;
struct srv_tenants;
struct srv_router;
struct summ_cache;

typedef struct server {
    server_opts o; // the server-wide options (host, limits, keys, CORS, logging); each model has its own copy
    struct event_base *base;
    struct evhttp *http;
    struct evhttp_bound_socket *bound;
    struct event *ev_loaded, *ev_sigterm, *ev_sigint, *ev_drain, *ev_check;
    volatile srv_state state; // written by the loader thread before ev_loaded fires; read by the loop
    pthread_t loader;         // loads every model in turn, then fires ev_loaded
    int loader_started;
    int load_rc;
    tc_err load_err;
    double t_start_drain;
    int exit_rc;
    int exit_sig; // the second signal that cut the drain short, or 0
    double lenient_t_log;        // monotonic seconds of the last --lenient warning (rate limit)
    int lenient_suppressed;      // warnings not logged since
    struct srv_conns *conns;     // owned (srv_conn.c): per-connection state, limits, listener
    struct srv_work *work;       // owned (srv_work.c): the worker thread for large prompts
    struct srv_tenants *tenants; // owned (srv_tenants.c): API keys, tenants, rate limits; NULL = no keys
    metrics *reg;                // borrowed: the registry, owned by models[0]'s metrics
    // Several models (srv_route.c): each has its own record (model, engine, requests, metrics); models[0]
    // is the one a request without "model" goes to.
    struct srv_model *models[SRV_CFG_MAX_MODELS]; // (n_models) owned
    int n_models;                                 // 1 with a single model
    int multi;                                    // several models or a router (model names route)
    struct srv_router *routers;                   // (n_routers) owned
    int n_routers;
    struct summ_cache *summ_cache;                     // gen_summ.c: --summarize-with's cache, owned
    uint64_t summ_generated, summ_cached, summ_failed; // summaries by outcome (/stats)
} server;

#endif
