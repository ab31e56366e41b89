// The server's life (server_run): builds the front end and the models' records, listens, loads the models on
// a loader thread while /health answers 503, joins each engine's events to the loop, then drains on
// SIGTERM/SIGINT and frees everything. Requests are answered by the endpoint table (srv_endpoints.c).
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "server/embed.h"
#include "server/gen.h"
#include "server/gen_summ.h"
#include "server/server.h"
#include "server/srv_conn.h"
#include "server/srv_endpoints.h"
#include "server/srv_front.h"
#include "server/srv_grammar.h"
#include "server/srv_log.h"
#include "server/srv_metrics.h"
#include "server/srv_model.h"
#include "server/srv_route.h"
#include "server/srv_tenants.h"
#include "server/srv_work.h"

// --- loading -----------------------------------------------------------------------------------------

// Whether the format's markers are control tokens of the vocabulary (Mistral's [TOOL_CALLS], gpt-oss's
// <|channel|>, Kimi's sections): text with tools then keeps control tokens, or the parser would not see them.
static int markers_are_control(const tok_vocab *v, tool_fmt f) {
    const tool_fmt_row *r = tool_fmt_get(f);
    for (int k = 0; r->markers[k]; k++) {
        int32_t id = tok_find(v, r->markers[k]);
        if (id >= 0 && tok_is_control(v, id)) return 1;
    }
    return 0;
}

static int load_model(srv_model *s, tc_err *err) {
    int rc = model_load(s->o.model_path, &s->m, err);
    if (!rc) rc = tok_load(model_gguf(s->m), &s->vocab, err);
    if (!rc) {
        const model_hparams *hp = model_get_hparams(s->m);
        int nv = tok_n_vocab(s->vocab);
        s->eog_ids = malloc((size_t)nv * sizeof(int32_t));
        if (!s->eog_ids) rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        for (int i = 0; !rc && i < nv; i++)
            if (tok_is_eog(s->vocab, i)) s->eog_ids[s->n_eog++] = i;
        gguf_str ts = {0};
        if (!rc && s->o.chat_template && s->o.chat_template_file)
            rc = tc_err_set(err, TC_ERR_INVALID, "--chat-template and --chat-template-file exclude each other");
        if (!rc && s->o.chat_template_file) { // the file replaces the model's template
            rc = chat_tmpl_load_file(s->o.chat_template_file, s->vocab, &s->tmpl, err);
            if (!rc && !(s->chat_src = strdup(chat_tmpl_src(s->tmpl)))) rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        } else if (!rc && gguf_get_str(model_gguf(s->m), "tokenizer.chat_template", &ts) == 0) {
            s->chat_src = strndup(ts.ptr, ts.len);
            if (!s->o.chat_template && (rc = chat_tmpl_new(ts.ptr, ts.len, s->vocab, &s->tmpl, err)))
                tc_err_wrap(err, "the model's chat template (tokenizer.chat_template)");
        }
        s->chat = s->o.chat_template ? chat_family_from_name(s->o.chat_template)
                                     : chat_detect(s->chat_src ? s->chat_src : "");
        if (!rc && s->chat == CHAT_UNKNOWN) {
            if (s->o.chat_template) rc = tc_err_set(err, TC_ERR_INVALID, "unknown chat template '%s'", s->o.chat_template);
            else if (!s->chat_src && chat_family_for_arch(hp->arch) != CHAT_UNKNOWN) s->chat = chat_family_for_arch(hp->arch);
            else s->chat = CHAT_CHATML; // no or unrecognized template: ChatML (logged when ready)
        }
        tool_fmt fam = s->chat == CHAT_LLAMA3 ? TOOL_FMT_LLAMA3 : s->chat == CHAT_MISTRAL ? TOOL_FMT_MISTRAL : TOOL_FMT_HERMES;
        s->tools = s->tmpl ? tool_fmt_detect(s->chat_src, fam) : fam;
        s->tool_specials = markers_are_control(s->vocab, s->tools);
        if (!rc) rc = srv_grammar_vocab(s, err); // grammar-constrained decoding (srv_grammar.c), after s->tools
        int32_t b = tok_bos(s->vocab);
        if (!rc && b >= 0) {
            int n = tok_piece(s->vocab, b, 0, s->bos_text, sizeof s->bos_text - 1);
            s->bos_text[n > 0 && n < (int)sizeof s->bos_text ? n : 0] = 0;
        }
        engine_opts eo = s->o.eng;
        eo.eog_ids = s->eog_ids;
        eo.n_eog = s->n_eog;
        s->ctx_size = eo.ctx_size > 0 ? eo.ctx_size : hp->ctx_train;
        if (s->ctx_size > hp->ctx_train && hp->ctx_train > 0) s->ctx_size = hp->ctx_train;
        if (eo.ctx_size > 0) eo.ctx_size = s->ctx_size; // else 0: the model's, cut to the memory (engine_opts)
        if (!rc && s->o.draft_model_path) { // engine_new checks that the vocabularies match
            rc = model_load(s->o.draft_model_path, &s->draft_m, err);
            eo.draft_model = s->draft_m;
        }
        if (!rc) rc = srv_model_engine_new(s, &eo, err); // engine_new, on this model's cores
        s->ctx_asked = s->ctx_size;
        if (!rc) s->ctx_size = engine_ctx_limit(s->eng); // a small KV pool lowers it: report and enforce that
    }
    return rc;
}

