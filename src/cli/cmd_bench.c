// tachyon bench: prefill and decode tokens/s (mean ± std over repetitions) in llama-bench's table shape,
// plus the memory-bandwidth floor for decode (bytes read per token ÷ measured read bandwidth).
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd_bench_spec.h"
#include "cli/cli.h"
#include "cli/cli_engine.h"
#include "common/timeutil.h"
#include "cpu/cpu.h"
#include "speculation/spec.h"

typedef struct bench_stat {
    double mean, std;
} bench_stat;

static bench_stat stat_of(const double *x, int n) {
    bench_stat s = {0, 0};
    for (int i = 0; i < n; i++) s.mean += x[i] / n;
    for (int i = 0; i < n; i++) s.std += (x[i] - s.mean) * (x[i] - s.mean);
    s.std = n > 1 ? sqrt(s.std / (n - 1)) : 0.0;
    return s;
}

// One repetition through the engine: tokens/s of prefilling n_prompt tokens (a request of that prompt and one
// new token), or of decoding n_gen tokens one at a time, both after a context of depth tokens (as llama-bench's
// -d: the cost at a long context is mostly attention over the KV cache). The depth is prefilled before the
// timed part; repetitions find it in the prefix cache, so a prefill at depth times its n_prompt tokens only.
// rep varies a prefill's first token after the depth, so that no repetition finds the one before it cached.
// Random tokens: the greedy output is whatever it is, and end-of-generation tokens do not stop it.
static int bench_once(engine *e, const int32_t *toks, int n_prompt, int n_gen, int depth, int rep, int n_vocab,
                      double *tps, tc_err *err) {
    int n = n_prompt > 0 ? depth + n_prompt : depth > 0 ? depth : 1;
    engine_req q = {.n_prompt = n, .max_tokens = n_prompt > 0 ? 1 : n_gen + 1, .ignore_eos = 1};
    samp_params_default(&q.sp);
    q.sp.temperature = 0.0f;
    q.sp.no_logprob = 1;
    if (!(q.prompt = malloc((size_t)n * sizeof *toks))) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    memcpy(q.prompt, toks, (size_t)n * sizeof *toks);
    if (n_prompt > 0) q.prompt[depth] = (toks[depth] + rep) % n_vocab;
    engine_event fin;
    int rc = cli_engine_generate(e, &q, NULL, NULL, &fin, err);
    free(q.prompt); // NULL once the engine took it
    if (rc) return rc;
    double t = n_prompt > 0 ? fin.t_first_token - fin.t_first_sched : fin.t_finish - fin.t_first_token;
    *tps = t > 0 ? (n_prompt > 0 ? n_prompt : n_gen) / t : 0;
    return 0;
}

// tachyon bench --prompt-file [--spec MODES]: loads the model (and --draft-model) and runs bench_spec_run.
// Returns the exit status.
static int bench_spec_main(bench_spec_args *sa, const char *path, const char *draft_path) {
    if (!sa->prompt_file) {
        fprintf(stderr, "tachyon bench: --spec needs --prompt-file (speculation pays only on text it can predict)\n");
        return 2;
    }
    if (sa->n_modes == 0) sa->modes[0] = SPEC_OFF, sa->n_modes = 1;
    tc_err e = {0};
    model *sm = NULL;
    sa->model_path = path;
    int rc = model_load(path, &sm, &e);
    if (!rc && draft_path) rc = model_load(draft_path, &sa->draft_model, &e);
    for (int i = 0; !rc && i < sa->n_modes; i++)
        if (sa->modes[i] == SPEC_DRAFT && !sa->draft_model)
            rc = tc_err_set(&e, TC_ERR_INVALID, "--spec draft needs --draft-model PATH");
    if (!rc) rc = bench_spec_run(sm, sa, &e);
    if (rc) fprintf(stderr, "bench: %s\n", e.msg[0] ? e.msg : "failed");
    model_free(sa->draft_model);
    model_free(sm);
    return rc ? 1 : 0;
}

