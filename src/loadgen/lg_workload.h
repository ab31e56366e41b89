// Benchmark workloads: deterministic request bodies for request index i, given a seed. Datasets: random,
// shared-prefix, multi-turn (each turn includes the previous turns and the server's actual answers),
// repetitive (code-edit: output repeats the input), and jsonl:FILE.
#ifndef TACHYON_LOADGEN_WORKLOAD_H
#define TACHYON_LOADGEN_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef enum {
    LG_DS_RANDOM,
    LG_DS_SHARED_PREFIX,
    LG_DS_MULTI_TURN,
    LG_DS_REPETITIVE,
    LG_DS_JSONL,
    LG_DS_MIXED_LENGTH, // random words; a fraction long_frac of the prompts is long_len tokens, the rest input_len
    LG_DS_CODE_EDIT,      // speculation workloads (lg_spec_wl.h): code-edit, code-edit-pred, quote, creative
    LG_DS_CODE_EDIT_PRED,
    LG_DS_QUOTE,
    LG_DS_CREATIVE,
} lg_ds_kind;

struct lg_prio_mix;

typedef struct lg_wl_cfg {
    lg_ds_kind kind;
    const char *path;   // jsonl file (kind == LG_DS_JSONL), borrowed
    int64_t input_len;  // tokens (approximately: one random word ~ one token)
    int64_t output_len; // tokens, sent as max_tokens (and min_tokens when ignore_eos)
    double range_ratio; // lengths uniform in [len*(1-r), len*(1+r)], 0 <= r < 1
    int64_t prefix_len; // shared-prefix: system prompt length, tokens
    int64_t num_groups; // shared-prefix: number of distinct prefixes; multi-turn: concurrent conversations
    int64_t turns;      // multi-turn: turns per conversation
    int ignore_eos;     // send ignore_eos: true and min_tokens = max_tokens
    int chat;           // 1: /v1/chat/completions bodies (messages); 0: /v1/completions (prompt)
    const char *model;  // borrowed
    uint64_t seed;
    // scheduling workloads (lg_class.h)
    int64_t long_len;                  // mixed-length: tokens of a long prompt
    double long_frac;                  // mixed-length: fraction of long prompts (each request drawn at random)
    const struct lg_prio_mix *prio;    // NULL: no priority field; else each request draws one (borrowed)
    const char *prio_field;            // the request field carrying it ("priority")
    double ttft_slo_ms;                // > 0: sent with every request as ttft_field
    const char *ttft_field;            // ("ttft_slo_ms")
} lg_wl_cfg;

typedef struct lg_workload lg_workload;

// cfg's strings must outlive the workload. Returns 0 or TC_ERR_* (bad jsonl file, bad lengths).
int lg_workload_init(lg_workload **out, const lg_wl_cfg *cfg, tc_err *err);
void lg_workload_free(lg_workload *w);
// Forgets multi-turn histories (before running the same workload again, e.g. against another server).
void lg_workload_reset(lg_workload *w);
// Resets, then draws every later request from seed instead of the configured one (a jsonl file's prompts
// stay the file's).
void lg_workload_reseed(lg_workload *w, uint64_t seed);
// Request body (JSON text, owned by the caller, free()) for request idx >= 0, and the estimated prompt tokens.
int lg_workload_body(lg_workload *w, int64_t idx, char **body, int64_t *est_input, tc_err *err);
// The class of request idx (deterministic, as its body): whether it has a priority and which, and its length
// class (LG_LEN_*).
void lg_workload_class(const lg_workload *w, int64_t idx, int *has_prio, int *prio, int *len_class);
// Index of the request that must complete before idx may be sent, or -1.
int64_t lg_workload_depends_on(const lg_workload *w, int64_t idx);
// Whether the runner should collect response text and report it with lg_workload_complete.
int lg_workload_wants_text(const lg_workload *w);
// Reports request idx finished with the given response text (may be empty when it failed).
int lg_workload_complete(lg_workload *w, int64_t idx, const char *text, size_t len, tc_err *err);
// Parses a --dataset value ("random", "shared-prefix", "multi-turn", "repetitive", "mixed-length", "jsonl:FILE",
// "code-edit", "code-edit-pred", "quote", "creative").
int lg_ds_parse(const char *s, lg_ds_kind *kind, const char **path, tc_err *err);

#endif
