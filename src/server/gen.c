// Generation requests (/v1/chat/completions, /v1/completions): prompt → engine requests (one per choice),
// engine events → detokenized text → stop-string holdback → SSE chunks or one JSON response. SSE bytes
// produced while handling one batch of engine events are flushed together at the end of the batch.
// A large body is parsed, rendered and tokenized on the worker thread (srv_work.c) so that the event loop
// keeps streaming meanwhile; a stream silent for --sse-ping seconds gets a ": ping" comment.
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <sys/socket.h>
#include <event2/keyvalq_struct.h>
#include <stdlib.h>
#include <string.h>

#include "common/timeutil.h"
#include "server/reasoning.h"
#include "server/srv_internal.h"

typedef struct gen_choice {
    srv_ev_sink sink; // fn NULL: a generation choice (first member: engine events are routed on it)
    struct gen_req *g;
    int index;        // OpenAI's choice index: prompt_i * n + j
    int prompt_i;     // which prompt (completions with several)
    char *echo;       // (echo_len) owned: the prompt text prepended to the choice (completions echo), or NULL
    size_t echo_len;
    long plp_off;     // echo with logprobs: text offset of the next prompt token
    uint64_t id;      // engine request id
    int live;         // submitted, FINISH not yet received
    int text_done;    // finish chunk queued / text closed (stop matched or engine finished)
    tok_stream *ts;   // owned
    oai_stopbuf sb;   // owned
    int n_tokens;     // generated tokens counted for usage (up to a stop match)
    const char *finish_reason;
    json_t *lp;       // owned: chat {"content": […]} or completions {tokens…}; pending (stream) or all
    double t_last;    // monotonic seconds of the previous token
    int reason;       // 1: <think>…</think> goes to reasoning_content (reasoning_on)
    rsn_split rs;     // streaming split of the released text (reason)
} gen_choice;

typedef struct gen_req {
    server *s;
    struct evhttp_request *req; // NULL once the client went away or the reply is complete
    struct evhttp_connection *conn;
    oai_req q;
    char id[48];
    long created; // unix seconds
    int n_prompt, n_cached;
    int n_choices, n_live;
    gen_choice ch[OAI_MAX_CHOICES];
    struct evbuffer *out; // SSE bytes waiting for this loop turn's flush
    int dirty, ended, logged, status;
    int error; // 0, or the HTTP status of a failed generation: 500 engine error, 503 cut by the shutdown or
               // dropped by the SLO scheduler (errcode says which)
    const char *errcode; // with error 503: "slo_unattainable", else NULL ("shutting_down")
    double retry_after;  // with "slo_unattainable": seconds for Retry-After
    int writing; // counted in s->n_writing until the reply is handed to libevent or the client is gone
    char errmsg[160];
    struct gen_req *next_dirty, *prev, *next;
    // preparation: parse, chat render, tokenize (inline, or on the worker thread for a large body)
    oai_kind kind;
    struct evbuffer *body; // owned while preparing on the worker
    int preparing;         // the worker owns q, ids and perr until its done callback
    int32_t **ids;         // (n_pr) each prompt's token ids, owned (completions may have several prompts)
    int *n_ids;            // (n_pr)
    int n_pr;
    int prep_rc;
    oai_err perr;
    int streaming;      // SSE headers sent
    double t_last_send; // monotonic seconds of the last bytes queued on the stream (pings after silence)
    double t_recv, t_first_tok;                                 // monotonic seconds (server side)
    double t_arrival, t_first_sched, t_first_token, t_finish;   // engine timestamps of choice 0
    int32_t *pred_ids;                                          // (n_pred_ids) tokenized prediction, owned
    int n_pred_ids;
    int pred_accepted, pred_rejected;                           // over choices (usage)
    int n_trunc_tokens, n_trunc_msgs;                           // dropped by truncation "auto" (gen_trunc.c)
    srv_tenant_ref tn;                                          // its tenant (srv_tenants.c), settled in g_free
    gen_summ_in si;           // --summarize-with: what truncation dropped, until gen_summ_start takes it
    const char *summ_status;  // x-tachyon-summary: "generated", "cached", "failed"; NULL = no summary tried
} gen_req;

// --- lifetime ----------------------------------------------------------------------------------------

static void g_unlink(gen_req *g) {
    server *s = g->s;
    if (g->prev) g->prev->next = g->next;
    else if (s->inflight == g) s->inflight = g->next;
    if (g->next) g->next->prev = g->prev;
    g->prev = g->next = NULL;
}

static void free_ids(gen_req *g) {
    for (int i = 0; g->ids && i < g->n_pr; i++) free(g->ids[i]);
    free(g->ids);
    free(g->n_ids);
    g->ids = NULL;
    g->n_ids = NULL;
}