// One result row: test pp<p> or tg<n>, with @d<depth> after a context of depth tokens (llama-bench's names).
static void print_row(const char *base, const model_hparams *hp, const char *be_name, int threads, int p, int n,
                      int depth, bench_stat s, int json) {
    char test[32];
    if (!depth) snprintf(test, sizeof test, "%s%d", p ? "pp" : "tg", p ? p : n);
    else snprintf(test, sizeof test, "%s%d@d%d", p ? "pp" : "tg", p ? p : n, depth);
    if (json)
        printf("{\"model\": \"%s\", \"size\": %llu, \"params\": %llu, \"backend\": \"%s\", \"threads\": %d, "
               "\"test\": \"%s\", \"avg_ts\": %.3f, \"stddev_ts\": %.3f}\n", base,
               (unsigned long long)hp->weight_bytes, (unsigned long long)hp->n_params, be_name, threads, test,
               s.mean, s.std);
    else
        printf("| %-34.34s | %6.2f MiB | %6.2f M | %-8s | %7d | %13s | %10.2f ± %7.2f |\n", base,
               hp->weight_bytes / 1048576.0, hp->n_params / 1e6, be_name, threads, test, s.mean, s.std);
}

static void print_header(void) {
    printf("| %-34s | %10s | %8s | %-8s | %7s | %13s | %20s |\n", "model", "size", "params", "backend", "threads",
           "test", "t/s");
    printf("| %.34s | %.10s | %.8s | %.8s | %.7s | %.13s | %.20s |\n", "----------------------------------",
           "----------", "--------", "--------", "-------", "-------------", "--------------------");
}

// Whether a tensor name contains "_exps" (llama.cpp's expert tensors: ffn_{gate,up,down}_exps and their biases).
static int name_has_exps(const gguf_str *n) {
    for (uint64_t i = 0; i + 5 <= n->len; i++)
        if (!memcmp(n->ptr + i, "_exps", 5)) return 1;
    return 0;
}

// Bytes one decoded token reads: every weight once, except the token embedding when the output projection is
// separate (one row of it is read), and of a mixture of experts' expert tensors (*_exps) only the n_expert_used
// experts a token is routed to.
static double bytes_per_token(const model *m) {
    const model_hparams *hp = model_get_hparams(m);
    const gguf_ctx *g = model_gguf(m);
    const gguf_tensor *te = gguf_find_tensor(g, "token_embd.weight");
    double bytes = (double)hp->weight_bytes - (hp->tied_embeddings || !te ? 0.0 : (double)te->size);
    if (hp->n_expert > 0 && hp->n_expert_used > 0 && hp->n_expert_used < hp->n_expert) {
        double unread = 1.0 - (double)hp->n_expert_used / hp->n_expert;
        for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
            const gguf_tensor *t = gguf_tensor_at(g, i);
            if (name_has_exps(&t->name)) bytes -= unread * (double)t->size;
        }
    }
    return bytes;
}

// Decode floor: the bytes a token reads divided into the measured read bandwidth.
static void print_floor(const model *m, int threads, int json) {
    cpu_pool *pool = cpu_pool_new(threads);
    double bw = pool ? cpu_mem_bandwidth(pool) : 0;
    cpu_pool_free(pool);
    double bytes = bytes_per_token(m);
    if (bw <= 0) return;
    if (json)
        printf("{\"mem_bandwidth_gbs\": %.2f, \"bytes_per_token\": %.0f, \"decode_floor_ts\": %.2f}\n", bw / 1e9,
               bytes, bw / bytes);
    else
        printf("\nmemory read bandwidth %.2f GB/s (%d threads); %.1f MiB read per token -> decode floor %.1f t/s\n",
               bw / 1e9, threads, bytes / 1048576.0, bw / bytes);
}

