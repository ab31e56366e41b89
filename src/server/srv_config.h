// Several models in one server: the model list (repeated `-m [ALIAS=]PATH`, or `--config FILE` in JSON) and
// router aliases that pick one of two models per request (srv_route.c). Pure data and parsing: no server
// state, so bad configurations are unit-tested (tests/unit/test_srv_config.c) and never reach the loader.
#ifndef TACHYON_SRV_CONFIG_H
#define TACHYON_SRV_CONFIG_H

#include <stddef.h>

#include "common/err.h"

#define SRV_CFG_MAX_MODELS 16  // a bounded set: model names are metric labels
#define SRV_CFG_MAX_ROUTERS 8
#define SRV_CFG_MAX_ALIAS 30   // bytes of an alias with its NUL (metric label values fit in 96-byte label sets)

typedef struct srv_model_spec {
    char alias[SRV_CFG_MAX_ALIAS]; // "" = the file's basename without .gguf
    char *path;                    // owned
    char *chat_template;           // owned, or NULL = detect from the model
    int n_threads;                 // compute threads of this model's engine; 0 = an equal share of the cores
    size_t kv_mem_bytes;           // 0 = the server-wide --kv-cache-mem (or the engine's default)
    int max_seqs, max_queue, ctx_size; // 0 = the server-wide value (max_queue: -1 = server-wide)
} srv_model_spec;

// A router alias: requests naming it go to `small` when the prompt has at most max_prompt_tokens tokens
// (counted with the small model's tokenizer) and max_tokens (as asked; absent = unbounded) is at most
// max_tokens; else to `large`, unless degrade is on and the large engine's predicted TTFT exceeds ttft_slo.
typedef struct srv_router_spec {
    char alias[SRV_CFG_MAX_ALIAS];
    char small[SRV_CFG_MAX_ALIAS], large[SRV_CFG_MAX_ALIAS]; // model aliases
    int max_prompt_tokens; // (256)
    int max_tokens;        // (256)
    int degrade;           // 0 (default) / 1
    double ttft_slo;       // seconds (1.0); only used with degrade
} srv_router_spec;

typedef struct srv_config {
    srv_model_spec models[SRV_CFG_MAX_MODELS];
    int n_models;
    srv_router_spec routers[SRV_CFG_MAX_ROUTERS];
    int n_routers;
} srv_config;

void srv_config_init(srv_config *c);
void srv_config_free(srv_config *c);
// `-m PATH` or `-m ALIAS=PATH` (a '=' before any '/' splits the alias off). TC_ERR_INVALID + message.
int srv_config_add_model_arg(srv_config *c, const char *arg, tc_err *err);
// `--router ALIAS=SMALL,LARGE` with the given thresholds.
int srv_config_add_router_arg(srv_config *c, const char *arg, const srv_router_spec *defaults, tc_err *err);
// The JSON config text (see docs/MULTI_MODEL.md): {"models": [...], "routers": [...]}; appended to c.
int srv_config_parse_json(srv_config *c, const char *text, size_t len, tc_err *err);
int srv_config_load_file(srv_config *c, const char *path, tc_err *err);
// Fills empty aliases from paths, then checks: at least one model, unique names (models and routers share one
// namespace), routers name two distinct existing models. TC_ERR_INVALID + message.
int srv_config_finish(srv_config *c, tc_err *err);
void srv_router_defaults(srv_router_spec *r);
const srv_model_spec *srv_config_model(const srv_config *c, const char *alias); // NULL if absent
const srv_router_spec *srv_config_router(const srv_config *c, const char *alias); // NULL if absent (or c NULL)

#endif
