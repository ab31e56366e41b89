#include "loadgen/lg_client.h"
#include "loadgen/lg_tenant.h"

#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "loadgen/lg_rng.h"
#include "loadgen/lg_sse.h"
#include "common/timeutil.h"

struct lg_pool {
    CURLSH *share;
};

// One request in flight. rec indexes run->recs (which may be reallocated while the transfer runs).
typedef struct xfer {
    struct runner *rn;
    struct xfer *prev, *next; // the runner's list of transfers in flight
    CURL *easy;
    struct curl_slist *headers;
    char *body;           // owned request body
    size_t rec;           // index into run->recs
    int64_t idx;          // workload index
    lg_sse sse;
    double t_now;         // arrival time of the bytes being parsed, seconds since t0
    double t_last;        // previous content chunk, seconds since t0
    double t_done;        // when [DONE] arrived, seconds since t0; < 0 before
    double t_byte;        // last byte received, seconds since t0
    int status;           // HTTP status once known
    int saw_usage;
    int64_t usage_in, usage_out;
    int saw_pred;
    int64_t pred_acc, pred_rej;
    char errbody[256];    // first bytes of a non-2xx response body
    size_t errbody_len;
    char curl_err[CURL_ERROR_SIZE];
    tc_err perr;          // parse / stream error that aborted the transfer
    int failed_parse;
} xfer;

typedef struct runner {
    const lg_target *t;
    const lg_run_cfg *cfg;
    lg_workload *wl;
    lg_run *run;
    CURLM *multi;
    char url[2048];
    double t0;            // monotonic seconds
    int want_text;
    int inflight;
    xfer *active;         // transfers in flight (doubly linked)
    uint8_t *done;        // (n_done,) 1 when workload index i has finished
    size_t n_done;
} runner;

static lg_record *rec_of(xfer *x) { return &x->rn->run->recs[x->rec]; }

// --- stream handling

static int on_event(void *ud, const char *data, size_t len) {
    xfer *x = ud;
    lg_record *r = rec_of(x);
    lg_chunk c;
    if (lg_chunk_parse(&c, data, len, x->rn->t->chat, &x->perr)) {
        x->failed_parse = 1;
        return TC_ERR_FORMAT;
    }
    if (c.done) {
        x->t_done = x->t_now;
        return 0;
    }
    int rc = 0;
    if (c.id && !r->id) r->id = strdup(c.id);
    if (c.model && !r->model) r->model = strdup(c.model);
    if (c.content_len) {
        if (r->n_chunks == 0) r->t_first = x->t_now;
        else rc = lg_record_push_itl(r, x->t_now - x->t_last);
        x->t_last = x->t_now;
        r->n_chunks++;
        if (x->rn->want_text && !rc) {
            size_t need = r->text_len + c.content_len + 1;
            if (need > r->text_cap) {
                size_t cap = r->text_cap ? r->text_cap : 256;
                while (cap < need) cap *= 2;
                char *p = realloc(r->text, cap);
                if (p) r->text = p, r->text_cap = cap;
                else rc = TC_ERR_NOMEM;
            }
            if (!rc) {
                memcpy(r->text + r->text_len, c.content, c.content_len);
                r->text_len += c.content_len;
                r->text[r->text_len] = 0;
            }
        }
    }
    if (c.has_usage) {
        x->saw_usage = 1;
        x->usage_in = c.prompt_tokens;
        x->usage_out = c.completion_tokens;
        if (c.has_pred) x->saw_pred = 1, x->pred_acc = c.accepted_pred, x->pred_rej = c.rejected_pred;
    }
    lg_chunk_clear(&c);
    if (rc) {
        tc_err_set(&x->perr, rc, "out of memory");
        x->failed_parse = 1;
    }
    return rc;
}

// Response headers: keeps x-tachyon-routed-model (a router alias's choice) for the per-model breakdown.
static size_t on_header(char *ptr, size_t size, size_t nmemb, void *ud) {
    xfer *x = ud;
    size_t n = size * nmemb;
    static const char name[] = "x-tachyon-routed-model:";
    size_t k = sizeof name - 1;
    if (n > k && !strncasecmp(ptr, name, k)) {
        lg_record *r = rec_of(x);
        const char *v = ptr + k, *end = ptr + n;
        while (v < end && (*v == ' ' || *v == '\t')) v++;
        while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ')) end--;
        free(r->routed_model);
        r->routed_model = strndup(v, (size_t)(end - v)); // NULL on OOM: the breakdown falls back to "model"
    }
    return n;
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud) {
    xfer *x = ud;
    size_t n = size * nmemb;
    x->t_now = tc_now() - x->rn->t0;
    x->t_byte = x->t_now;
    if (!x->status) {
        long code = 0;
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
        x->status = (int)code;
    }
    if (x->status < 200 || x->status >= 300) { // keep the start of the error body for the message
        size_t k = sizeof x->errbody - 1 - x->errbody_len;
        if (k > n) k = n;
        memcpy(x->errbody + x->errbody_len, ptr, k);
        x->errbody_len += k;
        x->errbody[x->errbody_len] = 0;
        return n;
    }
    if (lg_sse_feed(&x->sse, ptr, n, &x->perr)) {
        x->failed_parse = 1;
        return 0; // aborts the transfer
    }
    return n;
}

