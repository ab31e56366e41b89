// OpenAI request parsing and validation.
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/oai.h"
#include "server/oai_samp.h"
#include "server/oai_tools.h"

// --- typed field access ----------------------------------------------------------------------------

#define BAD(e, param, ...) oai_err_set(e, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

static const char *jtype(const json_t *v) { return oai_jtype(v); } // short for the messages below

// Field absent or null → 0 (keep default); wrong type → -1.
static int get_bool(json_t *o, const char *key, int *out, oai_err *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return BAD(e, key, "'%s' must be a boolean, got %s", key, jtype(v));
    *out = json_is_true(v);
    return 0;
}

static int get_num(json_t *o, const char *key, double lo, double hi, double *out, oai_err *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return BAD(e, key, "'%s' must be a number, got %s", key, jtype(v));
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi)
        return BAD(e, key, "'%s' must be between %g and %g, got %g", key, lo, hi, x);
    *out = x;
    return 0;
}

// Integers; a real with an integral value (e.g. 10.0) is accepted.
static int get_int(json_t *o, const char *key, long long lo, long long hi, long long *out, oai_err *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    long long x;
    if (json_is_integer(v)) x = json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) && fabs(json_real_value(v)) < 9e18)
        x = (long long)json_real_value(v);
    else return BAD(e, key, "'%s' must be an integer, got %s", key, jtype(v));
    if (x < lo || x > hi) return BAD(e, key, "'%s' must be between %lld and %lld, got %lld", key, lo, hi, x);
    *out = x;
    return 0;
}

static int take_owned(oai_req *r, char *s) {
    char **p = realloc(r->owned, (size_t)(r->n_owned + 1) * sizeof *p);
    if (!p) {
        free(s);
        return -1;
    }
    r->owned = p;
    r->owned[r->n_owned++] = s;
    return 0;
}

// [{"type":"text","text":…}, …] → one string (owned by r, NUL-terminated, *len bytes: may contain NUL).
static int join_text_parts(oai_req *r, json_t *c, const char *param, char **out, size_t *len, oai_err *e) {
    size_t total = 0, k;
    json_t *part;
    json_array_foreach(c, k, part) {
        json_t *ty = json_object_get(part, "type"), *tx = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(ty) || strcmp(json_string_value(ty), "text") || !json_is_string(tx))
            return BAD(e, param, "only parts of type 'text' with a string 'text' are supported (part %zu)", k);
        total += json_string_length(tx);
    }
    char *s = malloc(total + 1);
    if (!s || take_owned(r, s)) // take_owned frees s when it fails
        return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
    size_t off = 0;
    json_array_foreach(c, k, part) {
        json_t *tx = json_object_get(part, "text");
        memcpy(s + off, json_string_value(tx), json_string_length(tx));
        off += json_string_length(tx);
    }
    s[off] = 0;
    *out = s;
    *len = off;
    return 0;
}

// content: string | null | [{"type":"text","text":…}, …]
static int parse_content(oai_req *r, json_t *c, int i, const char **out, oai_err *e) {
    char param[64];
    snprintf(param, sizeof param, "messages[%d].content", i);
    if (!c || json_is_null(c)) {
        *out = "";
        return 0;
    }
    if (json_is_string(c)) {
        if (strlen(json_string_value(c)) != json_string_length(c)) return BAD(e, param, "content contains NUL");
        *out = json_string_value(c);
        return 0;
    }
    if (!json_is_array(c)) return BAD(e, param, "'%s' must be a string or an array of parts, got %s", param, jtype(c));
    char *s;
    size_t n;
    if (join_text_parts(r, c, param, &s, &n, e)) return -1;
    if (strlen(s) != n) return BAD(e, param, "content contains NUL");
    *out = s;
    return 0;
}

