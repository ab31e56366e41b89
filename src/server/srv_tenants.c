// API keys → tenants, per-tenant rate limits and usage, and the SIGHUP reload of --api-key-file.
//  - The key table (tenant/tenant_keys.c) is replaced whole on SIGHUP: the new file is parsed completely
//    first; a bad file keeps the old table and logs why. Requests in flight are untouched: they refer to
//    their tenant's state by a stable id, and tenant states (buckets, counters) are kept by name for the
//    life of the process, so a reload neither resets a tenant's limits nor drops its usage.
//  - Rate limits are token buckets (tenant/ratelimit.c): rpm takes 1 per request; tpm takes prompt tokens
//    + max_tokens of every choice at admission (a request can never overrun its tenant's allowance while
//    it runs) and the unused part of max_tokens comes back when the request ends. A refused request gets
//    429 with Retry-After (seconds until both buckets allow it) and OpenAI's x-ratelimit-* headers, which
//    admitted requests get too.
//  - Metrics labels are bounded: the first SRV_TENANT_LABELS tenant names get their own label, later ones
//    share tenant="other".
#include <event2/event.h>
#include <event2/keyvalq_struct.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <xxhash.h>

#include "common/timeutil.h"
#include "server/srv_log.h"
#include "server/srv_tenants.h"
#include "tenant/ratelimit.h"
#include "tenant/tenant_keys.h"

#define SRV_TENANT_LABELS 32
#define SRV_TENANT_STATES 4096 // distinct tenant names over the process's life (reloads included)

typedef struct tstate {
    char name[TN_NAME_MAX + 1];
    long rpm, tpm;         // current limits (0 = unlimited)
    float share;
    uint64_t salt;         // prefix-cache salt (0 when no key file: the clients of --api-key alone share one cache)
    rl_bucket req, tok;
    int in_flight;
    uint64_t n_req, n_limited, n_prompt, n_gen;
    metric *m_req, *m_limited, *m_prompt, *m_gen;
} tstate;

struct srv_tenants {
    tn_table *tab;      // owned; replaced on reload
    int *st_of;         // (tab->n_tenants) index into st of each table tenant
    tstate *st;         // (n_st) owned, never shrinks: ids are st index + 1
    int n_st;
    int n_labels;       // tenants with their own metrics label
    struct event *ev_hup;
    uint64_t reloads, reload_errors;
};

// --- tenant states -----------------------------------------------------------------------------------

static void add_metrics(server *s, tstate *t, int own_label) {
    char lab[96];
    snprintf(lab, sizeof lab, "tenant=\"%s\"", own_label ? t->name : "other");
    metrics *r = s->reg;
    static const struct { const char *name, *help; } M[4] = {
        {"tachyon:tenant_requests_total", "Generation requests admitted, by tenant"},
        {"tachyon:tenant_rate_limited_total", "Requests refused with 429 by the tenant's rate limits"},
        {"tachyon:tenant_prompt_tokens_total", "Prompt tokens of finished requests, by tenant"},
        {"tachyon:tenant_generation_tokens_total", "Generated tokens of finished requests, by tenant"},
    };
    metric **dst[4] = {&t->m_req, &t->m_limited, &t->m_prompt, &t->m_gen};
    for (int i = 0; i < 4; i++) {
        metric *m = metrics_find(r, M[i].name, lab);
        *dst[i] = m ? m : metrics_add(r, METRIC_COUNTER, M[i].name, lab, M[i].help, NULL, 0);
    }
}