// --- request lifecycle

static void xfer_free(xfer *x) {
    if (!x) return;
    if (x->prev) x->prev->next = x->next;
    else if (x->rn->active == x) x->rn->active = x->next;
    if (x->next) x->next->prev = x->prev;
    if (x->easy) {
        curl_multi_remove_handle(x->rn->multi, x->easy);
        curl_easy_cleanup(x->easy);
    }
    curl_slist_free_all(x->headers);
    lg_sse_free(&x->sse);
    free(x->body);
    free(x);
}

static int push_record(lg_run *run, int64_t index, size_t *pos) {
    if (run->n == run->cap) {
        size_t cap = run->cap ? run->cap * 2 : 256;
        lg_record *p = realloc(run->recs, cap * sizeof *p);
        if (!p) return TC_ERR_NOMEM;
        run->recs = p;
        run->cap = cap;
    }
    *pos = run->n++;
    memset(&run->recs[*pos], 0, sizeof run->recs[*pos]);
    run->recs[*pos].index = index;
    run->recs[*pos].t_first = -1;
    run->recs[*pos].tenant = -1;
    return 0;
}

static void set_error(lg_record *r, const char *fmt, const char *a, const char *b) {
    char buf[600];
    snprintf(buf, sizeof buf, fmt, a, b);
    free(r->error);
    r->error = strdup(buf);
}

// Starts request idx now. A failure to build it is recorded as a failed request.
static int dispatch(runner *rn, int64_t idx, tc_err *err) {
    size_t pos;
    if (push_record(rn->run, rn->cfg->warmup ? -idx - 1 : idx, &pos))
        return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    lg_record *r = &rn->run->recs[pos];
    lg_workload_class(rn->wl, idx, &r->has_priority, &r->priority, &r->len_class);
    xfer *x = calloc(1, sizeof *x);
    if (!x) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    x->rn = rn;
    x->rec = pos;
    x->idx = idx;
    x->t_done = -1;
    lg_sse_init(&x->sse, on_event, x);
    tc_err berr = {0};
    int64_t est = 0;
    if (lg_workload_body(rn->wl, idx, &x->body, &est, &berr)) {
        r->t_send = r->t_end = tc_now() - rn->t0;
        set_error(r, "building request: %s%s", berr.msg, "");
        rn->done[idx] = 1;
        xfer_free(x);
        return 0;
    }
    r->input_tokens = est;
    x->easy = curl_easy_init();
    x->headers = curl_slist_append(NULL, "Content-Type: application/json");
    x->headers = curl_slist_append(x->headers, "Accept: text/event-stream");
    x->headers = curl_slist_append(x->headers, "Expect:"); // no 100-continue round trip for large bodies
    const char *key = rn->t->api_key;
    if ((r->tenant = lg_tenant_of(rn->t->tenants, idx)) >= 0) key = rn->t->tenants->key[r->tenant];
    if (key) {
        char auth[1024];
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
        x->headers = curl_slist_append(x->headers, auth);
    }
    if (!x->easy || !x->headers) {
        xfer_free(x);
        return tc_err_set(err, TC_ERR_NOMEM, "curl_easy_init failed");
    }
    CURL *e = x->easy;
    curl_easy_setopt(e, CURLOPT_URL, rn->url);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)strlen(x->body));
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->curl_err);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    if (rn->t->pool) curl_easy_setopt(e, CURLOPT_SHARE, rn->t->pool->share);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, NULL);
    if (rn->cfg->timeout > 0) curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(rn->cfg->timeout * 1e3));
    r->t_send = tc_now() - rn->t0;
    if (curl_multi_add_handle(rn->multi, e) != CURLM_OK) {
        xfer_free(x);
        return tc_err_set(err, TC_ERR, "curl_multi_add_handle failed");
    }
    x->next = rn->active;
    if (rn->active) rn->active->prev = x;
    rn->active = x;
    rn->inflight++;
    if (rn->inflight > rn->run->max_inflight) rn->run->max_inflight = rn->inflight;
    return 0;
}