// Loads every model in turn, stopping at the first failure.
static void *loader_main(void *arg) {
    server *s = arg;
    int rc = 0;
    for (int i = 0; !rc && i < s->n_models; i++) {
        srv_model *t = s->models[i];
        rc = load_model(t, &t->load_err);
        if (rc && i) tc_err_set(&s->load_err, rc, "%s: %s", t->o.model_path, t->load_err.msg);
        else if (rc) s->load_err = t->load_err;
    }
    s->load_rc = rc;
    event_active(s->ev_loaded, EV_READ, 0); // thread-safe: evthread_use_pthreads
    return NULL;
}

static void engine_cb(evutil_socket_t fd, short what, void *arg) {
    (void)what;
    uint64_t v;
    while (read(fd, &v, sizeof v) == (ssize_t)sizeof v) {
    }
    gen_on_engine_events(arg);
}

static void log_ready(srv_model *s);

static void loaded_cb(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    server *s = arg;
    if (s->load_rc) {
        srv_log(&s->o, SRV_LOG_ERROR, "loading %s failed: %s", s->models[0]->o.model_path, s->load_err.msg);
        s->exit_rc = s->load_rc;
        event_base_loopexit(s->base, NULL);
        return;
    }
    if (s->state == SRV_LOADING) s->state = SRV_READY;
    for (int i = 0; i < s->n_models; i++) {
        srv_model *t = s->models[i];
        t->ev_engine = event_new(s->base, engine_event_fd(t->eng), EV_READ | EV_PERSIST, engine_cb, t);
        event_add(t->ev_engine, NULL);
        log_ready(t);
    }
    if (s->state == SRV_DRAINING) event_active(s->ev_drain, EV_TIMEOUT, 0);
}

static void log_ready(srv_model *s) {
    const model_hparams *hp = model_get_hparams(s->m);
    srv_log(&s->o, SRV_LOG_INFO, "model ready: %s (%s, %d layers, ctx %d, chat template %s%s, tool calls %s, %d "
            "end-of-generation tokens)", s->name, hp->arch, hp->n_layers, s->ctx_size,
            s->tmpl ? (s->o.chat_template_file ? "from --chat-template-file" : "of the model (Jinja)")
                    : chat_family_name(s->chat),
            s->tmpl || s->o.chat_template || (s->chat_src && chat_detect(s->chat_src) != CHAT_UNKNOWN) ? ""
                                                                                         : " (fallback)",
            tool_fmt_name(s->tools), s->n_eog);
    if (s->ctx_size < s->ctx_asked && s->o.eng.kv_mem_bytes)
        srv_log(&s->o, SRV_LOG_WARN, "the KV cache (--kv-cache-mem %.2f MiB) holds only %d tokens: the per-request "
                "context is %d tokens, not %d", s->o.eng.kv_mem_bytes / 1048576.0, s->ctx_size, s->ctx_size,
                s->ctx_asked);
    else if (s->ctx_size < s->ctx_asked)
        srv_log(&s->o, SRV_LOG_WARN, "the model's context of %d tokens needs more KV cache than a quarter of the "
                "free memory holds: the per-request context is %d tokens (--ctx-size or --kv-cache-mem to choose)",
                s->ctx_asked, s->ctx_size);
}

