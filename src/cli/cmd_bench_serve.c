// `tachyon bench-serve`: a serving benchmark against any OpenAI-compatible endpoint (what `vllm bench serve`
// gives), with sweeps, a two-server comparison, JSON and an HTML report. See docs/BENCHMARKING.md.
#include <curl/curl.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loadgen/lg_class.h"
#include "loadgen/lg_client.h"
#include "loadgen/lg_report.h"
#include "loadgen/lg_model.h"
#include "loadgen/lg_tenant.h"
#include "loadgen/lg_workload.h"
#include "cli/cli.h"

#define MAX_POINTS 32

typedef struct opts {
    const char *url, *url2, *api_key, *model, *json_path, *html_path, *sweep;
    int chat, ignore_eos_set, ignore_eos, rounds, quiet;
    int64_t warmup;
    lg_wl_cfg wl;
    lg_run_cfg run;
    lg_slo slo;
    int has_slo;
    // scheduling workloads: classes, per-request fields, the overload sweep
    lg_prio_mix prio;
    const char *prio_mix; // as given, for the JSON config
    int input_len_set;
    double capacity;      // req/s for --sweep overload=...; 0 = measure it first
    lg_tenants tenants; // --tenant KEY[:WEIGHT] (repeated)
} opts;

static void usage(FILE *f) {
    fputs("usage: tachyon bench-serve --url URL [options]\n"
          "  target:    --url URL  --api-key KEY  --model NAME  --endpoint chat|completions  --timeout S\n"
          "             --tenant KEY[:WEIGHT] (repeat: requests split over the keys by weight, per-tenant report)\n"
          "  load:      --num-requests N  --duration S  --request-rate R|inf  --burstiness B\n"
          "             --max-concurrency N  --warmup N  --seed N\n"
          "  workload:  --dataset random|shared-prefix|multi-turn|repetitive|mixed-length|jsonl:FILE\n"
          "             |code-edit|code-edit-pred|quote|creative (speculative decoding: when it pays, when not)\n"
          "             --input-len N  --output-len N  --range-ratio R  --prefix-len N  --num-groups N  --turns N\n"
          "             --long-len N  --long-frac F (mixed-length: 4000, 0.1; short prompts --input-len, 100)\n"
          "             --ignore-eos | --no-ignore-eos\n"
          "  classes:   --priority-mix P:W,P:W (e.g. 0:0.8,5:0.2)  --priority-field NAME (priority)\n"
          "             --only-priority P: send only class P's requests, at their times in the mixed schedule\n"
          "             (the 'unloaded' baseline of a class: same requests, same arrivals, without the others)\n"
          "             --ttft-slo-ms MS (sent per request, and the goodput TTFT SLO)  --ttft-slo-field NAME\n"
          "             (ttft_slo_ms)\n"
          "  output:    --slo ttft=MS,tpot=MS,e2e=MS  --json FILE  --report FILE.html  --quiet\n"
          "  runs:      --sweep rate=1,2,4,inf | --sweep concurrency=1,4,8 | --sweep overload=0.5,1,2,5\n"
          "             (Poisson arrivals at multiples of the capacity, measured first or --capacity R)\n"
          "             --compare URL2  --compare-rounds N\n"
          "see docs/BENCHMARKING.md\n",
          f);
}