// A transfer ended (successfully or not): fill in its record, tell the workload, free it.
static int finish(runner *rn, xfer *x, CURLcode res, tc_err *err) {
    lg_record *r = rec_of(x);
    double now = tc_now() - rn->t0;
    if (!x->status) {
        long code = 0;
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
        x->status = (int)code;
    }
    r->http_status = x->status;
    if (x->failed_parse) {
        set_error(r, "%s%s", x->perr.msg, "");
    } else if (res != CURLE_OK) {
        set_error(r, "%s: %s", curl_easy_strerror(res), x->curl_err[0] ? x->curl_err : "");
    } else if (x->status < 200 || x->status >= 300) {
        char st[32];
        snprintf(st, sizeof st, "HTTP %d", x->status);
        set_error(r, "%s: %s", st, x->errbody);
    } else {
        int rc = lg_sse_finish(&x->sse, &x->perr);
        if (rc) set_error(r, "%s%s", x->perr.msg, "");
        else if (x->t_done < 0) set_error(r, "%s%s", "stream ended without data: [DONE]", "");
        else r->ok = 1;
    }
    r = rec_of(x); // on_event may not realloc recs, but keep the pattern safe
    r->t_end = r->ok ? x->t_done : now;
    if (x->saw_usage) {
        r->input_tokens = x->usage_in;
        r->output_tokens = x->usage_out;
        r->usage_from_server = 1;
        r->has_pred = x->saw_pred, r->accepted_pred = x->pred_acc, r->rejected_pred = x->pred_rej;
    } else {
        r->output_tokens = r->n_chunks;
    }
    lg_record_finalize(r);
    rn->done[x->idx] = 1;
    rn->inflight--;
    int rc = 0;
    if (rn->want_text) rc = lg_workload_complete(rn->wl, x->idx, r->ok ? r->text : "", r->ok ? r->text_len : 0, err);
    xfer_free(x);
    return rc;
}

// --- connection pool