// --- shutdown ----------------------------------------------------------------------------------------

static void drain_cb(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    server *s = arg;
    double waited = tc_now() - s->t_start_drain;
    int n_inflight = 0, n_writing = 0;
    for (int i = 0; i < s->n_models; i++) n_inflight += s->models[i]->n_inflight, n_writing += s->models[i]->n_writing;
    // Exit once every reply is written. Requests cut at the grace still get their final event (the
    // shutting_down error and the stream's end) written: up to 2 s more, for slow or stalled readers.
    if ((n_inflight == 0 && n_writing <= 0) || (!s->models[0]->eng && s->loader_started == 0)) {
        event_base_loopexit(s->base, NULL);
        return;
    }
    if (!s->models[0]->ev_engine) return; // still loading: wait for it, then exit
    if (waited > s->o.shutdown_grace) {
        for (int i = 0; i < s->n_models; i++) {
            gen_cancel_all(s->models[i], ENGINE_FINISH_SHUTDOWN);
            embed_cancel_all(s->models[i], ENGINE_FINISH_SHUTDOWN);
        }
        if (waited > s->o.shutdown_grace + 2.0) { // the engine has answered and the last bytes had their time
            event_base_loopexit(s->base, NULL);
            return;
        }
    }
}

static void check_cb(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    server *s = arg;
    for (int i = 0; i < s->n_models; i++) {
        gen_check_disconnects(s->models[i]);
        embed_check_disconnects(s->models[i]);
    }
}

static void signal_cb(evutil_socket_t sig, short what, void *arg) {
    (void)what;
    server *s = arg;
    if (s->state == SRV_DRAINING) {
        srv_log(&s->o, SRV_LOG_WARN, "second signal %d during the drain: exiting now, %d in-flight request(s) cut",
                (int)sig, s->models[0]->n_inflight);
        s->exit_sig = (int)sig;
        for (int i = 0; i < s->n_models; i++) {
            gen_cancel_all(s->models[i], ENGINE_FINISH_SHUTDOWN);
            embed_cancel_all(s->models[i], ENGINE_FINISH_SHUTDOWN);
        }
        event_base_loopexit(s->base, NULL);
        return;
    }
    srv_log(&s->o, SRV_LOG_INFO, "signal %d: stop accepting, draining %d request(s) for up to %.1f s", (int)sig,
            s->models[0]->n_inflight, s->o.shutdown_grace);
    s->state = SRV_DRAINING;
    s->t_start_drain = tc_now();
    if (s->bound) evhttp_del_accept_socket(s->http, s->bound);
    s->bound = NULL;
    struct timeval tv = {0, 20000};
    event_add(s->ev_drain, &tv);
    if (s->models[0]->ev_engine || !s->loader_started) event_active(s->ev_drain, EV_TIMEOUT, 0);
}

// --- run ---------------------------------------------------------------------------------------------

static void name_from_path(srv_model *s) {
    const char *b = strrchr(s->o.model_path, '/');
    b = b ? b + 1 : s->o.model_path;
    snprintf(s->basename, sizeof s->basename, "%s", b);
    if (s->o.served_name) snprintf(s->name, sizeof s->name, "%s", s->o.served_name);
    else {
        snprintf(s->name, sizeof s->name, "%s", b);
        size_t n = strlen(s->name);
        if (n > 5 && !strcmp(s->name + n - 5, ".gguf")) s->name[n - 5] = 0;
    }
}

