// /metrics (Prometheus text) and /stats (rolling-window percentiles as JSON, for the dashboard).
#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/timeutil.h"
#include "server/srv_internal.h"
#include "server/srv_stats.h"

#define WINDOW_SAMPLES 65536

// metrics_add with model="name" put before the metric's own labels (model NULL: no label, one model).
static metric *madd(metrics *r, const char *model, metric_type type, const char *name, const char *labels,
                    const char *help, const double *bounds, int n_bounds) {
    char l[96];
    if (model) {
        int n = snprintf(l, sizeof l, "model=\"%s\"%s%s", model, labels ? "," : "", labels ? labels : "");
        if (n < 0 || n >= (int)sizeof l) return NULL;
        labels = l;
    }
    return metrics_add(r, type, name, labels, help, bounds, n_bounds);
}

int srv_metrics_init(srv_metrics *mt, tc_err *err) { return srv_metrics_init_model(mt, NULL, NULL, err); }

int srv_metrics_init_model(srv_metrics *mt, metrics *hub_reg, const char *model, tc_err *err) {
    memset(mt, 0, sizeof *mt);
    mt->reg = hub_reg ? hub_reg : metrics_new();
    mt->reg_borrowed = hub_reg != NULL;
    if (!mt->reg) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    metrics *r = mt->reg;
    const double *B = METRICS_LATENCY_BUCKETS;
    int nb = METRICS_N_LATENCY_BUCKETS;
    mt->ttft = madd(r, model, METRIC_HISTOGRAM, "tachyon:time_to_first_token_seconds", NULL,
                           "Time from request arrival to the first generated token", B, nb);
    mt->tpot = madd(r, model, METRIC_HISTOGRAM, "tachyon:time_per_output_token_seconds", NULL,
                           "Mean time per output token after the first, per request", B, nb);
    mt->itl = madd(r, model, METRIC_HISTOGRAM, "tachyon:inter_token_latency_seconds", NULL,
                          "Time between consecutive tokens of a stream", B, nb);
    mt->e2e = madd(r, model, METRIC_HISTOGRAM, "tachyon:e2e_request_latency_seconds", NULL,
                          "Time from request arrival to its last token", B, nb);
    mt->queue = madd(r, model, METRIC_HISTOGRAM, "tachyon:request_queue_time_seconds", NULL,
                            "Time a request waited before it was first scheduled", B, nb);
    mt->prefill = madd(r, model, METRIC_HISTOGRAM, "tachyon:request_prefill_time_seconds", NULL,
                              "Time from first scheduling to the first token", B, nb);
    mt->decode = madd(r, model, METRIC_HISTOGRAM, "tachyon:request_decode_time_seconds", NULL,
                             "Time from the first token to the last", B, nb);
    mt->running = madd(r, model, METRIC_GAUGE, "tachyon:num_requests_running", NULL, "Sequences in the running batch", NULL, 0);
    mt->waiting = madd(r, model, METRIC_GAUGE, "tachyon:num_requests_waiting", NULL, "Requests waiting to be scheduled", NULL, 0);
    mt->kv_used = madd(r, model, METRIC_GAUGE, "tachyon:kv_blocks_used", NULL, "KV cache blocks in use", NULL, 0);
    mt->kv_total = madd(r, model, METRIC_GAUGE, "tachyon:kv_blocks_total", NULL, "KV cache blocks in the pool", NULL, 0);
    mt->kv_cap_tokens = madd(r, model, METRIC_GAUGE, "tachyon:kv_capacity_tokens", NULL,
                                    "Tokens the KV cache pool holds (all blocks)", NULL, 0);
    mt->kv_token_bytes = madd(r, model, METRIC_GAUGE, "tachyon:kv_bytes_per_token", NULL,
                                     "KV cache bytes per token, all layers, K and V (depends on --kv-type)", NULL, 0);
    mt->batch_size = madd(r, model, METRIC_GAUGE, "tachyon:batch_size", NULL, "Sequences in the last step", NULL, 0);
    mt->batch_tokens = madd(r, model, METRIC_GAUGE, "tachyon:batch_tokens", NULL, "Tokens in the last step", NULL, 0);
    const char *hs = "Finished generation choices by finish reason";
    mt->success_stop = madd(r, model, METRIC_COUNTER, "tachyon:request_success_total", "finish_reason=\"stop\"", hs, NULL, 0);
    mt->success_length = madd(r, model, METRIC_COUNTER, "tachyon:request_success_total", "finish_reason=\"length\"", hs, NULL, 0);
    mt->success_abort = madd(r, model, METRIC_COUNTER, "tachyon:request_success_total", "finish_reason=\"abort\"", hs, NULL, 0);
    mt->prompt_tokens = madd(r, model, METRIC_COUNTER, "tachyon:prompt_tokens_total", NULL, "Prompt tokens of finished requests", NULL, 0);
    mt->gen_tokens = madd(r, model, METRIC_COUNTER, "tachyon:generation_tokens_total", NULL, "Generated tokens of finished requests", NULL, 0);
    mt->preemptions = madd(r, model, METRIC_COUNTER, "tachyon:preemptions_total", NULL, "Sequences preempted for lack of KV blocks", NULL, 0);
    mt->rejected = madd(r, model, METRIC_COUNTER, "tachyon:requests_rejected_total", NULL, "Requests rejected because the queue was full", NULL, 0);
    mt->cancelled = madd(r, model, METRIC_COUNTER, "tachyon:requests_cancelled_total", NULL, "Requests cancelled because the client went away", NULL, 0);
    mt->prefix_hit = madd(r, model, METRIC_COUNTER, "tachyon:prefix_cache_hit_tokens_total", NULL, "Prompt tokens served from the prefix cache", NULL, 0);
    mt->prefix_query = madd(r, model, METRIC_COUNTER, "tachyon:prefix_cache_queries_total", NULL, "Prompt tokens looked up in the prefix cache", NULL, 0);
    static const char *methods[ENGINE_SPEC_METHODS] = {"method=\"ngram\"", "method=\"prediction\"",
                                                       "method=\"draft\"", "method=\"self\""};
    for (int i = 0; i < ENGINE_SPEC_METHODS; i++) {
        mt->spec_draft[i] = madd(r, model, METRIC_COUNTER, "tachyon:spec_draft_tokens_total", methods[i],
                                        "Speculative tokens proposed, by draft method", NULL, 0);
        mt->spec_accepted[i] = madd(r, model, METRIC_COUNTER, "tachyon:spec_accepted_tokens_total", methods[i],
                                           "Speculative tokens the target model accepted, by draft method", NULL, 0);
        if (!mt->spec_draft[i] || !mt->spec_accepted[i]) goto oom;
    }
    static const double rate_b[10] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0};
    mt->spec_steps = madd(r, model, METRIC_COUNTER, "tachyon:spec_verify_steps_total", NULL,
                                 "Speculative verifications (one request's 1+k rows in a step)", NULL, 0);
    mt->spec_rate = madd(r, model, METRIC_HISTOGRAM, "tachyon:spec_acceptance_rate", NULL,
                                "Accepted / drafted speculative tokens per finished request that speculated", rate_b, 10);
    if (!mt->spec_steps || !mt->spec_rate || srv_sched_metrics_init(mt)) goto oom;
    if (!mt->ttft || !mt->tpot || !mt->itl || !mt->e2e || !mt->queue || !mt->prefill || !mt->decode || !mt->running ||
        !mt->waiting || !mt->kv_used || !mt->kv_total || !mt->kv_cap_tokens || !mt->kv_token_bytes || !mt->batch_size ||
        !mt->batch_tokens || !mt->success_stop ||
        !mt->success_length || !mt->success_abort || !mt->prompt_tokens || !mt->gen_tokens || !mt->preemptions ||
        !mt->rejected || !mt->cancelled || !mt->prefix_hit || !mt->prefix_query)
        goto oom;
    if (mwindow_init(&mt->w_ttft, WINDOW_SAMPLES, err) || mwindow_init(&mt->w_tpot, WINDOW_SAMPLES, err) ||
        mwindow_init(&mt->w_itl, WINDOW_SAMPLES, err) || mwindow_init(&mt->w_e2e, WINDOW_SAMPLES, err))
        goto oom;
    mrate_init(&mt->gen_rate);
    return 0;
