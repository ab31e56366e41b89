// `tachyon serve`: the OpenAI-compatible HTTP server (see src/server/server.h).
#include <getopt.h>
#include <stddef.h>
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
            "  --ctx-size N                per-request context limit, prompt + output (default: the model's,\n"
            "                              cut to what a quarter of the free memory holds, logged)\n"
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
            "  --chat-template NAME        a built-in renderer instead of the model's own Jinja template: chatml,\n"
            "                              llama2, llama3, mistral, gemma, phi3, zephyr, deepseek, qwen3\n"
            "  --chat-template-file F      render chats with the Jinja template in F instead of the model's\n"
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
            "                              logged warning (default: 400 naming the field)\n"
            "  --any-model-name            a request naming a model this server does not serve goes to the (first)\n"
            "                              model instead of 404, for clients whose configuration fixes a name\n");
}

// The parsed command line: the server's options and what builds its model list (srv_config).
typedef struct serve_args {
    server_opts o;
    srv_router_spec rdef; // thresholds for every --router: --route-*, --ttft-slo
    const char *margs[SRV_CFG_MAX_MODELS]; // -m arguments, as given (borrowed from argv)
    const char *rargs[SRV_CFG_MAX_ROUTERS]; // --router arguments (borrowed from argv)
    const char *config;                    // --config FILE or NULL
    int n_m, n_r;
} serve_args;

enum {
    O_HOST = 256, O_PORT, O_KEY, O_CORS, O_CTX, O_MBT, O_SEQS, O_KV, O_QUEUE, O_QTOK, O_RTO, O_GRACE, O_THREADS,
    O_TMPL, O_LOG, O_BODY, O_HTO, O_NAME, O_NOPC, O_ITL, O_ITLF, O_ITLM, O_PUBLIC, O_HOSTS, O_SPEC, O_SPECK, O_SPECMS,
    O_LENIENT, O_ANYMODEL, O_POOL, O_TRUNC, O_SUMM, O_DRAFT, O_DRAFTKV, O_SELFL,
    O_READTO, O_MAXCONN, O_MAXCONNPC, O_BODYBUF, O_PING, // connection limits
    O_KVT, O_KVTK, O_KVTV, O_KVROT, O_KVCEN, // KV cache types, its rotation and key centering
    O_REASON,
    O_KEYFILE,
    O_CONFIG, O_ROUTER, O_RMP, O_RMT, O_RDEG, // several models, routers (their --ttft-slo is O_TTFTSLO)
    O_SCHED, O_AGING, O_TTFTSLO, O_E2ESLO, // scheduling policy
    O_DEVICE, O_TMPLF
};

