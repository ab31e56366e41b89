// tachyon bench's speculation modes (cmd_bench_spec.c): greedy decode of a real prompt under each mode.
#ifndef TACHYON_CLI_CMD_BENCH_SPEC_H
#define TACHYON_CLI_CMD_BENCH_SPEC_H

#include "backend/backend.h"
#include "common/err.h"
#include "model/model.h"

#define BENCH_SPEC_MAX_MODES 8

typedef struct bench_spec_args {
    const char *model_path, *prompt_file;
    int modes[BENCH_SPEC_MAX_MODES]; // spec_mode values, the first is the speedup's baseline
    int n_modes, spec_k, n_gen, reps, threads, batch, json;
    tt_type kv_k, kv_v;
    backend_device device; // --device: where the target model runs (drafters stay on the CPU)
    model *draft_model; // (optional) borrowed: --draft-model, drafts for the draft and auto modes
    int self_layers;    // --self-spec-layers: L for self (0: n_layers / 4), and auto without a draft model
    int chat;           // --chat: the prompt file is one user turn in the model's chat template
} bench_spec_args;

// "off,ngram,auto" → modes; returns how many, or -1 on an unknown name or too many.
int bench_spec_parse_modes(const char *s, int *modes, int max);
// Prints one table row (or JSON line) per mode: decode t/s mean ± std over reps, speedup over the first
// mode, acceptance (accepted / drafted). Returns 0 or a TC_ERR_* with err set.
int bench_spec_run(model *m, const bench_spec_args *a, tc_err *err);

#endif