static void g_free(gen_req *g) {
    int n_out = 0;
    for (int i = 0; i < g->n_choices; i++) n_out += g->ch[i].n_tokens;
    srv_tenant_end(g->s, &g->tn, g->n_prompt, n_out); // refunds the unused part of its tokens reservation
    g_unlink(g);
    g->s->n_inflight--;
    for (int i = 0; i < g->n_choices; i++) {
        gen_choice *c = &g->ch[i];
        if (c->ts) tok_stream_free(c->ts);
        oai_stopbuf_free(&c->sb);
        if (c->lp) json_decref(c->lp);
        free(c->echo);
    }
    if (g->out) evbuffer_free(g->out);
    free(g->pred_ids);
    free(g->si.dropped);
    if (g->body) evbuffer_free(g->body);
    free_ids(g);
    oai_req_free(&g->q);
    free(g);
}

// Called by libevent once a finished reply is fully written: the drain on shutdown waits for this.
static void on_reply_done(struct evhttp_request *req, void *arg) {
    ((server *)arg)->n_writing--;
    srv_conn_reply_done(req, arg);
}

static void g_detach(gen_req *g) {
    if (g->writing) { // the reply is being completed now: on_reply_done takes over the count
        g->writing = 0;
        if (g->req) evhttp_request_set_on_complete_cb(g->req, on_reply_done, g->s);
        else g->s->n_writing--;
    }
    if (g->conn) srv_conn_set_closecb(g->s, g->conn, NULL, NULL);
    g->conn = NULL;
    g->req = NULL;
}

static void g_log(gen_req *g, int status, const char *finish) {
    if (g->logged) return;
    g->logged = 1;
    int n_out = 0;
    for (int i = 0; i < g->n_choices; i++) n_out += g->ch[i].n_tokens;
    double now = tc_now();
    srv_access_log(g->s, g->req, g->id, status, g->n_prompt, n_out, g->t_first_tok ? g->t_first_tok - g->t_recv : 0,
                   now - g->t_recv, finish);
}

static void g_maybe_free(gen_req *g) {
    if (!g->req && g->n_live == 0 && !g->dirty && !g->preparing) {
        if (!g->logged) g_log(g, 499, "cancelled"); // client closed the connection
        g_free(g);
    }
}

static void mark_dirty(gen_req *g) {
    if (g->dirty) return;
    g->dirty = 1;
    g->next_dirty = g->s->dirty;
    g->s->dirty = g;
}

static void queue_json(gen_req *g, json_t *j) {
    if (!j) return;
    size_t n;
    char *f = oai_sse_frame(j, &n);
    json_decref(j);
    if (f && g->req) evbuffer_add(g->out, f, n);
    free(f);
    mark_dirty(g);
}

static void flush_dirty(server *s) {
    gen_req *g = s->dirty;
    s->dirty = NULL;
    while (g) {
        gen_req *next = g->next_dirty;
        g->dirty = 0;
        g->next_dirty = NULL;
        if (g->req && evbuffer_get_length(g->out)) {
            evhttp_send_reply_chunk(g->req, g->out);
            g->t_last_send = tc_now();
        }
        if (g->req && g->ended) {
            struct evhttp_request *req = g->req;
            g_log(g, 200, g->ch[0].finish_reason);
            g_detach(g);
            evhttp_send_reply_end(req);
        }
        g_maybe_free(g);
        g = next;
    }
}

// --- streaming pieces --------------------------------------------------------------------------------

static json_t *lp_new(const gen_req *g) { return g->q.kind == OAI_CHAT ? oai_lp_chat_new() : oai_lp_cmpl_new(); }

// Queues a chunk with whatever text (and pending logprobs) can be released.
static void emit_stream(gen_choice *c, int final) {
    gen_req *g = c->g;
    const char *p;
    size_t n;
    if (oai_tools_active(&g->q) && !final) return; // text or tool calls: decided when the choice ends
    oai_stopbuf_take(&c->sb, final, &p, &n);
    json_t *lp = NULL;
    if (c->lp) {
        json_t *arr = json_object_get(c->lp, g->q.kind == OAI_CHAT ? "content" : "tokens");
        if (json_array_size(arr)) {
            lp = c->lp;
            c->lp = lp_new(g);
        }
    }
    if (c->reason) { // the released text splits into reasoning_content and content deltas
        tc_strbuf r = {0}, t = {0};
        rsn_feed(&c->rs, p, n, final, &r, &t);
        if (r.n || t.n || lp) {
            json_t *ch = oai_chunk(g->q.kind, g->id, g->created, g->s->name, c->index, NULL, t.n ? t.p : NULL, t.n,
                                   NULL, lp);
            if (r.n) {
                json_t *delta = json_object_get(json_array_get(json_object_get(ch, "choices"), 0), "delta");
                json_object_set_new(delta, "reasoning_content", oai_json_text(r.p, r.n));
            }
            queue_json(g, ch);
        }
        free(r.p), free(t.p);
        return;
    }
    if (!n && !lp) return;
    queue_json(g, oai_chunk(g->q.kind, g->id, g->created, g->s->name, c->index, NULL, p, n, NULL, lp));
}

