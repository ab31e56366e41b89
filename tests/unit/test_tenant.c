// The --api-key-file parser (good files, and every kind of bad line → an error naming the line), the
// constant-time key lookup, and the token bucket with a fake clock.
#include <string.h>

#include "tenant/ratelimit.h"
#include "tenant/tenant_keys.h"
#include "test_util.h"

static tn_table *parse(const char *text, tc_err *err) {
    tn_table *t = NULL;
    memset(err, 0, sizeof *err);
    int rc = tn_parse(text, strlen(text), &t, err);
    CHECK((rc == 0) == (t != NULL));
    return t;
}

static void test_parse_good(void) {
    tc_err err;
    tn_table *t = parse("# keys for staging\n"
                        "\n"
                        "sk-alpha   acme  rpm=60 tpm=1000 share=2   # the main key\n"
                        "sk-alpha-2 acme\n"
                        "\tsk-beta beta-corp tpm=500\r\n"
                        "sk-gamma g.3_x\n",
                        &err);
    CHECK_MSG(t != NULL, "%s", err.msg);
    if (!t) return;
    CHECK_EQ_INT(t->n_keys, 4);
    CHECK_EQ_INT(t->n_tenants, 3);
    int a = tn_find_tenant(t, "acme"), b = tn_find_tenant(t, "beta-corp"), g = tn_find_tenant(t, "g.3_x");
    CHECK(a >= 0 && b >= 0 && g >= 0);
    CHECK_EQ_INT(t->tenants[a].rpm, 60);
    CHECK_EQ_INT(t->tenants[a].tpm, 1000);
    CHECK_NEAR(t->tenants[a].share, 2.0, 0);
    CHECK_EQ_INT(t->tenants[b].rpm, 0);
    CHECK_EQ_INT(t->tenants[b].tpm, 500);
    CHECK_NEAR(t->tenants[g].share, 1.0, 0);
    CHECK_EQ_INT(tn_lookup(t, "sk-alpha", 8), a);
    CHECK_EQ_INT(tn_lookup(t, "sk-alpha-2", 10), a);
    CHECK_EQ_INT(tn_lookup(t, "sk-beta", 7), b);
    CHECK_EQ_INT(tn_lookup(t, "sk-gamma", 8), g);
    CHECK_EQ_INT(tn_lookup(t, "sk-alph", 7), -1);   // prefix
    CHECK_EQ_INT(tn_lookup(t, "sk-alphaX", 9), -1); // longer
    CHECK_EQ_INT(tn_lookup(t, "sk-alpha", 0), -1);
    CHECK_EQ_INT(tn_lookup(t, "", 0), -1);
    // --api-key merged in as tenant "default"
    CHECK_EQ_INT(tn_add_key(&t, "legacy", "default", &err), 0);
    CHECK_EQ_INT(tn_lookup(t, "legacy", 6), tn_find_tenant(t, "default"));
    tn_free(t);
    t = NULL;
    CHECK_EQ_INT(tn_add_key(&t, "only", "default", &err), 0); // no file: a table of one
    CHECK_EQ_INT(tn_lookup(t, "only", 4), 0);
    tn_free(t);
    // many keys: the table grows
    char big[64 * 40] = "";
    for (int i = 0; i < 40; i++) snprintf(big + strlen(big), sizeof big - strlen(big), "key%d t%d\n", i, i % 7);
    t = parse(big, &err);
    CHECK_MSG(t && t->n_keys == 40 && t->n_tenants == 7, "%s", err.msg);
    if (t) CHECK_EQ_INT(tn_lookup(t, "key33", 5), tn_find_tenant(t, "t5"));
    tn_free(t);
}

static void expect_bad(const char *text, const char *want) {
    tc_err err;
    tn_table *t = parse(text, &err);
    CHECK_MSG(t == NULL, "accepted: %s", text);
    CHECK_MSG(strstr(err.msg, want) != NULL, "error '%s' does not contain '%s'", err.msg, want);
    tn_free(t);
}

