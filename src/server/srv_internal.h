// Server internals shared by server.c (HTTP plumbing, simple endpoints), gen.c (completions) and
// srv_stats.c (/metrics, /stats). Everything here runs on the event-loop thread unless noted.
#ifndef TACHYON_SERVER_INTERNAL_H
#define TACHYON_SERVER_INTERNAL_H

#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>

#include "engine/engine.h"
#include "grammar/gram.h"
#include "metrics/metrics.h"
#include "model/model.h"
#include "server/oai.h"
#include "server/server.h"
#include "server/srv_config.h"
#include "server/srv_log.h"
#include "server/srv_reply.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

typedef enum { SRV_LOADING = 0, SRV_READY, SRV_DRAINING } srv_state;

typedef struct srv_metrics {
    metrics *reg; // owned
    metric *ttft, *tpot, *itl, *e2e, *queue, *prefill, *decode;
    metric *running, *waiting, *kv_used, *kv_total, *batch_size, *batch_tokens;
    metric *kv_cap_tokens, *kv_token_bytes; // KV capacity in tokens, bytes per token (set by the cache types)
    metric *success_stop, *success_length, *success_abort;
    metric *prompt_tokens, *gen_tokens, *preemptions, *rejected, *cancelled, *prefix_hit, *prefix_query;
    metric *spec_draft[ENGINE_SPEC_METHODS], *spec_accepted[ENGINE_SPEC_METHODS], *spec_steps; // by spec_method
    metric *spec_rate; // histogram: accepted / drafted tokens per finished request that speculated
    metric *sched_out[SCHED_N_CLASSES][SCHED_N_OUTCOMES]; // srv_sched_stats.c: outcomes per priority class
    metric *sched_qt[SCHED_N_CLASSES];                    // queue-time histograms per priority class
    metric *prio_preemptions;
    mwindow w_ttft, w_tpot, w_itl, w_e2e; // owned
    mrate gen_rate;                       // generated tokens per second
    uint64_t n_requests;                  // finished generation requests
    int reg_borrowed;                     // 1: reg is the hub's (several models), not freed here
} srv_metrics;

struct gen_req;
struct server;
struct srv_tenants;

// A generation request's tenant (srv_tenants.c): filled at admission, settled when the request is freed.
typedef struct srv_tenant_ref {
    int id;          // stable tenant id (1-based, kept across key-file reloads); 0 = no tenant (no keys)
    float share;     // fair-share weight (sched_fair.c)
    uint64_t salt;   // prefix-cache salt of the tenant; 0 = the shared cache
    double reserved; // tokens-per-minute units taken at admission (prompt + max_tokens per choice)
    int admitted;    // 1: counted against the tenant; srv_tenant_end settles it
} srv_tenant_ref;

// srv_sched_stats.c: the scheduler's per-priority outcome counters and queue-time histograms.
int srv_sched_metrics_init(srv_metrics *mt);                         // -1 on OOM
void srv_sched_metrics_refresh(srv_metrics *mt, const engine_stats *st);
json_t *srv_sched_stats_json(const engine_stats *st);                 // the "sched" object of /stats

// The target of an engine event (engine_req.user points at one): gen.c's choices leave fn NULL; other
// handlers (embed.c) set fn and get their events through it.
typedef struct srv_ev_sink {
    void (*fn)(struct server *s, struct srv_ev_sink *self, const engine_event *ev);
} srv_ev_sink;
struct srv_conns;
struct srv_work;