static int num(const char *flag, const char *s, double lo, double *out) {
    char *end;
    double v = !strcmp(s, "inf") ? INFINITY : strtod(s, &end);
    if ((strcmp(s, "inf") && (end == s || *end)) || !(v >= lo)) {
        fprintf(stderr, "bench-serve: %s: bad value '%s'\n", flag, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse(opts *o, int argc, char **argv) {
    enum { O_URL = 256, O_KEY, O_MODEL, O_EP, O_TIMEOUT, O_NREQ, O_DUR, O_RATE, O_BURST, O_CONC, O_WARM, O_SEED,
           O_DS, O_IN, O_OUT, O_RR, O_PREFIX, O_GROUPS, O_TURNS, O_IEOS, O_NOIEOS, O_SLO, O_JSON, O_REPORT, O_SWEEP,
           O_CMP, O_ROUNDS, O_QUIET, O_HELP, O_LONGLEN, O_LONGFRAC, O_PMIX, O_PFIELD, O_TSLO, O_TFIELD, O_CAP, O_TENANT, O_ONLYP };
    static const struct option lo[] = {
        {"url", 1, 0, O_URL}, {"api-key", 1, 0, O_KEY}, {"model", 1, 0, O_MODEL}, {"endpoint", 1, 0, O_EP},
        {"timeout", 1, 0, O_TIMEOUT}, {"num-requests", 1, 0, O_NREQ}, {"duration", 1, 0, O_DUR},
        {"request-rate", 1, 0, O_RATE}, {"burstiness", 1, 0, O_BURST}, {"max-concurrency", 1, 0, O_CONC},
        {"warmup", 1, 0, O_WARM}, {"seed", 1, 0, O_SEED}, {"dataset", 1, 0, O_DS}, {"input-len", 1, 0, O_IN},
        {"output-len", 1, 0, O_OUT}, {"range-ratio", 1, 0, O_RR}, {"prefix-len", 1, 0, O_PREFIX},
        {"num-groups", 1, 0, O_GROUPS}, {"turns", 1, 0, O_TURNS}, {"ignore-eos", 0, 0, O_IEOS},
        {"no-ignore-eos", 0, 0, O_NOIEOS}, {"slo", 1, 0, O_SLO}, {"json", 1, 0, O_JSON}, {"report", 1, 0, O_REPORT},
        {"sweep", 1, 0, O_SWEEP}, {"compare", 1, 0, O_CMP}, {"compare-rounds", 1, 0, O_ROUNDS},
        {"quiet", 0, 0, O_QUIET}, {"help", 0, 0, O_HELP}, {"long-len", 1, 0, O_LONGLEN},
        {"long-frac", 1, 0, O_LONGFRAC}, {"priority-mix", 1, 0, O_PMIX}, {"priority-field", 1, 0, O_PFIELD},
        {"ttft-slo-ms", 1, 0, O_TSLO}, {"ttft-slo-field", 1, 0, O_TFIELD}, {"capacity", 1, 0, O_CAP},
        {"tenant", 1, 0, O_TENANT}, {"only-priority", 1, 0, O_ONLYP}, {0, 0, 0, 0}};
    o->chat = 1;
    o->rounds = 2;
    o->api_key = getenv("OPENAI_API_KEY");
    o->wl = (lg_wl_cfg){.kind = LG_DS_RANDOM, .input_len = 256, .output_len = 128, .prefix_len = 512,
                           .num_groups = 4, .turns = 4, .long_len = 4000, .long_frac = 0.1,
                           .prio_field = "priority", .ttft_field = "ttft_slo_ms"};
    o->run = (lg_run_cfg){.rate = INFINITY, .burstiness = 1, .num_requests = -1, .timeout = 600};
    double v;
    int c;
    tc_err err = {0};
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case O_URL: o->url = optarg; break;
        case O_KEY: o->api_key = optarg; break;
        case O_MODEL: o->model = optarg; break;
        case O_EP:
            if (!strcmp(optarg, "chat")) o->chat = 1;
            else if (!strcmp(optarg, "completions")) o->chat = 0;
            else return fprintf(stderr, "bench-serve: --endpoint chat|completions\n"), -1;
            break;
        case O_TIMEOUT: if (num("--timeout", optarg, 0, &o->run.timeout)) return -1; break;
        case O_NREQ: if (num("--num-requests", optarg, 1, &v) || !isfinite(v)) return -1; o->run.num_requests = (int64_t)v; break;
        case O_DUR: if (num("--duration", optarg, 0, &o->run.duration)) return -1; break;
        case O_RATE: if (num("--request-rate", optarg, 1e-9, &o->run.rate)) return -1; break;
        case O_BURST: if (num("--burstiness", optarg, 1e-6, &o->run.burstiness) || !isfinite(o->run.burstiness)) return -1; break;
        case O_CONC: if (num("--max-concurrency", optarg, 0, &v) || !isfinite(v)) return -1; o->run.max_concurrency = (int)v; break;
        case O_WARM: if (num("--warmup", optarg, 0, &v) || !isfinite(v)) return -1; o->warmup = (int64_t)v; break;
        case O_SEED: if (num("--seed", optarg, 0, &v) || !isfinite(v)) return -1; o->run.seed = (uint64_t)v; break;
        case O_DS: if (lg_ds_parse(optarg, &o->wl.kind, &o->wl.path, &err)) return fprintf(stderr, "bench-serve: %s\n", err.msg), -1; break;
        case O_IN: if (num("--input-len", optarg, 1, &v) || !isfinite(v)) return -1; o->wl.input_len = (int64_t)v; o->input_len_set = 1; break;
        case O_LONGLEN: if (num("--long-len", optarg, 1, &v) || !isfinite(v)) return -1; o->wl.long_len = (int64_t)v; break;
        case O_LONGFRAC: if (num("--long-frac", optarg, 0, &o->wl.long_frac) || o->wl.long_frac > 1) return -1; break;
        case O_PMIX:
            if (lg_prio_mix_parse(&o->prio, optarg, &err)) return fprintf(stderr, "bench-serve: %s\n", err.msg), -1;
            o->prio_mix = optarg;
            o->wl.prio = &o->prio;
            break;
        case O_PFIELD: o->wl.prio_field = optarg; break;
        case O_ONLYP:
            if (num("--only-priority", optarg, -1e9, &v) || !isfinite(v) || v > 1e9) return -1;
            o->run.only_prio_set = 1, o->run.only_prio = (int)v;
            break;
        case O_TSLO: if (num("--ttft-slo-ms", optarg, 1e-9, &o->wl.ttft_slo_ms) || !isfinite(o->wl.ttft_slo_ms)) return -1; break;
        case O_TFIELD: o->wl.ttft_field = optarg; break;
        case O_CAP: if (num("--capacity", optarg, 1e-9, &o->capacity) || !isfinite(o->capacity)) return -1; break;
        case O_OUT: if (num("--output-len", optarg, 1, &v) || !isfinite(v)) return -1; o->wl.output_len = (int64_t)v; break;
        case O_RR: if (num("--range-ratio", optarg, 0, &o->wl.range_ratio) || o->wl.range_ratio >= 1) return -1; break;
        case O_PREFIX: if (num("--prefix-len", optarg, 0, &v) || !isfinite(v)) return -1; o->wl.prefix_len = (int64_t)v; break;
        case O_GROUPS: if (num("--num-groups", optarg, 1, &v) || !isfinite(v)) return -1; o->wl.num_groups = (int64_t)v; break;
        case O_TURNS: if (num("--turns", optarg, 1, &v) || !isfinite(v)) return -1; o->wl.turns = (int64_t)v; break;
        case O_IEOS: o->ignore_eos_set = 1, o->ignore_eos = 1; break;
        case O_NOIEOS: o->ignore_eos_set = 1, o->ignore_eos = 0; break;
        case O_SLO:
            if (lg_slo_parse(&o->slo, optarg, &err)) return fprintf(stderr, "bench-serve: %s\n", err.msg), -1;
            o->has_slo = 1;
            break;
        case O_JSON: o->json_path = optarg; break;
        case O_REPORT: o->html_path = optarg; break;
        case O_SWEEP: o->sweep = optarg; break;
        case O_CMP: o->url2 = optarg; break;
        case O_ROUNDS: if (num("--compare-rounds", optarg, 1, &v) || !isfinite(v)) return -1; o->rounds = (int)v; break;
        case O_QUIET: o->quiet = 1; break;
        case O_TENANT:
            if (lg_tenant_add(&o->tenants, optarg, &err)) return fprintf(stderr, "bench-serve: %s\n", err.msg), -1;
            break;
        case O_HELP: case 'h': usage(stdout); return 1;
        default: usage(stderr); return -1;
        }
    }
    if (optind < argc) return fprintf(stderr, "bench-serve: unexpected argument '%s'\n", argv[optind]), -1;
    if (!o->url) return fprintf(stderr, "bench-serve: --url is required\n"), usage(stderr), -1;
    if (o->run.num_requests < 0 && !(o->run.duration > 0)) o->run.num_requests = 100;
    if (o->run.only_prio_set && !o->wl.prio) return fprintf(stderr, "bench-serve: --only-priority needs --priority-mix\n"), -1;
    if (o->wl.kind == LG_DS_MIXED_LENGTH && !o->input_len_set) o->wl.input_len = 100;
    if (o->wl.ttft_slo_ms > 0 && !(o->slo.ttft_ms > 0)) o->slo.ttft_ms = o->wl.ttft_slo_ms, o->has_slo = 1;
    // Copying workloads end where the copy ends: their natural length is part of what they measure.
    if (!o->ignore_eos_set)
        o->ignore_eos = o->wl.kind != LG_DS_JSONL && o->wl.kind != LG_DS_REPETITIVE &&
                        o->wl.kind != LG_DS_CODE_EDIT && o->wl.kind != LG_DS_CODE_EDIT_PRED &&
                        o->wl.kind != LG_DS_QUOTE && o->wl.kind != LG_DS_CREATIVE;
    o->wl.ignore_eos = o->ignore_eos;
    o->wl.chat = o->chat;
    o->wl.model = o->model ? o->model : "default";
    o->wl.seed = o->run.seed;
    o->run.quiet = o->quiet;
    return 0;
}

// "rate=1,2,inf", "concurrency=1,4" or "overload=0.5,1,2,5" -> values; *is_rate: 1 rate, 0 concurrency,
// 2 overload (rates as multiples of the capacity).
static int parse_sweep(const char *s, int *is_rate, double *vals, int *n) {
    const char *eq = strchr(s, '=');
    if (!eq) goto bad;
    if (!strncmp(s, "rate=", 5)) *is_rate = 1;
    else if (!strncmp(s, "concurrency=", 12)) *is_rate = 0;
    else if (!strncmp(s, "overload=", 9)) *is_rate = 2;
    else goto bad;
    *n = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", eq + 1);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (*n == MAX_POINTS || num("--sweep", t, *is_rate ? 1e-9 : 1, &vals[*n])) goto bad;
        if (*is_rate != 1 && !isfinite(vals[*n])) goto bad;
        (*n)++;
    }
    if (*n) return 0;
bad:
    fprintf(stderr, "bench-serve: --sweep rate=R1,R2,...|concurrency=N1,N2,...|overload=M1,M2,... (at most %d points)\n",
            MAX_POINTS);
    return -1;
}