static int parse_messages(oai_req *r, oai_err *e) {
    json_t *m = json_object_get(r->root, "messages");
    if (!m || json_is_null(m)) return BAD(e, "messages", "Missing required parameter: 'messages'");
    if (!json_is_array(m)) return BAD(e, "messages", "'messages' must be an array, got %s", jtype(m));
    size_t n = json_array_size(m);
    if (n == 0) return BAD(e, "messages", "'messages' must contain at least one message");
    if (n > OAI_MAX_MSGS) return BAD(e, "messages", "too many messages (%zu > %d)", n, OAI_MAX_MSGS);
    r->msgs = calloc(n, sizeof *r->msgs);
    if (!r->msgs) return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *msg = json_array_get(m, i);
        char param[64];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(msg)) return BAD(e, param, "'%s' must be an object, got %s", param, jtype(msg));
        json_t *role = json_object_get(msg, "role");
        snprintf(param, sizeof param, "messages[%zu].role", i);
        if (!role) return BAD(e, param, "Missing required parameter: '%s'", param);
        if (!json_is_string(role)) return BAD(e, param, "'%s' must be a string, got %s", param, jtype(role));
        const char *rs = json_string_value(role);
        if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant") && strcmp(rs, "developer") &&
            strcmp(rs, "tool"))
            return BAD(e, param, "invalid role '%.32s' (expected system, developer, user, assistant or tool)", rs);
        r->msgs[i].role = strcmp(rs, "developer") ? rs : "system";
        json_t *content = json_object_get(msg, "content");
        if ((!content || json_is_null(content)) && strcmp(rs, "assistant")) { // only an assistant's may be null
            snprintf(param, sizeof param, "messages[%zu].content", i);
            return BAD(e, param, "'%s' is required for a %s message (a string or an array of parts)", param, rs);
        }
        if (parse_content(r, content, (int)i, &r->msgs[i].content, e)) return -1;
        r->n_msgs = (int)i + 1;
    }
    return 0;
}

// One prompt: a string, or a non-empty array of token ids. where: "prompt" or "prompt[i]" for messages.
static int parse_one_prompt(json_t *p, const char *where, oai_prompt *out, oai_err *e) {
    if (json_is_string(p)) {
        out->text = json_string_value(p);
        out->len = json_string_length(p);
        if (strlen(out->text) != out->len) return BAD(e, "prompt", "'%s' contains NUL", where);
        return 0;
    }
    size_t n = json_array_size(p);
    if (!json_is_array(p) || n == 0)
        return BAD(e, "prompt", "'%s' must be a string or a non-empty array of token ids, got %s", where,
                   json_is_array(p) ? "an empty array" : jtype(p));
    out->ids = malloc(n * sizeof(int32_t));
    if (!out->ids) return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(p, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > INT32_MAX)
            return BAD(e, "prompt", "'%s' token ids must be non-negative integers (element %zu)", where, i);
        out->ids[i] = (int32_t)json_integer_value(t);
    }
    out->n_ids = (int)n;
    return 0;
}

// prompt: "text" | [ids…] | ["text", …] | [[ids…], …] (several prompts: each gets its own n choices).
static int parse_prompt(oai_req *r, oai_err *e) {
    json_t *p = json_object_get(r->root, "prompt");
    if (!p || json_is_null(p)) return BAD(e, "prompt", "Missing required parameter: 'prompt'");
    if (json_is_array(p) && json_array_size(p) == 0) return BAD(e, "prompt", "'prompt' must not be empty");
    json_t *first = json_is_array(p) ? json_array_get(p, 0) : NULL;
    int several = first && (json_is_string(first) || json_is_array(first));
    size_t n = several ? json_array_size(p) : 1;
    if (n > OAI_MAX_CHOICES) return BAD(e, "prompt", "at most %d prompts per request, got %zu", OAI_MAX_CHOICES, n);
    r->prompts = calloc(n, sizeof *r->prompts);
    if (!r->prompts) return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
    r->n_prompts = (int)n;
    for (size_t i = 0; i < n; i++) {
        char where[32];
        snprintf(where, sizeof where, several ? "prompt[%zu]" : "prompt", i);
        json_t *pi = several ? json_array_get(p, i) : p;
        if (several && !json_is_string(pi) && !json_is_array(pi))
            return BAD(e, "prompt", "'%s' must be a string or an array of token ids, got %s", where, jtype(pi));
        if (parse_one_prompt(pi, where, &r->prompts[i], e)) return -1;
    }
    r->prompt = r->prompts[0].text;
    r->prompt_len = r->prompts[0].len;
    r->prompt_ids = r->prompts[0].ids;
    r->n_prompt_ids = r->prompts[0].n_ids;
    return 0;
}