typedef struct server {
    server_opts o;
    struct event_base *base;
    struct evhttp *http;
    struct evhttp_bound_socket *bound;
    struct event *ev_engine, *ev_loaded, *ev_sigterm, *ev_sigint, *ev_drain, *ev_check;
    volatile srv_state state; // written by the loader thread before ev_loaded fires; read by the loop
    // loaded model (set by the loader thread, read by the loop after ev_loaded)
    pthread_t loader;
    int loader_started;
    int load_rc;
    tc_err load_err;
    model *m;
    model *draft_m; // (optional) the draft model (--draft-model), owned
    tok_vocab *vocab;
    gram_vocab *gvocab; // the vocabulary trie for grammars (srv_grammar.c), owned
    engine *eng;
    int32_t *eog_ids; // (n_eog)
    int n_eog;
    chat_family chat;
    char *chat_src; // template text from the GGUF, or NULL
    char bos_text[64];
    int ctx_size;   // effective per-request context limit (prompt + output tokens), as the engine enforces it
    int ctx_asked;  // what --ctx-size / the model asked for (ctx_size is lower when the KV pool is small)
    char name[256]; // served model name
    char basename[256];
    double t_start_drain;
    int exit_rc;
    int exit_sig; // the second signal that cut the drain short, or 0
    uint64_t seed_ctr;
    // in-flight generation requests, and those with bytes to flush this turn
    struct gen_req *inflight, *dirty;
    int n_inflight;
    int n_writing; // generation replies whose last bytes are not yet written (drain waits for them)
    srv_metrics mt;
    double lenient_t_log;   // monotonic seconds of the last --lenient warning (rate limit)
    int lenient_suppressed; // warnings not logged since
    struct srv_conns *conns; // owned (srv_conn.c): per-connection state, limits, listener
    struct srv_work *work;   // owned (srv_work.c): the worker thread for large prompts
    struct srv_tenants *tenants; // owned by the hub (srv_tenants.c), borrowed by the other models: API keys, tenants, rate limits; NULL = no keys
    // Several models (srv_route.c): each model is one `server` with its own model, engine, requests and
    // metrics; the first (the hub) owns the loop, HTTP server, connections and worker, which the others
    // borrow (base, http, conns, work point at the hub's). Everything runs on the hub's loop thread.
    struct server *hub;                        // the first model's server (the hub itself for the hub)
    struct server *models[SRV_CFG_MAX_MODELS]; // hub only: every model, models[0] == the hub
    int n_models;                              // hub only (1 with a single model)
    int multi;                                 // hub only: several models or a router (model names route)
    struct srv_router *routers;                // hub only: (n_routers) owned
    int n_routers;
    struct summ_cache *summ_cache;                     // hub only (gen_summ.c): --summarize-with's cache, owned
    uint64_t summ_generated, summ_cached, summ_failed; // hub only: summaries by outcome (/stats)
    int pinned;   // 1: this model's engine and compute threads run on `cpus` only (several models, enough cores)
    cpu_set_t cpus;
} server;

// --- server.c helpers --------------------------------------------------------------------------------
int srv_model_ok(const server *s, const char *name);

// --- srv_access.c: Host, API key, JSON-only POST bodies -------------------------------------
// 0 if the request may go on; else -1 with *e filled (403 Host not allowed, 401 key, 415 Content-Type).
// public_route: the endpoint is served without the key (--public-routes adds paths).
int srv_access_check(server *s, struct evhttp_request *req, const char *path, int public_route, oai_err *e);

// --- srv_tenants.c: API keys → tenants, rate limits, SIGHUP reload of --api-key-file ------------------
// Loads --api-key-file (merged with --api-key as tenant "default") and installs the SIGHUP handler. 0 or a
// negative TC_ERR_* (message in err). Without either option s->tenants stays NULL and nothing changes.
int srv_tenants_init(server *s, tc_err *err);
void srv_tenants_free(server *s);
// 1 if the request's "Authorization: Bearer KEY" names a known key (or no keys are configured), else 0.
int srv_tenants_auth_ok(server *s, struct evhttp_request *req);
// Identifies req's tenant and charges 1 request and `tokens` tokens to its buckets. 0: admitted (t filled,
// x-ratelimit-* headers set on req); -1: *e is the 429 (Retry-After and x-ratelimit-* set) or the 401.
int srv_tenant_admit(server *s, struct evhttp_request *req, srv_tenant_ref *t, double tokens, oai_err *e);
// The request ended with n_prompt + n_out tokens used: refunds the rest of its reservation, counts usage.
void srv_tenant_end(server *s, srv_tenant_ref *t, int n_prompt, int n_out);
// The prefix-cache salt for a request: the tenant's salt combined with its cache_salt (NULL = none).
uint64_t srv_tenant_salt(const srv_tenant_ref *t, const char *cache_salt, size_t len);
// /stats: {"name": {requests, rate_limited, prompt_tokens, generation_tokens, in_flight, limits…}, …}
json_t *srv_tenants_stats(server *s);

