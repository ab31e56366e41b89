// Generation requests (/v1/chat/completions, /v1/completions), second half: engine events → detokenized text →
// stop-string holdback → SSE chunks or one JSON response, and the request's lifetime (gen_launch.c is the
// first half: parse, prompt, submit). SSE bytes produced while handling one batch of engine events are flushed
// together at the end of the batch; a stream silent for --sse-ping seconds gets a ": ping" comment.
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <sys/socket.h>
#include <event2/keyvalq_struct.h>
#include <stdlib.h>
#include <string.h>

#include "common/timeutil.h"
#include "server/gen.h"
#include "server/gen_impl.h"
#include "server/gen_trunc.h"
#include "server/oai_tools.h"
#include "server/srv_conn.h"
#include "server/srv_log.h"
#include "server/srv_reply.h"
#include "server/srv_tenants.h"


// --- lifetime ----------------------------------------------------------------------------------------

static void g_unlink(gen_req *g) {
    srv_model *s = g->s;
    if (g->prev) g->prev->next = g->next;
    else if (s->inflight == g) s->inflight = g->next;
    if (g->next) g->next->prev = g->prev;
    g->prev = g->next = NULL;
}

void gen_free_ids(gen_req *g) {
    for (int i = 0; g->ids && i < g->n_pr; i++) free(g->ids[i]);
    free(g->ids);
    free(g->n_ids);
    g->ids = NULL;
    g->n_ids = NULL;
}

static void g_free(gen_req *g) {
    int n_out = 0;
    for (int i = 0; i < g->n_choices; i++) n_out += g->ch[i].n_tokens;
    srv_tenant_end(g->s->fe, &g->tn, g->n_prompt, n_out); // refunds the unused part of its tokens reservation
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
    gram_free(g->gram);
    if (g->body) evbuffer_free(g->body);
    gen_free_ids(g);
    oai_req_free(&g->q);
    if (g->ws) g->wo->stream_free(g->ws);
    if (g->wire_in) json_decref(g->wire_in);
    free(g);
}

// Called by libevent once a finished reply is fully written: the drain on shutdown waits for this.
static void on_reply_done(struct evhttp_request *req, void *arg) {
    ((srv_model *)arg)->n_writing--;
    srv_conn_reply_done(req, ((srv_model *)arg)->fe);
}

void gen_detach(gen_req *g) {
    if (g->writing) { // the reply is being completed now: on_reply_done takes over the count
        g->writing = 0;
        if (g->req) evhttp_request_set_on_complete_cb(g->req, on_reply_done, g->s);
        else g->s->n_writing--;
    }
    if (g->conn) srv_conn_set_closecb(g->s->fe, g->conn, NULL, NULL);
    g->conn = NULL;
    g->req = NULL;
}

static void g_log(gen_req *g, int status, const char *finish) {
    if (g->logged) return;
    g->logged = 1;
    int n_out = 0;
    for (int i = 0; i < g->n_choices; i++) n_out += g->ch[i].n_tokens;
    double now = tc_now();
    srv_access_log(&g->s->o, g->req, g->id, status, g->n_prompt, n_out, g->t_first_tok ? g->t_first_tok - g->t_recv : 0,
                   now - g->t_recv, finish);
}

void gen_maybe_free(gen_req *g) {
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

void gen_queue_json(gen_req *g, json_t *j) {
    if (!j) return;
    if (g->wo) { // another API on the wire: its events, from the chat chunk
        if (!g->ws) g->ws = g->wo->stream_new(g->wire_in);
        if (g->req) g->wo->stream_chunk(g->ws, j, g->out);
        json_decref(j);
        mark_dirty(g);
        return;
    }
    size_t n;
    char *f = oai_sse_frame(j, &n);
    json_decref(j);
    if (f && g->req) evbuffer_add(g->out, f, n);
    free(f);
    mark_dirty(g);
}

void gen_flush_dirty(srv_model *s) {
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
            gen_detach(g);
            evhttp_send_reply_end(req);
        }
        gen_maybe_free(g);
        g = next;
    }
}

