// Several models in one server, and router aliases (see docs/MULTI_MODEL.md).
//
// Each model has its own record (srv_model.h: model, vocabulary, engine, in-flight requests, metrics); the
// front end (srv_front.h) holds them all and owns the event loop, the HTTP server, the connections and the
// worker thread. A request's JSON "model" picks its record here, before the endpoint's handler runs on it, so
// gen.c and embed.c are the same code with one model or sixteen.
//
// Router policy (per alias): a chat or completion request goes to the small model when its prompt has at most
// max_prompt_tokens tokens (the small model's tokenizer) and it asks for at most max_tokens new tokens (no
// max_tokens counts as more); otherwise to the large model, except with degrade on when the large engine's
// predicted TTFT (engine_predict_ttft) is above ttft_slo: then the small model answers instead of a late large
// one. Embeddings and tokenize calls naming a router go to its small model.
#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "server/gen_prompt.h"
#include "server/srv_log.h"
#include "server/srv_metrics.h"
#include "server/srv_model.h"
#include "server/srv_reply.h"
#include "server/srv_route.h"

enum { ROUTE_SHORT = 0, ROUTE_LONG, ROUTE_DEGRADED, ROUTE_N };
static const char *const route_reason[ROUTE_N] = {"short", "long", "degraded"};

typedef struct srv_router {
    srv_router_spec spec;
    srv_model *small, *large; // borrowed: two of the front end's models
    metric *routed[ROUTE_N];  // tachyon:routed_requests_total{alias,model,reason}: [short]/[degraded] small, [long] large
} srv_router;

// --- set-up ------------------------------------------------------------------------------------------

// One model's options: the server-wide ones, overridden by what its spec sets.
static void model_opts(server_opts *o, const srv_model_spec *m, int n_models) {
    o->model_path = m->path;
    o->served_name = m->alias;
    if (m->chat_template) o->chat_template = m->chat_template;
    // threads: its own, or an equal share of --threads (default: every core) so engines do not oversubscribe
    int th = o->eng.n_threads / (n_models > 0 ? n_models : 1);
    o->eng.n_threads = m->n_threads ? m->n_threads : th > 0 ? th : 1;
    if (m->kv_mem_bytes) o->eng.kv_mem_bytes = m->kv_mem_bytes;
    if (m->max_seqs) o->eng.max_seqs = m->max_seqs;
    if (m->max_queue >= 0) o->eng.max_queue = m->max_queue;
    if (m->ctx_size) o->eng.ctx_size = m->ctx_size;
}

// Partitions the cores this process may run on between the engines: model i gets the next n_threads of them,
// so one engine's steps never wait for another's. When the threads add up to more than those cores nothing is
// pinned (the kernel time-shares them and every step slows): logged once, here.
static void plan_cores(server *fe, int threads) {
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed)) return;
    int n_cores = CPU_COUNT(&allowed);
    if (threads > n_cores) {
        srv_log(&fe->o, SRV_LOG_WARN, "%d compute threads over %d models on %d cores: engines not pinned, they will "
                "share cores (give each model fewer threads)", threads, fe->n_models, n_cores);
        return;
    }
    int cpu = 0;
    for (int i = 0; i < fe->n_models; i++) {
        srv_model *t = fe->models[i];
        CPU_ZERO(&t->cpus);
        char list[256] = "";
        size_t off = 0;
        for (int k = 0; k < t->o.eng.n_threads; k++) {
            while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &allowed)) cpu++;
            CPU_SET(cpu, &t->cpus);
            if (off < sizeof list) off += (size_t)snprintf(list + off, sizeof list - off, "%s%d", k ? "," : "", cpu);
            cpu++;
        }
        t->pinned = 1;
        srv_log(&fe->o, SRV_LOG_INFO, "model %s: %d compute thread(s) on core(s) %s", t->o.served_name,
                t->o.eng.n_threads, list);
    }
}

int srv_model_engine_new(srv_model *s, const engine_opts *eo, tc_err *err) {
    cpu_set_t saved;
    int pin = s->pinned && !pthread_getaffinity_np(pthread_self(), sizeof saved, &saved) &&
              !pthread_setaffinity_np(pthread_self(), sizeof s->cpus, &s->cpus);
    int rc = engine_new(s->m, eo, &s->eng, err); // its engine thread and compute pool inherit the mask
    if (pin) pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
    return rc;
}

static srv_model *find_model(server *fe, const char *alias) {
    for (int i = 0; i < fe->n_models; i++)
        if (!strcmp(fe->models[i]->name, alias)) return fe->models[i];
    return NULL;
}

