// Generation requests, first half: the HTTP handler parses the body (inline, or on the worker thread for a
// large one), renders and tokenizes the prompt, applies truncation / summarization, checks the context and the
// tenant's limits, then submits one engine request per choice and starts the reply (gen.c carries on from
// the engine's events).
#include <event2/buffer.h>
#include <event2/http.h>
#include <stdlib.h>
#include <string.h>

#include "common/timeutil.h"
#include "server/gen_impl.h"
#include "server/gen_launch.h"
#include "server/gen_prompt.h"
#include "server/gen_samp.h"
#include "server/gen_summ.h"
#include "server/gen_trunc.h"
#include "server/oai_tools.h"
#include "server/srv_conn.h"
#include "server/srv_grammar.h"
#include "server/srv_log.h"
#include "server/srv_reply.h"
#include "server/srv_tenants.h"
#include "server/srv_work.h"
static uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// Lenient mode: fields dropped instead of refused are logged, at most once every 10 s (the rest counted).
void gen_log_dropped(srv_model *s, const oai_req *q) {
    if (!q->lenient_dropped[0]) return;
    double now = tc_now();
    if (s->fe->lenient_t_log > 0 && now - s->fe->lenient_t_log < 10) {
        s->fe->lenient_suppressed++;
        return;
    }
    srv_log(&s->o, SRV_LOG_WARN, "--lenient: ignored unsupported request fields: %s (%d similar warnings suppressed)",
            q->lenient_dropped, s->fe->lenient_suppressed);
    s->fe->lenient_t_log = now;
    s->fe->lenient_suppressed = 0;
}

static void reply_error(srv_model *s, struct evhttp_request *req, const oai_err *e, double t_recv) {
    srv_send_error(&s->o, req, e);
    srv_access_log(&s->o, req, NULL, e->status, 0, 0, 0, tc_now() - t_recv, NULL);
}


// The request of another API (g->wo): parsed into g->wire_in, translated by the wire into a chat completions
// body (*chat, new reference) that the chat parser takes as it is (one JSON parse per request). lenient: the
// fields the wire does not accept are dropped first and named in dropped (cap bytes). 0, or -1 with *e filled.
static int wire_translate(gen_req *g, const char *body, size_t len, int lenient, char *dropped, size_t dropped_cap,
                          json_t **chat, oai_err *e) {
    json_error_t je;
    g->wire_in = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!g->wire_in)
        return oai_err_set(e, 400, "invalid_request_error", NULL, NULL,
                           "We could not parse the JSON body of your request: %s", je.text);
    if (!json_is_object(g->wire_in))
        return oai_err_set(e, 400, "invalid_request_error", NULL, NULL, "The request body must be a JSON object");
    if (lenient) wire_drop_unaccepted(g->wo, g->wire_in, dropped, dropped_cap);
    return g->wo->to_chat(g->wire_in, chat, e);
}

// Bodies above this size are parsed, rendered and tokenized on the worker thread (bytes). Below it the work
// takes well under a millisecond, and the inline path answers without a thread hop.
#define GEN_ASYNC_BODY (64 * 1024)