// Whether a request's output is split into reasoning_content and content (--reasoning-format, the chat
// template's family); never with tools (their parser owns the text) or for completions.
static int reasoning_on(const server *s, const oai_req *q) {
    if (q->kind != OAI_CHAT || oai_tools_active(q) || s->o.reasoning_format == SRV_REASONING_NONE) return 0;
    return s->o.reasoning_format == SRV_REASONING_PARSE || chat_family_reasons(s->chat);
}

static const char *finish_api(engine_finish f) {
    switch (f) {
    case ENGINE_FINISH_STOP: return "stop";
    case ENGINE_FINISH_ERROR: return "error";
    default: return "length"; // length, deadline, cancelled: the output was cut (shutdown is an error)
    }
}

// The tool calls in a choice's text (NULL if none); *content: text around them (malloc'd, may be NULL).
static json_t *tool_calls_of(gen_choice *c, char **content) {
    char base[64];
    snprintf(base, sizeof base, "call_%.24s_%d", c->g->id + (c->g->q.kind == OAI_CHAT ? 9 : 5), c->index);
    return oai_tools_parse(oai_tool_style_of(c->g->s->chat), c->sb.text ? c->sb.text : "", c->sb.len, base, content);
}

// Closes a choice's text: flushes the detokenizer, releases the rest, queues the finish chunk.
static void close_text(gen_choice *c, const char *reason, int aborted) {
    gen_req *g = c->g;
    server *s = g->s;
    if (c->text_done) return;
    c->text_done = 1;
    if (!c->sb.matched) {
        char buf[64];
        int n = tok_stream_flush(c->ts, buf, sizeof buf);
        if (n > 0 && n <= (int)sizeof buf && oai_stopbuf_push(&c->sb, buf, (size_t)n) == 1) reason = "stop";
    }
    c->finish_reason = reason;
    metric *m = aborted                   ? s->mt.success_abort
                : !strcmp(reason, "stop") ? s->mt.success_stop
                : !strcmp(reason, "length") ? s->mt.success_length
                                            : s->mt.success_abort;
    metric_inc(m, 1);
    json_t *calls = NULL;
    if (oai_tools_active(&g->q) && !strcmp(reason, "stop") && g->q.stream && g->req) {
        char *content = NULL;
        calls = tool_calls_of(c, &content);
        if (calls) {
            reason = c->finish_reason = "tool_calls";
            if (content) queue_json(g, oai_chunk(g->q.kind, g->id, g->created, s->name, c->index, NULL, content,
                                                 strlen(content), NULL, NULL));
            json_t *chunks = oai_tool_call_chunks(g->id, g->created, s->name, c->index, calls), *ch;
            size_t k;
            json_array_foreach(chunks, k, ch) queue_json(g, json_incref(ch));
            json_decref(chunks);
            json_decref(calls);
            free(content);
            c->sb.emitted = c->sb.len; // the text went out as tool calls
        }
    }
    if (g->q.stream && g->req) {
        emit_stream(c, 1);
        if (strcmp(reason, "error"))
            queue_json(g, oai_chunk(g->q.kind, g->id, g->created, s->name, c->index, NULL, NULL, 0, reason, NULL));
    }
}

static void lp_append_at(gen_choice *c, const samp_result *r, long offset);

static void lp_append(gen_choice *c, const samp_result *r) {
    lp_append_at(c, r, (long)(c->echo_len + c->sb.len)); // generated text follows the echoed prompt
}

// echo + logprobs: the first prompt token as OpenAI reports it (no logprob: nothing precedes it).
static void lp_first_prompt_token(gen_choice *c, int32_t tok) {
    char buf[64];
    int n = tok_piece(c->g->s->vocab, tok, TOK_DEC_SKIP_SPECIAL, buf, sizeof buf);
    n = n < 0 ? 0 : n > 64 ? 64 : n;
    json_array_append_new(json_object_get(c->lp, "tokens"), oai_json_text(buf, (size_t)n));
    json_array_append_new(json_object_get(c->lp, "token_logprobs"), json_null());
    json_array_append_new(json_object_get(c->lp, "top_logprobs"), json_null());
    json_array_append_new(json_object_get(c->lp, "text_offset"), json_integer(0));
    c->plp_off = n;
}

// echo + logprobs: one scored prompt token (engine PROMPT_LP event), offsets within the echoed prompt.
static void on_prompt_lp(gen_choice *c, const engine_event *ev) {
    if (!c->lp || c->text_done) return;
    char buf[64];
    int n = tok_piece(c->g->s->vocab, ev->tok.token, TOK_DEC_SKIP_SPECIAL, buf, sizeof buf);
    lp_append_at(c, &ev->tok, c->plp_off);
    c->plp_off += n < 0 ? 0 : n;
}

