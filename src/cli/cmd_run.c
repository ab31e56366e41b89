// tachyon run: generate from a prompt; generated text to stdout as it is produced, timings to stderr.
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_engine.h"
#include "common/timeutil.h"
#include "speculation/spec.h"
#include "speculation/spec_draft.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

static void run_usage(void) {
    fprintf(stderr, "usage: tachyon run -m MODEL -p PROMPT [-n N] [--temp T] [--top-p P] [--top-k K] [--min-p M]\n"
                    "                   [--repeat-penalty R] [--seed S] [-t THREADS] [-c CTX] [--chat]\n"
                    "                   [--chat-template NAME] [--ignore-eos] [--spec off|ngram|draft|self|auto] [--spec-k K]\n"
                    "                   [--draft-model PATH] [--self-spec-layers L]\n"
                    "                   [--kv-type|--kv-type-k|--kv-type-v f16|q8_0|q4_0] [--kv-rotate auto|off]\n"
                    "                   [--kv-center auto|off] [--device cpu|cuda]\n"
                    "  --spec: speculative decoding; ngram drafts k tokens by prompt lookup whenever it finds a match,\n"
                    "  draft drafts k tokens with --draft-model (same vocabulary as the model), self with the model's\n"
                    "  first L layers (--self-spec-layers, default n_layers/4); auto (default) uses the draft model\n"
                    "  (else self-speculation when L is given) where its measured cost pays, else prompt lookup,\n"
                    "  with k adapted to the acceptance rate and the measured step cost\n");
}

typedef struct run_opts {
    const char *model, *prompt, *chat_template, *draft_model;
    int self_layers; // --self-spec-layers (0: n_layers / 4 under --spec self, none under auto)
    int n_predict, threads, ctx, chat, ignore_eos;
    int spec, spec_k; // spec_mode, drafted tokens per step at most
    tt_type kv_k, kv_v; // KV cache types
    backend_device device; // --device
    samp_params sp;
} run_opts;

static int parse(int argc, char **argv, run_opts *o) {
    static const struct option lo[] = {
        {"model", 1, 0, 'm'}, {"prompt", 1, 0, 'p'}, {"n-predict", 1, 0, 'n'}, {"threads", 1, 0, 't'},
        {"ctx-size", 1, 0, 'c'}, {"temp", 1, 0, 1}, {"top-p", 1, 0, 2}, {"top-k", 1, 0, 3}, {"min-p", 1, 0, 4},
        {"seed", 1, 0, 5}, {"chat", 0, 0, 6}, {"chat-template", 1, 0, 7}, {"repeat-penalty", 1, 0, 8},
        {"ignore-eos", 0, 0, 9}, {"spec", 1, 0, 10}, {"spec-k", 1, 0, 11}, {"kv-type", 1, 0, 12},
        {"kv-type-k", 1, 0, 13}, {"kv-type-v", 1, 0, 14}, {"draft-model", 1, 0, 15}, {"self-spec-layers", 1, 0, 16},
        {"kv-rotate", 1, 0, 17}, {"kv-center", 1, 0, 18}, {"device", 1, 0, 19},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->n_predict = 128;
    o->spec = SPEC_AUTO;
    o->spec_k = 8;
    o->threads = 2;
    o->ctx = 0;
    o->kv_k = o->kv_v = TT_F16;
    samp_params_default(&o->sp);
    o->sp.no_logprob = 1; // run prints text, never logprobs
    o->sp.temperature = 0.0f;
    int c, bad = 0;
    double v = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:p:n:t:c:h", lo, NULL)) != -1) {
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'p': o->prompt = optarg; break;
        case 'n': bad = cli_num("run", "-n/--n-predict", optarg, 0, 1 << 24, &v), o->n_predict = (int)v; break;
        case 't': bad = cli_num("run", "-t/--threads", optarg, 1, 256, &v), o->threads = (int)v; break;
        case 'c': bad = cli_num("run", "-c/--ctx-size", optarg, 0, 1 << 24, &v), o->ctx = (int)v; break;
        case 1: bad = cli_num("run", "--temp", optarg, 0, 100, &v), o->sp.temperature = (float)v; break;
        case 2: bad = cli_num("run", "--top-p", optarg, 0, 1, &v), o->sp.top_p = (float)v; break;
        case 3: bad = cli_num("run", "--top-k", optarg, 0, 1e9, &v), o->sp.top_k = (int)v; break;
        case 4: bad = cli_num("run", "--min-p", optarg, 0, 1, &v), o->sp.min_p = (float)v; break;
        case 5: {
            char *end;
            o->sp.seed = strtoull(optarg, &end, 10);
            if (!*optarg || *end || *optarg == '-') {
                fprintf(stderr, "tachyon run: --seed expects a non-negative integer, got '%s'\n", optarg);
                bad = 1;
            }
            break;
        }
        case 6: o->chat = 1; break;
        case 7: o->chat_template = optarg, o->chat = 1; break;
        case 8: bad = cli_num("run", "--repeat-penalty", optarg, 0.01, 100, &v), o->sp.repetition_penalty = (float)v; break;
        case 9: o->ignore_eos = 1; break;
        case 10:
            if ((o->spec = spec_mode_parse(optarg)) < 0) {
                fprintf(stderr, "tachyon run: --spec expects off|ngram|draft|self|auto\n");
                bad = 1;
            }
            break;
        case 11: bad = cli_num("run", "--spec-k", optarg, 1, SPEC_MAX_K, &v), o->spec_k = (int)v; break;
        case 12: bad = cli_kv_type("run", "--kv-type", optarg, &o->kv_k, &o->kv_v); break;
        case 13: bad = cli_kv_type("run", "--kv-type-k", optarg, &o->kv_k, NULL); break;
        case 14: bad = cli_kv_type("run", "--kv-type-v", optarg, NULL, &o->kv_v); break;
        case 15: o->draft_model = optarg; break;
        case 16: bad = cli_num("run", "--self-spec-layers", optarg, 1, 1 << 16, &v), o->self_layers = (int)v; break;
        case 17: bad = cli_kv_rotate("run", optarg); break;
        case 18: bad = cli_kv_center("run", optarg); break;
        case 19: bad = cli_device("run", optarg, &o->device); break;
        default: run_usage(); return -1;
        }
        if (bad) return -1;
    }
    if (!o->model || !o->prompt) {
        run_usage();
        return -1;
    }
    return 0;
}