// Parse, model check, prompt ids: on the loop thread, or on the worker while g->preparing (then it touches
// only g->q, g->ids, g->perr and s's read-only model data: vocab, chat template).
static void gen_prepare(gen_req *g, const char *body, size_t len) {
    srv_model *s = g->s;
    oai_err *e = &g->perr;
    g->prep_rc = -1;
    if (g->wo) { // another API on the wire: its body translated into a chat completions body
        json_t *chat = NULL;
        char dropped[sizeof g->q.lenient_dropped] = "";
        if (wire_translate(g, body, len, s->o.lenient, dropped, sizeof dropped, &chat, e) ||
            oai_parse_json(g->kind, chat, s->o.lenient, &g->q, e))
            return;
        if (*dropped) { // the wire's dropped fields first, then the chat body's
            char both[2 * sizeof g->q.lenient_dropped + 2];
            snprintf(both, sizeof both, "%s%s%s", dropped, *g->q.lenient_dropped ? ", " : "", g->q.lenient_dropped);
            size_t n = strnlen(both, sizeof g->q.lenient_dropped - 1);
            memcpy(g->q.lenient_dropped, both, n);
            g->q.lenient_dropped[n] = 0;
        }
    } else if (oai_parse_ex(g->kind, body, len, s->o.lenient, &g->q, e)) {
        return;
    }
    if (!srv_model_serves(s, g->q.model)) {
        oai_err_set(e, 404, "invalid_request_error", "model_not_found", "model",
                    "The model `%.200s` does not exist or you do not have access to it.", g->q.model);
        return;
    }
    // every prompt is tokenized (and checked in gen_launch) before anything is submitted: all choices go in
    // at once, and the engine batches them
    int n_pr = g->kind == OAI_CHAT ? 1 : g->q.n_prompts;
    g->ids = calloc((size_t)n_pr, sizeof *g->ids);
    g->n_ids = calloc((size_t)n_pr, sizeof *g->n_ids);
    if (!g->ids || !g->n_ids) {
        oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    g->n_pr = n_pr;
    for (int pi = 0; pi < n_pr; pi++)
        if (gen_prompt_ids_at(s, &g->q, pi, &g->ids[pi], &g->n_ids[pi], e)) return;
    if (gen_truncate(s, &g->q, g->ids, g->n_ids, n_pr, &g->n_trunc_tokens, &g->n_trunc_msgs, &g->si, e)) return;
    g->prep_rc = 0;
}

// The output grammar, compiled on the worker (srv_grammar.c): never on the loop thread, whatever its size.
static void grammar_run(void *arg) {
    gen_req *g = arg;
    if (g->prep_rc == 0 && srv_grammar_compile(g->s, &g->q, &g->gram, &g->perr)) g->prep_rc = -1;
}

static void prep_run(void *arg) {
    gen_req *g = arg;
    size_t len = evbuffer_get_length(g->body);
    const char *p = len ? (const char *)evbuffer_pullup(g->body, -1) : "";
    gen_prepare(g, p ? p : "", p ? len : 0);
    grammar_run(g);
}

static void gen_launch(gen_req *g);

static void prep_done(void *arg) {
    gen_req *g = arg;
    g->preparing = 0;
    if (g->body) evbuffer_free(g->body);
    g->body = NULL;
    if (!g->req) { // the client left meanwhile
        gen_maybe_free(g);
        return;
    }
    gen_launch(g);
}

// The summary of its dropped turns is in g's prompt (or failed): launch, unless the client left meanwhile.
static void summ_done(void *arg) {
    gen_req *g = arg;
    g->preparing = 0;
    if (!g->req) {
        gen_maybe_free(g);
        return;
    }
    gen_launch(g);
}

// Answers an error for a request that owns its connection (g->req set); g lives on while choices finish.
static void gen_fail(gen_req *g, const oai_err *e) {
    srv_model *s = g->s;
    struct evhttp_request *req = g->req;
    for (int i = 0; i < g->n_choices; i++)
        if (g->ch[i].live) engine_cancel(s->eng, g->ch[i].id, ENGINE_FINISH_CANCELLED);
    g->logged = 1;
    gen_detach(g);
    reply_error(s, req, e, g->t_recv);
    gen_maybe_free(g);
}

static int handle(srv_model *s, struct evhttp_request *req, oai_kind kind, const wire_ops *wo);

int gen_handle(srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *ep_err) {
    (void)ep_err; // errors are replied here (the access line too)
    return handle(s, req, kind, NULL);
}

int gen_handle_responses(srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *ep_err) {
    (void)kind, (void)ep_err;
    return handle(s, req, OAI_CHAT, wire_get(WIRE_RESPONSES));
}

int gen_handle_messages(srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *ep_err) {
    (void)kind, (void)ep_err;
    return handle(s, req, OAI_CHAT, wire_get(WIRE_ANTHROPIC));
}

static int handle(srv_model *s, struct evhttp_request *req, oai_kind kind, const wire_ops *wo) {
    double t_recv = tc_now();
    oai_err e = {0};
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    gen_req *g = calloc(1, sizeof *g);
    if (!g) {
        oai_err_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        reply_error(s, req, &e, t_recv);
        return 0;
    }
    g->s = s;
    s->n_inflight++; // balanced by g_free
    g->t_recv = t_recv;
    g->kind = kind;
    g->wo = wo;
    // link before anything can finish: events can only arrive on this thread, after we return
    g->next = s->inflight;
    if (s->inflight) s->inflight->prev = g;
    s->inflight = g;
    g->req = req;
    g->writing = 1;
    s->n_writing++;
    g->conn = evhttp_request_get_connection(req);
    srv_conn_set_closecb(s->fe, g->conn, gen_on_close, g);
    if (len > GEN_ASYNC_BODY && (g->body = evbuffer_new())) {
        evbuffer_add_buffer(g->body, in); // moves the chains: the request keeps no copy
        g->preparing = 1;
        if (srv_work_submit(s->fe, prep_run, prep_done, g) == 0) return 0;
        g->preparing = 0;
        evbuffer_add_buffer(in, g->body);
        evbuffer_free(g->body);
        g->body = NULL;
    }
    const char *body = len ? (const char *)evbuffer_pullup(in, -1) : "";
    gen_prepare(g, body ? body : "", body ? len : 0);
    evbuffer_drain(in, len); // parsed into g->q: free the body now rather than with the request
    if (g->prep_rc == 0 && oai_wants_grammar(&g->q)) {
        g->preparing = 1;
        if (srv_work_submit(s->fe, grammar_run, prep_done, g) == 0) return 0;
        g->preparing = 0;
        oai_err_set(&g->perr, 500, "server_error", NULL, NULL, "cannot reach the worker thread");
        g->prep_rc = -1;
    }
    gen_launch(g);
    return 0;
}

// The prompt is ready (g->prep_rc, g->perr, g->ids): check it against the context, submit one engine request
// per choice, start the reply.
// Every prompt and its completion fit the context (else 400 context_length_exceeded); counts g->n_prompt and
// the tokens to reserve for the tenant (prompt + max_tokens of every choice). 0, or -1 with *e filled.
static int check_context(gen_req *g, double *reserve, oai_err *e) {
    srv_model *s = g->s;
    const oai_req *q = &g->q;
    const char *pparam = g->kind == OAI_CHAT ? "messages" : "prompt";
    for (int pi = 0; pi < g->n_pr; pi++) {
        int n_ids = g->n_ids[pi];
        if (n_ids >= s->ctx_size)
            return oai_err_set(e, 400, "invalid_request_error", "context_length_exceeded", pparam,
                               "This model's maximum context length is %d tokens. However, your %s resulted in %d "
                               "tokens. Please reduce the length of the %s.", s->ctx_size, pparam, n_ids, pparam);
        int mt = q->max_tokens > 0 ? q->max_tokens : s->ctx_size - n_ids;
        if ((long long)n_ids + mt > s->ctx_size)
            return oai_err_set(e, 400, "invalid_request_error", "context_length_exceeded", "max_tokens",
                               "This model's maximum context length is %d tokens. However, you requested %lld tokens "
                               "(%d in the %s, %d for the completion). Please reduce the length of the %s or the "
                               "completion.", s->ctx_size, (long long)n_ids + mt, n_ids, pparam, mt, pparam);
        g->n_prompt += n_ids;
        *reserve += ((double)n_ids + mt) * q->n;
    }
    return 0;
}

// Sets up g's choices (index as OpenAI's: prompt_i * n + j): text stream, stop buffer, reasoning split,
// logprobs, echo. 0, or -1 with *e filled (out of memory).
static int init_choices(gen_req *g, oai_err *e) {
    srv_model *s = g->s;
    const oai_req *q = &g->q;
    for (int i = 0; i < g->n_choices; i++) {
        gen_choice *c = &g->ch[i];
        c->g = g;
        c->index = i;
        c->prompt_i = i / q->n;
        int keep = q->sx.keep_special || (s->tool_specials && oai_tools_active(q)); // the parser reads markers
        c->ts = tok_stream_new(s->vocab, (keep ? 0 : TOK_DEC_SKIP_SPECIAL) | TOK_DEC_CONTINUATION);
        oai_stopbuf_init(&c->sb, q->stop, q->n_stop);
        c->sb.keep_stop = q->sx.include_stop;
        c->reason = gen_reasoning_on(s, q);
        rsn_init(&c->rs, chat_family_opens_think(s->chat));
        if (q->logprobs) c->lp = gen_lp_new(g);
        if (c->lp && q->echo) gen_lp_first_prompt_token(c, g->ids[c->prompt_i][0]);
        if (!c->ts || !g->out || (q->logprobs && !c->lp) ||
            (q->echo && gen_echo_text(s, &q->prompts[c->prompt_i], &c->echo, &c->echo_len)))
            return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    return 0;
}

// The reply for an engine_submit failure rc (err its message, retry_after the scheduler's estimate).
static void submit_error(srv_model *s, int rc, double retry_after, const tc_err *err, oai_err *e) {
    if (rc == TC_ERR_FULL && retry_after > 0) { // --sched slo: its target cannot be met now
        oai_err_set(e, 503, "server_error", "slo_unattainable", NULL,
                    "The server cannot meet this request's latency target (%s); retry later", err->msg);
        e->retry_after = retry_after;
    } else if (rc == TC_ERR_FULL) {
        metric_inc(s->mt.rejected, 1);
        oai_err_set(e, 503, "server_error", "queue_full", NULL, "The server is overloaded (%s); retry after a moment",
                    err->msg);
    } else if (rc == TC_ERR_INVALID) {
        oai_err_set(e, 400, "invalid_request_error", NULL, NULL, "%s", err->msg);
    } else {
        oai_err_set(e, 500, "server_error", NULL, NULL, "submit failed: %s", err->msg);
    }
}

// Starts the SSE reply: the role chunk of every chat choice, the echoed prompt of every completions choice.
static void start_stream(gen_req *g) {
    srv_model *s = g->s;
    const oai_req *q = &g->q;
    oai_kind kind = g->kind;
    srv_sse_start(&s->o, g->req);
    g->streaming = 1;
    g->t_last_send = tc_now();
    if (kind == OAI_CHAT)
        for (int i = 0; i < q->n; i++) {
            json_t *ch = oai_chunk(kind, g->id, g->created, s->name, i, "assistant", "", 0, NULL, NULL);
            // another API on the wire announces the prompt's size when its message starts (Anthropic's
            // message_start); prefix-cache hits are known later, so all of it counts as input here
            if (g->wo && i == 0) json_object_set_new(ch, "usage", oai_usage(g->n_prompt, 0, 0));
            gen_queue_json(g, ch);
        }
    for (int i = 0; i < g->n_choices; i++) // completions echo: the prompt text comes first
        if (g->ch[i].echo)
            gen_queue_json(g, oai_chunk(kind, g->id, g->created, s->name, i, NULL, g->ch[i].echo, g->ch[i].echo_len,
                                        NULL, NULL));
    gen_flush_dirty(s);
}

static void gen_launch(gen_req *g) {
    srv_model *s = g->s;
    struct evhttp_request *req = g->req;
    oai_kind kind = g->kind;
    oai_err e = {0};
    if (g->prep_rc) {
        gen_fail(g, &g->perr);
        return;
    }
    if (g->si.dropped) { // --summarize-with: wait (off the loop, like a worker job) for the summary
        g->preparing = 1;
        if (gen_summ_start(s, &g->q, &g->ids[0], &g->n_ids[0], &g->si, &g->summ_status, summ_done, g) == 1) return;
        g->preparing = 0;
    }
    const oai_req *q = &g->q;
    gen_log_dropped(s, q);
    for (int i = 0; i < q->n_bias; i++)
        if (q->bias[i].id >= tok_n_vocab(s->vocab)) {
            oai_err_set(&e, 400, NULL, NULL, "logit_bias", "'logit_bias' token id %d is out of range (vocabulary %d)",
                        q->bias[i].id, tok_n_vocab(s->vocab));
            goto fail;
        }
    double reserve = 0; // tenant's tokens per minute: prompt + max_tokens of every choice
    if (check_context(g, &reserve, &e)) goto fail;
    if (srv_tenant_admit(s->fe, req, &g->tn, reserve, &e)) goto fail; // 401 / 429 with headers
    if (!s->eng) {
        oai_err_set(&e, 503, "unavailable_error", "shutting_down", NULL, "The server is shutting down");
        goto fail;
    }
    double timeout = s->o.request_timeout;
    if (s->o.e2e_slo > 0 && (timeout <= 0 || s->o.e2e_slo < timeout)) timeout = s->o.e2e_slo;
    if (q->timeout > 0 && (timeout <= 0 || q->timeout < timeout)) timeout = q->timeout;
    uint64_t seed = q->seed_given ? q->sp.seed : mix64(++s->seed_ctr ^ (uint64_t)(tc_wall() * 1e6));
    g->created = (long)tc_wall();
    uint64_t idn = ++s->seed_ctr;
    snprintf(g->id, sizeof g->id, "%s%016llx%08x", kind == OAI_CHAT ? "chatcmpl-" : "cmpl-",
             (unsigned long long)mix64(idn ^ (uint64_t)(g->t_recv * 1e9)), (unsigned)idn);
    g->out = evbuffer_new();
    g->n_choices = g->n_pr * q->n;
    if (init_choices(g, &e)) goto fail;
    if (q->prediction && q->prediction_len > 0) {
        tc_err terr = {0};
        if (tok_encode(s->vocab, q->prediction, q->prediction_len, 0, &g->pred_ids, &g->n_pred_ids, &terr)) {
            oai_err_set(&e, 400, "invalid_request_error", NULL, "prediction", "cannot tokenize 'prediction': %s",
                        terr.msg);
            goto fail;
        }
    }
    samp_params sp = q->sp;
    int32_t brk[SAMP_MAX_IDS]; // DRY's breaker ids: samp_new copies them in engine_submit
    if (gen_samp_ids(s, q, &sp, brk, &e)) goto fail;
    for (int i = 0; i < g->n_choices; i++) {
        engine_req er = {0};
        int n_ids = g->n_ids[g->ch[i].prompt_i];
        er.prompt = malloc((size_t)n_ids * sizeof *er.prompt);
        if (!er.prompt) {
            oai_err_set(&e, 500, "server_error", NULL, NULL, "out of memory");
            goto fail;
        }
        memcpy(er.prompt, g->ids[g->ch[i].prompt_i], (size_t)n_ids * sizeof *er.prompt);
        er.n_prompt = n_ids;
        er.max_tokens = q->max_tokens > 0 ? q->max_tokens : s->ctx_size - n_ids;
        er.sp = sp;
        er.sp.seed = seed + (uint64_t)i;
        er.deadline = timeout > 0 ? g->t_recv + timeout : 0;
        er.ignore_eos = q->ignore_eos;
        er.priority = q->priority;
        er.ttft_slo = q->ttft_slo;
        if (g->n_pred_ids > 0 && (er.prediction = malloc((size_t)g->n_pred_ids * sizeof(int32_t)))) {
            memcpy(er.prediction, g->pred_ids, (size_t)g->n_pred_ids * sizeof(int32_t));
            er.n_prediction = g->n_pred_ids; // (out of memory: no draft source, still correct)
        }
        er.prompt_logprobs = q->echo && q->logprobs ? 1 + q->top_logprobs : 0;
        er.user = &g->ch[i];
        er.cache_salt = srv_tenant_salt(&g->tn, q->cache_salt, q->cache_salt_len);
        er.tenant = g->tn.id;
        er.share = g->tn.share;
        if (g->gram && srv_grammar_matcher(s, g->gram, &er.grammar, &e)) { // every choice shares g->gram
            free(er.prompt);
            free(er.prediction);
            goto fail;
        }
        tc_err err = {0};
        int rc = engine_submit(s->eng, &er, &g->ch[i].id, &err);
        if (rc) {
            free(er.prompt);
            free(er.prediction);
            gram_matcher_free(er.grammar);
            submit_error(s, rc, er.retry_after, &err, &e);
            goto fail; // choices already submitted finish through the engine; g lives until then
        }
        g->ch[i].live = 1;
        g->n_live++;
    }
    gen_free_ids(g);
    gen_trunc_headers(s, req, q, g->n_trunc_tokens, g->n_trunc_msgs);
    if (g->summ_status) evhttp_add_header(evhttp_request_get_output_headers(req), "x-tachyon-summary", g->summ_status);
    if (q->stream) start_stream(g);
    return;
fail:
    gen_fail(g, &e);
}
