// Parsing and checking the model list and router aliases (see srv_config.h). Every error names the field
// and, for the JSON file, the entry: a bad config stops the server before anything loads.
#include "server/srv_config.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void srv_config_init(srv_config *c) { memset(c, 0, sizeof *c); }

void srv_config_free(srv_config *c) {
    for (int i = 0; i < c->n_models; i++) {
        free(c->models[i].path);
        free(c->models[i].chat_template);
    }
    memset(c, 0, sizeof *c);
}

void srv_router_defaults(srv_router_spec *r) {
    memset(r, 0, sizeof *r);
    r->max_prompt_tokens = 256;
    r->max_tokens = 256;
    r->ttft_slo = 1.0;
}

// Aliases are API model ids and metric label values: printable ASCII without quotes, backslashes or spaces.
static int alias_ok(const char *a, size_t n) {
    if (n == 0 || n >= SRV_CFG_MAX_ALIAS) return 0;
    for (size_t i = 0; i < n; i++)
        if (a[i] <= ' ' || a[i] > '~' || a[i] == '"' || a[i] == '\\' || a[i] == ',' || a[i] == '=') return 0;
    return 1;
}

static int set_alias(char *dst, const char *src, size_t n, const char *what, tc_err *err) {
    if (!alias_ok(src, n))
        return tc_err_set(err, TC_ERR_INVALID, "%s '%.*s': expected 1..%d printable characters without spaces, "
                          "quotes, '\\', ',' or '='", what, (int)(n > 64 ? 64 : n), src, SRV_CFG_MAX_ALIAS - 1);
    memcpy(dst, src, n);
    dst[n] = 0;
    return 0;
}

static srv_model_spec *new_model(srv_config *c, tc_err *err) {
    if (c->n_models >= SRV_CFG_MAX_MODELS) {
        tc_err_set(err, TC_ERR_INVALID, "at most %d models", SRV_CFG_MAX_MODELS);
        return NULL;
    }
    srv_model_spec *m = &c->models[c->n_models++];
    memset(m, 0, sizeof *m);
    m->max_queue = -1;
    return m;
}

int srv_config_add_model_arg(srv_config *c, const char *arg, tc_err *err) {
    const char *eq = strchr(arg, '='), *sl = strchr(arg, '/');
    if (eq && sl && sl < eq) eq = NULL; // "dir/a=b.gguf" is a path
    const char *path = eq ? eq + 1 : arg;
    if (!*path) return tc_err_set(err, TC_ERR_INVALID, "-m '%s': empty model path", arg);
    srv_model_spec *m = new_model(c, err);
    if (!m) return TC_ERR_INVALID;
    if (eq && set_alias(m->alias, arg, (size_t)(eq - arg), "-m alias", err)) {
        c->n_models--;
        return TC_ERR_INVALID;
    }
    if (!(m->path = strdup(path))) {
        c->n_models--;
        return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    }
    return 0;
}

int srv_config_add_router_arg(srv_config *c, const char *arg, const srv_router_spec *defaults, tc_err *err) {
    const char *eq = strchr(arg, '='), *comma = eq ? strchr(eq, ',') : NULL;
    if (!eq || !comma || strchr(comma + 1, ','))
        return tc_err_set(err, TC_ERR_INVALID, "--router '%s': expected ALIAS=SMALL,LARGE", arg);
    if (c->n_routers >= SRV_CFG_MAX_ROUTERS)
        return tc_err_set(err, TC_ERR_INVALID, "at most %d routers", SRV_CFG_MAX_ROUTERS);
    srv_router_spec r = *defaults;
    if (set_alias(r.alias, arg, (size_t)(eq - arg), "--router alias", err) ||
        set_alias(r.small, eq + 1, (size_t)(comma - eq - 1), "--router small model", err) ||
        set_alias(r.large, comma + 1, strlen(comma + 1), "--router large model", err))
        return TC_ERR_INVALID;
    c->routers[c->n_routers++] = r;
    return 0;
}

// --- JSON ------------------------------------------------------------------------------------------

// A non-negative integer field (absent: *out untouched). lo..hi inclusive.
static int get_int(json_t *o, const char *key, const char *where, long long lo, long long hi, long long *out,
                   tc_err *err) {
    json_t *v = json_object_get(o, key);
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return tc_err_set(err, TC_ERR_INVALID, "%s: '%s' must be an integer in %lld..%lld", where, key, lo, hi);
    *out = json_integer_value(v);
    return 0;
}

static int get_num(json_t *o, const char *key, const char *where, double lo, double hi, double *out, tc_err *err) {
    json_t *v = json_object_get(o, key);
    if (!v) return 0;
    if (!json_is_number(v) || !(json_number_value(v) >= lo && json_number_value(v) <= hi))
        return tc_err_set(err, TC_ERR_INVALID, "%s: '%s' must be a number in %g..%g", where, key, lo, hi);
    *out = json_number_value(v);
    return 0;
}

