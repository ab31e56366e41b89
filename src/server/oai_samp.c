// llama-server's and vLLM's sampling and stopping fields (see oai_samp.h). Values are range-checked here so
// a bad one is a 400 naming the field; samp_new checks them again for every other caller.
#include "server/oai_samp.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strbuf.h"
#include "grammar/gram_schema.h"
#include "server/oai.h"

#define BAD(e, param, ...) oai_err_set(e, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

static const char *const dry_default_breakers[] = {"\n", ":", "\"", "*"}; // llama.cpp's defaults

static int num(json_t *o, const char *key, double lo, double hi, float *out, oai_err *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return BAD(e, key, "'%s' must be a number", key);
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi) return BAD(e, key, "'%s' must be between %g and %g, got %g", key, lo, hi, x);
    *out = (float)x;
    return 0;
}

static int integer(json_t *o, const char *key, long long lo, long long hi, int *out, oai_err *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    double d = json_is_real(v) ? json_real_value(v) : 0;
    if (!json_is_integer(v) && !(json_is_real(v) && d == floor(d) && fabs(d) < 9e18))
        return BAD(e, key, "'%s' must be an integer", key);
    long long x = json_is_integer(v) ? json_integer_value(v) : (long long)d;
    if (x < lo || x > hi) return BAD(e, key, "'%s' must be between %lld and %lld, got %lld", key, lo, hi, x);
    *out = (int)x;
    return 0;
}

static int boolean(json_t *o, const char *key, int *out, oai_err *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return BAD(e, key, "'%s' must be a boolean", key);
    *out = json_is_true(v);
    return 0;
}

static int given(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return v && !json_is_null(v);
}

// Aliases of fields OpenAI's names already cover: n_predict, repeat_penalty, repeat_last_n, n_probs.
static int parse_aliases(oai_req *r, oai_err *e) {
    json_t *o = r->root;
    int np = -1;
    if (integer(o, "n_predict", -1, INT_MAX, &np, e)) return -1;
    if (np == 0) return BAD(e, "n_predict", "'n_predict' must be -1 (no limit) or >= 1");
    if (np > 0 && r->max_tokens > 0 && np != r->max_tokens)
        return BAD(e, "n_predict", "'n_predict' (%d) and 'max_tokens' (%d) disagree", np, r->max_tokens);
    if (np > 0) r->max_tokens = np;
    float rp = r->sp.repetition_penalty;
    if (num(o, "repeat_penalty", 0.01, 10, &rp, e)) return -1;
    if (given(o, "repeat_penalty") && given(o, "repetition_penalty") && rp != r->sp.repetition_penalty)
        return BAD(e, "repeat_penalty", "'repeat_penalty' and 'repetition_penalty' disagree");
    r->sp.repetition_penalty = rp;
    const char *ln = given(o, "repeat_last_n") ? "repeat_last_n" : "penalty_last_n";
    if (integer(o, ln, -1, 1 << 24, &r->sp.penalty_last_n, e)) return -1;
    int n_probs = 0;
    if (integer(o, "n_probs", 0, SAMP_MAX_LOGPROBS, &n_probs, e)) return -1;
    if (n_probs > 0 && r->top_logprobs == 0) { // llama-server's top-n probabilities, as OpenAI logprobs
        r->logprobs = 1;
        r->top_logprobs = n_probs;
        r->sp.n_logprobs = n_probs;
        r->sp.no_logprob = 0;
    }
    return 0;
}

static int parse_dry_breakers(oai_req *r, oai_err *e) {
    json_t *a = json_object_get(r->root, "dry_sequence_breakers");
    oai_samp_ext *x = &r->sx;
    if (!a || json_is_null(a)) {
        x->n_dry_breakers = (int)(sizeof dry_default_breakers / sizeof dry_default_breakers[0]);
        for (int i = 0; i < x->n_dry_breakers; i++) x->dry_breakers[i] = dry_default_breakers[i];
        return 0;
    }
    if (!json_is_array(a)) return BAD(e, "dry_sequence_breakers", "'dry_sequence_breakers' must be an array of strings");
    if (json_array_size(a) > OAI_MAX_DRY_BREAKERS)
        return BAD(e, "dry_sequence_breakers", "at most %d sequence breakers are supported", OAI_MAX_DRY_BREAKERS);
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *v = json_array_get(a, i);
        size_t len = json_string_length(v);
        if (!json_is_string(v) || len == 0 || len > OAI_MAX_DRY_BREAKER_LEN)
            return BAD(e, "dry_sequence_breakers", "'dry_sequence_breakers' elements must be strings of 1 to %d bytes",
                       OAI_MAX_DRY_BREAKER_LEN);
        x->dry_breakers[x->n_dry_breakers++] = json_string_value(v);
    }
    return 0;
}