// Moves the records of src onto the end of dst (src is left empty).
static int append_run(lg_run *dst, lg_run *src) {
    if (dst->n + src->n > dst->cap) {
        size_t cap = dst->n + src->n + 16;
        lg_record *p = realloc(dst->recs, cap * sizeof *p);
        if (!p) return TC_ERR_NOMEM;
        dst->recs = p;
        dst->cap = cap;
    }
    if (dst->n == 0) dst->t0 = src->t0;
    if (src->n) memcpy(dst->recs + dst->n, src->recs, src->n * sizeof *src->recs);
    dst->n += src->n;
    dst->duration += src->duration;
    if (src->max_inflight > dst->max_inflight) dst->max_inflight = src->max_inflight;
    free(src->recs);
    memset(src, 0, sizeof *src);
    return 0;
}

static int warmup(const opts *o, const lg_target *t, tc_err *err) {
    if (o->warmup <= 0) return 0;
    lg_wl_cfg wc = o->wl;
    wc.seed = o->run.seed ^ 0x5741524D55500000ull; // a workload disjoint from the measured one
    lg_workload *wl = NULL;
    int rc = lg_workload_init(&wl, &wc, err);
    if (rc) return rc;
    lg_run_cfg rc_cfg = o->run;
    rc_cfg.num_requests = o->warmup, rc_cfg.duration = 0, rc_cfg.rate = INFINITY, rc_cfg.warmup = 1, rc_cfg.quiet = 1;
    rc_cfg.only_prio_set = 0;
    lg_run r;
    rc = lg_run_exec(&r, t, &rc_cfg, wl, err);
    if (!rc) {
        size_t failed = 0;
        for (size_t i = 0; i < r.n; i++) failed += !r.recs[i].ok;
        if (!o->quiet) fprintf(stderr, "warmup against %s: %zu requests, %zu failed\n", t->url, r.n, failed);
    }
    lg_run_free(&r);
    lg_workload_free(wl);
    return rc;
}

