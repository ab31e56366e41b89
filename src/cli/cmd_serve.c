// `tachyon serve`: the OpenAI-compatible HTTP server (see src/server/server.h).
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "server/server.h"
#include "server/srv_config.h"
#include "sched/sched_order.h"
#include "speculation/spec.h"

static void serve_usage(void) {
    fprintf(stderr,
            "usage: tachyon serve -m MODEL [options]\n"
            "  -m, --model [ALIAS=]PATH    GGUF model file (required); repeat it to serve several models, each with\n"
            "                              its own engine, named ALIAS (or the file name without .gguf) in the API\n"
            "  --config FILE               JSON list of models and router aliases (docs/MULTI_MODEL.md)\n"
            "  --router ALIAS=SMALL,LARGE  a model name that routes each request to SMALL or LARGE (below)\n"
            "  --route-max-prompt-tokens N to SMALL when the prompt has at most N tokens (256) ...\n"
            "  --route-max-tokens N        ... and max_tokens is given and at most N (256); else to LARGE\n"
            "  --route-degrade             to SMALL also when LARGE's predicted time to first token is above\n"
            "                              --ttft-slo (off; 1 s when --ttft-slo is not given)\n"
            "  --host ADDR                 listen address (127.0.0.1)\n"
            "  --port N                    listen port (8080)\n"
            "  --api-key KEY               require 'Authorization: Bearer KEY' on every route except /health and\n"
            "                              the dashboard page / (which asks for the key)\n"
            "  --api-key-file FILE         API keys and tenants, one per line: KEY TENANT [rpm=N] [tpm=N] [share=W]\n"
            "                              ('#' comments; rpm/tpm: requests/tokens per minute, tokens = prompt +\n"
            "                              max_tokens, unused max_tokens refunded; share: fair-share weight of\n"
            "                              running slots). Reloaded on SIGHUP; --api-key joins as tenant 'default'\n"
            "  --public-routes LIST        comma list of routes open without the key, e.g. /metrics,/stats\n"
            "  --allowed-hosts LIST        Host header names accepted besides localhost, 127.0.0.1, [::1] and\n"
            "                              the --host address ('*' = any; bound to 0.0.0.0 or :: any Host is\n"
            "                              accepted unless this is given)\n"
            "  --cors ORIGINS              allow cross-origin requests from these origins (comma list, e.g.\n"
            "                              http://localhost:3000; '*' = any); off by default\n"
            "  --ctx-size N                per-request context limit, prompt + output (model's)\n"
            "  --max-batch-tokens N        tokens per engine step\n"
            "  --max-seqs N                running sequences at most\n"
            "  --itl-guard R               while streams decode, size prefill chunks so a step takes at most\n"
            "                              R x a decode-only step (2; 0 = off: chunks of max-batch-tokens)\n"
            "  --itl-guard-floor-ms MS     the guard never caps a step below MS (30; 0 = none): with a few\n"
            "                              streams a decode step is ms long and R x it would leave prompts\n"
            "                              a few tokens per step\n"
            "  --itl-guard-fair 0|1        1 (default): no cap in a step where a tenant below its fair share\n"
            "                              (--api-key-file), or a better priority than every decoding stream\n"
            "                              (--sched priority|slo), has a prompt to prefill\n"
            "  --kv-cache-mem MIB          KV cache pool size (default: engine's choice); a pool smaller than\n"
            "                              --ctx-size tokens lowers the context (logged, in /v1/models)\n"
            "  --kv-type TYPE              KV cache type for K and V: f16 (default), q8_0, q4_0; a quantized\n"
            "                              cache holds ~1.9x (q8_0) or ~3.6x (q4_0) the tokens in the same memory\n"
            "  --kv-type-k / --kv-type-v TYPE  the same for K or V alone\n"
            "  --kv-rotate auto|off        Hadamard rotation of a quantized K/V cache (auto: on; off, or\n"
            "                              TACHYON_KV_ROTATE=0: stored unrotated, for A/B)\n"
            "  --kv-center auto|off        subtract the model's mean key before quantizing K (auto: on for\n"
            "                              q8_0/q4_0 keys; off, or TACHYON_KV_CENTER=0: for A/B)\n"
            "  --max-queue N               requests waiting for a running slot at most (256); beyond → 503\n"
            "                              (a request that finds one of --max-seqs slots free always starts)\n"
            "  --max-queued-tokens N       prompt tokens waiting for a slot at most (0 = unlimited)\n"
            "  --request-timeout S         deadline per generation request (0 = none)\n"
            "  --sched POLICY              fifo (default): arrival order | priority: request 'priority' (lower\n"
            "                              first, aging one class per --sched-aging s), shortest prefill first,\n"
            "                              a better priority may preempt | slo: as priority, and a request whose\n"
            "                              predicted TTFT misses its target is refused at once (503 + Retry-After)\n"
            "  --sched-aging S             seconds waited per priority class gained (5)\n"
            "  --ttft-slo S                default time-to-first-token target per request (0 = none; field\n"
            "                              'ttft_slo_ms' overrides); also the routers' degradation objective\n"
            "  --e2e-slo S                 default end-to-end deadline per request (0 = none; field 'timeout'\n"
            "                              may shorten it)\n"
            "  --shutdown-grace S          drain time on SIGTERM/SIGINT (10)\n"
            "  --threads N                 compute threads\n"
            "  --device cpu|cuda           where the forward pass runs (cpu); cuda needs a CUDA build and a GPU\n"
            "  --chat-template NAME        chatml, llama2, llama3, mistral, gemma, phi3, zephyr, deepseek, qwen3\n"
            "  --reasoning-format F        auto: <think>…</think> output goes to reasoning_content when the chat\n"
            "                              template is a reasoning one (qwen3, deepseek); none: left inline in\n"
            "                              content; deepseek: always split (auto)\n"
            "  --log-level LEVEL           debug, info, warn, error (info)\n"
            "  --max-body BYTES            request body limit; larger → 413 (8 MiB)\n"
            "  --http-timeout S            close a connection idle this long between requests, or whose\n"
            "                              client stops reading a reply this long; a request whose bytes\n"
            "                              stop arriving this long → 408 (10)\n"
            "  --request-read-timeout S    total time to receive a request's headers and body, from its first\n"
            "                              byte; beyond → 408 and close (30; 0 = none)\n"
            "  --max-connections N         open connections at most; beyond, an idle one or the slowest partial\n"
            "                              request (408) makes room, else the new one is answered 503 and\n"
            "                              closed (default: from the descriptor limit, raised to its maximum)\n"
            "  --max-connections-per-client N  when the open connections reach 3/4 of the cap, one client\n"
            "                              address may hold N at most; beyond → 503 (0 = auto: cap/8, >= 16)\n"
            "  --max-body-buffer BYTES     request bytes buffered across all connections; a connection that\n"
            "                              goes beyond → 503 (64 MiB; 0 = unlimited)\n"
            "  --sse-ping S                ': ping' comment on a stream silent this long (5; 0 = off)\n"
            "  --served-model-name NAME    model id in the API (file name without .gguf)\n"
            "  --no-prefix-cache           do not reuse KV of identical prompt prefixes\n"
            "  --spec MODE                 speculative decoding: off, ngram (prompt lookup, k drafts whenever it\n"
            "                              matches), auto (the request's prediction if given, else prompt\n"
            "                              lookup; k adapted per request, none when it does not pay) (auto),\n"
            "                              draft (a draft model drafts k tokens for every decoding request, one\n"
            "                              batched draft forward per position), self (the model's first L layers\n"
            "                              draft); auto also uses the draft model when loaded, else self when\n"
            "                              --self-spec-layers is given\n"
            "  --spec-k N                  drafted tokens per request per step at most (8; 1..16)\n"
            "  --spec-max-streams N        auto drafts only while at most N streams decode (1); with N > 1 the\n"
            "                              drafts of a multi-stream step stay within the p99 of the streams'\n"
            "                              inter-token gaps without drafts\n"
            "  --draft-model PATH          a draft model (GGUF) with the target's vocabulary (refused otherwise)\n"
            "  --draft-kv-mem MiB          the draft model's KV pool (default: a quarter of --kv-cache-mem when set,\n"
            "                              else as many tokens as the target's pool)\n"
            "  --self-spec-layers L        self-speculation through the first L layers (--spec self: n_layers/4); it\n"
            "                              drafts in the target's KV (no pool of its own; --device cpu only)\n"
            "  --pooling mean|last         /v1/embeddings: mean of the final hidden states (default) or the last\n"
            "                              token's\n"
            "  --truncation disabled|auto  context overflow of a request that does not say ('truncation'):\n"
            "                              refuse with context_length_exceeded (disabled, default), or drop the\n"
            "                              oldest chat turns / the middle of a completions prompt (auto)\n"
            "  --summarize-with MODEL      truncation auto, chat: replace the dropped turns with one summary\n"
            "                              message generated by MODEL (a served model's name; cached)\n"
            "  --lenient                   accept unknown or unsupported request fields, ignoring them with a\n"
            "                              logged warning (default: 400 naming the field)\n");
}

