// API keys → tenants, rate limits and usage, the SIGHUP reload of --api-key-file: the front end's
// (server), on its loop thread.
#ifndef TACHYON_SERVER_SRV_TENANTS_H
#define TACHYON_SERVER_SRV_TENANTS_H

#include <event2/http.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "common/err.h"
#include "server/oai_err.h"
#include "server/srv_front.h"

// A generation request's tenant (srv_tenants.c): filled at admission, settled when the request is freed.
typedef struct srv_tenant_ref {
    int id;          // stable tenant id (1-based, kept across key-file reloads); 0 = no tenant (no keys)
    float share;     // fair-share weight (sched_fair.c)
    uint64_t salt;   // prefix-cache salt of the tenant; 0 = the shared cache
    double reserved; // tokens-per-minute units taken at admission (prompt + max_tokens per choice)
    int admitted;    // 1: counted against the tenant; srv_tenant_end settles it
} srv_tenant_ref;

// Loads --api-key-file (merged with --api-key as tenant "default") and installs the SIGHUP handler. 0 or a
// negative TC_ERR_* (message in err). Without either option s->tenants stays NULL and nothing changes.
int srv_tenants_init(server *s, tc_err *err);
void srv_tenants_free(server *s);
// The request's API key: "Authorization: Bearer KEY", else "x-api-key: KEY" (Anthropic's header); NULL if
// neither. Borrowed from the request's headers.
const char *srv_request_key(struct evhttp_request *req);
// 1 if the request's key (srv_request_key) names a known key (or no keys are configured), else 0.
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

#endif