int server_run(const server_opts *o, tc_err *err) {
    server *s = calloc(1, sizeof *s);
    srv_model *m0 = s ? calloc(1, sizeof *m0) : NULL;
    if (!m0) {
        free(s);
        return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    }
    int rc = 0;
    s->o = m0->o = *o;
    m0->fe = s;
    s->models[0] = m0;
    s->n_models = 1;
    if ((rc = srv_models_init(s, err))) goto out; // several models: options per model, their records
    name_from_path(m0);
    signal(SIGPIPE, SIG_IGN);
    evthread_use_pthreads();
    if ((rc = s->multi ? srv_metrics_init_model(&m0->mt, NULL, m0->name, err) : srv_metrics_init(&m0->mt, err))) goto out;
    s->reg = m0->mt.reg;
    s->base = event_base_new();
    s->http = s->base ? evhttp_new(s->base) : NULL;
    if (!s->http) {
        rc = tc_err_set(err, TC_ERR_NOMEM, "libevent: cannot create the HTTP server");
        goto out;
    }
    if ((rc = srv_conn_init(s, err)) || (rc = srv_work_init(s, err))) goto out;
    // SIGHUP reloads --api-key-file (srv_tenants.c installs that); without one it must not end the process
    if (!o->api_key_file) signal(SIGHUP, SIG_IGN);
    if ((rc = srv_tenants_init(s, err))) goto out; // API keys, tenants (srv_tenants.c)
    for (int i = 1; i < s->n_models; i++) // the other models' series go to the first model's registry
        if ((rc = srv_metrics_init_model(&s->models[i]->mt, s->reg, s->models[i]->name, err))) goto out;
    if ((rc = srv_models_metrics(s, err))) goto out;
    srv_endpoints_install(s);
    evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_OPTIONS);
    evhttp_set_max_body_size(s->http, (ev_ssize_t)o->max_body);
    evhttp_set_max_headers_size(s->http, (ev_ssize_t)o->max_headers);
    evhttp_set_timeout(s->http, o->http_timeout);
    s->bound = srv_conn_listen(s, err);
    if (!s->bound) {
        rc = TC_ERR_IO;
        goto out;
    }
    evutil_socket_t lfd = evhttp_bound_socket_get_fd(s->bound);
    int one = 1;
    setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); // inherited by accepted sockets on Linux
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int port = o->port;
    if (getsockname(lfd, (struct sockaddr *)&ss, &sl) == 0)
        port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                              : ((struct sockaddr_in *)&ss)->sin_port);
    srv_log(&s->o, SRV_LOG_INFO, "listening on http://%s:%d (model %s loading)", o->host, port, m0->name);
    for (int i = 1; i < s->n_models; i++) srv_log(&s->o, SRV_LOG_INFO, "also serving model %s", s->models[i]->name);

    s->ev_loaded = event_new(s->base, -1, 0, loaded_cb, s);
    s->ev_drain = event_new(s->base, -1, EV_PERSIST, drain_cb, s);
    s->ev_sigterm = evsignal_new(s->base, SIGTERM, signal_cb, s);
    s->ev_sigint = evsignal_new(s->base, SIGINT, signal_cb, s);
    event_add(s->ev_sigterm, NULL);
    event_add(s->ev_sigint, NULL);
    s->ev_check = event_new(s->base, -1, EV_PERSIST, check_cb, s);
    struct timeval check_tv = {0, 20000}; // 20 ms
    event_add(s->ev_check, &check_tv);
    if (pthread_create(&s->loader, NULL, loader_main, s)) {
        rc = tc_err_set(err, TC_ERR, "cannot start the loader thread");
        goto out;
    }
    s->loader_started = 1;
    event_base_dispatch(s->base);
    rc = s->exit_rc;
    if (rc) tc_err_set(err, rc, "loading %s failed: %s", m0->o.model_path, s->load_err.msg);
    else if (s->exit_sig) rc = 128 + s->exit_sig; // like a shell reports a process killed by that signal

out:
    if (s->loader_started) pthread_join(s->loader, NULL);
    for (int i = 0; i < s->n_models; i++) { // in-flight requests were drained or cut above
        if (s->models[i]->eng) engine_free(s->models[i]->eng, 0.5);
        s->models[i]->eng = NULL;
    }
    srv_work_free(s); // joins the worker: no job touches a request after this
    for (int i = 0; i < s->n_models; i++) { // before evhttp_free: no close callback may reach a freed engine
        gen_free_all(s->models[i]);
        embed_free_all(s->models[i]);
    }
    srv_tenants_free(s); // after gen_free_all: freed requests settle with their tenant
    gen_summ_free(s);
    if (s->http) evhttp_free(s->http);
    srv_conn_free(s);
    srv_models_free(s); // every model's record: engine events, models, vocabularies, metrics
    if (s->ev_loaded) event_free(s->ev_loaded);
    if (s->ev_drain) event_free(s->ev_drain);
    if (s->ev_check) event_free(s->ev_check);
    if (s->ev_sigterm) event_free(s->ev_sigterm);
    if (s->ev_sigint) event_free(s->ev_sigint);
    if (s->base) event_base_free(s->base);
    free(s);
    return rc;
}