static int parse_stop_ids(oai_req *r, oai_err *e) {
    json_t *a = json_object_get(r->root, "stop_token_ids");
    if (!a || json_is_null(a)) return 0;
    if (!json_is_array(a)) return BAD(e, "stop_token_ids", "'stop_token_ids' must be an array of token ids");
    if (json_array_size(a) > OAI_MAX_STOP_IDS)
        return BAD(e, "stop_token_ids", "at most %d stop token ids are supported", OAI_MAX_STOP_IDS);
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
            return BAD(e, "stop_token_ids", "'stop_token_ids' elements must be token ids (integers >= 0)");
        r->sx.stop_ids[r->sx.n_stop_ids++] = (int32_t)json_integer_value(v);
    }
    return 0;
}

int oai_samp_parse(oai_req *r, oai_err *e) {
    json_t *o = r->root;
    samp_params *p = &r->sp;
    if (parse_aliases(r, e)) return -1;
    if (num(o, "typical_p", 0, 1, &p->typical_p, e) || num(o, "top_n_sigma", -1e9, 1e9, &p->top_n_sigma, e) ||
        num(o, "xtc_probability", 0, 1, &p->xtc_probability, e) || num(o, "xtc_threshold", 0, 1, &p->xtc_threshold, e) ||
        num(o, "dynatemp_range", 0, 1e3, &p->dynatemp_range, e) ||
        num(o, "dynatemp_exponent", 0, 1e3, &p->dynatemp_exponent, e) || integer(o, "mirostat", 0, 2, &p->mirostat, e) ||
        num(o, "mirostat_tau", 0, 1e3, &p->mirostat_tau, e) || num(o, "mirostat_eta", 0, 1e3, &p->mirostat_eta, e) ||
        num(o, "dry_multiplier", 0, 1e6, &p->dry_multiplier, e) || num(o, "dry_base", 1, 1e3, &p->dry_base, e) ||
        integer(o, "dry_allowed_length", 0, SAMP_DRY_MAX_N, &p->dry_allowed_length, e) ||
        integer(o, "dry_penalty_last_n", -1, SAMP_DRY_MAX_N, &p->dry_penalty_last_n, e))
        return -1;
    if (given(o, "typical_p") && !(p->typical_p > 0)) return BAD(e, "typical_p", "'typical_p' must be greater than 0");
    if (parse_dry_breakers(r, e) || parse_stop_ids(r, e)) return -1;
    int skip = 1;
    if (boolean(o, "include_stop_str_in_output", &r->sx.include_stop, e) || boolean(o, "skip_special_tokens", &skip, e) ||
        integer(o, "min_tokens", 0, INT_MAX, &r->sx.min_tokens, e))
        return -1;
    if (r->max_tokens > 0 && r->sx.min_tokens > r->max_tokens)
        return BAD(e, "min_tokens", "'min_tokens' (%d) must not exceed 'max_tokens' (%d)", r->sx.min_tokens, r->max_tokens);
    p->min_tokens = r->sx.min_tokens;
    r->sx.keep_special = !skip;
    return 0;
}

// --- guided decoding

