// Shared by the two halves of generation requests: gen.c (engine events → text → SSE / JSON replies,
// lifetime) and gen_launch.c (request parsing, prompt preparation, submission). Internal to src/server.
#ifndef TACHYON_SERVER_GEN_IMPL_H
#define TACHYON_SERVER_GEN_IMPL_H

#include "server/gen_prompt.h"
#include "server/gen_summ.h"
#include "server/gen_tstream.h"
#include "server/reasoning.h"
#include "server/srv_model.h"
#include "server/srv_tenants.h"
#include "server/wire.h"

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
    int reason;       // 1: <think>…</think> goes to reasoning_content (gen_reasoning_on)
    rsn_split rs;     // streaming split of the released text (reason)
    gen_tstream tst;  // tools in play, streamed: the content released before the choice ends
} gen_choice;

typedef struct gen_req {
    srv_model *s;
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
    gram *gram;            // the compiled grammar every choice follows (a reference), or NULL
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
    // the API on the wire (wire.h): NULL ops for OpenAI's own; else the request as the client sent it and the
    // streaming state of the translation
    const wire_ops *wo;
    json_t *wire_in;   // owned: the API's body (the chat path parses its translation)
    wire_stream *ws;   // owned: created with the first streamed chunk
} gen_req;

// gen.c, for gen_launch.c
void gen_free_ids(gen_req *g);
void gen_detach(gen_req *g);      // the reply is going out: unlink from the connection and the write count
void gen_maybe_free(gen_req *g);  // frees g once no choice is live and nothing references it
void gen_queue_json(gen_req *g, json_t *j); // one SSE data event (flushed by gen_flush_dirty)
void gen_flush_dirty(srv_model *s);
json_t *gen_lp_new(const gen_req *g);
int gen_reasoning_on(const srv_model *s, const oai_req *q);
void gen_lp_first_prompt_token(gen_choice *c, int32_t tok);
void gen_on_close(struct evhttp_connection *conn, void *arg); // the client went away

#endif