static void test_parse_bad(void) {
    expect_bad("", "no keys");
    expect_bad("# only comments\n\n", "no keys");
    expect_bad("k1 a\nlonely\n", "line 2: a key needs a tenant name");
    expect_bad("k1 a rpm=10 tpm=5 share=1 extra\n", "line 1: too many fields");
    expect_bad("k1 a\nk1 b\n", "line 2: duplicate key");
    expect_bad("k1 a rpm=0\n", "line 1: rpm must be an integer");
    expect_bad("k1 a rpm=ten\n", "line 1: rpm must be an integer");
    expect_bad("k1 a tpm=-5\n", "line 1: tpm must be an integer");
    expect_bad("k1 a share=0\n", "line 1: share must be a number");
    expect_bad("k1 a share=x\n", "line 1: share must be a number");
    expect_bad("k1 a burst=3\n", "line 1: unknown option 'burst'");
    expect_bad("k1 a 60\n", "line 1: '60' is not an option");
    expect_bad("k1 bad/name\n", "line 1: tenant name");
    expect_bad("k1 a rpm=10\nk2 a rpm=20\n", "line 2: tenant a already has rpm=10");
    expect_bad("k1 a share=2\n\nk2 a share=3\n", "line 3: tenant a already has share=2");
    char longkey[400];
    memset(longkey, 'k', 300);
    strcpy(longkey + 300, " a\n");
    expect_bad(longkey, "line 1: the key must be");
    expect_bad("k\x01y a\n", "line 1: the key must be");
    // the same limit repeated is fine
    tc_err err;
    tn_table *t = parse("k1 a rpm=10\nk2 a rpm=10 tpm=7\n", &err);
    CHECK_MSG(t && t->tenants[0].rpm == 10 && t->tenants[0].tpm == 7, "%s", err.msg);
    tn_free(t);
    // tn_load: a missing file names the path
    CHECK(tn_load("/nonexistent/keys.txt", &t, &err) != 0 && t == NULL);
    CHECK(strstr(err.msg, "/nonexistent/keys.txt") != NULL);
}

static void test_bucket(void) {
    rl_bucket b;
    double now = 100.0; // fake clock, seconds
    rl_init(&b, 60, now); // 60 per minute: 1 per second, 60 at once
    CHECK_NEAR(rl_remaining(&b, now), 60, 1e-9);
    CHECK_NEAR(rl_wait(&b, 60, now), 0, 0);
    rl_take(&b, 60, now);
    CHECK_NEAR(rl_remaining(&b, now), 0, 1e-9);
    CHECK_NEAR(rl_wait(&b, 1, now), 1.0, 1e-9);  // one unit comes back per second
    CHECK_NEAR(rl_wait(&b, 5, now), 5.0, 1e-9);
    CHECK_NEAR(rl_reset(&b, now), 60.0, 1e-9);
    now += 2.5;
    CHECK_NEAR(rl_remaining(&b, now), 2.5, 1e-9);
    CHECK_NEAR(rl_wait(&b, 2, now), 0, 0);
    CHECK(rl_wait(&b, 61, now) < 0); // more than the bucket ever holds: never
    rl_take(&b, 2, now);
    rl_refund(&b, 100, now); // a refund never overfills
    CHECK_NEAR(rl_remaining(&b, now), 60, 1e-9);
    now += 1000;
    CHECK_NEAR(rl_remaining(&b, now), 60, 1e-9); // capped
    // reload to a smaller limit: level clipped; unlimited → limited starts full
    rl_set_limit(&b, 10, now);
    CHECK_NEAR(rl_remaining(&b, now), 10, 1e-9);
    CHECK_NEAR(rl_wait(&b, 11, now), -1, 0);
    rl_bucket u;
    rl_init(&u, 0, now); // unlimited
    CHECK_NEAR(rl_wait(&u, 1e12, now), 0, 0);
    rl_take(&u, 1e12, now);
    CHECK_NEAR(rl_wait(&u, 1e12, now), 0, 0);
    rl_set_limit(&u, 30, now);
    CHECK_NEAR(rl_remaining(&u, now), 30, 1e-9);
}

int main(void) {
    test_parse_good();
    test_parse_bad();
    test_bucket();
    TEST_MAIN_END();
}