// logit_bias: {"<token id>": bias, …} with string keys (JSON has no others) and biases in [-100, 100].
static int parse_logit_bias(oai_req *r, oai_err *e) {
    json_t *b = json_object_get(r->root, "logit_bias");
    if (!b || json_is_null(b)) return 0;
    if (!json_is_object(b)) return BAD(e, "logit_bias", "'logit_bias' must be an object mapping token ids to biases, got %s", jtype(b));
    size_t n = json_object_size(b);
    if (n > OAI_MAX_BIAS) return BAD(e, "logit_bias", "'logit_bias' has %zu entries; at most %d", n, OAI_MAX_BIAS);
    if (n == 0) return 0;
    r->bias = malloc(n * sizeof *r->bias);
    if (!r->bias) return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
    const char *key;
    json_t *v;
    json_object_foreach(b, key, v) {
        char *end;
        errno = 0;
        long id = strtol(key, &end, 10);
        if (!*key || *end || errno || id < 0 || id > INT32_MAX || (key[0] < '0' || key[0] > '9'))
            return BAD(e, "logit_bias", "'logit_bias' keys must be token ids (decimal integers), got '%.40s'", key);
        if (!json_is_number(v))
            return BAD(e, "logit_bias", "'logit_bias' value for token %ld must be a number, got %s", id, jtype(v));
        double x = json_number_value(v);
        if (!isfinite(x) || x < -100 || x > 100)
            return BAD(e, "logit_bias", "'logit_bias' value for token %ld must be between -100 and 100, got %g", id, x);
        r->bias[r->n_bias++] = (samp_bias){(int32_t)id, (float)x};
    }
    r->sp.bias = r->bias;
    r->sp.n_bias = r->n_bias;
    return 0;
}

// Fields honoured only for some values: anything else is refused rather than half-honoured.
static int parse_restricted(oai_req *r, oai_err *e) {
    json_t *o = r->root, *v;
    if ((v = json_object_get(o, "priority")) && !json_is_null(v)) {
        if (!json_is_integer(v)) return BAD(e, "priority", "'priority' must be an integer, got %s", jtype(v));
        json_int_t p = json_integer_value(v);
        if (p < -1000000 || p > 1000000)
            return BAD(e, "priority", "'priority' must be between -1000000 and 1000000 (lower runs first)");
        r->priority = (int)p;
    }
    if ((v = json_object_get(o, "modalities")) && !json_is_null(v)) {
        size_t i;
        json_t *m;
        if (!json_is_array(v)) return BAD(e, "modalities", "'modalities' must be an array, got %s", jtype(v));
        json_array_foreach(v, i, m) if (!json_is_string(m) || strcmp(json_string_value(m), "text"))
            return BAD(e, "modalities", "'modalities': only the \"text\" modality is supported");
    }
    if ((v = json_object_get(o, "chat_template_kwargs")) && !json_is_null(v)) {
        if (!json_is_object(v))
            return BAD(e, "chat_template_kwargs", "'chat_template_kwargs' must be an object, got %s", jtype(v));
        const char *key;
        json_t *kv;
        json_object_foreach(v, key, kv) {
            if (!strcmp(key, "enable_thinking")) {
                if (json_is_null(kv)) continue;
                if (!json_is_boolean(kv))
                    return BAD(e, "chat_template_kwargs", "'chat_template_kwargs.enable_thinking' must be a boolean, "
                               "got %s", jtype(kv));
                r->enable_thinking = json_is_true(kv);
            }
            // any other key is a variable for the model's Jinja template (as transformers' apply_chat_template
            // takes extra keyword arguments); a template that does not read it ignores it
        }
    }
    if ((v = json_object_get(o, "suffix")) && !json_is_null(v)) {
        if (!json_is_string(v)) return BAD(e, "suffix", "'suffix' must be a string, got %s", jtype(v));
        if (strlen(json_string_value(v)) != json_string_length(v)) return BAD(e, "suffix", "'suffix' contains NUL");
        if (json_string_length(v)) r->suffix = json_string_value(v);
    }
    return 0;
}