oom:
    srv_metrics_free(mt);
    return tc_err_set(err, TC_ERR_NOMEM, "out of memory (metrics)");
}

void srv_metrics_free(srv_metrics *mt) {
    if (!mt->reg_borrowed) metrics_free(mt->reg);
    mwindow_free(&mt->w_ttft);
    mwindow_free(&mt->w_tpot);
    mwindow_free(&mt->w_itl);
    mwindow_free(&mt->w_e2e);
    memset(mt, 0, sizeof *mt);
}

// Copies the engine's snapshot into the gauges and engine-side counters.
static void refresh(server *s, engine_stats *st) {
    memset(st, 0, sizeof *st);
    if (s->eng) engine_get_stats(s->eng, st);
    srv_metrics *mt = &s->mt;
    metric_set(mt->running, st->running);
    metric_set(mt->waiting, st->waiting);
    metric_set(mt->kv_used, st->kv_blocks_used);
    metric_set(mt->kv_total, st->kv_blocks_total);
    metric_set(mt->kv_cap_tokens, st->kv_capacity_tokens);
    metric_set(mt->kv_token_bytes, (double)st->kv_bytes_per_token);
    metric_set(mt->batch_size, st->last_batch_seqs);
    metric_set(mt->batch_tokens, st->last_batch_tokens);
    metric_set(mt->preemptions, (double)st->preemptions);
    metric_set(mt->prefix_hit, (double)st->prefix_hit_tokens);
    metric_set(mt->prefix_query, (double)st->prefix_query_tokens);
    for (int i = 0; i < ENGINE_SPEC_METHODS; i++) {
        metric_set(mt->spec_draft[i], (double)st->spec_draft[i]);
        metric_set(mt->spec_accepted[i], (double)st->spec_accepted[i]);
    }
    metric_set(mt->spec_steps, (double)st->spec_verify_steps);
    srv_sched_metrics_refresh(mt, st);
}