// --- streaming pieces --------------------------------------------------------------------------------

json_t *gen_lp_new(const gen_req *g) { return g->q.kind == OAI_CHAT ? oai_lp_chat_new() : oai_lp_cmpl_new(); }

// Tools in play: the text that can no longer start a call (gen_tstream.h) goes out as content; the rest is
// split into content and calls when the choice ends (stream_tools). A prompt that leaves the model inside
// <think> holds everything (its text is reasoning until </think>).
static void emit_tool_text(gen_choice *c) {
    gen_req *g = c->g;
    if (chat_family_opens_think(g->s->chat)) return;
    const char *p;
    size_t n;
    gen_tstream_take(&c->tst, tool_fmt_get(g->s->tools), c->sb.text, oai_stopbuf_safe(&c->sb), &p, &n);
    if (n) gen_queue_json(g, oai_chunk(g->q.kind, g->id, g->created, g->s->name, c->index, NULL, p, n, NULL, NULL));
}

// Queues a chunk with whatever text (and pending logprobs) can be released.
static void emit_stream(gen_choice *c, int final) {
    gen_req *g = c->g;
    const char *p;
    size_t n;
    if (oai_tools_active(&g->q) && !final) { // text or tool calls: decided when the text shows which
        emit_tool_text(c);
        return;
    }
    oai_stopbuf_take(&c->sb, final, &p, &n);
    json_t *lp = NULL;
    if (c->lp) {
        json_t *arr = json_object_get(c->lp, g->q.kind == OAI_CHAT ? "content" : "tokens");
        if (json_array_size(arr)) {
            lp = c->lp;
            c->lp = gen_lp_new(g);
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
            gen_queue_json(g, ch);
        }
        free(r.p), free(t.p);
        return;
    }
    if (!n && !lp) return;
    gen_queue_json(g, oai_chunk(g->q.kind, g->id, g->created, g->s->name, c->index, NULL, p, n, NULL, lp));
}

