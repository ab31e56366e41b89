// One served model's record: its model and vocabulary, engine, metrics and requests in flight. The front
// end (srv_front.h) owns one per served model in models[]; handlers get the record of the model a request
// goes to and reach the shared parts through fe. Loaded on the loader thread, used on the loop thread.
#ifndef TACHYON_SERVER_SRV_MODEL_H
#define TACHYON_SERVER_SRV_MODEL_H

#include <event2/event.h>
#include <sched.h>
#include <stdint.h>

#include "common/err.h"
#include "engine/engine.h"
#include "grammar/gram.h"
#include "model/model.h"
#include "server/srv_front.h"
#include "server/srv_metrics.h"
#include "server/srv_opts.h"
#include "server/tool_fmt.h"
#include "tokenizer/chat.h"
#include "tokenizer/chat_tmpl.h"
#include "tokenizer/tokenizer.h"

struct emb_req;
struct gen_req;
struct srv_model;

// The target of an engine event (engine_req.user points at one): gen.c's choices leave fn NULL; other
// handlers (embed.c) set fn and get their events through it.
typedef struct srv_ev_sink {
    void (*fn)(struct srv_model *s, struct srv_ev_sink *self, const engine_event *ev);
} srv_ev_sink;

typedef struct srv_model {
    server_opts o; // the server-wide options with this model's own (path, name, template, engine) set
    server *fe;    // borrowed: the front end that owns this record
    struct event *ev_engine; // the engine's event fd on the loop, once loaded
    tc_err load_err;
    // set by the loader thread, read by the loop after the front end's ev_loaded
    model *m;
    model *draft_m; // (optional) the draft model (--draft-model), owned
    tok_vocab *vocab;
    gram_vocab *gvocab; // the vocabulary trie for grammars (srv_grammar.c), owned
    engine *eng;
    int32_t *eog_ids; // (n_eog)
    int n_eog;
    chat_family chat;
    char *chat_src; // template text from the GGUF (or --chat-template-file), or NULL
    chat_tmpl *tmpl; // owned: chat_src rendered as Jinja, NULL when a built-in family renders (--chat-template)
    tool_fmt tools;  // how the model writes tool calls: from the markers of its Jinja template wherever they
                     // appear, else the family's
    int tool_specials; // 1: tools' markers are control tokens: with tools, generated text keeps control tokens
    char bos_text[64];
    int ctx_size;   // effective per-request context limit (prompt + output tokens), as the engine enforces it
    int ctx_asked;  // what --ctx-size / the model asked for (ctx_size is lower when the KV pool is small)
    char name[256]; // served model name
    char basename[256];
    uint64_t seed_ctr;
    // in-flight generation requests, and those with bytes to flush this turn
    struct gen_req *inflight, *dirty;
    int n_inflight;
    int n_writing; // generation replies whose last bytes are not yet written (drain waits for them)
    struct emb_req *emb_inflight; // embed.c: in-flight embedding requests (counted in n_inflight)
    srv_metrics mt;
    int pinned; // 1: this model's engine and compute threads run on `cpus` only (several models, enough cores)
    cpu_set_t cpus;
} srv_model;

// 1 if a request's "model" (NULL or "" = any) names this model: its served name, its file's basename (with
// or without .gguf) or a router alias (srv_route_pick chose this model for it).
int srv_model_ok(const srv_model *s, const char *name);
// What a request's "model" may say to reach s: srv_model_ok, or anything with --any-model-name.
int srv_model_serves(const srv_model *s, const char *name);
// Frees what the record owns (its engine event, engine, vocabularies, models, metrics) and the record.
void srv_model_free(srv_model *s);

#endif