// The seed of round / sweep point idx: idx 0 is --seed; the others (the capacity run is -1) draw fresh prompts,
// so a server with a prefix cache does not answer a repeated round's prompts from its cache. Both servers of a
// round get the same.
static uint64_t round_seed(const opts *o, int idx) { return o->wl.seed + (uint64_t)idx * 0x9E3779B97F4A7C15ull; }

// The overload sweep's reference: completed requests per second of the workload sent all at once (within
// --max-concurrency), against the first server. Not part of the results.
static int measure_capacity(opts *o, const lg_target *t, lg_workload *wl, tc_err *err) {
    if (o->capacity > 0) return 0;
    lg_run_cfg cfg = o->run;
    cfg.rate = INFINITY, cfg.quiet = 1;
    lg_workload_reseed(wl, round_seed(o, -1));
    lg_run r;
    int rc = lg_run_exec(&r, t, &cfg, wl, err);
    if (rc) return rc;
    size_t ok = 0;
    const char *why = NULL;
    for (size_t i = 0; i < r.n; i++) {
        ok += r.recs[i].index >= 0 && r.recs[i].ok;
        if (!why && !r.recs[i].ok) why = r.recs[i].error;
    }
    if (ok && r.duration > 0) o->capacity = (double)ok / r.duration;
    if (!(o->capacity > 0)) rc = tc_err_set(err, TC_ERR_IO, "capacity run: every request failed (%.300s)", why ? why : "?");
    lg_run_free(&r);
    if (rc) return rc;
    if (!o->quiet) fprintf(stderr, "measured capacity: %.3f req/s (%zu requests at once)\n", o->capacity, ok);
    return 0;
}