// --- srv_conn.c: connection-level limits (see the top of srv_conn.c) ----------------------------------
enum { SRV_RL_ACCEPT = 0, SRV_RL_REFUSED, SRV_RL_TIMEOUT, SRV_RL_BUFFER, SRV_RL_HTTP, SRV_RL_LIBEVENT, SRV_RL_N };
// Raises RLIMIT_NOFILE, installs the evhttp hooks. 0 or a negative TC_ERR_* (message in err).
int srv_conn_init(server *s, tc_err *err);
// Listens on o.host:o.port through our own evconnlistener (accept back-off on EMFILE); NULL + err on failure.
struct evhttp_bound_socket *srv_conn_listen(server *s, tc_err *err);
void srv_conn_free(server *s); // after evhttp_free
// route_cb calls this first: the request is complete, so its read deadline stops and, while its reply is
// pending, the connection has no idle timeout (a stream may wait in the queue for as long as it needs).
void srv_conn_dispatch(server *s, struct evhttp_request *req);
// The reply to req is fully written (chained from gen.c's own completion callback).
void srv_conn_reply_done(struct evhttp_request *req, void *arg);
// The connection close callback (evhttp keeps one per connection, and srv_conn uses it): gen.c's is chained.
void srv_conn_set_closecb(server *s, struct evhttp_connection *conn,
                          void (*cb)(struct evhttp_connection *, void *), void *arg);