static void lp_append_at(gen_choice *c, const samp_result *r, long offset) {
    server *s = c->g->s;
    char bufs[SAMP_MAX_LOGPROBS + 1][64];
    oai_lp_tok chosen, top[SAMP_MAX_LOGPROBS];
    int n = tok_piece(s->vocab, r->token, 0, bufs[0], sizeof bufs[0]);
    chosen = (oai_lp_tok){bufs[0], n < 0 ? 0 : n > 64 ? 64 : n, r->logprob};
    int nt = r->n_top < c->g->q.top_logprobs ? r->n_top : c->g->q.top_logprobs;
    for (int i = 0; i < nt; i++) {
        int k = tok_piece(s->vocab, r->top_ids[i], 0, bufs[i + 1], sizeof bufs[i + 1]);
        top[i] = (oai_lp_tok){bufs[i + 1], k < 0 ? 0 : k > 64 ? 64 : k, r->top_logprobs[i]};
    }
    if (c->g->q.kind == OAI_CHAT)
        json_array_append_new(json_object_get(c->lp, "content"), oai_lp_chat_entry(&chosen, top, nt));
    else oai_lp_cmpl_append(c->lp, &chosen, top, nt, offset);
}

// --- engine events -----------------------------------------------------------------------------------

static void on_token(gen_choice *c, const engine_event *ev) {
    gen_req *g = c->g;
    server *s = g->s;
    if (c->text_done) return; // tokens the engine made before it saw our stop cancel
    double now = tc_now();
    c->n_tokens++;
    mrate_add(&s->mt.gen_rate, now, 1);
    if (!g->t_first_tok) g->t_first_tok = now;
    if (c->t_last > 0) {
        metric_observe(s->mt.itl, now - c->t_last);
        mwindow_add(&s->mt.w_itl, now, now - c->t_last);
    }
    c->t_last = now;
    int32_t t = ev->tok.token;
    if (c->lp) lp_append(c, &ev->tok);
    if (!tok_is_eog(s->vocab, t) || g->q.ignore_eos) {
        char buf[256], *p = buf;
        int n = tok_stream_push(c->ts, t, buf, sizeof buf);
        if (n > (int)sizeof buf && (p = malloc((size_t)n))) n = tok_stream_push(c->ts, t, p, n);
        if (n > 0 && oai_stopbuf_push(&c->sb, p, (size_t)n) == 1) {
            engine_cancel(s->eng, c->id, ENGINE_FINISH_STOP);
            close_text(c, "stop", 0);
        }
        if (p != buf) free(p);
    }
    if (g->q.stream && g->req && !c->text_done) emit_stream(c, 0);
}

static json_t *usage_json(const gen_req *g, int n_out) {
    json_t *u = oai_usage(g->n_prompt, n_out, g->n_cached);
    if (g->q.prediction) oai_usage_prediction(u, g->pred_accepted, g->pred_rejected);
    if (gen_trunc_auto(g->s, &g->q)) oai_usage_truncated(u, g->n_trunc_tokens);
    return u;
}