static const struct option SERVE_LONG[] = {
    {"model", required_argument, 0, 'm'},         {"host", required_argument, 0, O_HOST},
    {"port", required_argument, 0, O_PORT},       {"api-key", required_argument, 0, O_KEY},
    {"cors", required_argument, 0, O_CORS},             {"ctx-size", required_argument, 0, O_CTX},
    {"max-batch-tokens", required_argument, 0, O_MBT}, {"max-seqs", required_argument, 0, O_SEQS},
    {"kv-cache-mem", required_argument, 0, O_KV}, {"max-queue", required_argument, 0, O_QUEUE},
    {"max-queued-tokens", required_argument, 0, O_QTOK}, {"request-timeout", required_argument, 0, O_RTO},
    {"shutdown-grace", required_argument, 0, O_GRACE}, {"threads", required_argument, 0, O_THREADS},
    {"device", required_argument, 0, O_DEVICE},
    {"chat-template", required_argument, 0, O_TMPL}, {"chat-template-file", required_argument, 0, O_TMPLF},
    {"log-level", required_argument, 0, O_LOG},
    {"itl-guard", required_argument, 0, O_ITL}, {"itl-guard-fair", required_argument, 0, O_ITLF},
    {"itl-guard-floor-ms", required_argument, 0, O_ITLM},
    {"spec", required_argument, 0, O_SPEC},       {"spec-k", required_argument, 0, O_SPECK},
    {"spec-max-streams", required_argument, 0, O_SPECMS},
    {"max-body", required_argument, 0, O_BODY},   {"http-timeout", required_argument, 0, O_HTO},
    {"served-model-name", required_argument, 0, O_NAME}, {"no-prefix-cache", no_argument, 0, O_NOPC},
    {"public-routes", required_argument, 0, O_PUBLIC}, {"allowed-hosts", required_argument, 0, O_HOSTS},
    {"truncation", required_argument, 0, O_TRUNC},
    {"summarize-with", required_argument, 0, O_SUMM},
    {"lenient", no_argument, 0, O_LENIENT},     {"any-model-name", no_argument, 0, O_ANYMODEL},     {"pooling", required_argument, 0, O_POOL},
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

// --- numeric flags: one row each, the value range and the serve_args field it sets

enum { SV_INT, SV_FLOAT, SV_DOUBLE, SV_SIZE, SV_MIB }; // the field's type (SV_MIB: size_t bytes from MiB)
typedef struct serve_num_flag {
    int val;       // the option's getopt val
    double lo, hi; // accepted range, inclusive
    size_t off;    // offsetof(serve_args, field)
    int kind;      // SV_*
} serve_num_flag;

#define SA(field) offsetof(serve_args, field)
static const serve_num_flag SERVE_NUMS[] = {
    {O_RMP, 0, 1 << 24, SA(rdef.max_prompt_tokens), SV_INT},
    {O_RMT, 0, 1 << 24, SA(rdef.max_tokens), SV_INT},
    {O_PORT, 0, 65535, SA(o.port), SV_INT},
    {O_CTX, 0, 1 << 24, SA(o.eng.ctx_size), SV_INT},
    {O_MBT, 1, 1 << 20, SA(o.eng.max_batch_tokens), SV_INT},
    {O_SEQS, 1, 4096, SA(o.eng.max_seqs), SV_INT},
    {O_KV, 0, 1 << 22, SA(o.eng.kv_mem_bytes), SV_MIB},
    {O_QUEUE, 0, 1 << 20, SA(o.eng.max_queue), SV_INT},
    {O_QTOK, 0, 1e9, SA(o.eng.max_queued_tokens), SV_INT},
    {O_RTO, 0, 1e7, SA(o.request_timeout), SV_DOUBLE},
    {O_GRACE, 0, 1e5, SA(o.shutdown_grace), SV_DOUBLE},
    {O_THREADS, 1, 1024, SA(o.eng.n_threads), SV_INT},
    {O_ITL, 0, 1000, SA(o.eng.itl_guard), SV_FLOAT},
    {O_ITLF, 0, 1, SA(o.eng.itl_guard_fair), SV_INT},
    {O_ITLM, 0, 10000, SA(o.eng.itl_guard_floor_ms), SV_FLOAT},
    {O_BODY, 64, 1e10, SA(o.max_body), SV_SIZE},
    {O_HTO, 1, 86400, SA(o.http_timeout), SV_INT},
    {O_SPECK, 1, SPEC_MAX_K, SA(o.eng.spec_k), SV_INT},
    {O_SPECMS, 1, 1 << 20, SA(o.eng.spec_max_streams), SV_INT},
    {O_DRAFTKV, 1, 1 << 22, SA(o.eng.draft_kv_mem_bytes), SV_MIB},
    {O_SELFL, 1, 4096, SA(o.eng.self_spec_layers), SV_INT},
    {O_READTO, 0, 86400, SA(o.read_timeout), SV_DOUBLE},
    {O_MAXCONN, 1, 1 << 20, SA(o.max_connections), SV_INT},
    {O_MAXCONNPC, 0, 1 << 20, SA(o.max_conn_per_client), SV_INT},
    {O_BODYBUF, 0, 1e12, SA(o.max_body_buffer), SV_SIZE},
    {O_PING, 0, 86400, SA(o.sse_ping), SV_DOUBLE},
    {O_AGING, 0.001, 1e6, SA(o.eng.sched_aging), SV_DOUBLE},
    {O_E2ESLO, 0, 1e7, SA(o.e2e_slo), SV_DOUBLE},
};

// --- string flags: the argument itself, borrowed from argv

typedef struct serve_str_flag {
    int val;
    size_t off;   // offsetof(serve_args, a const char * field)
    int nonempty; // 1: an empty argument is refused ("expects a non-empty list")
} serve_str_flag;

static const serve_str_flag SERVE_STRS[] = {
    {O_CONFIG, SA(config), 0},           {O_HOST, SA(o.host), 0},
    {O_KEY, SA(o.api_key), 0},           {O_KEYFILE, SA(o.api_key_file), 0},
    {O_CORS, SA(o.cors), 1},             {O_PUBLIC, SA(o.public_routes), 0},
    {O_HOSTS, SA(o.allowed_hosts), 1},   {O_TMPL, SA(o.chat_template), 0},
    {O_TMPLF, SA(o.chat_template_file), 0}, {O_NAME, SA(o.served_name), 0},
    {O_DRAFT, SA(o.draft_model_path), 0}, {O_SUMM, SA(o.summarize_with), 0},
};
#undef SA

// A numeric or string flag from the tables: 0 set, 1 bad value (message printed), -1 not in the tables.
static int serve_parse_table(serve_args *a, int c, const char *arg) {
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", cli_opt_name(SERVE_LONG, c));
    for (size_t i = 0; i < sizeof SERVE_NUMS / sizeof SERVE_NUMS[0]; i++) {
        const serve_num_flag *f = &SERVE_NUMS[i];
        if (f->val != c) continue;
        double v;
        if (cli_num("serve", flag, arg, f->lo, f->hi, &v)) return 1;
        char *p = (char *)a + f->off;
        switch (f->kind) {
        case SV_INT: *(int *)p = (int)v; break;
        case SV_FLOAT: *(float *)p = (float)v; break;
        case SV_DOUBLE: *(double *)p = v; break;
        case SV_SIZE: *(size_t *)p = (size_t)v; break;
        case SV_MIB: *(size_t *)p = (size_t)(v * 1048576.0); break;
        }
        return 0;
    }
    for (size_t i = 0; i < sizeof SERVE_STRS / sizeof SERVE_STRS[0]; i++) {
        const serve_str_flag *f = &SERVE_STRS[i];
        if (f->val != c) continue;
        if (f->nonempty && !*arg) {
            fprintf(stderr, "tachyon serve: %s expects a non-empty list\n", flag);
            return 1;
        }
        *(const char **)((char *)a + f->off) = arg;
        return 0;
    }
    return -1;
}

// A flag that takes one of a few words: 0 set, 1 bad value (message printed), -1 not one of these.
static int serve_parse_word(server_opts *o, int c, const char *arg) {
    switch (c) {
    case O_LOG:
        if (!strcmp(arg, "debug")) o->log_level = SRV_LOG_DEBUG;
        else if (!strcmp(arg, "info")) o->log_level = SRV_LOG_INFO;
        else if (!strcmp(arg, "warn")) o->log_level = SRV_LOG_WARN;
        else if (!strcmp(arg, "error")) o->log_level = SRV_LOG_ERROR;
        else return fprintf(stderr, "tachyon serve: --log-level expects debug|info|warn|error\n"), 1;
        return 0;
    case O_SPEC:
        if (spec_mode_parse(arg) < 0)
            return fprintf(stderr, "tachyon serve: --spec expects off|ngram|auto|draft|self\n"), 1;
        o->eng.spec = spec_mode_parse(arg);
        return 0;
    case O_TRUNC:
        if (strcmp(arg, "disabled") && strcmp(arg, "auto"))
            return fprintf(stderr, "tachyon serve: --truncation expects disabled|auto\n"), 1;
        o->truncation = !strcmp(arg, "auto");
        return 0;
    case O_POOL:
        if (!strcmp(arg, "mean")) o->pooling = ENGINE_EMBED_MEAN;
        else if (!strcmp(arg, "last")) o->pooling = ENGINE_EMBED_LAST;
        else return fprintf(stderr, "tachyon serve: --pooling expects mean|last\n"), 1;
        return 0;
    case O_SCHED:
        if ((o->eng.sched_policy = sched_policy_parse(arg)) < 0)
            return fprintf(stderr, "tachyon serve: --sched expects fifo|priority|slo\n"), 1;
        return 0;
    case O_REASON:
        if (!strcmp(arg, "auto")) o->reasoning_format = SRV_REASONING_AUTO;
        else if (!strcmp(arg, "none")) o->reasoning_format = SRV_REASONING_NONE;
        else if (!strcmp(arg, "deepseek")) o->reasoning_format = SRV_REASONING_PARSE;
        else {
            fprintf(stderr, "tachyon serve: --reasoning-format expects auto|none|deepseek, got '%s'\n", arg);
            return 1;
        }
        return 0;
    case O_DEVICE: return cli_device("serve", arg, &o->eng.device) ? 1 : 0;
    case O_KVT: return cli_kv_type("serve", "--kv-type", arg, &o->eng.kv_type_k, &o->eng.kv_type_v) ? 1 : 0;
    case O_KVTK: return cli_kv_type("serve", "--kv-type-k", arg, &o->eng.kv_type_k, NULL) ? 1 : 0;
    case O_KVTV: return cli_kv_type("serve", "--kv-type-v", arg, NULL, &o->eng.kv_type_v) ? 1 : 0;
    case O_KVROT: return cli_kv_rotate("serve", arg) ? 1 : 0;
    case O_KVCEN: return cli_kv_center("serve", arg) ? 1 : 0;
    default: return -1;
    }
}

// One option (c as getopt_long returns it, arg its argument or NULL): 0 taken, 1 refused (message printed;
// exit status 2), -1 unknown (the usage follows).
static int serve_parse_opt(serve_args *a, int c, const char *arg) {
    switch (c) {
    case 'm':
        if (a->n_m == SRV_CFG_MAX_MODELS)
            return fprintf(stderr, "tachyon serve: at most %d models\n", SRV_CFG_MAX_MODELS), 1;
        a->o.model_path = a->margs[a->n_m++] = arg;
        return 0;
    case O_ROUTER:
        if (a->n_r == SRV_CFG_MAX_ROUTERS)
            return fprintf(stderr, "tachyon serve: at most %d routers\n", SRV_CFG_MAX_ROUTERS), 1;
        a->rargs[a->n_r++] = arg;
        return 0;
    case O_RDEG: a->rdef.degrade = 1; return 0;
    case O_NOPC: a->o.eng.prefix_cache = 0; return 0;
    case O_LENIENT: a->o.lenient = 1; return 0;
    case O_ANYMODEL: a->o.any_model = 1; return 0;
    case O_TTFTSLO: { // the requests' default TTFT target, and the routers' objective for degradation
        double v;
        if (cli_num("serve", "--ttft-slo", arg, 0, 1e6, &v)) return 1;
        a->o.eng.ttft_slo = v;
        if (v > 0) a->rdef.ttft_slo = v;
        return 0;
    }
    default: break;
    }
    if (c < 256 || !arg) return -1; // '?' and ':' from getopt_long
    int rc = serve_parse_table(a, c, arg);
    return rc >= 0 ? rc : serve_parse_word(&a->o, c, arg);
}

// `-m ALIAS=PATH`: a '=' before any '/' (srv_config_add_model_arg's rule)
static int has_alias(const char *arg) {
    const char *eq = strchr(arg, '='), *sl = strchr(arg, '/');
    return eq && (!sl || eq < sl);
}

// Several models, an alias or a router: fills cfg (initialized) from --config, the -m and --router arguments,
// and points a->o at it; one plain -m PATH leaves the one-model server alone. 0, or TC_ERR_* with err set.
static int serve_model_list(serve_args *a, srv_config *cfg, tc_err *err) {
    if (!(a->config || a->n_r || a->n_m > 1 || (a->n_m == 1 && has_alias(a->margs[0])))) return 0;
    int crc = a->config ? srv_config_load_file(cfg, a->config, err) : 0;
    for (int i = 0; !crc && i < a->n_m; i++) crc = srv_config_add_model_arg(cfg, a->margs[i], err);
    for (int i = 0; !crc && i < a->n_r; i++) crc = srv_config_add_router_arg(cfg, a->rargs[i], &a->rdef, err);
    if (!crc) crc = srv_config_finish(cfg, err);
    if (crc) return crc;
    a->o.cfg = cfg;
    a->o.model_path = cfg->models[0].path;
    return 0;
}

int cli_serve(int argc, char **argv) {
    serve_args a;
    memset(&a, 0, sizeof a);
    server_opts_default(&a.o);
    srv_router_defaults(&a.rdef);
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "m:h", SERVE_LONG, NULL)) != -1) {
        if (c == 'h') {
            serve_usage();
            return 0;
        }
        int rc = serve_parse_opt(&a, c, optarg);
        if (rc < 0) {
            serve_usage();
            return 2;
        }
        if (rc) return 2;
    }
    if ((!a.o.model_path && !a.config) || optind < argc) {
        if (!a.o.model_path && !a.config) fprintf(stderr, "tachyon serve: -m MODEL (or --config FILE) is required\n");
        else fprintf(stderr, "tachyon serve: unexpected argument '%s'\n", argv[optind]);
        serve_usage();
        return 2;
    }
    tc_err err = {0};
    static srv_config cfg; // large: not on the stack
    srv_config_init(&cfg);
    if (serve_model_list(&a, &cfg, &err)) {
        fprintf(stderr, "tachyon serve: %s\n", err.msg);
        srv_config_free(&cfg);
        return 2;
    }
    int rc = server_run(&a.o, &err);
    srv_config_free(&cfg);
    if (rc > 0) return rc; // 128 + signal: a second signal cut the drain (logged)
    if (rc) {
        fprintf(stderr, "tachyon serve: %s\n", err.msg);
        return 1;
    }
    return 0;
}