// A string field; required → error when absent. *out borrowed from o.
static int get_str(json_t *o, const char *key, const char *where, int required, const char **out, tc_err *err) {
    json_t *v = json_object_get(o, key);
    if (!v) {
        if (required) return tc_err_set(err, TC_ERR_INVALID, "%s: '%s' is required", where, key);
        return 0;
    }
    if (!json_is_string(v) || !json_string_length(v) || strlen(json_string_value(v)) != json_string_length(v))
        return tc_err_set(err, TC_ERR_INVALID, "%s: '%s' must be a non-empty string", where, key);
    *out = json_string_value(v);
    return 0;
}

static int check_keys(json_t *o, const char *const *keys, const char *where, tc_err *err) {
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        int ok = 0;
        for (int i = 0; keys[i] && !ok; i++) ok = !strcmp(k, keys[i]);
        if (!ok) return tc_err_set(err, TC_ERR_INVALID, "%s: unknown field '%.64s'", where, k);
    }
    return 0;
}

static int parse_model(srv_config *c, json_t *o, int idx, tc_err *err) {
    static const char *const keys[] = {"alias", "path", "threads", "kv_cache_mem_mib", "chat_template",
                                       "max_seqs", "max_queue", "ctx_size", NULL};
    char where[48];
    snprintf(where, sizeof where, "models[%d]", idx);
    if (!json_is_object(o)) return tc_err_set(err, TC_ERR_INVALID, "%s must be an object", where);
    if (check_keys(o, keys, where, err)) return TC_ERR_INVALID;
    const char *alias = NULL, *path = NULL, *tmpl = NULL;
    long long th = 0, kv = 0, seqs = 0, queue = -1, ctx = 0;
    if (get_str(o, "path", where, 1, &path, err) || get_str(o, "alias", where, 0, &alias, err) ||
        get_str(o, "chat_template", where, 0, &tmpl, err) || get_int(o, "threads", where, 1, 1024, &th, err) ||
        get_int(o, "kv_cache_mem_mib", where, 1, 1 << 22, &kv, err) ||
        get_int(o, "max_seqs", where, 1, 4096, &seqs, err) || get_int(o, "max_queue", where, 0, 1 << 20, &queue, err) ||
        get_int(o, "ctx_size", where, 1, 1 << 24, &ctx, err))
        return TC_ERR_INVALID;
    srv_model_spec *m = new_model(c, err);
    if (!m) return TC_ERR_INVALID;
    if (alias && set_alias(m->alias, alias, strlen(alias), "alias", err)) {
        c->n_models--;
        return TC_ERR_INVALID;
    }
    m->path = strdup(path);
    m->chat_template = tmpl ? strdup(tmpl) : NULL;
    if (!m->path || (tmpl && !m->chat_template)) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    m->n_threads = (int)th;
    m->kv_mem_bytes = (size_t)kv << 20;
    m->max_seqs = (int)seqs;
    m->max_queue = (int)queue;
    m->ctx_size = (int)ctx;
    return 0;
}

static int parse_router(srv_config *c, json_t *o, int idx, tc_err *err) {
    static const char *const keys[] = {"alias", "small", "large", "max_prompt_tokens", "max_tokens",
                                       "degrade", "ttft_slo", NULL};
    char where[48];
    snprintf(where, sizeof where, "routers[%d]", idx);
    if (!json_is_object(o)) return tc_err_set(err, TC_ERR_INVALID, "%s must be an object", where);
    if (check_keys(o, keys, where, err)) return TC_ERR_INVALID;
    if (c->n_routers >= SRV_CFG_MAX_ROUTERS)
        return tc_err_set(err, TC_ERR_INVALID, "at most %d routers", SRV_CFG_MAX_ROUTERS);
    srv_router_spec r;
    srv_router_defaults(&r);
    const char *alias = NULL, *small = NULL, *large = NULL;
    long long mp = r.max_prompt_tokens, mt = r.max_tokens;
    json_t *dg = json_object_get(o, "degrade");
    if (get_str(o, "alias", where, 1, &alias, err) || get_str(o, "small", where, 1, &small, err) ||
        get_str(o, "large", where, 1, &large, err) ||
        get_int(o, "max_prompt_tokens", where, 0, 1 << 24, &mp, err) ||
        get_int(o, "max_tokens", where, 0, 1 << 24, &mt, err) ||
        get_num(o, "ttft_slo", where, 0.001, 86400, &r.ttft_slo, err))
        return TC_ERR_INVALID;
    if (dg && !json_is_boolean(dg)) return tc_err_set(err, TC_ERR_INVALID, "%s: 'degrade' must be true or false", where);
    r.degrade = json_is_true(dg);
    r.max_prompt_tokens = (int)mp;
    r.max_tokens = (int)mt;
    if (set_alias(r.alias, alias, strlen(alias), "alias", err) || set_alias(r.small, small, strlen(small), "small", err) ||
        set_alias(r.large, large, strlen(large), "large", err))
        return TC_ERR_INVALID;
    c->routers[c->n_routers++] = r;
    return 0;
}