static int num(const char *flag, const char *s, double lo, double hi, double *out) {
    char f[64];
    snprintf(f, sizeof f, "--%s", flag);
    return cli_num("serve", f, s, lo, hi, out);
}

// `-m ALIAS=PATH`: a '=' before any '/' (srv_config_add_model_arg's rule)
static int has_alias(const char *arg) {
    const char *eq = strchr(arg, '='), *sl = strchr(arg, '/');
    return eq && (!sl || eq < sl);
}

int cli_serve(int argc, char **argv) {
    server_opts o;
    server_opts_default(&o);
    enum {
        O_HOST = 256, O_PORT, O_KEY, O_CORS, O_CTX, O_MBT, O_SEQS, O_KV, O_QUEUE, O_QTOK, O_RTO, O_GRACE, O_THREADS,
        O_TMPL, O_LOG, O_BODY, O_HTO, O_NAME, O_NOPC, O_ITL, O_ITLF, O_ITLM, O_PUBLIC, O_HOSTS, O_SPEC, O_SPECK, O_SPECMS,
        O_LENIENT, O_POOL, O_TRUNC, O_SUMM, O_DRAFT, O_DRAFTKV, O_SELFL,
        O_READTO, O_MAXCONN, O_MAXCONNPC, O_BODYBUF, O_PING, // connection limits
        O_KVT, O_KVTK, O_KVTV, O_KVROT, O_KVCEN, // KV cache types, its rotation and key centering
        O_REASON,
        O_KEYFILE,
        O_CONFIG, O_ROUTER, O_RMP, O_RMT, O_RDEG, // several models, routers (their --ttft-slo is O_TTFTSLO)
        O_SCHED, O_AGING, O_TTFTSLO, O_E2ESLO, // scheduling policy
        O_DEVICE
    };
    static const struct option lo[] = {
        {"model", required_argument, 0, 'm'},         {"host", required_argument, 0, O_HOST},
        {"port", required_argument, 0, O_PORT},       {"api-key", required_argument, 0, O_KEY},
        {"cors", required_argument, 0, O_CORS},             {"ctx-size", required_argument, 0, O_CTX},
        {"max-batch-tokens", required_argument, 0, O_MBT}, {"max-seqs", required_argument, 0, O_SEQS},
        {"kv-cache-mem", required_argument, 0, O_KV}, {"max-queue", required_argument, 0, O_QUEUE},
        {"max-queued-tokens", required_argument, 0, O_QTOK}, {"request-timeout", required_argument, 0, O_RTO},
        {"shutdown-grace", required_argument, 0, O_GRACE}, {"threads", required_argument, 0, O_THREADS},
        {"device", required_argument, 0, O_DEVICE},
        {"chat-template", required_argument, 0, O_TMPL}, {"log-level", required_argument, 0, O_LOG},
        {"itl-guard", required_argument, 0, O_ITL}, {"itl-guard-fair", required_argument, 0, O_ITLF},
        {"itl-guard-floor-ms", required_argument, 0, O_ITLM},
        {"spec", required_argument, 0, O_SPEC},       {"spec-k", required_argument, 0, O_SPECK},
        {"spec-max-streams", required_argument, 0, O_SPECMS},
        {"max-body", required_argument, 0, O_BODY},   {"http-timeout", required_argument, 0, O_HTO},
        {"served-model-name", required_argument, 0, O_NAME}, {"no-prefix-cache", no_argument, 0, O_NOPC},
        {"public-routes", required_argument, 0, O_PUBLIC}, {"allowed-hosts", required_argument, 0, O_HOSTS},
        {"truncation", required_argument, 0, O_TRUNC},
        {"summarize-with", required_argument, 0, O_SUMM},
        {"lenient", no_argument, 0, O_LENIENT},     {"pooling", required_argument, 0, O_POOL},
        {"request-read-timeout", required_argument, 0, O_READTO}, {"max-connections", required_argument, 0, O_MAXCONN},
        {"max-connections-per-client", required_argument, 0, O_MAXCONNPC},
        {"max-body-buffer", required_argument, 0, O_BODYBUF}, {"sse-ping", required_argument, 0, O_PING},
        {"kv-type", required_argument, 0, O_KVT}, {"kv-type-k", required_argument, 0, O_KVTK},
        {"kv-type-v", required_argument, 0, O_KVTV}, {"kv-rotate", required_argument, 0, O_KVROT},
        {"kv-center", required_argument, 0, O_KVCEN},
        {"api-key-file", required_argument, 0, O_KEYFILE},
        {"reasoning-format", required_argument, 0, O_REASON},
        {"config", required_argument, 0, O_CONFIG}, {"router", required_argument, 0, O_ROUTER},
        {"route-max-prompt-tokens", required_argument, 0, O_RMP}, {"route-max-tokens", required_argument, 0, O_RMT},
        {"route-degrade", no_argument, 0, O_RDEG},
        {"sched", required_argument, 0, O_SCHED}, {"sched-aging", required_argument, 0, O_AGING},
        {"ttft-slo", required_argument, 0, O_TTFTSLO}, {"e2e-slo", required_argument, 0, O_E2ESLO},
        {"draft-model", required_argument, 0, O_DRAFT}, {"draft-kv-mem", required_argument, 0, O_DRAFTKV},
        {"self-spec-layers", required_argument, 0, O_SELFL},
        {"help", no_argument, 0, 'h'},                {0, 0, 0, 0}};
    optind = 1;
    int c;
    double v;
    const char *margs[SRV_CFG_MAX_MODELS], *rargs[SRV_CFG_MAX_ROUTERS], *config = NULL;
    int n_m = 0, n_r = 0;
    srv_router_spec rdef;
    srv_router_defaults(&rdef);
    while ((c = getopt_long(argc, argv, "m:h", lo, NULL)) != -1) {
        const char *flag = cli_opt_name(lo, c);
        int bad = 0;
        switch (c) {
        case 'm':
            if (n_m == SRV_CFG_MAX_MODELS) {
                fprintf(stderr, "tachyon serve: at most %d models\n", SRV_CFG_MAX_MODELS);
                return 2;
            }
            o.model_path = margs[n_m++] = optarg;
            break;
        case O_CONFIG: config = optarg; break;
        case O_ROUTER:
            if (n_r == SRV_CFG_MAX_ROUTERS) {
                fprintf(stderr, "tachyon serve: at most %d routers\n", SRV_CFG_MAX_ROUTERS);
                return 2;
            }
            rargs[n_r++] = optarg;
            break;
        case O_RMP: bad = num(flag, optarg, 0, 1 << 24, &v); rdef.max_prompt_tokens = (int)v; break;
        case O_RMT: bad = num(flag, optarg, 0, 1 << 24, &v); rdef.max_tokens = (int)v; break;
        case O_RDEG: rdef.degrade = 1; break;
        case 'h': serve_usage(); return 0;
        case O_HOST: o.host = optarg; break;
        case O_PORT: bad = num(flag, optarg, 0, 65535, &v); o.port = (int)v; break;
        case O_KEY: o.api_key = optarg; break;
        case O_KEYFILE: o.api_key_file = optarg; break;
        case O_CORS: o.cors = optarg; bad = !*optarg; break;
        case O_PUBLIC: o.public_routes = optarg; break;
        case O_HOSTS: o.allowed_hosts = optarg; bad = !*optarg; break;
        case O_CTX: bad = num(flag, optarg, 0, 1 << 24, &v); o.eng.ctx_size = (int)v; break;
        case O_MBT: bad = num(flag, optarg, 1, 1 << 20, &v); o.eng.max_batch_tokens = (int)v; break;
        case O_SEQS: bad = num(flag, optarg, 1, 4096, &v); o.eng.max_seqs = (int)v; break;
        case O_KV: bad = num(flag, optarg, 0, 1 << 22, &v); o.eng.kv_mem_bytes = (size_t)(v * 1048576.0); break;
        case O_QUEUE: bad = num(flag, optarg, 0, 1 << 20, &v); o.eng.max_queue = (int)v; break;
        case O_QTOK: bad = num(flag, optarg, 0, 1e9, &v); o.eng.max_queued_tokens = (int)v; break;
        case O_RTO: bad = num(flag, optarg, 0, 1e7, &v); o.request_timeout = v; break;
        case O_GRACE: bad = num(flag, optarg, 0, 1e5, &v); o.shutdown_grace = v; break;
        case O_THREADS: bad = num(flag, optarg, 1, 1024, &v); o.eng.n_threads = (int)v; break;
        case O_DEVICE: bad = cli_device("serve", optarg, &o.eng.device) ? 1 : 0; break;
        case O_TMPL: o.chat_template = optarg; break;
        case O_ITL: bad = num(flag, optarg, 0, 1000, &v); o.eng.itl_guard = (float)v; break;
        case O_ITLF: bad = num(flag, optarg, 0, 1, &v); o.eng.itl_guard_fair = (int)v; break;
        case O_ITLM: bad = num(flag, optarg, 0, 10000, &v); o.eng.itl_guard_floor_ms = (float)v; break;
        case O_LOG:
            if (!strcmp(optarg, "debug")) o.log_level = SRV_LOG_DEBUG;
            else if (!strcmp(optarg, "info")) o.log_level = SRV_LOG_INFO;
            else if (!strcmp(optarg, "warn")) o.log_level = SRV_LOG_WARN;
            else if (!strcmp(optarg, "error")) o.log_level = SRV_LOG_ERROR;
            else {
                fprintf(stderr, "tachyon serve: --log-level expects debug|info|warn|error\n");
                bad = 1;
            }
            break;
        case O_BODY: bad = num(flag, optarg, 64, 1e10, &v); o.max_body = (size_t)v; break;
        case O_HTO: bad = num(flag, optarg, 1, 86400, &v); o.http_timeout = (int)v; break;
        case O_NAME: o.served_name = optarg; break;
        case O_NOPC: o.eng.prefix_cache = 0; break;
        case O_SPEC:
            if (spec_mode_parse(optarg) < 0) {
                fprintf(stderr, "tachyon serve: --spec expects off|ngram|auto|draft|self\n");
                bad = 1;
            } else o.eng.spec = spec_mode_parse(optarg);
            break;
        case O_SPECK: bad = num(flag, optarg, 1, SPEC_MAX_K, &v); o.eng.spec_k = (int)v; break;
        case O_SPECMS: bad = num(flag, optarg, 1, 1 << 20, &v); o.eng.spec_max_streams = (int)v; break;
        case O_DRAFT: o.draft_model_path = optarg; break;
        case O_DRAFTKV: bad = num(flag, optarg, 1, 1 << 22, &v); o.eng.draft_kv_mem_bytes = (size_t)(v * 1048576.0); break;
        case O_SELFL: bad = num(flag, optarg, 1, 4096, &v); o.eng.self_spec_layers = (int)v; break;
        case O_LENIENT: o.lenient = 1; break;
        case O_SUMM: o.summarize_with = optarg; break;
        case O_TRUNC:
            if (strcmp(optarg, "disabled") && strcmp(optarg, "auto")) {
                fprintf(stderr, "tachyon serve: --truncation expects disabled|auto\n");
                bad = 1;
            } else o.truncation = !strcmp(optarg, "auto");
            break;
        case O_POOL:
            if (!strcmp(optarg, "mean")) o.pooling = ENGINE_EMBED_MEAN;
            else if (!strcmp(optarg, "last")) o.pooling = ENGINE_EMBED_LAST;
            else {
                fprintf(stderr, "tachyon serve: --pooling expects mean|last\n");
                bad = 1;
            }
            break;
        case O_READTO: bad = num("--request-read-timeout", optarg, 0, 86400, &v); o.read_timeout = v; break;
        case O_MAXCONN: bad = num("--max-connections", optarg, 1, 1 << 20, &v); o.max_connections = (int)v; break;
        case O_MAXCONNPC:
            bad = num("--max-connections-per-client", optarg, 0, 1 << 20, &v);
            o.max_conn_per_client = (int)v;
            break;
        case O_BODYBUF: bad = num("--max-body-buffer", optarg, 0, 1e12, &v); o.max_body_buffer = (size_t)v; break;
        case O_PING: bad = num("--sse-ping", optarg, 0, 86400, &v); o.sse_ping = v; break;
        case O_KVT: bad = cli_kv_type("serve", "--kv-type", optarg, &o.eng.kv_type_k, &o.eng.kv_type_v); break;
        case O_KVTK: bad = cli_kv_type("serve", "--kv-type-k", optarg, &o.eng.kv_type_k, NULL); break;
        case O_KVTV: bad = cli_kv_type("serve", "--kv-type-v", optarg, NULL, &o.eng.kv_type_v); break;
        case O_KVROT: bad = cli_kv_rotate("serve", optarg); break;
        case O_KVCEN: bad = cli_kv_center("serve", optarg); break;
        case O_SCHED:
            if ((o.eng.sched_policy = sched_policy_parse(optarg)) < 0) {
                fprintf(stderr, "tachyon serve: --sched expects fifo|priority|slo\n");
                bad = 1;
            }
            break;
        case O_AGING: bad = num(flag, optarg, 0.001, 1e6, &v); o.eng.sched_aging = v; break;
        case O_TTFTSLO: // the requests' default TTFT target, and the routers' objective for degradation
            bad = num(flag, optarg, 0, 1e6, &v);
            o.eng.ttft_slo = v;
            if (v > 0) rdef.ttft_slo = v;
            break;
        case O_E2ESLO: bad = num(flag, optarg, 0, 1e7, &v); o.e2e_slo = v; break;
        case O_REASON:
            if (!strcmp(optarg, "auto")) o.reasoning_format = SRV_REASONING_AUTO;
            else if (!strcmp(optarg, "none")) o.reasoning_format = SRV_REASONING_NONE;
            else if (!strcmp(optarg, "deepseek")) o.reasoning_format = SRV_REASONING_PARSE;
            else {
                fprintf(stderr, "tachyon serve: --reasoning-format expects auto|none|deepseek, got '%s'\n", optarg);
                bad = 1;
            }
            break;
        default: serve_usage(); return 2;
        }
        if (bad) {
            if (c == O_CORS || c == O_HOSTS) fprintf(stderr, "tachyon serve: --%s expects a non-empty list\n", flag);
            return 2;
        }
    }
    if ((!o.model_path && !config) || optind < argc) {
        if (!o.model_path && !config) fprintf(stderr, "tachyon serve: -m MODEL (or --config FILE) is required\n");
        else fprintf(stderr, "tachyon serve: unexpected argument '%s'\n", argv[optind]);
        serve_usage();
        return 2;
    }
    tc_err err = {0};
    // several models, an alias or a router: the model list (one plain -m PATH keeps the one-model server)
    static srv_config cfg; // large: not on the stack
    srv_config_init(&cfg);
    if (config || n_r || n_m > 1 || (n_m == 1 && has_alias(margs[0]))) {
        int crc = config ? srv_config_load_file(&cfg, config, &err) : 0;
        for (int i = 0; !crc && i < n_m; i++) crc = srv_config_add_model_arg(&cfg, margs[i], &err);
        for (int i = 0; !crc && i < n_r; i++) crc = srv_config_add_router_arg(&cfg, rargs[i], &rdef, &err);
        if (!crc) crc = srv_config_finish(&cfg, &err);
        if (crc) {
            fprintf(stderr, "tachyon serve: %s\n", err.msg);
            srv_config_free(&cfg);
            return 2;
        }
        o.cfg = &cfg;
        o.model_path = cfg.models[0].path;
    }
    int rc = server_run(&o, &err);
    srv_config_free(&cfg);
    if (rc > 0) return rc; // 128 + signal: a second signal cut the drain (logged)
    if (rc) {
        fprintf(stderr, "tachyon serve: %s\n", err.msg);
        return 1;
    }
    return 0;
}