int lg_pool_init(lg_pool **out, tc_err *err) {
    lg_pool *p = calloc(1, sizeof *p);
    if (!p || !(p->share = curl_share_init())) {
        free(p);
        return tc_err_set(err, TC_ERR_NOMEM, "curl_share_init failed");
    }
    curl_share_setopt(p->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
    curl_share_setopt(p->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    *out = p;
    return 0;
}

void lg_pool_free(lg_pool *p) {
    if (!p) return;
    curl_share_cleanup(p->share);
    free(p);
}

// --- the event loop

static void build_url(runner *rn) {
    const char *base = rn->t->url;
    size_t n = strlen(base);
    while (n && base[n - 1] == '/') n--;
    const char *path = rn->t->chat ? "/chat/completions" : "/completions";
    int has_v1 = n >= 3 && !strncmp(base + n - 3, "/v1", 3);
    snprintf(rn->url, sizeof rn->url, "%.*s%s%s", (int)n, base, has_v1 ? "" : "/v1", path);
}

static int grow_done(runner *rn, int64_t idx) {
    if ((size_t)idx < rn->n_done) return 0;
    size_t n = rn->n_done ? rn->n_done : 1024;
    while (n <= (size_t)idx) n *= 2;
    uint8_t *p = realloc(rn->done, n);
    if (!p) return TC_ERR_NOMEM;
    memset(p + rn->n_done, 0, n - rn->n_done);
    rn->done = p;
    rn->n_done = n;
    return 0;
}

int lg_run_exec(lg_run *out, const lg_target *t, const lg_run_cfg *cfg, lg_workload *wl,
                tc_err *err) {
    memset(out, 0, sizeof *out);
    if (cfg->num_requests < 0 && !(cfg->duration > 0))
        return tc_err_set(err, TC_ERR_INVALID, "give --num-requests or --duration");
    runner rn = {.t = t, .cfg = cfg, .wl = wl, .run = out, .want_text = lg_workload_wants_text(wl)};
    build_url(&rn);
    rn.multi = curl_multi_init();
    if (!rn.multi) return tc_err_set(err, TC_ERR, "curl_multi_init failed");
    long maxconn = cfg->max_concurrency > 0 ? cfg->max_concurrency : 1024;
    curl_multi_setopt(rn.multi, CURLMOPT_MAXCONNECTS, maxconn);
    lg_rng arr;
    lg_rng_seed(&arr, cfg->seed, 0xA551u);
    int64_t *pend = NULL; // workload indices that have arrived but are not sent yet, FIFO
    size_t n_pend = 0, cap_pend = 0;
    int64_t next_idx = 0;
    double next_arrival = 0; // seconds since t0
    int generating = 1, rc = 0, last_pct = -1;
    rn.t0 = tc_now();
    out->t0 = rn.t0;
    for (;;) {
        double now = tc_now() - rn.t0;
        int past_duration = cfg->duration > 0 && now >= cfg->duration;
        // Arrivals that are due join the pending queue.
        while (generating && next_arrival <= now) {
            if ((cfg->num_requests >= 0 && next_idx >= cfg->num_requests) ||
                (cfg->duration > 0 && next_arrival >= cfg->duration)) {
                generating = 0;
                break;
            }
            if (n_pend == cap_pend) {
                size_t cap = cap_pend ? cap_pend * 2 : 256;
                int64_t *p = realloc(pend, cap * sizeof *p);
                if (!p) {
                    rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
                    goto done;
                }
                pend = p;
                cap_pend = cap;
            }
            if (grow_done(&rn, next_idx)) {
                rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
                goto done;
            }
            int has_prio, prio, len_class;
            if (cfg->only_prio_set && (lg_workload_class(wl, next_idx, &has_prio, &prio, &len_class), prio != cfg->only_prio))
                rn.done[next_idx++] = 1; // another class's slot in the schedule: not sent
            else
                pend[n_pend++] = next_idx++;
            next_arrival += lg_rng_interarrival(&arr, cfg->rate, cfg->burstiness);
        }
        if (past_duration) { // requests not sent by the deadline are never sent
            generating = 0;
            n_pend = 0;
        }
        // Send what the concurrency limit and multi-turn dependencies allow, oldest first.
        size_t keep = 0;
        for (size_t i = 0; i < n_pend; i++) {
            int64_t idx = pend[i], dep = lg_workload_depends_on(wl, idx);
            int can = (cfg->max_concurrency <= 0 || rn.inflight < cfg->max_concurrency) && (dep < 0 || rn.done[dep]);
            if (can) {
                if ((rc = dispatch(&rn, idx, err))) goto done;
            } else {
                pend[keep++] = idx;
            }
        }
        n_pend = keep;
        int running = 0;
        curl_multi_perform(rn.multi, &running);
        CURLMsg *m;
        int left, finished = 0;
        while ((m = curl_multi_info_read(rn.multi, &left))) {
            if (m->msg != CURLMSG_DONE) continue;
            xfer *x = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
            CURLcode res = m->data.result;
            if ((rc = finish(&rn, x, res, err))) goto done;
            finished++;
        }
        if (!cfg->quiet && cfg->num_requests > 0 && isatty(2)) {
            int pct = (int)(100 * (out->n - (size_t)rn.inflight) / (size_t)cfg->num_requests);
            if (pct / 10 != last_pct / 10) fprintf(stderr, "\r  %3d%% done", pct), last_pct = pct;
        }
        if (!generating && n_pend == 0 && rn.inflight == 0) break;
        if (finished && n_pend) continue; // a freed slot or a finished dependency may let a pending one go now
        // Sleep until the next arrival or socket activity.
        double wait = 1.0;
        if (generating) wait = next_arrival - (tc_now() - rn.t0);
        if (cfg->duration > 0 && generating) {
            double to_end = cfg->duration - (tc_now() - rn.t0);
            if (to_end < wait) wait = to_end;
        }
        int ms = wait <= 0 ? 0 : (int)ceil(wait * 1e3);
        if (ms > 1000) ms = 1000;
        if (ms > 0 || rn.inflight > 0) curl_multi_poll(rn.multi, NULL, 0, ms, NULL);
    }
    out->duration = tc_now() - rn.t0;
    if (!cfg->quiet && cfg->num_requests > 0 && isatty(2)) fprintf(stderr, "\r            \r");
    // Duration ends at the last completion (not at loop exit).
    double last = 0;
    for (size_t i = 0; i < out->n; i++)
        if (out->recs[i].t_end > last) last = out->recs[i].t_end;
    if (last > 0) out->duration = last;
done:
    while (rn.active) xfer_free(rn.active); // only after a fatal error
    free(pend);
    free(rn.done);
    curl_multi_cleanup(rn.multi);
    return rc;
}

void lg_run_free(lg_run *r) {
    for (size_t i = 0; i < r->n; i++) lg_record_free(&r->recs[i]);
    free(r->recs);
    memset(r, 0, sizeof *r);
}