static void complete(gen_req *g) {
    server *s = g->s;
    double now = tc_now();
    int n_out = 0;
    for (int i = 0; i < g->n_choices; i++) n_out += g->ch[i].n_tokens;
    srv_metrics *mt = &s->mt;
    s->mt.n_requests++;
    metric_inc(mt->prompt_tokens, g->n_prompt);
    metric_inc(mt->gen_tokens, n_out);
    metric_observe(mt->e2e, now - g->t_recv);
    mwindow_add(&mt->w_e2e, now, now - g->t_recv);
    if (g->t_first_tok) {
        metric_observe(mt->ttft, g->t_first_tok - g->t_recv);
        mwindow_add(&mt->w_ttft, now, g->t_first_tok - g->t_recv);
    }
    int n0 = g->ch[0].n_tokens;
    if (g->t_first_sched > 0) metric_observe(mt->queue, g->t_first_sched - g->t_arrival);
    if (g->t_first_token > 0 && g->t_first_sched > 0) {
        metric_observe(mt->prefill, g->t_first_token - g->t_first_sched);
        metric_observe(mt->decode, g->t_finish - g->t_first_token);
    }
    if (n0 > 1 && g->t_first_tok) {
        double tpot = (g->ch[0].t_last - g->t_first_tok) / (n0 - 1);
        metric_observe(mt->tpot, tpot);
        mwindow_add(&mt->w_tpot, now, tpot);
    }
    if (!g->req) return;
    oai_err e;
    if (g->error == 503)
        oai_err_set(&e, 503, "server_error", g->errcode ? g->errcode : "shutting_down", NULL, "%s", g->errmsg);
    if (g->error == 503) e.retry_after = g->retry_after;
    else if (g->error) oai_err_set(&e, 500, "server_error", NULL, NULL, "%s", g->errmsg);
    if (g->q.stream) {
        if (g->error) {
            char *t = oai_err_json(&e);
            if (t) {
                evbuffer_add_printf(g->out, "data: %s\n\n", t);
                free(t);
            }
        }
        if (g->error == 503) { // cut: no usage, no [DONE] (which would read as a normal end); just close
            g->ended = 1;
            mark_dirty(g);
            return;
        }
        if (g->q.include_usage)
            queue_json(g, oai_usage_chunk(g->q.kind, g->id, g->created, s->name, usage_json(g, n_out)));
        evbuffer_add(g->out, OAI_SSE_DONE, strlen(OAI_SSE_DONE));
        g->ended = 1;
        mark_dirty(g);
        return;
    }
    struct evhttp_request *req = g->req;
    if (g->error) {
        g_log(g, g->error, "error");
        g_detach(g);
        srv_send_error(s, req, &e);
        return;
    }
    json_t *choices = json_array();
    for (int i = 0; i < g->n_choices; i++) {
        gen_choice *c = &g->ch[i];
        const char *text = c->sb.text ? c->sb.text : "";
        size_t len = c->sb.len;
        char *joined = NULL;
        if (c->echo && (joined = malloc(c->echo_len + len + 1))) {
            memcpy(joined, c->echo, c->echo_len);
            memcpy(joined + c->echo_len, text, len);
            text = joined;
            len += c->echo_len;
        }
        tc_strbuf rtext = {0}, ctext = {0};
        if (c->reason) { // the same split as the stream's, over the whole text at once
            rsn_split rs;
            rsn_init(&rs, chat_family_opens_think(s->chat));
            rsn_feed(&rs, text, len, 1, &rtext, &ctext);
            text = ctext.p ? ctext.p : "", len = ctext.n;
        }
        json_t *ch = oai_choice(g->q.kind, c->index, text, len, c->finish_reason, c->lp);
        if (c->reason)
            json_object_set_new(json_object_get(ch, "message"), "reasoning_content",
                                rtext.n ? oai_json_text(rtext.p, rtext.n) : json_null());
        free(rtext.p), free(ctext.p);
        free(joined);
        c->lp = NULL;
        if (oai_tools_active(&g->q) && !strcmp(c->finish_reason, "stop")) {
            char *content = NULL;
            json_t *calls = tool_calls_of(c, &content);
            if (calls) oai_choice_set_tool_calls(ch, calls, content), c->finish_reason = "tool_calls";
            free(content);
        }
        json_array_append_new(choices, ch);
    }
    json_t *resp = oai_response(g->q.kind, g->id, g->created, s->name, choices, usage_json(g, n_out));
    g_log(g, 200, g->ch[0].finish_reason);
    g_detach(g);
    srv_send_json(s, req, 200, resp);
}

static void on_finish(gen_choice *c, const engine_event *ev) {
    gen_req *g = c->g;
    if (!c->live) return;
    c->live = 0;
    g->n_live--;
    if (ev->n_cached > g->n_cached) g->n_cached = ev->n_cached;
    g->pred_accepted += ev->n_pred_accepted;
    // OpenAI's meaning: prediction tokens that did not make it into this choice's output
    if (g->n_pred_ids > ev->n_pred_accepted) g->pred_rejected += g->n_pred_ids - ev->n_pred_accepted;
    if (ev->n_spec_drafted > 0) metric_observe(g->s->mt.spec_rate, (double)ev->n_spec_accepted / ev->n_spec_drafted);
    if (c->index == 0) {
        g->t_arrival = ev->t_arrival;
        g->t_first_sched = ev->t_first_sched;
        g->t_first_token = ev->t_first_token;
        g->t_finish = ev->t_finish;
    }
    if (ev->finish == ENGINE_FINISH_ERROR) {
        g->error = 500;
        snprintf(g->errmsg, sizeof g->errmsg, "generation failed: %.120s", ev->msg);
    } else if (ev->finish == ENGINE_FINISH_SLO && g->error != 500) {
        g->error = 503;
        g->errcode = "slo_unattainable";
        g->retry_after = ev->retry_after;
        snprintf(g->errmsg, sizeof g->errmsg, "The request waited until its time-to-first-token target could no "
                 "longer be met (--sched slo); retry later");
    } else if (ev->finish == ENGINE_FINISH_SHUTDOWN && g->error != 500) {
        // not a `length` finish: the client must not take a cut answer for a complete one
        g->error = 503;
        snprintf(g->errmsg, sizeof g->errmsg, "The server shut down before the generation finished (after %d "
                 "tokens); retry the request", c->n_tokens);
    }
    if (ev->finish == ENGINE_FINISH_DEADLINE)
        srv_log(g->s, SRV_LOG_INFO, "request %s choice %d: deadline reached after %d tokens", g->id, c->index,
                c->n_tokens);
    engine_finish f = ev->finish;
    int cut = f == ENGINE_FINISH_SHUTDOWN || f == ENGINE_FINISH_SLO;
    close_text(c, cut ? "error" : finish_api(f), cut || f == ENGINE_FINISH_CANCELLED || f == ENGINE_FINISH_ERROR);
    if (g->n_live == 0) complete(g);
    else mark_dirty(g);
}