// The state of tenant `name` (created on first sight), or -1 when too many names were seen.
static int state_of(server *s, struct srv_tenants *T, const tn_tenant *x, int salted, double now) {
    for (int i = 0; i < T->n_st; i++)
        if (!strcmp(T->st[i].name, x->name)) {
            tstate *t = &T->st[i];
            if (t->rpm != x->rpm) rl_set_limit(&t->req, (double)x->rpm, now);
            if (t->tpm != x->tpm) rl_set_limit(&t->tok, (double)x->tpm, now);
            t->rpm = x->rpm, t->tpm = x->tpm, t->share = (float)x->share;
            return i;
        }
    if (T->n_st >= SRV_TENANT_STATES) return -1;
    tstate *t = &T->st[T->n_st];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", x->name);
    t->rpm = x->rpm, t->tpm = x->tpm, t->share = (float)x->share;
    rl_init(&t->req, (double)x->rpm, now);
    rl_init(&t->tok, (double)x->tpm, now);
    if (salted) t->salt = XXH3_64bits_withSeed(t->name, strlen(t->name), 0x7e4a47) | 1; // never 0 (= unsalted)
    add_metrics(s, t, T->n_labels < SRV_TENANT_LABELS);
    if (T->n_labels < SRV_TENANT_LABELS) T->n_labels++;
    return T->n_st++;
}

// Installs table tab (owned from here on) and maps its tenants to states. 0, or -1 (tab not taken).
static int install(server *s, tn_table *tab, tc_err *err) {
    struct srv_tenants *T = s->tenants;
    int *map = malloc((size_t)(tab->n_tenants ? tab->n_tenants : 1) * sizeof *map);
    if (!map) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    double now = tc_now();
    for (int i = 0; i < tab->n_tenants; i++) {
        if ((map[i] = state_of(s, T, &tab->tenants[i], s->o.api_key_file != NULL, now)) < 0) {
            free(map);
            return tc_err_set(err, TC_ERR_INVALID, "more than %d distinct tenants", SRV_TENANT_STATES);
        }
    }
    tn_free(T->tab);
    free(T->st_of);
    T->tab = tab;
    T->st_of = map;
    return 0;
}

// The key file (if any) plus --api-key as tenant "default", parsed in full. *out owned.
static int load_table(server *s, tn_table **out, tc_err *err) {
    *out = NULL;
    int rc = s->o.api_key_file ? tn_load(s->o.api_key_file, out, err) : 0;
    if (!rc && s->o.api_key) rc = tn_add_key(out, s->o.api_key, "default", err);
    if (rc) {
        tn_free(*out);
        *out = NULL;
    }
    return rc;
}

static void hup_cb(evutil_socket_t sig, short what, void *arg) {
    (void)sig, (void)what;
    server *s = arg;
    struct srv_tenants *T = s->tenants;
    tn_table *tab;
    tc_err err = {0};
    if (load_table(s, &tab, &err) || install(s, tab, &err)) {
        if (tab && T->tab != tab) tn_free(tab);
        T->reload_errors++;
        srv_log(&s->o, SRV_LOG_ERROR, "SIGHUP: keeping the previous API keys: %s", err.msg);
        return;
    }
    T->reloads++;
    srv_log(&s->o, SRV_LOG_INFO, "SIGHUP: reloaded %s: %d keys, %d tenants", s->o.api_key_file ? s->o.api_key_file : "keys",
            tab->n_keys, tab->n_tenants);
}

int srv_tenants_init(server *s, tc_err *err) {
    if (!s->o.api_key_file && !s->o.api_key) return 0;
    struct srv_tenants *T = calloc(1, sizeof *T);
    if (!T || !(T->st = calloc(SRV_TENANT_STATES, sizeof *T->st))) {
        free(T);
        return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    }
    s->tenants = T;
    tn_table *tab;
    int rc = load_table(s, &tab, err);
    if (!rc && (rc = install(s, tab, err))) tn_free(tab);
    if (rc) return rc;
    if (s->o.api_key_file) {
        T->ev_hup = evsignal_new(s->base, SIGHUP, hup_cb, s);
        if (!T->ev_hup || event_add(T->ev_hup, NULL)) return tc_err_set(err, TC_ERR, "cannot install the SIGHUP handler");
        srv_log(&s->o, SRV_LOG_INFO, "API keys: %d keys, %d tenants from %s (SIGHUP reloads it)", tab->n_keys,
                tab->n_tenants, s->o.api_key_file);
    }
    return 0;
}