int srv_config_parse_json(srv_config *c, const char *text, size_t len, tc_err *err) {
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    if (!root) return tc_err_set(err, TC_ERR_INVALID, "config: invalid JSON at line %d: %s", je.line, je.text);
    int rc = 0;
    static const char *const keys[] = {"models", "routers", NULL};
    json_t *ms = json_object_get(root, "models"), *rs = json_object_get(root, "routers");
    if (!json_is_object(root)) rc = tc_err_set(err, TC_ERR_INVALID, "config: the top level must be an object");
    else if (check_keys(root, keys, "config", err)) rc = TC_ERR_INVALID;
    else if (!json_is_array(ms) || !json_array_size(ms))
        rc = tc_err_set(err, TC_ERR_INVALID, "config: 'models' must be a non-empty array");
    else if (rs && !json_is_array(rs)) rc = tc_err_set(err, TC_ERR_INVALID, "config: 'routers' must be an array");
    for (size_t i = 0; !rc && i < json_array_size(ms); i++) rc = parse_model(c, json_array_get(ms, i), (int)i, err);
    for (size_t i = 0; !rc && rs && i < json_array_size(rs); i++)
        rc = parse_router(c, json_array_get(rs, i), (int)i, err);
    json_decref(root);
    return rc;
}

int srv_config_load_file(srv_config *c, const char *path, tc_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return tc_err_set(err, TC_ERR_IO, "config %s: cannot open", path);
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (n + 4096 > cap) {
            if (cap > (1u << 24)) {
                rc = tc_err_set(err, TC_ERR_INVALID, "config %s: larger than 16 MiB", path);
                break;
            }
            char *nb = realloc(buf, cap = cap ? cap * 2 : 8192);
            if (!nb) {
                rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
                break;
            }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    fclose(f);
    if (!rc) {
        rc = srv_config_parse_json(c, buf ? buf : "", n, err);
        if (rc) {
            char m[sizeof err->msg];
            snprintf(m, sizeof m, "%s", err->msg);
            tc_err_set(err, rc, "config %s: %s", path, m);
        }
    }
    free(buf);
    return rc;
}

// --- checks ----------------------------------------------------------------------------------------

const srv_model_spec *srv_config_model(const srv_config *c, const char *alias) {
    for (int i = 0; i < c->n_models; i++)
        if (!strcmp(c->models[i].alias, alias)) return &c->models[i];
    return NULL;
}

const srv_router_spec *srv_config_router(const srv_config *c, const char *alias) {
    for (int i = 0; c && alias && i < c->n_routers; i++)
        if (!strcmp(c->routers[i].alias, alias)) return &c->routers[i];
    return NULL;
}

int srv_config_finish(srv_config *c, tc_err *err) {
    if (c->n_models == 0) return tc_err_set(err, TC_ERR_INVALID, "no model: give -m PATH or --config FILE");
    for (int i = 0; i < c->n_models; i++) {
        srv_model_spec *m = &c->models[i];
        if (m->alias[0]) continue;
        const char *b = strrchr(m->path, '/');
        b = b ? b + 1 : m->path;
        size_t n = strlen(b);
        if (n > 5 && !strcmp(b + n - 5, ".gguf")) n -= 5;
        if (set_alias(m->alias, b, n, "model name from the path", err)) return TC_ERR_INVALID;
    }
    for (int i = 0; i < c->n_models; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(c->models[i].alias, c->models[j].alias))
                return tc_err_set(err, TC_ERR_INVALID, "two models are named '%s' (give one an alias: -m ALIAS=PATH)",
                                  c->models[i].alias);
    for (int i = 0; i < c->n_routers; i++) {
        const srv_router_spec *r = &c->routers[i];
        if (srv_config_model(c, r->alias))
            return tc_err_set(err, TC_ERR_INVALID, "router '%s' has the name of a model", r->alias);
        for (int j = 0; j < i; j++)
            if (!strcmp(c->routers[j].alias, r->alias))
                return tc_err_set(err, TC_ERR_INVALID, "two routers are named '%s'", r->alias);
        if (!srv_config_model(c, r->small))
            return tc_err_set(err, TC_ERR_INVALID, "router '%s': no model named '%s' (small)", r->alias, r->small);
        if (!srv_config_model(c, r->large))
            return tc_err_set(err, TC_ERR_INVALID, "router '%s': no model named '%s' (large)", r->alias, r->large);
        if (!strcmp(r->small, r->large))
            return tc_err_set(err, TC_ERR_INVALID, "router '%s': small and large are the same model", r->alias);
    }
    return 0;
}