void gen_on_engine_events(server *s) {
    if (!s->eng) return;
    engine_event evs[64];
    int n;
    while ((n = engine_poll(s->eng, evs, 64)) > 0) {
        for (int i = 0; i < n; i++) {
            srv_ev_sink *sink = evs[i].user;
            if (!sink) {
                free(evs[i].embedding);
                continue;
            }
            if (sink->fn) { // not a generation choice (embeddings)
                sink->fn(s, sink, &evs[i]);
                continue;
            }
            gen_choice *c = (gen_choice *)sink;
            if (evs[i].type == ENGINE_EV_TOKEN) on_token(c, &evs[i]);
            else if (evs[i].type == ENGINE_EV_PROMPT_LP) on_prompt_lp(c, &evs[i]);
            else if (evs[i].type == ENGINE_EV_FINISH) {
                gen_req *g = c->g;
                on_finish(c, &evs[i]);
                mark_dirty(g); // g is freed in flush_dirty at the earliest
            }
        }
    }
    flush_dirty(s);
}

// --- connection close --------------------------------------------------------------------------------

static void on_close(struct evhttp_connection *conn, void *arg) {
    (void)conn;
    gen_req *g = arg;
    server *s = g->s;
    // When libevent drops a connection on a read/write error while a reply is still in progress, it
    // detaches the request (no connection) and leaves freeing it to us; otherwise it frees it itself.
    if (g->req && !evhttp_request_get_connection(g->req)) evhttp_request_free(g->req);
    g->conn = NULL;
    g->req = NULL;
    if (g->writing) {
        g->writing = 0;
        s->n_writing--;
    }
    if (g->n_live > 0) {
        metric_inc(s->mt.cancelled, 1);
        srv_log(s, SRV_LOG_DEBUG, "request %s: client went away, cancelling", g->id);
        for (int i = 0; i < g->n_choices; i++)
            if (g->ch[i].live && s->eng) engine_cancel(s->eng, g->ch[i].id, ENGINE_FINISH_CANCELLED);
    }
    g_maybe_free(g);
}

// libevent notices a closed connection only when a write fails, so a client that leaves during a long
// prefill or a non-streamed generation would go unnoticed: peek at each waiting socket instead (called
// from a short periodic timer). A closed peer reads as 0 bytes (or an error); pipelined bytes are left
// in place.
void gen_check_disconnects(server *s) {
    gen_req *next;
    for (gen_req *g = s->inflight; g; g = next) {
        next = g->next;
        if (!g->conn || !g->req) continue;
        struct bufferevent *bev = evhttp_connection_get_bufferevent(g->conn);
        evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
        if (fd < 0) continue;
        char c;
        ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            struct evhttp_connection *conn = g->conn;
            srv_conn_set_closecb(s, conn, NULL, NULL);
            on_close(conn, g); // cancels; g may be freed here
            evhttp_connection_free(conn);
            continue;
        }
        // Keep-alive comments on a silent stream (queued, in a long prefill, preempted): clients and proxies
        // see a live connection, and the request's own deadline decides how long it may take.
        if (g->streaming && !g->ended && s->o.sse_ping > 0 && tc_now() - g->t_last_send >= s->o.sse_ping) {
            evbuffer_add(g->out, ": ping\n\n", 8);
            mark_dirty(g);
        }
    }
    if (s->dirty) flush_dirty(s);
}

void gen_cancel_all(server *s, engine_finish why) {
    for (gen_req *g = s->inflight; g; g = g->next)
        for (int i = 0; i < g->n_choices; i++)
            if (g->ch[i].live && s->eng) engine_cancel(s->eng, g->ch[i].id, why);
}

void gen_free_all(server *s) {
    while (s->inflight) {
        gen_req *g = s->inflight;
        g_detach(g);
        g_free(g);
    }
    s->dirty = NULL;
}

// --- request ------------------------------------------------------------------------------------------

static uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// Lenient mode: fields dropped instead of refused are logged, at most once every 10 s (the rest counted).
void gen_log_dropped(server *s, const oai_req *q) {
    if (!q->lenient_dropped[0]) return;
    double now = tc_now();
    if (s->lenient_t_log > 0 && now - s->lenient_t_log < 10) {
        s->lenient_suppressed++;
        return;
    }
    srv_log(s, SRV_LOG_WARN, "--lenient: ignored unsupported request fields: %s (%d similar warnings suppressed)",
            q->lenient_dropped, s->lenient_suppressed);
    s->lenient_t_log = now;
    s->lenient_suppressed = 0;
}

static void reply_error(server *s, struct evhttp_request *req, const oai_err *e, double t_recv) {
    srv_send_error(s, req, e);
    srv_access_log(s, req, NULL, e->status, 0, 0, 0, tc_now() - t_recv, NULL);
}


// Bodies above this size are parsed, rendered and tokenized on the worker thread (bytes). Below it the work
// takes well under a millisecond, and the inline path answers without a thread hop.
#define GEN_ASYNC_BODY (64 * 1024)