static int parse_stop(oai_req *r, oai_err *e) {
    json_t *s = json_object_get(r->root, "stop");
    if (!s || json_is_null(s)) return 0;
    json_t *one[1] = {s};
    size_t n = 1;
    if (json_is_array(s)) n = json_array_size(s);
    else if (!json_is_string(s)) return BAD(e, "stop", "'stop' must be a string or an array of strings, got %s", jtype(s));
    if (n > OAI_MAX_STOP) return BAD(e, "stop", "at most %d stop strings are supported, got %zu", OAI_MAX_STOP, n);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_is_array(s) ? json_array_get(s, i) : one[0];
        if (!json_is_string(v)) return BAD(e, "stop", "'stop' elements must be strings (element %zu)", i);
        size_t len = json_string_length(v);
        if (len > OAI_MAX_STOP_LEN) return BAD(e, "stop", "stop strings are limited to %d bytes", OAI_MAX_STOP_LEN);
        if (len == 0 || strlen(json_string_value(v)) != len) continue; // "" never matches; NUL cannot be generated
        r->stop[r->n_stop++] = json_string_value(v);
    }
    return 0;
}

// prediction (OpenAI Predicted Outputs): {"type": "content", "content": string | [{"type":"text","text":…}]}
static int parse_prediction(oai_req *r, oai_err *e) {
    json_t *p = json_object_get(r->root, "prediction");
    if (!p || json_is_null(p)) return 0;
    json_t *ty = json_object_get(p, "type"), *c = json_object_get(p, "content");
    if (!json_is_object(p) || !json_is_string(ty) || strcmp(json_string_value(ty), "content"))
        return BAD(e, "prediction", "'prediction' must be an object {\"type\": \"content\", \"content\": …}");
    if (json_is_string(c)) {
        r->prediction = json_string_value(c);
        r->prediction_len = json_string_length(c);
        return 0;
    }
    if (!json_is_array(c))
        return BAD(e, "prediction.content", "'prediction.content' must be a string or an array of text parts");
    char *s;
    if (join_text_parts(r, c, "prediction.content", &s, &r->prediction_len, e)) return -1;
    r->prediction = s;
    return 0;
}

int oai_parse(oai_kind kind, const char *body, size_t len, oai_req *r, oai_err *e) {
    return oai_parse_ex(kind, body, len, 0, r, e);
}

// OpenAI defaults (set field by field: the request must not depend on the sampler's greedy default).
static void set_defaults(oai_req *r, oai_kind kind) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->max_tokens = -1;
    r->truncation = -1;
    r->n = 1;
    r->enable_thinking = -1;
    samp_params_default(&r->sp); // llama-server's samplers off
    r->sp.temperature = 1.0f;
    r->sp.top_k = 0;
    r->sp.top_p = 1.0f;
    r->sp.min_p = 0.0f;
    r->sp.repetition_penalty = 1.0f;
    r->sp.presence_penalty = 0.0f;
    r->sp.frequency_penalty = 0.0f;
    r->sp.penalty_last_n = -1; // OpenAI penalties count every generated token
    r->sp.seed = 0;
    r->sp.n_logprobs = 0;
}

// stream, stream_options.
static int parse_stream(oai_req *r, oai_err *e) {
    json_t *o = r->root, *v;
    if (get_bool(o, "stream", &r->stream, e)) return -1;
    if ((v = json_object_get(o, "stream_options")) && !json_is_null(v)) {
        if (!json_is_object(v)) {
            BAD(e, "stream_options", "'stream_options' must be an object, got %s", jtype(v));
            return -1;
        }
        if (!r->stream) {
            BAD(e, "stream_options", "'stream_options' is only allowed when 'stream' is true");
            return -1;
        }
        json_t *iu = json_object_get(v, "include_usage");
        if (iu && !json_is_null(iu) && !json_is_boolean(iu)) {
            BAD(e, "stream_options.include_usage", "'stream_options.include_usage' must be a boolean, got %s",
                jtype(iu));
            return -1;
        }
        r->include_usage = json_is_true(iu);
    }
    return 0;
}