void srv_tenants_free(server *s) {
    struct srv_tenants *T = s->tenants;
    if (!T) return;
    if (T->ev_hup) event_free(T->ev_hup);
    tn_free(T->tab);
    free(T->st_of);
    free(T->st);
    free(T);
    s->tenants = NULL;
}

// --- per request -------------------------------------------------------------------------------------

const char *srv_request_key(struct evhttp_request *req) {
    const struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *h = evhttp_find_header(in, "Authorization");
    if (h && !strncasecmp(h, "Bearer ", 7)) return h + 7;
    return evhttp_find_header(in, "x-api-key");
}

// Index into T->st of the request's key, or -1 (no or unknown key).
static int lookup(server *s, struct evhttp_request *req) {
    struct srv_tenants *T = s->tenants;
    const char *k = srv_request_key(req);
    if (!k) return -1;
    int i = tn_lookup(T->tab, k, strlen(k));
    return i < 0 ? -1 : T->st_of[i];
}

int srv_tenants_auth_ok(server *s, struct evhttp_request *req) { return !s->tenants || lookup(s, req) >= 0; }

uint64_t srv_tenant_salt(const srv_tenant_ref *t, const char *cache_salt, size_t len) {
    if (!cache_salt || !len) return t->salt;
    return XXH3_64bits_withSeed(cache_salt, len, t->salt ^ 0x5a17) | 1;
}

// A Go-style duration as OpenAI sends in x-ratelimit-reset-*: "250ms", "1.5s", "6m0s".
static void duration(char *buf, size_t n, double sec) {
    if (sec < 1) snprintf(buf, n, "%dms", (int)ceil(sec * 1000));
    else if (sec < 60) snprintf(buf, n, "%gs", ceil(sec * 10) / 10);
    else snprintf(buf, n, "%dm%ds", (int)(sec / 60), (int)fmod(ceil(sec), 60));
}

static void add_headers(struct evhttp_request *req, const char *what, rl_bucket *b, long limit, double now) {
    if (limit <= 0) return;
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    char name[64], v[48];
    snprintf(name, sizeof name, "x-ratelimit-limit-%s", what);
    snprintf(v, sizeof v, "%ld", limit);
    evhttp_add_header(h, name, v);
    snprintf(name, sizeof name, "x-ratelimit-remaining-%s", what);
    snprintf(v, sizeof v, "%ld", (long)floor(rl_remaining(b, now)));
    evhttp_add_header(h, name, v);
    snprintf(name, sizeof name, "x-ratelimit-reset-%s", what);
    duration(v, sizeof v, rl_reset(b, now));
    evhttp_add_header(h, name, v);
}