int srv_models_init(server *fe, tc_err *err) {
    const srv_config *c = fe->o.cfg;
    if (!c) return 0;
    if (c->n_models < 1) return tc_err_set(err, TC_ERR_INVALID, "no model configured");
    server_opts base = fe->o;
    fe->multi = c->n_models > 1 || c->n_routers > 0;
    model_opts(&fe->models[0]->o, &c->models[0], c->n_models);
    int threads = fe->models[0]->o.eng.n_threads;
    for (int i = 1; i < c->n_models; i++) {
        srv_model *t = calloc(1, sizeof *t);
        if (!t) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        fe->models[fe->n_models++] = t;
        t->o = base;
        t->o.draft_model_path = NULL; // --draft-model drafts for the first model only (its vocabulary)
        model_opts(&t->o, &c->models[i], c->n_models);
        t->fe = fe;
        const char *b = strrchr(t->o.model_path, '/');
        snprintf(t->basename, sizeof t->basename, "%s", b ? b + 1 : t->o.model_path);
        snprintf(t->name, sizeof t->name, "%s", t->o.served_name);
        threads += t->o.eng.n_threads;
    }
    if (fe->multi) plan_cores(fe, threads);
    if (c->n_routers) {
        fe->routers = calloc((size_t)c->n_routers, sizeof *fe->routers);
        if (!fe->routers) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        fe->n_routers = c->n_routers;
    }
    for (int i = 0; i < c->n_routers; i++) {
        srv_router *r = &fe->routers[i];
        r->spec = c->routers[i];
        // the first model's name is set by the caller from served_name = models[0].alias
        r->small = !strcmp(r->spec.small, c->models[0].alias) ? fe->models[0] : find_model(fe, r->spec.small);
        r->large = !strcmp(r->spec.large, c->models[0].alias) ? fe->models[0] : find_model(fe, r->spec.large);
        if (!r->small || !r->large) // srv_config_finish checked this: only a caller that skipped it gets here
            return tc_err_set(err, TC_ERR_INVALID, "router '%s': unknown model", r->spec.alias);
    }
    return 0;
}

// After the metrics registry exists (server_run calls it once every model's metrics are registered).
static int router_metrics(server *fe) {
    for (int i = 0; i < fe->n_routers; i++) {
        srv_router *r = &fe->routers[i];
        for (int k = 0; k < ROUTE_N; k++) {
            char l[128]; // at most 8 + 29 + 9 + 29 + 19 bytes: fits the registry's 96 (SRV_CFG_MAX_ALIAS)
            const char *model = k == ROUTE_LONG ? r->spec.large : r->spec.small;
            snprintf(l, sizeof l, "alias=\"%s\",model=\"%s\",reason=\"%s\"", r->spec.alias, model, route_reason[k]);
            r->routed[k] = metrics_add(fe->reg, METRIC_COUNTER, "tachyon:routed_requests_total", l,
                                       "Requests to a router alias, by the model chosen and why", NULL, 0);
            if (!r->routed[k]) return -1;
        }
    }
    return 0;
}

void srv_models_free(server *fe) {
    for (int i = fe->n_models - 1; i >= 0; i--) { // the first model's metrics own the registry: freed last
        srv_model_free(fe->models[i]);
        fe->models[i] = NULL;
    }
    fe->n_models = 0;
    free(fe->routers);
    fe->routers = NULL;
    fe->n_routers = 0;
}

// --- routing -----------------------------------------------------------------------------------------

static srv_router *find_router(const server *fe, const char *name) {
    for (int i = 0; i < fe->n_routers; i++)
        if (!strcmp(fe->routers[i].spec.alias, name)) return &fe->routers[i];
    return NULL;
}

// Test-only (TACHYON_FAULT_ROUTE_TTFT=SECONDS): every large model's predicted TTFT, as if it were overloaded,
// so degradation is tested without timing. Negative: unset.
static double fault_ttft(void) {
    const char *v = getenv("TACHYON_FAULT_ROUTE_TTFT");
    return v && *v ? atof(v) : -1;
}

// The router's choice for a chat or completion body; *reason one of ROUTE_*.
static srv_model *route(server *fe, srv_router *r, oai_kind kind, const char *body, size_t len, int *reason) {
    oai_req q;
    oai_err e = {0};
    *reason = ROUTE_SHORT;
    if (oai_parse_ex(kind, body, len, fe->o.lenient, &q, &e)) return r->small; // its handler reports the error
    int32_t *ids = NULL;
    int n = 0;
    if (gen_prompt_ids(r->small, &q, &ids, &n, &e)) n = 0; // likewise
    free(ids);
    int small = n <= r->spec.max_prompt_tokens && q.max_tokens >= 0 && q.max_tokens <= r->spec.max_tokens;
    oai_req_free(&q);
    if (small) return r->small;
    *reason = ROUTE_LONG;
    if (!r->spec.degrade) return r->large;
    double f = fault_ttft();
    double ttft = f >= 0 ? f : engine_predict_ttft(r->large->eng, n);
    if (ttft <= r->spec.ttft_slo) return r->large;
    srv_log(&fe->o, SRV_LOG_DEBUG, "router %s: %s predicted TTFT %.3f s > SLO %.3f s, degrading to %s", r->spec.alias,
            r->large->name, ttft, r->spec.ttft_slo, r->small->name);
    *reason = ROUTE_DEGRADED;
    return r->small;
}