// Parse, model check, prompt ids: on the loop thread, or on the worker while g->preparing (then it touches
// only g->q, g->ids, g->perr and s's read-only model data: vocab, chat template).
static void gen_prepare(gen_req *g, const char *body, size_t len) {
    server *s = g->s;
    oai_err *e = &g->perr;
    g->prep_rc = -1;
    if (oai_parse_ex(g->kind, body, len, s->o.lenient, &g->q, e)) return;
    if (!srv_model_ok(s, g->q.model)) {
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

static void prep_run(void *arg) {
    gen_req *g = arg;
    size_t len = evbuffer_get_length(g->body);
    const char *p = len ? (const char *)evbuffer_pullup(g->body, -1) : "";
    gen_prepare(g, p ? p : "", p ? len : 0);
}

static void gen_launch(gen_req *g);

static void prep_done(void *arg) {
    gen_req *g = arg;
    g->preparing = 0;
    evbuffer_free(g->body);
    g->body = NULL;
    if (!g->req) { // the client left meanwhile
        g_maybe_free(g);
        return;
    }
    gen_launch(g);
}

// The summary of its dropped turns is in g's prompt (or failed): launch, unless the client left meanwhile.
static void summ_done(void *arg) {
    gen_req *g = arg;
    g->preparing = 0;
    if (!g->req) {
        g_maybe_free(g);
        return;
    }
    gen_launch(g);
}

// Answers an error for a request that owns its connection (g->req set); g lives on while choices finish.
static void gen_fail(gen_req *g, const oai_err *e) {
    server *s = g->s;
    struct evhttp_request *req = g->req;
    for (int i = 0; i < g->n_choices; i++)
        if (g->ch[i].live) engine_cancel(s->eng, g->ch[i].id, ENGINE_FINISH_CANCELLED);
    g->logged = 1;
    g_detach(g);
    reply_error(s, req, e, g->t_recv);
    g_maybe_free(g);
}

void gen_handle(server *s, struct evhttp_request *req, oai_kind kind) {
    double t_recv = tc_now();
    oai_err e = {0};
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    gen_req *g = calloc(1, sizeof *g);
    if (!g) {
        oai_err_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        reply_error(s, req, &e, t_recv);
        return;
    }
    g->s = s;
    s->n_inflight++; // balanced by g_free
    g->t_recv = t_recv;
    g->kind = kind;
    // link before anything can finish: events can only arrive on this thread, after we return
    g->next = s->inflight;
    if (s->inflight) s->inflight->prev = g;
    s->inflight = g;
    g->req = req;
    g->writing = 1;
    s->n_writing++;
    g->conn = evhttp_request_get_connection(req);
    srv_conn_set_closecb(s, g->conn, on_close, g);
    if (len > GEN_ASYNC_BODY && (g->body = evbuffer_new())) {
        evbuffer_add_buffer(g->body, in); // moves the chains: the request keeps no copy
        g->preparing = 1;
        if (srv_work_submit(s, prep_run, prep_done, g) == 0) return;
        g->preparing = 0;
        evbuffer_add_buffer(in, g->body);
        evbuffer_free(g->body);
        g->body = NULL;
    }
    const char *body = len ? (const char *)evbuffer_pullup(in, -1) : "";
    gen_prepare(g, body ? body : "", body ? len : 0);
    evbuffer_drain(in, len); // parsed into g->q: free the body now rather than with the request
    gen_launch(g);
}

// The prompt is ready (g->prep_rc, g->perr, g->ids): check it against the context, submit one engine request
// per choice, start the reply.
static void gen_launch(gen_req *g) {
    server *s = g->s;
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
    const char *pparam = kind == OAI_CHAT ? "messages" : "prompt";
    double reserve = 0; // tenant's tokens per minute: prompt + max_tokens of every choice
    for (int pi = 0; pi < g->n_pr; pi++) {
        int n_ids = g->n_ids[pi];
        if (n_ids >= s->ctx_size) {
            oai_err_set(&e, 400, "invalid_request_error", "context_length_exceeded", pparam,
                        "This model's maximum context length is %d tokens. However, your %s resulted in %d tokens. "
                        "Please reduce the length of the %s.", s->ctx_size, pparam, n_ids, pparam);
            goto fail;
        }
        int mt = q->max_tokens > 0 ? q->max_tokens : s->ctx_size - n_ids;
        if ((long long)n_ids + mt > s->ctx_size) {
            oai_err_set(&e, 400, "invalid_request_error", "context_length_exceeded", "max_tokens",
                        "This model's maximum context length is %d tokens. However, you requested %lld tokens (%d in "
                        "the %s, %d for the completion). Please reduce the length of the %s or the completion.",
                        s->ctx_size, (long long)n_ids + mt, n_ids, pparam, mt, pparam);
            goto fail;
        }
        g->n_prompt += n_ids;
        reserve += ((double)n_ids + mt) * q->n;
    }
    if (srv_tenant_admit(s, req, &g->tn, reserve, &e)) goto fail; // 401 / 429 with headers
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
    for (int i = 0; i < g->n_choices; i++) { // choice index as OpenAI: prompt_i * n + j
        gen_choice *c = &g->ch[i];
        c->g = g;
        c->index = i;
        c->prompt_i = i / q->n;
        c->ts = tok_stream_new(s->vocab, TOK_DEC_SKIP_SPECIAL | TOK_DEC_CONTINUATION);
        oai_stopbuf_init(&c->sb, q->stop, q->n_stop);
        c->reason = reasoning_on(s, q);
        rsn_init(&c->rs, chat_family_opens_think(s->chat));
        if (q->logprobs) c->lp = lp_new(g);
        if (c->lp && q->echo) lp_first_prompt_token(c, g->ids[c->prompt_i][0]);
        if (!c->ts || !g->out || (q->logprobs && !c->lp) ||
            (q->echo && gen_echo_text(s, &q->prompts[c->prompt_i], &c->echo, &c->echo_len))) {
            oai_err_set(&e, 500, "server_error", NULL, NULL, "out of memory");
            goto fail;
        }
    }
    if (q->prediction && q->prediction_len > 0) {
        tc_err terr = {0};
        if (tok_encode(s->vocab, q->prediction, q->prediction_len, 0, &g->pred_ids, &g->n_pred_ids, &terr)) {
            oai_err_set(&e, 400, "invalid_request_error", NULL, "prediction", "cannot tokenize 'prediction': %s",
                        terr.msg);
            goto fail;
        }
    }
    char *gbnf = NULL; // the grammar the output must follow (oai_output_grammar), or NULL
    if (oai_output_grammar(q, s->chat, &gbnf, &e)) goto fail;
    for (int i = 0; i < g->n_choices; i++) {
        engine_req er = {0};
        int n_ids = g->n_ids[g->ch[i].prompt_i];
        er.prompt = malloc((size_t)n_ids * sizeof *er.prompt);
        if (!er.prompt) {
            oai_err_set(&e, 500, "server_error", NULL, NULL, "out of memory");
            free(gbnf);
            goto fail;
        }
        memcpy(er.prompt, g->ids[g->ch[i].prompt_i], (size_t)n_ids * sizeof *er.prompt);
        er.n_prompt = n_ids;
        er.max_tokens = q->max_tokens > 0 ? q->max_tokens : s->ctx_size - n_ids;
        er.sp = q->sp;
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
        if (gbnf && srv_grammar_matcher(s, gbnf, &er.grammar, &e)) {
            free(er.prompt);
            free(gbnf);
            goto fail;
        }
        tc_err err = {0};
        int rc = engine_submit(s->eng, &er, &g->ch[i].id, &err);
        if (rc) {
            free(er.prompt);
            free(er.prediction);
            gram_matcher_free(er.grammar);
            free(gbnf);
            if (rc == TC_ERR_FULL && er.retry_after > 0) { // --sched slo: its target cannot be met now
                oai_err_set(&e, 503, "server_error", "slo_unattainable", NULL,
                            "The server cannot meet this request's latency target (%s); retry later", err.msg);
                e.retry_after = er.retry_after;
            } else if (rc == TC_ERR_FULL) {
                metric_inc(s->mt.rejected, 1);
                oai_err_set(&e, 503, "server_error", "queue_full", NULL,
                            "The server is overloaded (%s); retry after a moment", err.msg);
            } else if (rc == TC_ERR_INVALID) {
                oai_err_set(&e, 400, "invalid_request_error", NULL, NULL, "%s", err.msg);
            } else {
                oai_err_set(&e, 500, "server_error", NULL, NULL, "submit failed: %s", err.msg);
            }
            goto fail; // choices already submitted finish through the engine; g lives until then
        }
        g->ch[i].live = 1;
        g->n_live++;
    }
    free(gbnf);
    free_ids(g);
    gen_trunc_headers(s, req, q, g->n_trunc_tokens, g->n_trunc_msgs);
    if (g->summ_status) evhttp_add_header(evhttp_request_get_output_headers(req), "x-tachyon-summary", g->summ_status);
    if (q->stream) {
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        evhttp_add_header(h, "Content-Type", "text/event-stream");
        evhttp_add_header(h, "Cache-Control", "no-cache");
        evhttp_add_header(h, "X-Accel-Buffering", "no");
        srv_add_common_headers(s, req);
        evhttp_send_reply_start(req, 200, "OK");
        g->streaming = 1;
        g->t_last_send = tc_now();
        if (kind == OAI_CHAT)
            for (int i = 0; i < q->n; i++)
                queue_json(g, oai_chunk(kind, g->id, g->created, s->name, i, "assistant", "", 0, NULL, NULL));
        for (int i = 0; i < g->n_choices; i++) // completions echo: the prompt text comes first
            if (g->ch[i].echo)
                queue_json(g, oai_chunk(kind, g->id, g->created, s->name, i, NULL, g->ch[i].echo, g->ch[i].echo_len,
                                        NULL, NULL));
        flush_dirty(s);
    }
    return;
fail:
    gen_fail(g, &e);
}