int srv_tenant_admit(server *s, struct evhttp_request *req, srv_tenant_ref *ref, double tokens, oai_err *e) {
    memset(ref, 0, sizeof *ref);
    struct srv_tenants *T = s->tenants;
    if (!T) return 0;
    int i = lookup(s, req);
    if (i < 0) // the key was removed by a reload since the access check
        return oai_err_set(e, 401, "invalid_request_error", "invalid_api_key", NULL,
                           "Incorrect or missing API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'");
    tstate *t = &T->st[i];
    double now = tc_now();
    double wr = rl_wait(&t->req, 1, now), wt = rl_wait(&t->tok, tokens, now);
    if (wr != 0 || wt != 0) {
        t->n_limited++;
        if (t->m_limited) metric_inc(t->m_limited, 1);
        add_headers(req, "requests", &t->req, t->rpm, now);
        add_headers(req, "tokens", &t->tok, t->tpm, now);
        if (wt < 0)
            return oai_err_set(e, 429, "tokens", "rate_limit_exceeded", NULL,
                               "Request too large for tenant %s: tokens per minute limit %ld, requested %.0f (prompt + "
                               "max_tokens). Lower max_tokens or the prompt.", t->name, t->tpm, tokens);
        double wait = wr > wt ? wr : wt;
        char v[32];
        snprintf(v, sizeof v, "%d", (int)ceil(wait) > 0 ? (int)ceil(wait) : 1);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", v);
        snprintf(v, sizeof v, "%d", (int)ceil(wait * 1000));
        evhttp_add_header(evhttp_request_get_output_headers(req), "retry-after-ms", v);
        int by_req = wr != 0;
        return oai_err_set(e, 429, by_req ? "requests" : "tokens", "rate_limit_exceeded", NULL,
                           "Rate limit reached for tenant %s on %s per minute: limit %ld, remaining %ld, requested "
                           "%.0f. Please try again in %.3gs.", t->name, by_req ? "requests" : "tokens",
                           by_req ? t->rpm : t->tpm, (long)floor(rl_remaining(by_req ? &t->req : &t->tok, now)),
                           by_req ? 1.0 : tokens, wait);
    }
    rl_take(&t->req, 1, now);
    rl_take(&t->tok, tokens, now);
    add_headers(req, "requests", &t->req, t->rpm, now);
    add_headers(req, "tokens", &t->tok, t->tpm, now);
    t->n_req++;
    t->in_flight++;
    if (t->m_req) metric_inc(t->m_req, 1);
    ref->id = i + 1;
    ref->share = t->share;
    ref->salt = t->salt;
    ref->reserved = tokens;
    ref->admitted = 1;
    return 0;
}

void srv_tenant_end(server *s, srv_tenant_ref *ref, int n_prompt, int n_out) {
    struct srv_tenants *T = s->tenants;
    if (!T || !ref->admitted) return;
    ref->admitted = 0;
    tstate *t = &T->st[ref->id - 1];
    rl_refund(&t->tok, ref->reserved - (double)n_prompt - (double)n_out, tc_now());
    t->in_flight--;
    t->n_prompt += (uint64_t)n_prompt;
    t->n_gen += (uint64_t)n_out;
    if (t->m_prompt) metric_inc(t->m_prompt, n_prompt);
    if (t->m_gen) metric_inc(t->m_gen, n_out);
}

json_t *srv_tenants_stats(server *s) {
    struct srv_tenants *T = s->tenants;
    json_t *j = json_object();
    if (!T) return j;
    double now = tc_now();
    for (int i = 0; i < T->n_st; i++) {
        tstate *t = &T->st[i];
        json_t *x = json_pack("{s:I,s:I,s:I,s:I,s:i,s:f}", "requests", (json_int_t)t->n_req, "rate_limited",
                              (json_int_t)t->n_limited, "prompt_tokens", (json_int_t)t->n_prompt, "generation_tokens",
                              (json_int_t)t->n_gen, "in_flight", t->in_flight, "share", (double)t->share);
        if (t->rpm) json_object_set_new(x, "remaining_requests", json_integer((json_int_t)floor(rl_remaining(&t->req, now))));
        if (t->tpm) json_object_set_new(x, "remaining_tokens", json_integer((json_int_t)floor(rl_remaining(&t->tok, now))));
        // bounded like the metrics: past SRV_TENANT_LABELS names, tenants are summed under "other"
        const char *name = i < SRV_TENANT_LABELS ? t->name : "other";
        json_t *prev = json_object_get(j, name);
        if (prev) {
            static const char *sum[] = {"requests", "rate_limited", "prompt_tokens", "generation_tokens", "in_flight"};
            for (int k = 0; k < 5; k++)
                json_object_set_new(prev, sum[k], json_integer(json_integer_value(json_object_get(prev, sum[k])) +
                                                               json_integer_value(json_object_get(x, sum[k]))));
            json_decref(x);
        } else {
            json_object_set_new(j, name, x);
        }
    }
    return j;
}