// Prints each generated token as its text completes (an end-of-generation token ends the request in the
// engine, unless --ignore-eos: then it is printed like any other).
typedef struct run_out {
    tok_stream *ts;
} run_out;

static void run_emit(void *ctx, const samp_result *tok) {
    run_out *r = ctx;
    char piece[256];
    int len = tok_stream_push(r->ts, tok->token, piece, sizeof piece);
    if (len > 0 && len <= (int)sizeof piece) fwrite(piece, 1, (size_t)len, stdout), fflush(stdout);
}

// The prompt's token ids (BOS alone for an empty prompt): *ids malloc'd.
static int run_prompt(const run_opts *o, model *m, const tok_vocab *v, int32_t **ids, int *n_ids, tc_err *err) {
    int rc = o->chat ? cli_encode_chat(m, v, o->chat_template, o->prompt, ids, n_ids, err)
                     : tok_encode(v, o->prompt, strlen(o->prompt), tok_add_bos(v) ? TOK_ENC_ADD_BOS : 0, ids, n_ids,
                                  err);
    if (rc || *n_ids > 0) return rc;
    int32_t bos = tok_bos(v);
    if (bos < 0) return tc_err_set(err, TC_ERR_INVALID, "empty prompt and the model has no BOS token");
    free(*ids);
    if (!(*ids = malloc(sizeof **ids))) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    (*ids)[0] = bos, *n_ids = 1;
    return 0;
}