static json_t *config_json(const opts *o, int argc, char **argv) {
    json_t *args = json_array();
    for (int i = 0; i < argc; i++) json_array_append_new(args, json_string(argv[i]));
    json_t *c = json_pack("{s:s, s:s?, s:s, s:s, s:o, s:f, s:I, s:I, s:I, s:i, s:i, s:I}", "url", o->url, "compare_url",
                          o->url2, "model", o->wl.model, "endpoint", o->chat ? "chat" : "completions", "argv", args,
                          "burstiness", o->run.burstiness, "seed", (json_int_t)o->run.seed, "num_requests",
                          (json_int_t)o->run.num_requests, "warmup", (json_int_t)o->warmup, "max_concurrency",
                          o->run.max_concurrency, "compare_rounds", o->rounds, "input_len", (json_int_t)o->wl.input_len);
    if (!c) return NULL;
    json_object_set_new(c, "request_rate", isfinite(o->run.rate) ? json_real(o->run.rate) : json_string("inf"));
    json_object_set_new(c, "duration_s", json_real(o->run.duration));
    json_object_set_new(c, "output_len", json_integer(o->wl.output_len));
    json_object_set_new(c, "ignore_eos", json_boolean(o->ignore_eos));
    if (o->capacity > 0) json_object_set_new(c, "capacity_rps", json_real(o->capacity));
    if (o->prio_mix) json_object_set_new(c, "priority_mix", json_string(o->prio_mix));
    if (o->wl.ttft_slo_ms > 0) json_object_set_new(c, "ttft_slo_ms", json_real(o->wl.ttft_slo_ms));
    if (o->wl.kind == LG_DS_MIXED_LENGTH)
        json_object_set_new(c, "mixed_length", json_pack("{s:I, s:I, s:f}", "short_len", (json_int_t)o->wl.input_len,
                                                         "long_len", (json_int_t)o->wl.long_len, "long_frac",
                                                         o->wl.long_frac));
    if (o->has_slo)
        json_object_set_new(c, "slo_ms", json_pack("{s:f, s:f, s:f}", "ttft", o->slo.ttft_ms, "tpot", o->slo.tpot_ms,
                                                   "e2e", o->slo.e2e_ms));
    return c;
}

