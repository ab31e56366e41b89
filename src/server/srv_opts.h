// The server's options (the command line of `tachyon serve`), a leaf under every server file: each model's
// record and the shared front end hold a copy (server_run fills them; see server.h).
#ifndef TACHYON_SERVER_SRV_OPTS_H
#define TACHYON_SERVER_SRV_OPTS_H

#include <stddef.h>

#include "engine/engine.h"

enum { SRV_LOG_DEBUG = 0, SRV_LOG_INFO, SRV_LOG_WARN, SRV_LOG_ERROR };

struct srv_config;

typedef struct server_opts {
    const char *host;          // listen address ("127.0.0.1")
    int port;                  // 0 = any free port (the chosen one is logged)
    const char *api_key;       // NULL = no auth; else "Authorization: Bearer KEY" on every route except /health,
                               // the dashboard shell (/) and public_routes
    const char *api_key_file;  // NULL = none; else "KEY TENANT [rpm=N] [tpm=N] [share=W]" lines (see
                               // src/tenant/tenant_keys.h), reloaded on SIGHUP; api_key joins it as "default"
    const char *public_routes; // comma list of paths served without the key (e.g. "/metrics,/stats"), or NULL
    const char *allowed_hosts; // comma list of Host names accepted besides loopback names and the bind address;
                               // "*" = any; NULL = those only (any Host when bound to 0.0.0.0 or ::)
    const char *cors;          // NULL = off; "*" or a comma list of origins echoed in Access-Control-Allow-Origin
    size_t max_body;           // bytes; larger bodies → 413
    size_t max_headers;        // bytes of request line + headers
    int http_timeout;          // seconds a connection may stay idle between requests, or a write may stall
    // connection hardening (srv_conn.c)
    double read_timeout;       // seconds to receive a whole request (headers + body) from its first byte → 408
    int max_connections;       // open connections at most; beyond → 503 and close (0 = auto from RLIMIT_NOFILE)
    int max_conn_per_client;   // from 3/4 of max_connections on, open connections per client address at most
                               // (0 = auto: max_connections / 8, at least 16)
    size_t max_body_buffer;    // bytes of unfinished requests buffered across all connections; beyond → 503
    double sse_ping;           // seconds of silence on a stream before a ": ping" comment (0 = never)
    double request_timeout;    // seconds per generation request (0 = none)
    double e2e_slo;            // default end-to-end deadline per generation request, seconds (0 = none); the
                               // request's "timeout" may shorten it (the shortest of the three applies)
    double shutdown_grace;     // seconds to drain on SIGTERM/SIGINT
    const char *model_path;
    const char *draft_model_path; // (optional) --draft-model: loaded next to the target, set as eng.draft_model
    const char *served_name;   // NULL = model file basename without ".gguf"
    const char *chat_template; // a built-in family by name; NULL = the model's own template (Jinja)
    const char *chat_template_file; // a Jinja chat template file rendered instead of the model's, or NULL
    const struct srv_config *cfg; // NULL: the one model at model_path; else every model and router alias
                                  // (server/srv_config.h; borrowed, finished; model_path etc. are ignored)
    int reasoning_format;      // SRV_REASONING_*: where <think>…</think> output goes (see server/reasoning.h)
    engine_opts eng;           // eog_ids are filled in by the server
    int log_level;             // SRV_LOG_*
    int pooling;               // ENGINE_EMBED_MEAN (default) or ENGINE_EMBED_LAST for /v1/embeddings
    int lenient;               // 1: unknown / unsupported request fields are dropped with a logged warning
    int any_model;             // 1 (--any-model-name): a request naming an unknown model goes to the first model
                               // instead of a 400
    int truncation;            // context overflow when a request does not say: 0 refuse (context_length_exceeded),
                               // 1 auto (drop the oldest turns / middle-out; gen_trunc.c)
    const char *summarize_with; // (optional) a served model's name: truncation "auto" replaces the dropped
                                // chat turns with a summary it generates (gen_summ.c); NULL = plain truncation
} server_opts;

enum {
    SRV_REASONING_AUTO = 0, // reasoning_content when the chat template is a reasoning one (qwen3, deepseek)
    SRV_REASONING_NONE,     // always inline in content, tags included
    SRV_REASONING_PARSE,    // always split, whatever the template ("deepseek", llama.cpp's name)
};

void server_opts_default(server_opts *o);

#endif
