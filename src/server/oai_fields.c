// The one table of request fields: every top-level field of OpenAI's CreateChatCompletionRequest and
// CreateCompletionRequest, plus the vLLM / llama.cpp extensions tachyon honours. Each row says whether the
// field is handled (parsed in oai_req.c), refused (400 naming it: we cannot honour it, and silently
// dropping it would change what the client gets), or ignored with a reason (OpenAI documents it as not
// affecting generation). A field in no row is unknown and refused too. A feature that lands flips its row.
#include <stdio.h>
#include <string.h>

#include "server/oai.h"

#define C OAI_FIELD_CHAT
#define P OAI_FIELD_COMPLETION
#define B (OAI_FIELD_CHAT | OAI_FIELD_COMPLETION)
#define E OAI_FIELD_EMBEDDING
#define H OAI_F_HANDLED
#define R OAI_F_REFUSED
#define I OAI_F_IGNORED

static const oai_field fields[] = {
    // --- honoured (see oai_parse) ---------------------------------------------------------------------
    {"model", B | E, H, NULL},
    {"messages", C, H, NULL},
    {"prompt", P, H, NULL},
    {"stream", B, H, NULL},
    {"stream_options", B, H, NULL},
    {"max_tokens", B, H, NULL},
    {"max_completion_tokens", B, H, NULL},
    {"n", B, H, NULL},
    {"temperature", B, H, NULL},
    {"top_p", B, H, NULL},
    {"presence_penalty", B, H, NULL},
    {"frequency_penalty", B, H, NULL},
    {"logit_bias", B, H, NULL},
    {"seed", B, H, NULL},
    {"stop", B, H, NULL},
    {"logprobs", B, H, NULL},
    {"top_logprobs", C, H, NULL},
    {"echo", P, H, NULL},
    {"suffix", P, H, NULL},      // needs FIM tokens in the vocabulary (checked at generation)
    {"best_of", P, H, NULL},     // only best_of == n (no server-side ranking)
    {"modalities", C, H, NULL},  // only ["text"]
    {"priority", B, H, NULL},    // lower runs first; ordering only under --sched priority|slo
    {"chat_template_kwargs", C, H, NULL}, // variables of the model's Jinja template; unused ones change nothing
    // extensions (vLLM / llama.cpp names)
    {"top_k", B, H, NULL},
    {"min_p", B, H, NULL},
    {"repetition_penalty", B, H, NULL},
    {"ignore_eos", B, H, NULL},
    {"min_tokens", B, H, NULL},  // no end token, stop token or stop string before this many tokens
    // llama-server's sampler fields and aliases (oai_samp.c; samplers in src/sampling/)
    {"n_predict", B, H, NULL},         // = max_tokens (-1: no limit)
    {"repeat_penalty", B, H, NULL},    // = repetition_penalty
    {"repeat_last_n", B, H, NULL},     // the penalties' window (-1: everything, 0: off); OpenAI's default -1
    {"penalty_last_n", B, H, NULL},    // = repeat_last_n
    {"n_probs", B, H, NULL},           // = top_logprobs (logprobs turned on), OpenAI's logprobs shape
    {"typical_p", B, H, NULL},
    {"top_n_sigma", B, H, NULL},
    {"xtc_probability", B, H, NULL},
    {"xtc_threshold", B, H, NULL},
    {"dynatemp_range", B, H, NULL},
    {"dynatemp_exponent", B, H, NULL},
    {"mirostat", B, H, NULL},          // 0, 1 or 2
    {"mirostat_tau", B, H, NULL},
    {"mirostat_eta", B, H, NULL},
    {"dry_multiplier", B, H, NULL},
    {"dry_base", B, H, NULL},
    {"dry_allowed_length", B, H, NULL},
    {"dry_penalty_last_n", B, H, NULL},
    {"dry_sequence_breakers", B, H, NULL}, // tokens whose text contains a breaker (single-token breakers)
    // vLLM's stopping and decoding fields (oai_samp.c)
    {"stop_token_ids", B, H, NULL},
    {"include_stop_str_in_output", B, H, NULL},
    {"skip_special_tokens", B, H, NULL},
    {"guided_json", B, H, NULL},       // the JSON-schema grammar, as response_format json_schema
    {"guided_choice", B, H, NULL},     // a grammar of the listed strings
    {"guided_grammar", B, H, NULL},    // GBNF, as `grammar`
    {"guided_regex", B, H, NULL},      // parsed to refuse it with the reason: no regex constraints
    {"structured_outputs", B, H, NULL}, // {json | choice | grammar | regex}: as guided_*
    {"timeout", B, H, NULL},     // seconds: the end-to-end deadline (with --request-timeout / --e2e-slo)
    {"ttft_slo_ms", B, H, NULL}, // time-to-first-token target (--ttft-slo); refused at once under --sched slo
    {"cache_salt", B, H, NULL},  // vLLM: prefix-cache namespace (no hits across salts or tenants)
    // embeddings (embed.c)
    {"input", E, H, NULL},
    {"encoding_format", E, H, NULL}, // "float" | "base64"
    {"dimensions", E, H, NULL},      // only the model's width (no truncation / Matryoshka)
    // structured outputs and tools (oai_tools.c), predicted outputs (oai_req.c, drafts for src/spec/)
    {"response_format", B, H, NULL},     // text | json_object | json_schema
    {"grammar", B, H, NULL},             // llama.cpp extension: GBNF text
    {"tools", C, H, NULL},
    {"tool_choice", C, H, NULL},
    {"parallel_tool_calls", C, H, NULL},
    {"prediction", B, H, NULL},
    {"truncation", B, H, NULL},          // "disabled" | "auto" (Responses API): context-overflow policy, gen_trunc.c          // {"type": "content", ...}: a draft source, never changes the output
    // --- refused: the deprecated function-calling fields (not parsed: 'tools' replaces them) ----------------
    {"functions", C, R, "the deprecated 'functions' is not supported: use 'tools'"},
    {"function_call", C, R, "the deprecated 'function_call' is not supported: use 'tool_choice'"},
    // --- refused: nothing here can honour them ------------------------------------------------------------
    {"audio", C, R, "audio output is not supported: this server generates text only"},
    {"reasoning_effort", C, R, "this model has no reasoning-effort control"},
    {"verbosity", C, R, "this model has no verbosity control"},
    {"web_search_options", C, R, "web search is not available"},
    // --- ignored: documented as not affecting the generated tokens ----------------------------------------
    {"user", B | E, I, "end-user identifier for abuse monitoring"},
    {"safety_identifier", C, I, "end-user identifier for abuse monitoring"},
    {"store", C, I, "stored completions are an OpenAI platform feature"},
    {"metadata", C, I, "tags for stored completions"},
    {"service_tier", B, I, "one processing tier"},
    {"prompt_cache_key", C, I, "prefix caching is automatic"},
    {"cache_prompt", B, I, "llama-server: prefix caching is automatic and always on"},
    {"id_slot", B, I, "llama-server: no slots; the scheduler places requests and the prefix cache finds shared prefixes"},
};