int cli_bench_serve(int argc, char **argv) {
    opts o = {0};
    int prc = parse(&o, argc, argv);
    if (prc) return prc > 0 ? 0 : 2;
    double vals[MAX_POINTS] = {0};
    int n_points = 1, is_rate = 1, sweeping = o.sweep != NULL;
    if (sweeping && parse_sweep(o.sweep, &is_rate, vals, &n_points)) return 2;
    int n_servers = o.url2 ? 2 : 1;
    const lg_tenants *tn = o.tenants.n ? &o.tenants : NULL;
    lg_target tg[2] = {{.url = o.url, .api_key = o.api_key, .chat = o.chat, .tenants = tn},
                          {.url = o.url2, .api_key = o.api_key, .chat = o.chat, .tenants = tn}};
    lg_result *res = calloc((size_t)(n_points * n_servers), sizeof *res);
    lg_workload *wl = NULL;
    tc_err err = {0};
    int rc = 0, status = 0;
    if (!res) return fprintf(stderr, "bench-serve: out of memory\n"), 1;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if ((rc = lg_workload_init(&wl, &o.wl, &err))) goto out;
    for (int s = 0; s < n_servers; s++)
        if ((rc = lg_pool_init(&tg[s].pool, &err))) goto out;
    for (int s = 0; s < n_servers; s++)
        if ((rc = warmup(&o, &tg[s], &err))) goto out;
    if (sweeping && is_rate == 2 && (rc = measure_capacity(&o, &tg[0], wl, &err))) goto out;
    for (int p = 0; p < n_points; p++) {
        lg_run_cfg cfg = o.run;
        char label[64] = "";
        if (sweeping) {
            if (is_rate == 2) cfg.rate = vals[p] * o.capacity; // Poisson unless --burstiness says otherwise
            else if (is_rate) cfg.rate = vals[p];
            else cfg.max_concurrency = (int)vals[p];
            if (is_rate == 2) snprintf(label, sizeof label, "overload=%gx", vals[p]);
            else if (is_rate && !isfinite(vals[p])) snprintf(label, sizeof label, "rate=inf");
            else snprintf(label, sizeof label, "%s=%g", is_rate ? "rate" : "concurrency", vals[p]);
        }
        // --compare: rounds alternate the order A,B / B,A (ABBA...) so drift hits both servers alike.
        int rounds = n_servers == 2 ? o.rounds : 1;
        for (int r = 0; r < rounds; r++)
            for (int k = 0; k < n_servers; k++) {
                int s = (r % 2 == 0) ? k : n_servers - 1 - k;
                lg_result *br = &res[p * n_servers + s];
                snprintf(br->label, sizeof br->label, "%s", label);
                snprintf(br->server, sizeof br->server, "%s", n_servers == 2 ? (s == 0 ? "A" : "B") : "");
                br->url = tg[s].url;
                br->x = sweeping ? vals[p] : 0;
                if (!o.quiet)
                    fprintf(stderr, "running %s%s%s against %s (round %d/%d)\n", label[0] ? label : "benchmark",
                            br->server[0] ? " server " : "", br->server, tg[s].url, r + 1, rounds);
                lg_workload_reseed(wl, round_seed(&o, p * rounds + r));
                lg_run one;
                if ((rc = lg_run_exec(&one, &tg[s], &cfg, wl, &err))) goto out;
                if ((rc = append_run(&br->run, &one))) {
                    lg_run_free(&one);
                    tc_err_set(&err, rc, "out of memory");
                    goto out;
                }
            }
    }
    size_t n_res = (size_t)(n_points * n_servers), completed = 0;
    for (size_t i = 0; i < n_res; i++) {
        res[i].sum.max_inflight = res[i].run.max_inflight;
        if ((rc = lg_summarize(&res[i].sum, res[i].run.recs, res[i].run.n, res[i].run.duration,
                               o.has_slo ? &o.slo : NULL, &err)) ||
            (rc = lg_classes_compute(&res[i].cls, res[i].run.recs, res[i].run.n, res[i].run.duration,
                                     o.has_slo ? &o.slo : NULL, &err)))
            goto out;
        completed += res[i].sum.completed;
        if (tn) res[i].tenants_json = lg_tenant_json(tn, res[i].run.recs, res[i].run.n, res[i].run.duration);
    }
    for (int p = 0; p < n_points; p++) {
        if (n_servers == 2) {
            lg_print_table(stdout, &res[p * 2], &o.slo);
            lg_print_table(stdout, &res[p * 2 + 1], &o.slo);
            lg_print_compare(stdout, &res[p * 2], &res[p * 2 + 1], &o.slo);
        } else {
            lg_print_table(stdout, &res[p], &o.slo);
        }
        for (int k = 0; tn && k < n_servers; k++)
            lg_tenant_print(stdout, tn, res[p * n_servers + k].run.recs, res[p * n_servers + k].run.n,
                            res[p * n_servers + k].run.duration);
        for (int k = 0; k < n_servers; k++) // several models or a router: which model answered (lg_model.c)
            lg_model_print(stdout, res[p * n_servers + k].run.recs, res[p * n_servers + k].run.n,
                           res[p * n_servers + k].run.duration);
    }
    if (o.json_path) {
        json_t *cfg = config_json(&o, argc, argv);
        rc = lg_write_json(o.json_path, cfg, res, n_res, &err);
        json_decref(cfg);
        if (rc) goto out;
    }
    if (o.html_path && (rc = lg_write_html(o.html_path, "tachyon bench-serve", res, n_res,
                                                sweeping ? (is_rate == 2 ? 2 : 1) : 0, &err)))
        goto out;
    if (completed == 0) {
        fprintf(stderr, "bench-serve: every request failed\n");
        status = 3;
    }
out:
    if (rc) {
        fprintf(stderr, "bench-serve: %s\n", err.msg);
        status = 1;
    }
    for (int i = 0; i < n_points * n_servers; i++) {
        lg_run_free(&res[i].run);
        json_decref(res[i].tenants_json);
    }
    free(res);
    lg_workload_free(wl);
    lg_pool_free(tg[0].pool);
    lg_pool_free(tg[1].pool);
    curl_global_cleanup();
    return status;
}
