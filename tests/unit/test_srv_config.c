// Model list and router configuration (server/srv_config.c): -m/--router arguments, the JSON config, and the
// checks that turn every bad configuration into a clear message instead of a crash or a half-started server.
#include "server/srv_config.h"
#include "test_util.h"

// Parses json (NULL: none), then the -m and --router args, then finishes. Returns the first error code.
static int build(srv_config *c, const char *json, const char *const *ms, const char *const *rs, tc_err *err) {
    srv_config_init(c);
    memset(err, 0, sizeof *err);
    srv_router_spec d;
    srv_router_defaults(&d);
    int rc = json ? srv_config_parse_json(c, json, strlen(json), err) : 0;
    for (int i = 0; !rc && ms && ms[i]; i++) rc = srv_config_add_model_arg(c, ms[i], err);
    for (int i = 0; !rc && rs && rs[i]; i++) rc = srv_config_add_router_arg(c, rs[i], &d, err);
    if (!rc) rc = srv_config_finish(c, err);
    return rc;
}

// The configuration fails with a message containing `want`.
static void bad(const char *json, const char *const *ms, const char *const *rs, const char *want) {
    srv_config c;
    tc_err err;
    int rc = build(&c, json, ms, rs, &err);
    CHECK_MSG(rc == TC_ERR_INVALID, "expected an error containing '%s' for %s, got rc %d", want, json ? json : "(args)",
              rc);
    CHECK_MSG(strstr(err.msg, want) != NULL, "message '%s' lacks '%s'", err.msg, want);
    srv_config_free(&c);
}

static void test_args(void) {
    srv_config c;
    tc_err err;
    const char *ms[] = {"dir/v=2/a.gguf", "fast=models/x.gguf", "/abs/y.gguf", NULL};
    const char *rs[] = {"auto=fast,y", NULL};
    CHECK_EQ_INT(build(&c, NULL, ms, rs, &err), 0);
    CHECK_EQ_INT(c.n_models, 3);
    CHECK(!strcmp(c.models[0].alias, "a")); // '=' after a '/' is part of the path: not an alias
    CHECK(!strcmp(c.models[0].path, "dir/v=2/a.gguf"));
    CHECK(!strcmp(c.models[1].alias, "fast") && !strcmp(c.models[1].path, "models/x.gguf"));
    CHECK(!strcmp(c.models[2].alias, "y"));
    CHECK_EQ_INT(c.n_routers, 1);
    CHECK(!strcmp(c.routers[0].small, "fast") && !strcmp(c.routers[0].large, "y"));
    CHECK_EQ_INT(c.routers[0].max_prompt_tokens, 256);
    CHECK_EQ_INT(c.routers[0].degrade, 0);
    // router aliases by name: a model's name or an unknown one is not a router; no config has none
    CHECK(srv_config_router(&c, "auto") == &c.routers[0]);
    CHECK(srv_config_router(&c, "fast") == NULL);
    CHECK(srv_config_router(&c, "nope") == NULL);
    CHECK(srv_config_router(NULL, "auto") == NULL);
    srv_config_free(&c);
}

static void test_json(void) {
    srv_config c;
    tc_err err;
    const char *j = "{\"models\": [{\"alias\": \"small\", \"path\": \"s.gguf\", \"threads\": 1, \"kv_cache_mem_mib\": 64,"
                    " \"chat_template\": \"chatml\", \"max_seqs\": 4, \"max_queue\": 0, \"ctx_size\": 512},"
                    " {\"path\": \"dir/big.gguf\"}],"
                    " \"routers\": [{\"alias\": \"auto\", \"small\": \"small\", \"large\": \"big\", \"max_prompt_tokens\": 32,"
                    " \"max_tokens\": 64, \"degrade\": true, \"ttft_slo\": 0.25}]}";
    CHECK_EQ_INT(build(&c, j, NULL, NULL, &err), 0);
    CHECK_EQ_INT(c.n_models, 2);
    const srv_model_spec *s = srv_config_model(&c, "small"), *b = srv_config_model(&c, "big");
    CHECK(s && b);
    if (s && b) {
        CHECK_EQ_INT(s->n_threads, 1);
        CHECK_EQ_INT(s->kv_mem_bytes, 64 << 20);
        CHECK(s->chat_template && !strcmp(s->chat_template, "chatml"));
        CHECK_EQ_INT(s->max_seqs, 4);
        CHECK_EQ_INT(s->max_queue, 0);
        CHECK_EQ_INT(s->ctx_size, 512);
        CHECK_EQ_INT(b->max_queue, -1); // unset: the server-wide value
        CHECK(b->chat_template == NULL);
    }
    CHECK_EQ_INT(c.routers[0].max_prompt_tokens, 32);
    CHECK_EQ_INT(c.routers[0].max_tokens, 64);
    CHECK_EQ_INT(c.routers[0].degrade, 1);
    CHECK_NEAR(c.routers[0].ttft_slo, 0.25, 1e-12);
    srv_config_free(&c);
}

