// tachyon bench --spec MODES --prompt-file FILE: greedy decode tokens/s of each speculation mode on a real
// prompt (speculation only pays on text it can predict, so random tokens would measure nothing), modes
// interleaved within each repetition so that a machine whose load drifts affects them alike.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd_bench_spec.h"
#include "cli/cli.h"
#include "cli/cli_engine.h"
#include "cpu/cpu.h"
#include "speculation/spec.h"
#include "speculation/spec_draft.h"
#include "tokenizer/tokenizer.h"

int bench_spec_parse_modes(const char *s, int *modes, int max) {
    int n = 0;
    char buf[128];
    if (strlen(s) >= sizeof buf) return -1;
    strcpy(buf, s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int m = spec_mode_parse(t);
        if (m < 0 || n == max) return -1;
        modes[n++] = m;
    }
    return n > 0 ? n : -1;
}

static int read_prompt(model *m, const tok_vocab *v, const char *path, int chat, int32_t **ids, int *n_ids,
                       tc_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return tc_err_set(err, TC_ERR_IO, "cannot open prompt file '%s'", path);
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 > cap) {
            char *t = realloc(text, cap = 2 * cap + 8192);
            if (!t) break;
            text = t;
        }
        size_t r = fread(text + len, 1, cap - len, f);
        len += r;
        if (r == 0) break;
    }
    fclose(f);
    if (!text) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    int rc = 0;
    if (chat) {
        char *z = realloc(text, len + 1); // a C string for the chat message
        if (!z) rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        else text = z, text[len] = '\0', rc = cli_encode_chat(m, v, NULL, text, ids, n_ids, err);
    } else rc = tok_encode(v, text, len, tok_add_bos(v) ? TOK_ENC_ADD_BOS : 0, ids, n_ids, err);
    if (!rc && *n_ids == 0) rc = tc_err_set(err, TC_ERR_INVALID, "prompt file '%s' is empty", path);
    free(text);
    return rc;
}

typedef struct { double tps[1000]; long drafted, accepted, steps; } mode_acc;

// The engine of one mode: the target (and the draft model or self-speculation where the mode drafts with one)
// as tachyon run and serve would run them.
static int mode_engine(model *m, const tok_vocab *v, const bench_spec_args *a, int mode, int ctx, engine **out,
                       tc_err *err) {
    engine_opts eo;
    cli_engine_opts(&eo, ctx, a->batch > SPEC_MAX_K + 1 ? a->batch : SPEC_MAX_K + 1, a->threads);
    eo.kv_type_k = a->kv_k, eo.kv_type_v = a->kv_v, eo.device = a->device;
    eo.spec = mode, eo.spec_k = a->spec_k, eo.self_spec_layers = a->self_layers;
    eo.draft_model = mode == SPEC_DRAFT || mode == SPEC_AUTO ? a->draft_model : NULL;
    return cli_engine_new(m, v, &eo, out, err);
}

// One greedy decode of n_gen tokens after the prompt (end-of-generation tokens do not stop it: a benchmark
// wants a fixed length) into the mode's tallies.
static int decode_once(engine *e, const int32_t *ids, int n_ids, int n_gen, mode_acc *acc, int rep, tc_err *err) {
    engine_req q = {.n_prompt = n_ids, .max_tokens = n_gen, .ignore_eos = 1};
    samp_params_default(&q.sp);
    q.sp.temperature = 0.0f;
    q.sp.no_logprob = 1; // bench reads tokens only
    if (!(q.prompt = malloc((size_t)n_ids * sizeof *ids))) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    memcpy(q.prompt, ids, (size_t)n_ids * sizeof *ids);
    engine_stats before, after;
    engine_get_stats(e, &before);
    engine_event fin;
    int rc = cli_engine_generate(e, &q, NULL, NULL, &fin, err);
    free(q.prompt); // NULL once the engine took it
    if (rc) return rc;
    engine_get_stats(e, &after);
    double t = fin.t_finish - fin.t_first_token;
    acc->tps[rep] = fin.n_generated > 1 && t > 0 ? (fin.n_generated - 1) / t : 0;
    acc->drafted += fin.n_spec_drafted, acc->accepted += fin.n_spec_accepted;
    acc->steps += (long)(after.spec_verify_steps - before.spec_verify_steps);
    return 0;
}