// max_tokens (or max_completion_tokens), n and the sampling parameters.
static int parse_sampling(oai_req *r, oai_err *e) {
    json_t *o = r->root, *v;
    long long x = -1;
    const char *mt_key = json_object_get(o, "max_completion_tokens") && !json_is_null(json_object_get(o, "max_completion_tokens"))
                             ? "max_completion_tokens"
                             : "max_tokens";
    if (get_int(o, mt_key, 1, INT_MAX, &x, e)) return -1;
    r->max_tokens = (int)x;
    x = 1;
    if (get_int(o, "n", 1, OAI_MAX_N, &x, e)) return -1;
    r->n = (int)x;
    double d;
    d = r->sp.temperature;
    if (get_num(o, "temperature", 0, 2, &d, e)) return -1;
    r->sp.temperature = (float)d;
    d = 1;
    if (get_num(o, "top_p", 0, 1, &d, e)) return -1;
    if (d <= 0) {
        BAD(e, "top_p", "'top_p' must be greater than 0");
        return -1;
    }
    r->sp.top_p = (float)d;
    d = 0;
    if (get_num(o, "min_p", 0, 1, &d, e)) return -1;
    r->sp.min_p = (float)d;
    x = 0;
    if (get_int(o, "top_k", -1, INT_MAX, &x, e)) return -1;
    r->sp.top_k = (int)(x < 0 ? 0 : x);
    d = 1;
    if (get_num(o, "repetition_penalty", 0.01, 10, &d, e)) return -1;
    r->sp.repetition_penalty = (float)d;
    d = 0;
    if (get_num(o, "presence_penalty", -2, 2, &d, e)) return -1;
    r->sp.presence_penalty = (float)d;
    d = 0;
    if (get_num(o, "frequency_penalty", -2, 2, &d, e)) return -1;
    r->sp.frequency_penalty = (float)d;
    if ((v = json_object_get(o, "seed")) && !json_is_null(v)) {
        if (!json_is_integer(v)) {
            BAD(e, "seed", "'seed' must be an integer, got %s", jtype(v));
            return -1;
        }
        r->sp.seed = (uint64_t)json_integer_value(v);
        r->seed_given = 1;
    }
    return 0;
}

// logprobs as each API writes it (chat: a boolean and top_logprobs; completions: a count), echo, best_of.
static int parse_logprobs(oai_req *r, oai_err *e) {
    json_t *o = r->root;
    long long x;
    oai_kind kind = r->kind;
    if (kind == OAI_CHAT) {
        if (get_bool(o, "logprobs", &r->logprobs, e)) return -1;
        x = 0;
        if (get_int(o, "top_logprobs", 0, SAMP_MAX_LOGPROBS, &x, e)) return -1;
        if (x > 0 && !r->logprobs) {
            BAD(e, "top_logprobs", "'top_logprobs' requires 'logprobs' to be true");
            return -1;
        }
        r->top_logprobs = (int)x;
    } else {
        x = -1;
        if (get_int(o, "logprobs", 0, SAMP_MAX_LOGPROBS, &x, e)) return -1;
        r->logprobs = x >= 0;
        r->top_logprobs = x > 0 ? (int)x : 0;
        if (get_bool(o, "echo", &r->echo, e)) return -1;
        x = r->n;
        if (get_int(o, "best_of", 1, OAI_MAX_N, &x, e)) return -1;
        if (x != r->n) {
            BAD(e, "best_of", "'best_of' must equal 'n' (%d): ranking candidates server-side is not supported", r->n);
            return -1;
        }
        if (r->n_prompts * r->n > OAI_MAX_CHOICES) {
            BAD(e, "n", "%d prompts x n=%d choices exceeds %d choices per request", r->n_prompts, r->n, OAI_MAX_CHOICES);
            return -1;
        }
    }
    return 0;
}