int cli_bench(int argc, char **argv) {
    static const struct option lo[] = {{"model", 1, 0, 'm'}, {"n-prompt", 1, 0, 'p'}, {"n-gen", 1, 0, 'n'},
                                       {"threads", 1, 0, 't'}, {"repetitions", 1, 0, 'r'}, {"json", 0, 0, 'j'},
                                       {"batch", 1, 0, 'b'}, {"kv-type", 1, 0, 1}, {"kv-type-k", 1, 0, 2},
                                       {"kv-type-v", 1, 0, 3}, {"depth", 1, 0, 'd'}, {"spec", 1, 0, 4},
                                       {"spec-k", 1, 0, 5}, {"prompt-file", 1, 0, 6}, {"draft-model", 1, 0, 7},
                                       {"self-spec-layers", 1, 0, 8},
                                       {"kv-rotate", 1, 0, 9}, {"chat", 0, 0, 10},
                                       {"kv-center", 1, 0, 11}, {"device", 1, 0, 12}, {0, 0, 0, 0}};
    bench_spec_args sa = {.spec_k = 8};
    tt_type kv_k = TT_F16, kv_v = TT_F16;
    backend_device device = BACKEND_CPU;
    const char *path = NULL, *draft_path = NULL;
    int n_prompt = 512, n_gen = 128, threads = 2, reps = 5, json = 0, batch = 512, depth = 0, c, bad = 0;
    double v = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:p:n:t:r:b:d:j", lo, NULL)) != -1) {
        switch (c) {
        case 'm': path = optarg; break;
        case 'p': bad = cli_num("bench", "-p/--n-prompt", optarg, 0, 1 << 20, &v), n_prompt = (int)v; break;
        case 'n': bad = cli_num("bench", "-n/--n-gen", optarg, 0, 1 << 20, &v), n_gen = (int)v; break;
        case 't': bad = cli_num("bench", "-t/--threads", optarg, 1, 256, &v), threads = (int)v; break;
        case 'r': bad = cli_num("bench", "-r/--repetitions", optarg, 1, 1000, &v), reps = (int)v; break;
        case 'b': bad = cli_num("bench", "-b/--batch", optarg, 1, 1 << 20, &v), batch = (int)v; break;
        case 'j': json = 1; break;
        case 'd': bad = cli_num("bench", "-d/--depth", optarg, 0, 1 << 20, &v), depth = (int)v; break;
        case 1: bad = cli_kv_type("bench", "--kv-type", optarg, &kv_k, &kv_v); break;
        case 2: bad = cli_kv_type("bench", "--kv-type-k", optarg, &kv_k, NULL); break;
        case 3: bad = cli_kv_type("bench", "--kv-type-v", optarg, NULL, &kv_v); break;
        case 4:
            if ((sa.n_modes = bench_spec_parse_modes(optarg, sa.modes, BENCH_SPEC_MAX_MODES)) < 0)
                fprintf(stderr, "tachyon bench: --spec expects a comma-separated list of off|ngram|draft|self|auto\n"),
                    bad = 1;
            break;
        case 5: bad = cli_num("bench", "--spec-k", optarg, 1, 16, &v), sa.spec_k = (int)v; break;
        case 6: sa.prompt_file = optarg; break;
        case 7: draft_path = optarg; break;
        case 8: bad = cli_num("bench", "--self-spec-layers", optarg, 1, 1 << 16, &v), sa.self_layers = (int)v; break;
        case 9: bad = cli_kv_rotate("bench", optarg); break;
        case 11: bad = cli_kv_center("bench", optarg); break;
        case 10: sa.chat = 1; break;
        case 12: bad = cli_device("bench", optarg, &device); break;
        default: path = NULL, optind = argc; break;
        }
        if (bad) return 2;
    }
    if (!path || n_prompt < 0 || n_gen < 0 || threads < 1 || reps < 1 || reps > 1000 || batch < 1) {
        fprintf(stderr, "usage: tachyon bench -m MODEL [-p 512] [-n 128] [-t THREADS] [-r REPS] [-b BATCH] [-d DEPTH] [--json]\n"
                        "                     [--kv-type|--kv-type-k|--kv-type-v f16|q8_0|q4_0] [--kv-rotate auto|off]\n"
                        "                     [--kv-center auto|off]\n"
                        "                     [--device cpu|cuda]\n"
                        "                     [--prompt-file FILE [--spec off,ngram,draft,self,auto] [--spec-k K]\n"
                        "                      [--draft-model PATH] [--self-spec-layers L] [--chat]]\n"
                        "  -d/--depth: prefill and decode after a context of DEPTH tokens (pp<p>@d<DEPTH>, tg<n>@d<DEPTH>)\n"
                        "  --prompt-file: greedy decode of -n tokens after this prompt, once per --spec mode (interleaved\n"
                        "                 within each repetition; speedup relative to the first mode, acceptance rate)\n"
                        "  --chat: the prompt file is one user turn in the model's chat template (as run --chat)\n");
        return 2;
    }
    if (sa.n_modes > 0 || sa.prompt_file) {
        sa.n_gen = n_gen > 0 ? n_gen : 1, sa.reps = reps, sa.threads = threads;
        sa.batch = batch, sa.json = json, sa.kv_k = kv_k, sa.kv_v = kv_v, sa.device = device;
        return bench_spec_main(&sa, path, draft_path);
    }
    tc_err err = {0};
    model *m = NULL;
    engine *eng = NULL;
    tok_vocab *vocab = NULL;
    int32_t *toks = NULL;
    double *samples = malloc(sizeof(double) * (size_t)reps);
    int status = 1;
    if (!samples || model_load(path, &m, &err) || tok_load(model_gguf(m), &vocab, &err)) goto fail;
    const model_hparams *hp = model_get_hparams(m);
    int ctx = depth + (n_prompt > n_gen ? n_prompt : n_gen) + 2;
    engine_opts eo;
    cli_engine_opts(&eo, ctx, batch, threads);
    eo.prefix_cache = 1; // the depth of a test is prefilled once (bench_once)
    eo.kv_type_k = kv_k, eo.kv_type_v = kv_v, eo.device = device, eo.spec = SPEC_OFF;
    if (cli_engine_new(m, vocab, &eo, &eng, &err)) goto fail;
    toks = malloc(sizeof(int32_t) * (size_t)ctx);
    if (!toks) goto fail;
    srand(1234);
    for (int i = 0; i < ctx; i++) toks[i] = rand() % hp->n_vocab;

    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char be_name[24]; // the table's backend column
    if (device == BACKEND_CUDA) snprintf(be_name, sizeof be_name, "CUDA");
    else snprintf(be_name, sizeof be_name, "CPU-%s", cpu_isa_name(cpu_best_isa()));
    if (!json) print_header();
    struct { int p, n; } tests[2] = {{n_prompt, 0}, {0, n_gen}};
    for (int k = 0; k < 2; k++) {
        if (tests[k].p == 0 && tests[k].n == 0) continue;
        double warm;
        if (bench_once(eng, toks, tests[k].p, tests[k].n > 16 ? 16 : tests[k].n, depth, reps, hp->n_vocab, &warm,
                       &err))
            goto fail;
        for (int r = 0; r < reps; r++)
            if (bench_once(eng, toks, tests[k].p, tests[k].n, depth, r, hp->n_vocab, &samples[r], &err)) goto fail;
        print_row(base, hp, be_name, threads, tests[k].p, tests[k].n, depth, stat_of(samples, reps), json);
        fflush(stdout);
    }
    if (device == BACKEND_CPU) print_floor(m, threads, json);
    status = 0;
    goto done;
fail:
    fprintf(stderr, "bench: %s\n", err.msg[0] ? err.msg : "failed");
done:
    engine_free(eng, 0);
    tok_free(vocab);
    free(toks);
    free(samples);
    model_free(m);
    return status;
}