static void test_errors(void) {
    bad("", NULL, NULL, "invalid JSON");
    bad("[1]", NULL, NULL, "top level must be an object");
    bad("{\"models\": []}", NULL, NULL, "'models' must be a non-empty array");
    bad("{\"modles\": [{\"path\": \"a\"}]}", NULL, NULL, "unknown field 'modles'");
    bad("{\"models\": [{\"alias\": \"a\"}]}", NULL, NULL, "models[0]: 'path' is required");
    bad("{\"models\": [{\"path\": 3}]}", NULL, NULL, "'path' must be a non-empty string");
    bad("{\"models\": [{\"path\": \"a\", \"threads\": 0}]}", NULL, NULL, "'threads' must be an integer");
    bad("{\"models\": [{\"path\": \"a\", \"threads\": 1.5}]}", NULL, NULL, "'threads' must be an integer");
    bad("{\"models\": [{\"path\": \"a\", \"thread\": 1}]}", NULL, NULL, "models[0]: unknown field 'thread'");
    bad("{\"models\": [{\"path\": \"a\", \"alias\": \"has space\"}]}", NULL, NULL, "alias 'has space'");
    bad("{\"models\": [{\"path\": \"a\", \"alias\": \"q\\\"uote\"}]}", NULL, NULL, "alias");
    bad("{\"models\": [{\"path\": \"x/m.gguf\"}, {\"path\": \"y/m.gguf\"}]}", NULL, NULL, "two models are named 'm'");
    bad("{\"models\": [{\"path\": \"a\"}], \"routers\": {}}", NULL, NULL, "'routers' must be an array");
    bad("{\"models\": [{\"path\": \"a\"}, {\"path\": \"b\"}], \"routers\": [{\"alias\": \"r\", \"small\": \"a\"}]}", NULL,
        NULL, "routers[0]: 'large' is required");
    bad("{\"models\": [{\"path\": \"a\"}, {\"path\": \"b\"}], \"routers\": [{\"alias\": \"r\", \"small\": \"a\", "
        "\"large\": \"c\"}]}", NULL, NULL, "no model named 'c'");
    bad("{\"models\": [{\"path\": \"a\"}, {\"path\": \"b\"}], \"routers\": [{\"alias\": \"a\", \"small\": \"a\", "
        "\"large\": \"b\"}]}", NULL, NULL, "router 'a' has the name of a model");
    bad("{\"models\": [{\"path\": \"a\"}, {\"path\": \"b\"}], \"routers\": [{\"alias\": \"r\", \"small\": \"a\", "
        "\"large\": \"a\"}]}", NULL, NULL, "small and large are the same model");
    bad("{\"models\": [{\"path\": \"a\"}, {\"path\": \"b\"}], \"routers\": [{\"alias\": \"r\", \"small\": \"a\", "
        "\"large\": \"b\", \"degrade\": 1}]}", NULL, NULL, "'degrade' must be true or false");
    bad("{\"models\": [{\"path\": \"a\"}, {\"path\": \"b\"}], \"routers\": [{\"alias\": \"r\", \"small\": \"a\", "
        "\"large\": \"b\", \"ttft_slo\": -1}]}", NULL, NULL, "'ttft_slo' must be a number");
    const char *m_empty[] = {"x=", NULL};
    bad(NULL, m_empty, NULL, "empty model path");
    const char *m_dup[] = {"a=1.gguf", "a=2.gguf", NULL};
    bad(NULL, m_dup, NULL, "two models are named 'a'");
    const char *m_long[] = {"models/a-model-file-name-of-more-than-thirty-bytes.gguf", NULL};
    bad(NULL, m_long, NULL, "model name from the path");
    const char *m2[] = {"a=1.gguf", "b=2.gguf", NULL};
    const char *r_bad[] = {"auto=a", NULL};
    bad(NULL, m2, r_bad, "expected ALIAS=SMALL,LARGE");
    const char *r_bad2[] = {"auto=a,b,c", NULL};
    bad(NULL, m2, r_bad2, "expected ALIAS=SMALL,LARGE");
    const char *r_dup[] = {"auto=a,b", "auto=b,a", NULL};
    bad(NULL, m2, r_dup, "two routers are named 'auto'");
    bad(NULL, NULL, NULL, "no model");
    // too many models: an error, not an overflow
    srv_config c;
    tc_err err;
    srv_config_init(&c);
    int rc = 0;
    for (int i = 0; i <= SRV_CFG_MAX_MODELS && !rc; i++) {
        char a[32];
        snprintf(a, sizeof a, "m%d=p%d", i, i);
        rc = srv_config_add_model_arg(&c, a, &err);
    }
    CHECK_EQ_INT(rc, TC_ERR_INVALID);
    CHECK_EQ_INT(c.n_models, SRV_CFG_MAX_MODELS);
    srv_config_free(&c);
    // a missing file
    srv_config_init(&c);
    CHECK_EQ_INT(srv_config_load_file(&c, "/nonexistent/tachyon.json", &err), TC_ERR_IO);
    CHECK(strstr(err.msg, "/nonexistent/tachyon.json") != NULL);
    srv_config_free(&c);
}

int main(void) {
    test_args();
    test_json();
    test_errors();
    TEST_MAIN_END();
}