int srv_route_pick(server *fe, struct evhttp_request *req, const char *path, srv_model **out, oai_err *e) {
    *out = fe->models[0];
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    const char *body = len ? (const char *)evbuffer_pullup(in, -1) : "";
    json_t *root = json_loadb(body, len, 0, NULL);
    json_t *m = root ? json_object_get(root, "model") : NULL;
    const char *name = json_is_string(m) ? json_string_value(m) : NULL;
    int rc = 0;
    if (!name || !name[0]) goto pick; // bad JSON, no or a non-string model: the first model's handler answers
    for (int i = 0; i < fe->n_models; i++)
        if (srv_model_ok(fe->models[i], name) && !srv_config_router(fe->o.cfg, name)) {
            *out = fe->models[i];
            goto pick;
        }
    srv_router *r = find_router(fe, name);
    if (!r && fe->o.any_model) goto pick; // --any-model-name: the first model answers
    if (!r) {
        rc = oai_err_set(e, 404, "invalid_request_error", "model_not_found", "model",
                         "The model `%.200s` does not exist or you do not have access to it.", name);
        goto out;
    }
    int chat = !strcmp(path, "/v1/chat/completions"), compl = !strcmp(path, "/v1/completions");
    if (!chat && !compl) {
        *out = r->small;
        goto pick;
    }
    int reason;
    *out = route(fe, r, chat ? OAI_CHAT : OAI_COMPLETION, body, len, &reason);
    metric_inc(r->routed[reason], 1);
pick:
    evhttp_add_header(evhttp_request_get_output_headers(req), "x-tachyon-routed-model", (*out)->name);
out:
    json_decref(root);
    return rc;
}

// --- /v1/models --------------------------------------------------------------------------------------

// The model objects of /v1/models: every served model, then every router alias.
static json_t *model_list(server *fe) {
    json_t *data = json_array();
    json_int_t now = (json_int_t)tc_wall();
    for (int i = 0; i < fe->n_models; i++) {
        srv_model *t = fe->models[i];
        json_array_append_new(data, json_pack("{s:s,s:s,s:I,s:s,s:i}", "id", t->name, "object", "model", "created",
                                              now, "owned_by", "tachyon", "max_model_len", t->ctx_size));
    }
    for (int i = 0; i < fe->n_routers; i++) {
        const srv_router *r = &fe->routers[i];
        json_array_append_new(
            data, json_pack("{s:s,s:s,s:I,s:s,s:{s:s,s:s,s:i,s:i,s:b,s:f}}", "id", r->spec.alias, "object", "model",
                            "created", now, "owned_by", "tachyon", "router", "small", r->small->name, "large",
                            r->large->name, "max_prompt_tokens", r->spec.max_prompt_tokens, "max_tokens",
                            r->spec.max_tokens, "degrade", r->spec.degrade, "ttft_slo", r->spec.ttft_slo));
    }
    return data;
}

void srv_route_models(server *fe, struct evhttp_request *req) {
    srv_send_json(&fe->o, req, 200, json_pack("{s:s,s:o}", "object", "list", "data", model_list(fe)));
}

int srv_route_model_one(server *fe, struct evhttp_request *req, const char *id, oai_err *e) {
    json_t *data = model_list(fe), *m;
    size_t i;
    const char *want = id;
    for (int k = 0; k < fe->n_models; k++) // a file name (with or without .gguf) names the model too
        if (srv_model_ok(fe->models[k], id) && !srv_config_router(fe->o.cfg, id)) want = fe->models[k]->name;
    json_array_foreach(data, i, m) if (!strcmp(json_string_value(json_object_get(m, "id")), want)) {
        srv_send_json(&fe->o, req, 200, json_incref(m));
        json_decref(data);
        return 200;
    }
    json_decref(data);
    return oai_err_set(e, 404, "invalid_request_error", "model_not_found", "model",
                       "The model `%.200s` does not exist or you do not have access to it.", id);
}

int srv_models_metrics(server *fe, tc_err *err) {
    if (router_metrics(fe)) return tc_err_set(err, TC_ERR_NOMEM, "out of memory (metrics)");
    return 0;
}