// At most one line per second per kind; the rest are counted and reported as "(N suppressed)".
void srv_log_limited(server *s, int kind, int level, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

// --- srv_work.c: one worker thread for work too slow for the event loop (large prompts) -------------
typedef void (*srv_work_fn)(void *arg);
int srv_work_init(server *s, tc_err *err);
// run(arg) on the worker thread, then done(arg) on the loop thread. 0, or -1 if it cannot be queued.
int srv_work_submit(server *s, srv_work_fn run, srv_work_fn done, void *arg);
// Stops and joins the thread; queued and finished jobs are dropped without their done().
void srv_work_free(server *s);

// --- gen.c ------------------------------------------------------------------------------------------
// Prompt token ids of a parsed request exactly as generation uses them (chat: rendered with the template,
// message text plain); *ids malloc'd. Also serves /tokenize {"messages": …}.
int gen_prompt_ids(server *s, const oai_req *q, int32_t **ids, int *n, oai_err *e);
// gen_prompt.c: the same for prompt pi of a completions request (0 for chat); with `suffix`, the FIM prompt
// (400 naming suffix when the vocabulary has no FIM tokens).
int gen_prompt_ids_at(server *s, const oai_req *q, int pi, int32_t **ids, int *n, oai_err *e);
// The text a completions `echo` prepends for prompt p (*out malloc'd): the text as sent, or the ids decoded.
int gen_echo_text(server *s, const oai_prompt *p, char **out, size_t *len);
// What chat truncation dropped, for the summarization policy (--summarize-with, gen_summ.c).
typedef struct gen_summ_in {
    char *dropped; // (len) owned: the dropped messages as "role: content" paragraphs; NULL: nothing dropped
    size_t len;
    int ins;       // where the summary message goes in the kept messages (q->msgs index)
    int budget;    // prompt tokens at most (the context minus the completion's room)
} gen_summ_in;
// gen_trunc.c: the context-overflow policy. With truncation "auto" (request field, else --truncation), drops
// the oldest chat turns (re-rendering ids[0]; q's messages are reduced to those kept) or middle-out truncates
// each completions prompt until prompt + room fits; *n_tok / *n_msg get what was dropped. What cannot fit
// is left as it is (gen_launch refuses it). With si (may be NULL) and --summarize-with, chat truncation
// leaves gen_summ_reserve(budget) more tokens free and fills *si (si->dropped NULL when plain truncation was
// used). 0, or -1 with *e filled.
int gen_truncate(server *s, oai_req *q, int32_t **ids, int *n_ids, int n_pr, int *n_tok, int *n_msg,
                 gen_summ_in *si, oai_err *e);
int gen_trunc_auto(const server *s, const oai_req *q); // 1: truncation "auto" applies to q
// x-tachyon-truncated-tokens (and -messages for chat) on the reply, when truncation "auto" applies.
void gen_trunc_headers(const server *s, struct evhttp_request *req, const oai_req *q, int n_tok, int n_msg);
// --- gen_summ.c: --summarize-with, the dropped turns replaced by one generated summary message --------
int gen_summ_reserve(int budget); // prompt tokens truncation keeps free for the summary message
// Summarizes si->dropped (ownership taken) into one message inserted in q at si->ins, re-rendering *ids /
// *n_ids. *status gets "cached" or "failed" when this returns 0 (done now: a cache hit, or plain truncation
// stays); 1: a summary request is on the summarizer's engine queue, and done(arg) runs later on the loop
// thread once *status ("generated" or "failed"), q and *ids are final (they must stay valid until then).
int gen_summ_start(server *s, oai_req *q, int32_t **ids, int *n_ids, gen_summ_in *si, const char **status,
                   void (*done)(void *arg), void *arg);
void gen_summ_free(server *s); // the hub's summary cache
json_t *gen_summ_stats(const server *s); // /stats "summary": {generated, cached, failed, cache_entries}
void gen_on_engine_events(server *s); // drains engine_poll and flushes dirty streams
void gen_log_dropped(server *s, const oai_req *q); // --lenient: logs dropped fields (at most once per 10 s)
void gen_check_disconnects(server *s);               // timer: notice clients that left, ping idle streams
void gen_cancel_all(server *s, engine_finish why); // engine_cancel every live request
void gen_free_all(server *s);                        // after engine_free: drop every request

// --- srv_grammar.c ----------------------------------------------------------------------------------
int srv_grammar_vocab(server *s, tc_err *err); // builds s->gvocab (loader thread, after eog_ids)
// A matcher for one choice over s->gvocab; errors → 400 (grammar) or 500 (memory).
int srv_grammar_matcher(server *s, const char *gbnf, gram_matcher **out, oai_err *e);

// --- srv_route.c: several models and router aliases ----------------------------------------------------
// Creates the other models' servers from o.cfg (the hub's own options are set from cfg->models[0] first).
int srv_models_init(server *hub, tc_err *err);
void srv_models_free(server *hub); // the other models' servers (after their engines are freed)
int srv_models_metrics(server *hub, tc_err *err); // the routers' counters, once the hub's registry exists
// The model a request on `path` goes to: its JSON body's "model" names a model or a router alias (empty or
// absent: the first model). 0 with *out set (and x-tachyon-routed-model added), or -1 with *e (404
// model_not_found for an unknown name). Only called when hub->multi.
int srv_route_pick(server *hub, struct evhttp_request *req, const char *path, server **out, oai_err *e);
void srv_route_models(server *hub, struct evhttp_request *req); // GET /v1/models: every model and router
void srv_models_sync_state(server *hub);                         // copies hub->state to the other models
// Loader thread: engine_new for s with its threads pinned to s->cpus when s->pinned (threads inherit the
// creating thread's affinity; the loader's own is restored after).
int srv_model_engine_new(server *s, const engine_opts *eo, tc_err *err);

// --- srv_stats.c ------------------------------------------------------------------------------------
int srv_metrics_init(srv_metrics *mt, tc_err *err);
// A model's metrics in the hub's registry, every series labelled model="name" (several models).
int srv_metrics_init_model(srv_metrics *mt, metrics *hub_reg, const char *model_name, tc_err *err);
void srv_metrics_free(srv_metrics *mt);

// --- dashboard_html.c (generated from dashboard.html by embed_dashboard.py) --------------------------
extern const char srv_dashboard_html[];
extern const unsigned long srv_dashboard_html_len;

#endif