// GBNF for exactly one of the strings: root ::= "a" | "b" (GBNF string escapes).
static int choice_gbnf(json_t *a, const char *param, char **out, oai_err *e) {
    if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > 1024)
        return BAD(e, param, "'%s' must be an array of 1 to 1024 strings", param);
    tc_strbuf b = {0};
    tc_strbuf_str(&b, "root ::= ");
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_string(v) || json_string_length(v) == 0) {
            free(b.p);
            return BAD(e, param, "'%s' elements must be non-empty strings", param);
        }
        tc_strbuf_str(&b, i ? " | \"" : "\"");
        const unsigned char *s = (const unsigned char *)json_string_value(v);
        for (size_t k = 0; k < json_string_length(v); k++) {
            char esc[8];
            if (s[k] == '"' || s[k] == '\\') snprintf(esc, sizeof esc, "\\%c", s[k]);
            else if (s[k] < 0x20) snprintf(esc, sizeof esc, "\\x%02x", s[k]);
            else esc[0] = (char)s[k], esc[1] = 0;
            tc_strbuf_str(&b, esc);
        }
        tc_strbuf_str(&b, "\"");
    }
    if (b.oom) {
        free(b.p);
        return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    *out = b.p;
    return 0;
}

int oai_samp_guided(oai_req *r, oai_err *e) {
    json_t *o = r->root, *so = json_object_get(o, "structured_outputs");
    if (so && !json_is_null(so) && !json_is_object(so))
        return BAD(e, "structured_outputs", "'structured_outputs' must be an object");
    static const char *const kinds[] = {"json", "regex", "choice", "grammar"};
    const char *param = NULL;
    json_t *v = NULL;
    char name[48];
    for (int i = 0; i < 4; i++) {
        json_t *g = json_object_get(o, (snprintf(name, sizeof name, "guided_%s", kinds[i]), name));
        json_t *s = so && !json_is_null(so) ? json_object_get(so, kinds[i]) : NULL;
        for (int k = 0; k < 2; k++) {
            json_t *c = k ? s : g;
            if (!c || json_is_null(c)) continue;
            if (v) return BAD(e, k ? "structured_outputs" : name, "only one guided decoding constraint may be given");
            v = c;
            param = k ? (i == 0 ? "structured_outputs.json" : i == 1 ? "structured_outputs.regex"
                                                     : i == 2 ? "structured_outputs.choice" : "structured_outputs.grammar")
                      : (i == 0 ? "guided_json" : i == 1 ? "guided_regex" : i == 2 ? "guided_choice" : "guided_grammar");
        }
    }
    if (!v) return 0;
    if (r->ext.grammar || r->ext.choice == OAI_TC_REQUIRED || r->ext.choice == OAI_TC_NAMED)
        return BAD(e, param, "'%s' cannot be combined with 'response_format', 'grammar' or a forced tool call", param);
    const char *kind = strchr(param, '.') ? strchr(param, '.') + 1 : param + strlen("guided_");
    tc_err err = {0};
    if (!strcmp(kind, "regex"))
        return BAD(e, param, "'%s' is not supported: the grammar engine has no regular-expression constraints; use "
                             "guided_grammar (GBNF), guided_choice or guided_json", param);
    r->ext.grammar_param = param;
    if (!strcmp(kind, "choice")) return choice_gbnf(v, param, &r->ext.grammar, e);
    if (!strcmp(kind, "grammar")) {
        if (!json_is_string(v)) return BAD(e, param, "'%s' must be a string (GBNF)", param);
        size_t n = json_string_length(v);
        if (!(r->ext.grammar = malloc(n + 1))) return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
        memcpy(r->ext.grammar, json_string_value(v), n + 1);
        return 0; // compiled later, off the event loop (srv_grammar.c)
    }
    json_t *schema = v, *parsed = NULL;
    if (json_is_string(v)) { // vLLM accepts the schema as a JSON string too
        json_error_t je;
        if (!(schema = parsed = json_loads(json_string_value(v), 0, &je)))
            return BAD(e, param, "'%s' is not valid JSON: %s", param, je.text);
    }
    if (!json_is_object(schema)) {
        json_decref(parsed);
        return BAD(e, param, "'%s' must be a JSON schema object", param);
    }
    int rc = gram_schema_gbnf(schema, 0, &r->ext.grammar, &err);
    json_decref(parsed);
    if (rc)
        return err.code == TC_ERR_NOMEM ? oai_err_set(e, 500, "server_error", NULL, NULL, "%s", err.msg)
                                        : BAD(e, param, "%s", err.msg);
    return 0;
}