static void run_report(const run_opts *o, double t_load, const engine_event *fin, const engine_stats *es,
                       const model *dm) {
    double t_prefill = fin->t_first_token - fin->t_first_sched, t_decode = fin->t_finish - fin->t_first_token;
    int n_gen = fin->n_generated;
    fprintf(stderr, "\nload %.3f s | prompt %d tok, TTFT %.1f ms, prefill %.1f tok/s | generated %d tok, decode %.1f tok/s\n",
            t_load, fin->n_prompt, (fin->t_first_token - fin->t_arrival) * 1e3,
            t_prefill > 0 ? fin->n_prompt / t_prefill : 0.0, n_gen,
            n_gen > 1 && t_decode > 0 ? (n_gen - 1) / t_decode : 0.0);
    long model_drafted = (long)(es->spec_draft[SPEC_M_DRAFT] + es->spec_draft[SPEC_M_SELF]);
    int self = spec_drafter_choice(o->spec, dm != NULL, o->self_layers) == SPEC_M_SELF;
    fprintf(stderr, "spec %s: %d drafted (%ld by the %s), %d accepted (acceptance %.1f%%) in %ld verify steps\n",
            spec_mode_name((spec_mode)o->spec), fin->n_spec_drafted, model_drafted,
            dm ? "draft model" : self ? "self-speculation drafter" : "model", fin->n_spec_accepted,
            fin->n_spec_drafted ? 100.0 * fin->n_spec_accepted / fin->n_spec_drafted : 0.0,
            (long)es->spec_verify_steps);
}

int cli_run(int argc, char **argv) {
    run_opts o;
    if (parse(argc, argv, &o)) return 2;
    tc_err err = {0};
    model *m = NULL;
    tok_vocab *v = NULL;
    tok_stream *ts = NULL;
    int32_t *ids = NULL;
    model *dm = NULL; // --draft-model
    engine *eng = NULL;
    int n_ids = 0, status = 1;

    double t0 = tc_now();
    if (model_load(o.model, &m, &err) || tok_load(model_gguf(m), &v, &err)) goto fail;
    const model_hparams *hp = model_get_hparams(m);
    if (run_prompt(&o, m, v, &ids, &n_ids, &err)) goto fail;
    int ctx = o.ctx ? o.ctx : n_ids + o.n_predict;
    if (ctx > hp->ctx_train) ctx = hp->ctx_train;
    if (n_ids + o.n_predict > ctx) {
        tc_err_set(&err, TC_ERR_INVALID, "prompt (%d tokens) + %d new tokens exceed the context of %d", n_ids,
                   o.n_predict, ctx);
        goto fail;
    }
    if (o.draft_model && (o.spec == SPEC_DRAFT || o.spec == SPEC_AUTO) && model_load(o.draft_model, &dm, &err))
        goto fail;
    engine_opts eo;
    cli_engine_opts(&eo, ctx, n_ids < 512 ? n_ids : 512, o.threads);
    eo.kv_type_k = o.kv_k, eo.kv_type_v = o.kv_v, eo.device = o.device;
    eo.spec = o.spec, eo.spec_k = o.spec_k, eo.draft_model = dm, eo.self_spec_layers = o.self_layers;
    if (cli_engine_new(m, v, &eo, &eng, &err)) goto fail;
    double t_load = tc_now() - t0; // model, tokenizer and the engine's start (its warm-up pages the weights in)
    // Generated text continues the prompt's text (keeps its leading space), unless the prompt is BOS alone.
    int bos_only = n_ids == 1 && ids[0] == tok_bos(v);
    ts = tok_stream_new(v, bos_only ? 0 : TOK_DEC_CONTINUATION);
    if (!ts) goto fail;
    run_out ro = {ts};
    engine_req q = {.prompt = ids, .n_prompt = n_ids, .max_tokens = o.n_predict, .sp = o.sp,
                    .ignore_eos = o.ignore_eos};
    engine_event fin;
    if (o.n_predict > 0) {
        if (cli_engine_generate(eng, &q, run_emit, &ro, &fin, &err)) goto fail;
        ids = q.prompt; // NULL: the engine took it
    } else { // nothing to generate: the prompt is not even run
        memset(&fin, 0, sizeof fin);
        fin.n_prompt = n_ids;
    }
    char piece[256];
    int len = tok_stream_flush(ts, piece, sizeof piece);
    if (len > 0 && len <= (int)sizeof piece) fwrite(piece, 1, (size_t)len, stdout);
    printf("\n");
    engine_stats es;
    engine_get_stats(eng, &es);
    run_report(&o, t_load, &fin, &es, dm);
    status = 0;
    goto done;
fail:
    fprintf(stderr, "run: %s\n", err.msg[0] ? err.msg : "failed");
done:
    engine_free(eng, 0);
    model_free(dm);
    tok_stream_free(ts);
    free(ids);
    tok_free(v);
    model_free(m);
    return status;
}