#undef C
#undef P
#undef B
#undef E
#undef H
#undef R
#undef I

const oai_field *oai_field_table(int *n) {
    *n = (int)(sizeof fields / sizeof fields[0]);
    return fields;
}

const oai_field *oai_field_find(oai_kind kind, const char *name) {
    unsigned bit = kind == OAI_CHAT ? OAI_FIELD_CHAT : kind == OAI_COMPLETION ? OAI_FIELD_COMPLETION : OAI_FIELD_EMBEDDING;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if ((fields[i].kinds & bit) && !strcmp(fields[i].name, name)) return &fields[i];
    return NULL;
}

// The JSON type OpenAI documents for each ignored field: ignored, but never of another type.
static const struct {
    const char *name;
    json_type type;
    const char *what;
} ignored_types[] = {
    {"user", JSON_STRING, "a string"},        {"safety_identifier", JSON_STRING, "a string"},
    {"store", JSON_TRUE, "a boolean"},        {"metadata", JSON_OBJECT, "an object"},
    {"service_tier", JSON_STRING, "a string"}, {"prompt_cache_key", JSON_STRING, "a string"},
    {"cache_prompt", JSON_TRUE, "a boolean"},  {"id_slot", JSON_INTEGER, "an integer"},
};

static int ignored_type_ok(const char *name, json_t *v) {
    for (size_t i = 0; i < sizeof ignored_types / sizeof ignored_types[0]; i++) {
        if (strcmp(ignored_types[i].name, name)) continue;
        if (ignored_types[i].type == JSON_TRUE) return json_is_boolean(v);
        return json_typeof(v) == ignored_types[i].type;
    }
    return 1;
}

static const char *ignored_type_name(const char *name) {
    for (size_t i = 0; i < sizeof ignored_types / sizeof ignored_types[0]; i++)
        if (!strcmp(ignored_types[i].name, name)) return ignored_types[i].what;
    return "of its documented type";
}

// Walks the body's top-level keys against the table. Strict: the first unknown or refused field is a 400
// naming it. Lenient: they are dropped from the body (so nothing downstream can half-use them) and listed in
// r->lenient_dropped for the server to log.
int oai_check_fields(oai_kind kind, int lenient, oai_req *r, oai_err *e) {
    const char *key;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(r->root, tmp, key, v) {
        const oai_field *f = oai_field_find(kind, key);
        if (!lenient && f && f->status == OAI_F_IGNORED && !json_is_null(v) && !ignored_type_ok(key, v)) {
            char param[64];
            snprintf(param, sizeof param, "%s", key);
            return oai_err_set(e, 400, "invalid_request_error", "invalid_type", param, "'%s' must be %s", param,
                               ignored_type_name(key));
        }
        if (f && f->status != OAI_F_REFUSED) continue;
        if (f && json_is_null(v)) continue; // an explicit null is the default: nothing asked for
        if (lenient) {
            size_t used = strlen(r->lenient_dropped);
            snprintf(r->lenient_dropped + used, sizeof r->lenient_dropped - used, "%s%s", used ? ", " : "", key);
            json_object_del(r->root, key);
            continue;
        }
        char param[64];
        snprintf(param, sizeof param, "%s", key);
        if (f)
            return oai_err_set(e, 400, "invalid_request_error", "unsupported_parameter", param,
                               "'%s' is not supported by this server: %s", param, f->why);
        return oai_err_set(e, 400, "invalid_request_error", "unknown_parameter", param,
                           "Unrecognized request argument supplied: %s", param);
    }
    return 0;
}