int srv_handle_metrics(server *s, struct evhttp_request *req, oai_kind kind, oai_err *e) {
    (void)kind, (void)e;
    engine_stats st;
    for (int i = 0; i < s->hub->n_models; i++) refresh(s->hub->models[i], &st); // one registry, every model
    char *t = NULL;
    size_t len = 0;
    struct evbuffer *b = evbuffer_new();
    if (metrics_render(s->mt.reg, &t, &len) == 0 && b) evbuffer_add(b, t, len);
    free(t);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain; version=0.0.4");
    srv_add_common_headers(&s->o, req);
    evhttp_send_reply(req, b ? 200 : 500, b ? "OK" : "Internal Server Error", b);
    if (b) evbuffer_free(b);
    return 200;
}

static json_t *num_or_null(double v) { return isnan(v) ? json_null() : json_real(v); }

static json_t *pct(mwindow *w, double now, double span) {
    static const double qs[3] = {0.5, 0.95, 0.99};
    double out[3];
    int n = mwindow_percentiles(w, now, span, qs, 3, out);
    return json_pack("{s:o,s:o,s:o,s:i}", "p50", num_or_null(out[0]), "p95", num_or_null(out[1]), "p99",
                     num_or_null(out[2]), "n", n);
}

// One model's /stats object (the whole reply with one model).
static json_t *stats_json(server *s) {
    engine_stats st;
    refresh(s, &st);
    srv_metrics *mt = &s->mt;
    double now = tc_now();
    json_t *win = json_object();
    const struct {
        const char *name;
        double span;
    } spans[2] = {{"1m", 60}, {"5m", 300}};
    for (int i = 0; i < 2; i++) {
        json_object_set_new(win, spans[i].name,
                            json_pack("{s:o,s:o,s:o,s:o,s:f}", "ttft", pct(&mt->w_ttft, now, spans[i].span), "tpot",
                                      pct(&mt->w_tpot, now, spans[i].span), "itl", pct(&mt->w_itl, now, spans[i].span),
                                      "e2e", pct(&mt->w_e2e, now, spans[i].span), "output_tokens_per_s",
                                      mrate_per_sec(&mt->gen_rate, now, spans[i].span)));
    }
    double hit = st.prefix_query_tokens ? (double)st.prefix_hit_tokens / (double)st.prefix_query_tokens : 0;
    double kv = st.kv_blocks_total ? (double)st.kv_blocks_used / st.kv_blocks_total : 0;
    json_t *j = json_pack("{s:f,s:s,s:s,s:o,s:f,s:f,s:i,s:i,s:i,s:i,s:f,s:f,s:I,s:I,s:I,s:I,s:I,s:i,s:i}", "time",
                          tc_wall(), "model", s->name, "state",
                          s->state == SRV_READY ? "ready" : s->state == SRV_LOADING ? "loading" : "draining", "windows",
                          win, "output_tokens_per_s", mrate_per_sec(&mt->gen_rate, now, 5), "output_tokens_per_s_1m",
                          mrate_per_sec(&mt->gen_rate, now, 60), "running", st.running, "waiting", st.waiting,
                          "kv_blocks_used", st.kv_blocks_used, "kv_blocks_total", st.kv_blocks_total, "kv_usage", kv,
                          "prefix_cache_hit_rate", hit, "prefix_cache_hit_tokens", (json_int_t)st.prefix_hit_tokens,
                          "prefix_cache_query_tokens", (json_int_t)st.prefix_query_tokens, "preemptions",
                          (json_int_t)st.preemptions, "requests_finished", (json_int_t)mt->n_requests, "steps",
                          (json_int_t)st.steps, "batch_size", st.last_batch_seqs, "batch_tokens", st.last_batch_tokens);
    if (j) {
        json_object_set_new(j, "max_model_len", json_integer(s->ctx_size));
        json_object_set_new(j, "kv_capacity_tokens", json_integer(st.kv_capacity_tokens));
        json_object_set_new(j, "kv_bytes_per_token", json_integer((json_int_t)st.kv_bytes_per_token));
        if (st.kv_swa_blocks_total) { // sliding-window layers' own pool (bounded by the window, not the context)
            json_object_set_new(j, "kv_swa_blocks_used", json_integer(st.kv_swa_blocks_used));
            json_object_set_new(j, "kv_swa_blocks_total", json_integer(st.kv_swa_blocks_total));
            json_object_set_new(j, "kv_swa_blocks_peak", json_integer(st.kv_swa_blocks_peak));
        }
        if (s->eng) { // types are known once the engine exists (the model has loaded)
            json_object_set_new(j, "kv_type_k", json_string(tt_name(st.kv_type_k)));
            json_object_set_new(j, "kv_type_v", json_string(tt_name(st.kv_type_v)));
        }
    }
    uint64_t sd = 0, sa = 0;
    for (int i = 0; i < ENGINE_SPEC_METHODS; i++) sd += st.spec_draft[i], sa += st.spec_accepted[i];
    json_t *spec = j ? json_pack("{s:I,s:I,s:I,s:f,s:I}", "draft_tokens", (json_int_t)sd, "accepted_tokens",
                                 (json_int_t)sa, "verify_steps", (json_int_t)st.spec_verify_steps, "acceptance_rate",
                                 sd ? (double)sa / (double)sd : 0.0, "draft_prefill_tokens",
                                 (json_int_t)st.spec_draft_prefill)
                     : NULL;
    json_t *by = spec ? json_object() : NULL;
    static const char *names[ENGINE_SPEC_METHODS] = {"ngram", "prediction", "draft", "self"};
    for (int i = 0; by && i < ENGINE_SPEC_METHODS; i++) // per method, as the Prometheus `method` label
        json_object_set_new(by, names[i], json_pack("{s:I,s:I}", "draft_tokens", (json_int_t)st.spec_draft[i],
                                                    "accepted_tokens", (json_int_t)st.spec_accepted[i]));
    if (by) json_object_set_new(spec, "by_method", by);
    if (spec) json_object_set_new(j, "spec", spec);
    if (j && s->tenants && s == s->hub) json_object_set_new(j, "tenants", srv_tenants_stats(s)); // srv_tenants.c
    if (j) json_object_set_new(j, "sched", srv_sched_stats_json(&st));
    if (j && s == s->hub && s->o.summarize_with) json_object_set_new(j, "summary", gen_summ_stats(s)); // gen_summ.c
    return j;
}

int srv_handle_stats(server *s, struct evhttp_request *req, oai_kind kind, oai_err *e) {
    (void)kind, (void)e;
    json_t *j = stats_json(s->hub); // the first model's, at the top level as with one model
    if (j && s->hub->multi) {       // and every model's under "models", keyed by name (the dashboard's list)
        json_t *ms = json_object();
        for (int i = 0; i < s->hub->n_models; i++) json_object_set_new(ms, s->hub->models[i]->name, stats_json(s->hub->models[i]));
        json_object_set_new(j, "models", ms);
    }
    srv_send_json(&s->o, req, 200, j);
    return 200;
}
