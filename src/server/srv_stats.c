// /metrics (Prometheus text) and /stats (rolling-window percentiles as JSON, for the dashboard).
#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/timeutil.h"
#include "server/gen_summ.h"
#include "server/srv_metrics.h"
#include "server/srv_model.h"
#include "server/srv_reply.h"
#include "server/srv_stats.h"
#include "server/srv_tenants.h"

// Copies the engine's snapshot into the gauges and engine-side counters.
static void refresh(srv_model *s, engine_stats *st) {
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

int srv_handle_metrics(srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *e) {
    (void)kind, (void)e;
    engine_stats st;
    for (int i = 0; i < s->fe->n_models; i++) refresh(s->fe->models[i], &st); // one registry, every model
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
static json_t *stats_json(srv_model *s) {
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
                          s->fe->state == SRV_READY ? "ready" : s->fe->state == SRV_LOADING ? "loading" : "draining", "windows",
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
    if (j && s->fe->tenants && s == s->fe->models[0]) json_object_set_new(j, "tenants", srv_tenants_stats(s->fe)); // srv_tenants.c
    if (j) json_object_set_new(j, "sched", srv_sched_stats_json(&st));
    if (j && s == s->fe->models[0] && s->o.summarize_with) json_object_set_new(j, "summary", gen_summ_stats(s->fe)); // gen_summ.c
    return j;
}

int srv_handle_stats(srv_model *s, struct evhttp_request *req, oai_kind kind, oai_err *e) {
    (void)kind, (void)e;
    json_t *j = stats_json(s->fe->models[0]); // the first model's, at the top level as with one model
    if (j && s->fe->multi) {       // and every model's under "models", keyed by name (the dashboard's list)
        json_t *ms = json_object();
        for (int i = 0; i < s->fe->n_models; i++) json_object_set_new(ms, s->fe->models[i]->name, stats_json(s->fe->models[i]));
        json_object_set_new(j, "models", ms);
    }
    srv_send_json(&s->o, req, 200, j);
    return 200;
}