int bench_spec_run(model *m, const bench_spec_args *a, tc_err *err) {
    int32_t *ids = NULL;
    int n_ids = 0, rc;
    tok_vocab *v = NULL;
    engine *engs[BENCH_SPEC_MAX_MODES] = {0};
    mode_acc *acc = calloc((size_t)a->n_modes, sizeof *acc);
    if (!acc) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    if ((rc = tok_load(model_gguf(m), &v, err))) goto done;
    if ((rc = read_prompt(m, v, a->prompt_file, a->chat, &ids, &n_ids, err))) goto done;
    for (int i = 0; i < a->n_modes; i++) // every mode's refusal before any engine starts
        if ((rc = spec_self_device_check(spec_drafter_choice(a->modes[i], a->draft_model != NULL, a->self_layers),
                                         a->device == BACKEND_CPU, err)))
            goto done;
    int ctx = n_ids + a->n_gen + SPEC_MAX_K + 1;
    for (int i = 0; i < a->n_modes; i++)
        if ((rc = mode_engine(m, v, a, a->modes[i], ctx, &engs[i], err))) goto done;
    for (int r = 0; r < a->reps; r++)
        for (int i = 0; i < a->n_modes; i++)
            if ((rc = decode_once(engs[i], ids, n_ids, a->n_gen, &acc[i], r, err))) goto done;
    const char *base = strrchr(a->model_path, '/') ? strrchr(a->model_path, '/') + 1 : a->model_path;
    if (!a->json) {
        printf("| %-30s | %-6s | %7s | %6s | %10s | %18s | %7s | %9s |\n", "model", "spec", "threads", "prompt",
               "test", "t/s", "speedup", "accepted");
        printf("| %.30s | ------ | ------- | ------ | ---------- | ------------------ | ------- | --------- |\n",
               "------------------------------");
    }
    double base_tps = 0;
    for (int i = 0; i < a->n_modes; i++) {
        double mean = 0, sd = 0;
        for (int r = 0; r < a->reps; r++) mean += acc[i].tps[r] / a->reps;
        for (int r = 0; r < a->reps; r++) sd += (acc[i].tps[r] - mean) * (acc[i].tps[r] - mean);
        sd = a->reps > 1 ? sqrt(sd / (a->reps - 1)) : 0;
        if (i == 0) base_tps = mean;
        double rate = acc[i].drafted ? (double)acc[i].accepted / acc[i].drafted : 0;
        const char *mode = spec_mode_name((spec_mode)a->modes[i]);
        if (a->json)
            printf("{\"model\": \"%s\", \"backend\": \"CPU-%s\", \"threads\": %d, \"test\": \"tg%d\", \"spec\": \"%s\", "
                   "\"spec_k\": %d, \"n_prompt\": %d, \"avg_ts\": %.3f, \"stddev_ts\": %.3f, \"speedup\": %.3f, "
                   "\"drafted\": %ld, \"accepted\": %ld, \"verify_steps\": %ld, \"acceptance\": %.4f}\n",
                   base, cpu_isa_name(cpu_best_isa()), a->threads, a->n_gen, mode, a->spec_k, n_ids, mean, sd,
                   base_tps > 0 ? mean / base_tps : 0, acc[i].drafted, acc[i].accepted, acc[i].steps, rate);
        else {
            char test[32];
            snprintf(test, sizeof test, "tg%d", a->n_gen);
            printf("| %-30.30s | %-6s | %7d | %6d | %10s | %8.2f ± %7.2f | %6.2fx | %8.1f%% |\n", base, mode,
                   a->threads, n_ids, test, mean, sd, base_tps > 0 ? mean / base_tps : 0, 100 * rate);
        }
        fflush(stdout);
    }
done:
    for (int i = 0; i < a->n_modes; i++) engine_free(engs[i], 0);
    tok_free(v);
    free(ids);
    free(acc);
    return rc;
}