// timeout, ttft_slo_ms, ignore_eos, cache_salt.
static int parse_limits(oai_req *r, oai_err *e) {
    json_t *o = r->root;
    double d;
    d = 0;
    if (get_num(o, "timeout", 0, 1e7, &d, e)) return -1;
    r->timeout = d;
    d = 0;
    if (get_num(o, "ttft_slo_ms", 0, 1e10, &d, e)) return -1;
    r->ttft_slo = d / 1000.0;
    if (get_bool(o, "ignore_eos", &r->ignore_eos, e)) return -1;
    json_t *salt = json_object_get(o, "cache_salt"); // vLLM: only requests with the same salt share cached prefixes
    if (salt && !json_is_null(salt)) {
        if (!json_is_string(salt) || json_string_length(salt) == 0) {
            BAD(e, "cache_salt", "'cache_salt' must be a non-empty string");
            return -1;
        }
        r->cache_salt = json_string_value(salt);
        r->cache_salt_len = json_string_length(salt);
    }
    return 0;
}

// truncation.
static int parse_tail(oai_req *r, oai_err *e) {
    json_t *o = r->root, *v;
    if ((v = json_object_get(o, "truncation")) && !json_is_null(v)) { // context overflow policy (gen_trunc.c)
        const char *t = json_string_value(v);
        if (!t || (strcmp(t, "disabled") && strcmp(t, "auto"))) {
            BAD(e, "truncation", "'truncation' must be \"disabled\" or \"auto\"");
            return -1;
        }
        r->truncation = !strcmp(t, "auto");
    }
    return 0;
}

int oai_parse_ex(oai_kind kind, const char *body, size_t len, int lenient, oai_req *r, oai_err *e) {
    memset(r, 0, sizeof *r);
    if (len == 0) return BAD(e, NULL, "The request body is empty; expected a JSON object");
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        return BAD(e, NULL, "We could not parse the JSON body of your request: %s (line %d, column %d)", je.text,
                   je.line, je.column);
    }
    return oai_parse_json(kind, root, lenient, r, e);
}

int oai_parse_json(oai_kind kind, json_t *root, int lenient, oai_req *r, oai_err *e) {
    set_defaults(r, kind);
    r->root = root;
    if (!json_is_object(r->root)) {
        BAD(e, NULL, "The request body must be a JSON object, got %s", jtype(r->root));
        goto err;
    }
    if (oai_check_fields(kind, lenient, r, e)) goto err;
    json_t *o = r->root, *v;
    if ((v = json_object_get(o, "model")) && !json_is_null(v)) {
        if (!json_is_string(v)) {
            BAD(e, "model", "'model' must be a string, got %s", jtype(v));
            goto err;
        }
        r->model = json_string_value(v);
    }
    if (kind == OAI_CHAT ? parse_messages(r, e) : parse_prompt(r, e)) goto err;
    if (parse_stream(r, e)) goto err;
    if (parse_sampling(r, e)) goto err;
    if (parse_logprobs(r, e)) goto err;
    if (parse_logit_bias(r, e) || parse_restricted(r, e)) goto err;
    r->sp.n_logprobs = r->top_logprobs;
    r->sp.no_logprob = !r->logprobs; // no per-token log-softmax nobody reads
    if (oai_samp_parse(r, e)) goto err; // llama-server / vLLM sampler fields: oai_samp.c
    if (parse_stop(r, e)) goto err;
    if (parse_limits(r, e)) goto err;
    if (parse_prediction(r, e)) goto err;
    if (oai_ext_parse(r, e)) goto err; // structured outputs and tools: oai_tools.c
    if (oai_samp_guided(r, e)) goto err; // vLLM's guided_* onto the grammar engine: oai_samp.c
    if (parse_tail(r, e)) goto err;
    return 0;
err:
    oai_req_free(r);
    return -1;
}

void oai_req_free(oai_req *r) {
    for (int i = 0; i < r->n_owned; i++) free(r->owned[i]);
    free(r->owned);
    free(r->msgs);
    for (int i = 0; i < r->n_prompts; i++) free(r->prompts[i].ids);
    free(r->prompts);
    free(r->bias);
    oai_ext_free(&r->ext);
    if (r->root) json_decref(r->root);
    memset(r, 0, sizeof *r);
}