// Whether a request's output is split into reasoning_content and content (--reasoning-format, the chat
// template's family); never with tools (their parser owns the text) or for completions.
int gen_reasoning_on(const srv_model *s, const oai_req *q) {
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

// A choice's text with tools in play, split by the model's tool-call format (tool_fmt.h): calls, content
// and reasoning. Out of memory leaves *tp empty (the text is then dropped rather than sent as raw markup).
static void tools_of(gen_choice *c, tool_parsed *tp) {
    gen_req *g = c->g;
    char base[64];
    snprintf(base, sizeof base, "call_%.24s_%d", g->id + (g->q.kind == OAI_CHAT ? 9 : 5), c->index);
    tool_parse_opts o = {.id_base = base,
                         .reasoning = g->s->o.reasoning_format != SRV_REASONING_NONE,
                         .in_think = chat_family_opens_think(g->s->chat),
                         .tools = json_object_get(g->q.root, "tools")};
    if (tool_fmt_parse(g->s->tools, c->sb.text ? c->sb.text : "", c->sb.len, &o, tp)) memset(tp, 0, sizeof *tp);
}

// Streams a tools choice at its end: reasoning, content and the calls (complete calls count also when the
// output was cut: finish_reason stays "length"); markup of a cut call is not sent.
static void stream_tools(gen_choice *c, const char **reason) {
    gen_req *g = c->g;
    srv_model *s = g->s;
    tool_parsed tp;
    tools_of(c, &tp);
    if (tp.calls && !strcmp(*reason, "stop")) *reason = c->finish_reason = "tool_calls";
    const char *rest;
    size_t n_rest; // the content not streamed yet
    gen_tstream_rest(&c->tst, c->sb.text, tp.content, &rest, &n_rest);
    if (tp.reasoning || n_rest) {
        json_t *ch = oai_chunk(g->q.kind, g->id, g->created, s->name, c->index, NULL, n_rest ? rest : NULL,
                               n_rest, NULL, NULL);
        if (tp.reasoning)
            json_object_set_new(json_object_get(json_array_get(json_object_get(ch, "choices"), 0), "delta"),
                                "reasoning_content", json_string(tp.reasoning));
        gen_queue_json(g, ch);
    }
    if (tp.calls) {
        json_t *chunks = oai_tool_call_chunks(g->id, g->created, s->name, c->index, tp.calls), *ch;
        size_t k;
        json_array_foreach(chunks, k, ch) gen_queue_json(g, json_incref(ch));
        json_decref(chunks);
    }
    tool_parsed_free(&tp);
    c->sb.emitted = c->sb.len; // the text went out as parsed above
}

// The non-streamed form of stream_tools: the choice's message gets the calls, content and reasoning.
static void choice_tools(gen_choice *c, json_t *ch) {
    tool_parsed tp;
    tools_of(c, &tp);
    json_t *msg = json_object_get(ch, "message");
    if (tp.calls) {
        oai_choice_set_tool_calls(ch, tp.calls, tp.content);
        tp.calls = NULL;
        if (!strcmp(c->finish_reason, "stop")) c->finish_reason = "tool_calls";
        else json_object_set_new(ch, "finish_reason", json_string(c->finish_reason));
    } else {
        json_object_set_new(msg, "content", json_string(tp.content ? tp.content : ""));
    }
    if (tp.reasoning) json_object_set_new(msg, "reasoning_content", json_string(tp.reasoning));
    tool_parsed_free(&tp);
}

// Closes a choice's text: flushes the detokenizer, releases the rest, queues the finish chunk.
static void close_text(gen_choice *c, const char *reason, int aborted) {
    gen_req *g = c->g;
    srv_model *s = g->s;
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
    if (oai_tools_active(&g->q) && g->q.stream && g->req && strcmp(reason, "error")) stream_tools(c, &reason);
    if (g->q.stream && g->req) {
        emit_stream(c, 1);
        if (strcmp(reason, "error")) {
            json_t *fin = oai_chunk(g->q.kind, g->id, g->created, s->name, c->index, NULL, NULL, 0, reason, NULL);
            if (g->wo && c->sb.which) // the matched stop string (vLLM's stop_reason), for wires that report it
                json_object_set_new(json_array_get(json_object_get(fin, "choices"), 0), "stop_reason",
                                    json_string(c->sb.which));
            gen_queue_json(g, fin);
        }
    }
}

static void lp_append_at(gen_choice *c, const samp_result *r, long offset);

static void lp_append(gen_choice *c, const samp_result *r) {
    lp_append_at(c, r, (long)(c->echo_len + c->sb.len)); // generated text follows the echoed prompt
}

// echo + logprobs: the first prompt token as OpenAI reports it (no logprob: nothing precedes it).
void gen_lp_first_prompt_token(gen_choice *c, int32_t tok) {
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
    srv_model *s = c->g->s;
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

static int gen_is_stop_id(const oai_req *q, int32_t t) {
    for (int i = 0; i < q->sx.n_stop_ids; i++)
        if (q->sx.stop_ids[i] == t) return 1;
    return 0;
}

static void on_token(gen_choice *c, const engine_event *ev) {
    gen_req *g = c->g;
    srv_model *s = g->s;
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
        int held = c->n_tokens <= g->q.sx.min_tokens; // min_tokens: no stop string starts in this token's text
        if (held) c->sb.search_from = (size_t)-1;
        if (n > 0 && oai_stopbuf_push(&c->sb, p, (size_t)n) == 1) {
            engine_cancel(s->eng, c->id, ENGINE_FINISH_STOP);
            close_text(c, "stop", 0);
        }
        if (p != buf) free(p);
        if (held) c->sb.search_from = c->sb.len;
        if (!c->text_done && gen_is_stop_id(&g->q, t)) { // stop_token_ids: its text stays, as vLLM's
            engine_cancel(s->eng, c->id, ENGINE_FINISH_STOP);
            close_text(c, "stop", 0);
        }
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
    srv_model *s = g->s;
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
        if (g->error && g->wo) {
            if (!g->ws) g->ws = g->wo->stream_new(g->wire_in);
            g->wo->stream_error(g->ws, &e, g->out);
        } else if (g->error) {
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
            gen_queue_json(g, oai_usage_chunk(g->q.kind, g->id, g->created, s->name, usage_json(g, n_out)));
        if (g->wo) {
            if (!g->ws) g->ws = g->wo->stream_new(g->wire_in);
            g->wo->stream_end(g->ws, g->out);
        } else {
            evbuffer_add(g->out, OAI_SSE_DONE, strlen(OAI_SSE_DONE));
        }
        g->ended = 1;
        mark_dirty(g);
        return;
    }
    struct evhttp_request *req = g->req;
    if (g->error) {
        g_log(g, g->error, "error");
        gen_detach(g);
        srv_send_error(&s->o, req, &e);
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
        if (g->wo && c->sb.which) json_object_set_new(ch, "stop_reason", json_string(c->sb.which)); // as above
        if (c->reason)
            json_object_set_new(json_object_get(ch, "message"), "reasoning_content",
                                rtext.n ? oai_json_text(rtext.p, rtext.n) : json_null());
        free(rtext.p), free(ctext.p);
        free(joined);
        c->lp = NULL;
        if (oai_tools_active(&g->q)) choice_tools(c, ch);
        json_array_append_new(choices, ch);
    }
    json_t *resp = oai_response(g->q.kind, g->id, g->created, s->name, choices, usage_json(g, n_out));
    if (g->wo && resp) { // another API on the wire: its reply, from the chat completion
        json_t *w = g->wo->from_chat(resp, g->wire_in);
        json_decref(resp);
        resp = w;
    }
    g_log(g, 200, g->ch[0].finish_reason);
    gen_detach(g);
    srv_send_json(&s->o, req, 200, resp);
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
        srv_log(&g->s->o, SRV_LOG_INFO, "request %s choice %d: deadline reached after %d tokens", g->id, c->index,
                c->n_tokens);
    engine_finish f = ev->finish;
    int cut = f == ENGINE_FINISH_SHUTDOWN || f == ENGINE_FINISH_SLO;
    close_text(c, cut ? "error" : finish_api(f), cut || f == ENGINE_FINISH_CANCELLED || f == ENGINE_FINISH_ERROR);
    if (g->n_live == 0) complete(g);
    else mark_dirty(g);
}

void gen_on_engine_events(srv_model *s) {
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
    gen_flush_dirty(s);
}

// --- connection close --------------------------------------------------------------------------------

void gen_on_close(struct evhttp_connection *conn, void *arg) {
    (void)conn;
    gen_req *g = arg;
    srv_model *s = g->s;
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
        srv_log(&s->o, SRV_LOG_DEBUG, "request %s: client went away, cancelling", g->id);
        for (int i = 0; i < g->n_choices; i++)
            if (g->ch[i].live && s->eng) engine_cancel(s->eng, g->ch[i].id, ENGINE_FINISH_CANCELLED);
    }
    gen_maybe_free(g);
}

// libevent notices a closed connection only when a write fails, so a client that leaves during a long
// prefill or a non-streamed generation would go unnoticed: peek at each waiting socket instead (called
// from a short periodic timer). A closed peer reads as 0 bytes (or an error); pipelined bytes are left
// in place.
void gen_check_disconnects(srv_model *s) {
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
            srv_conn_set_closecb(s->fe, conn, NULL, NULL);
            gen_on_close(conn, g); // cancels; g may be freed here
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
    if (s->dirty) gen_flush_dirty(s);
}

void gen_cancel_all(srv_model *s, engine_finish why) {
    for (gen_req *g = s->inflight; g; g = g->next)
        for (int i = 0; i < g->n_choices; i++)
            if (g->ch[i].live && s->eng) engine_cancel(s->eng, g->ch[i].id, why);
}

void gen_free_all(srv_model *s) {
    while (s->inflight) {
        gen_req *g = s->inflight;
        gen_detach(g);
        g_free(g);
    }
    s->dirty = NULL;
}
