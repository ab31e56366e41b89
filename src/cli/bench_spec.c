// tachyon bench --spec MODES --prompt-file FILE: greedy decode tokens/s of each speculation mode on a real
// prompt (speculation only pays on text it can predict, so random tokens would measure nothing), modes
// interleaved within each repetition so that a machine whose load drifts affects them alike.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench_spec.h"
#include "cli/cli.h"
#include "cli/gen_spec.h"
#include "cpu/cpu.h"
#include "spec/spec.h"
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

static int read_prompt(model *m, const char *path, int chat, int32_t **ids, int *n_ids, tc_err *err) {
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
    tok_vocab *v = NULL;
    int rc = tok_load(model_gguf(m), &v, err);
    if (!rc && chat) {
        char *z = realloc(text, len + 1); // a C string for the chat message
        if (!z) rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        else text = z, text[len] = '\0', rc = cli_encode_chat(m, v, NULL, text, ids, n_ids, err);
    } else if (!rc) rc = tok_encode(v, text, len, tok_add_bos(v) ? TOK_ENC_ADD_BOS : 0, ids, n_ids, err);
    if (!rc && *n_ids == 0) rc = tc_err_set(err, TC_ERR_INVALID, "prompt file '%s' is empty", path);
    tok_free(v);
    free(text);
    return rc;
}

typedef struct { double tps[1000]; long drafted, accepted, steps; } mode_acc;

int bench_spec_run(model *m, const bench_spec_args *a, tc_err *err) {
    int32_t *ids = NULL;
    int n_ids = 0, rc;
    gen_session g = {0};
    spec_drafter *dmodel = NULL, *dself = NULL; // the draft model's drafter, self-speculation's
    mode_acc *acc = calloc((size_t)a->n_modes, sizeof *acc);
    if (!acc) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    if ((rc = read_prompt(m, a->prompt_file, a->chat, &ids, &n_ids, err))) goto done;
    int batch = a->batch > SPEC_MAX_K + 1 ? a->batch : SPEC_MAX_K + 1;
    for (int i = 0; i < a->n_modes; i++)
        if ((rc = gen_spec_device_check(a->modes[i], a->draft_model != NULL, a->self_layers, a->device, err)))
            goto done;
    if ((rc = gen_open(&g, m, a->device, n_ids + a->n_gen + SPEC_MAX_K + 1, batch, a->threads, a->kv_k, a->kv_v, err)))
        goto done;
    int ctx = n_ids + a->n_gen + SPEC_MAX_K + 1, want_self = 0;
    for (int i = 0; i < a->n_modes; i++)
        want_self |= a->modes[i] == SPEC_SELF || (a->modes[i] == SPEC_AUTO && !a->draft_model && a->self_layers > 0);
    if (a->draft_model && (rc = gen_spec_drafter_new(&g, a->draft_model, SPEC_DRAFT, 0, ctx, a->spec_k, a->threads,
                                                     &dmodel, err)))
        goto done;
    if (want_self && (rc = gen_spec_drafter_new(&g, NULL, SPEC_SELF, a->self_layers, ctx, a->spec_k, a->threads,
                                                &dself, err)))
        goto done;
    gen_spec_stats st;
    gen_spec_opts warm = {SPEC_OFF, a->spec_k, NULL};
    if ((rc = gen_spec_decode(&g, ids, n_ids, a->n_gen > 16 ? 16 : a->n_gen, &warm, &st, err))) goto done;
    for (int r = 0; r < a->reps; r++)
        for (int i = 0; i < a->n_modes; i++) {
            int md = a->modes[i];
            gen_spec_opts o = {md, a->spec_k, md == SPEC_DRAFT ? dmodel : md == SPEC_SELF ? dself
                                              : md == SPEC_AUTO ? (dmodel ? dmodel : dself) : NULL};
            if ((rc = gen_spec_decode(&g, ids, n_ids, a->n_gen, &o, &st, err))) goto done;
            acc[i].tps[r] = st.n_gen > 1 ? (st.n_gen - 1) / st.t_decode : 0;
            acc[i].drafted += st.n_drafted, acc[i].accepted += st.n_accepted, acc[i].steps += st.n_steps;
        }
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
    spec_drafter_free(dmodel);
    spec_drafter_free(dself);
    gen_close(&g);
    free(ids);
    free(acc);
    return rc;
}
