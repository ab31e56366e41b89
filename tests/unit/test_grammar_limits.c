// Grammar cost bounds: large grammars compile in linear time or are refused fast with a message naming the
// limit (rules, elements, alternatives, fan-out, nesting), alternatives are never silently cut (refused, or
// matched exactly up to the limit), a grammar that can generate nothing is refused, the matcher fails with a
// message past its per-step bounds, and the compiled-grammar cache shares one compilation.
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "grammar/gram.h"
#include "grammar/gram_cache.h"
#include "grammar/gram_schema.h"
#include "test_util.h"

// Unoptimized or sanitizer builds run several times slower: there the CPU-time checks are skipped, and the
// compile-time limit may refuse the largest inputs before the limit each case is about.
#if !defined(__OPTIMIZE__) || defined(__SANITIZE_ADDRESS__)
#define SLOW_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLOW_BUILD 1
#endif
#endif
#ifndef SLOW_BUILD
#define SLOW_BUILD 0
#endif
#define TIME_LIMIT "compiling took longer than the limit"

// --- a growing text buffer

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static void bprintf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(buf *b, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        b->cap = (b->cap + (size_t)k + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
}

// CPU seconds of this thread (what the work costs, however busy the machine is).
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// Compiles src; returns rc, the message in err, the CPU seconds it took in *secs.
static int compile(const char *src, gram **g, tc_err *err, double *secs) {
    double t0 = cpu_now();
    int rc = gram_parse(src, strlen(src), NULL, g, err);
    *secs = cpu_now() - t0;
    return rc;
}

static void expect_refused(const char *what, const char *src, const char *needle, double max_s) {
    gram *g = NULL;
    tc_err err = {0};
    double secs;
    int rc = compile(src, &g, &err, &secs);
    CHECK_MSG(rc == TC_ERR_INVALID && (strstr(err.msg, needle) || (SLOW_BUILD && strstr(err.msg, TIME_LIMIT))),
              "%s: rc %d, message \"%s\" (want \"%s\")", what, rc, err.msg, needle);
    CHECK_MSG(SLOW_BUILD || secs < max_s, "%s: refused in %.3f s (want < %.2f)", what, secs, max_s);
    if (getenv("GRAM_TEST_VERBOSE")) fprintf(stderr, "%s: refused in %.3f s CPU: %s\n", what, secs, err.msg);
    gram_free(g);
}

// --- compile cost: the shapes that took 20 s to minutes with a linear name lookup and a fixpoint pass

static void test_compile_cost(void) {
    buf b = {0};
    // 40,000 rules in a right-recursive chain: compiles, well under a second
    bprintf(&b, "root ::= r0\n");
    for (int i = 0; i < 40000; i++) bprintf(&b, "r%d ::= \"a\" r%d | \"b\"\n", i, i + 1);
    bprintf(&b, "r40000 ::= \"b\"\n");
    gram *g = NULL;
    tc_err err = {0};
    double secs;
    int rc = compile(b.p, &g, &err, &secs);
    CHECK_MSG(rc == 0 || (SLOW_BUILD && strstr(err.msg, TIME_LIMIT)), "40k-rule chain: %s", err.msg);
    CHECK_MSG(SLOW_BUILD || secs < 1.0, "40k-rule chain compiled in %.3f s", secs);
    if (getenv("GRAM_TEST_VERBOSE")) fprintf(stderr, "40k-rule chain: compiled in %.3f s CPU\n", secs);
    if (g) {
        gram_matcher *m = NULL;
        CHECK(gram_matcher_new(g, NULL, &m, &err) == 0);
        if (m) CHECK(gram_matcher_accept_str(m, "aaab", 4) == 0 && gram_matcher_can_end(m));
        gram_matcher_free(m);
    }
    // 65,000 rules each starting with the next: nesting past the matcher's bound, refused fast
    b.n = 0;
    bprintf(&b, "root ::= r0\n");
    for (int i = 0; i < 65000; i++) bprintf(&b, "r%d ::= r%d \"a\"\n", i, i + 1);
    bprintf(&b, "r65000 ::= \"b\"\n");
    expect_refused("65k-rule left chain", b.p, "nest more than 512 deep", 0.3);
    // 70,000 rules: past the rule limit, refused fast
    b.n = 0;
    bprintf(&b, "root ::= r0\n");
    for (int i = 0; i < 70000; i++) bprintf(&b, "r%d ::= \"x\"\n", i);
    expect_refused("70k rules", b.p, "more than 65536 rules", 0.3);
    // a repetition of a long literal: past the element limit, refused fast
    b.n = 0;
    bprintf(&b, "root ::= \"");
    for (int i = 0; i < 5000; i++) bprintf(&b, "abcdefghij");
    bprintf(&b, "\"{10000}\n");
    expect_refused("huge repetition", b.p, "larger than 1048576 elements", 0.3);
    free(b.p);
}

// --- alternatives: refused past the bound with a reason, exact below it

static void test_alternatives(void) {
    buf b = {0};
    bprintf(&b, "root ::= \"\\\"\" (");
    for (int i = 0; i < 5000; i++) bprintf(&b, "%s\"v%d\"", i ? " | " : "", i);
    bprintf(&b, ") \"\\\"\"\n");
    expect_refused("enum of 5000", b.p, "more than 4096 alternatives", 0.3);
    // 4000: every one reachable, the last included (nothing cut)
    b.n = 0;
    bprintf(&b, "root ::= \"\\\"\" (");
    for (int i = 0; i < 4000; i++) bprintf(&b, "%s\"v%d\"", i ? " | " : "", i);
    bprintf(&b, ") \"\\\"\"\n");
    gram *g = NULL;
    tc_err err = {0};
    double secs;
    CHECK_MSG(compile(b.p, &g, &err, &secs) == 0, "enum of 4000: %s", err.msg);
    gram_matcher *m = NULL;
    if (g && gram_matcher_new(g, NULL, &m, &err) == 0) {
        CHECK(gram_matcher_accept_str(m, "\"v3999\"", 7) == 0 && gram_matcher_can_end(m));
        CHECK(gram_matcher_error(m) == NULL);
        gram_matcher_free(m);
    }
    // alternatives multiplied through nullable rules: 2^13 ways to pass x x … x
    b.n = 0;
    bprintf(&b, "root ::= x x x x x x x x x x x x x \"z\"\nx ::= \"\" | \"\" | \"a\"\n");
    expect_refused("nullable product", b.p, "more than 4096 ways", 0.3);
    free(b.p);
    // JSON schema: an enum and an anyOf of 5,000 objects are refused with the reason
    json_t *vals = json_array(), *objs = json_array();
    for (int i = 0; i < 5000; i++) {
        char k[32];
        snprintf(k, sizeof k, "k%d", i);
        json_array_append_new(vals, json_string(k));
        json_array_append_new(objs, json_pack("{s:s, s:{s:{s:s}}, s:[s]}", "type", "object", "properties", k, "type",
                                              "integer", "required", k));
    }
    json_t *schemas[2] = {json_pack("{s:o}", "enum", vals), json_pack("{s:o}", "anyOf", objs)};
    for (int i = 0; i < 2; i++) {
        char *text = NULL;
        CHECK_MSG(gram_schema_gbnf(schemas[i], 1, &text, &err) == 0, "%s", err.msg);
        if (text) expect_refused(i ? "anyOf of 5000 objects" : "enum of 5000", text, "more than 4096", 0.3);
        free(text);
        json_decref(schemas[i]);
    }
}

// --- grammars that can generate nothing

static const char *VOCAB[] = {"a", "b", "ab", "\"", "{", "}", " ", "x"};
#define N_VOCAB 8

static gram_vocab *small_vocab(void) {
    int lens[N_VOCAB + 1];
    for (int i = 0; i < N_VOCAB; i++) lens[i] = (int)strlen(VOCAB[i]);
    const char *pieces[N_VOCAB + 1];
    memcpy(pieces, VOCAB, sizeof VOCAB);
    pieces[N_VOCAB] = NULL, lens[N_VOCAB] = -1; // the end-of-generation token
    int32_t eog = N_VOCAB;
    gram_vocab *v = NULL;
    tc_err err = {0};
    CHECK_MSG(gram_vocab_new(pieces, lens, N_VOCAB + 1, &eog, 1, &v, &err) == 0, "%s", err.msg);
    return v;
}

static int start_check(const char *src, const gram_vocab *v, tc_err *err) {
    gram *g = NULL;
    gram_matcher *m = NULL;
    int rc = gram_parse(src, strlen(src), NULL, &g, err);
    if (!rc) rc = gram_matcher_new(g, v, &m, err);
    if (!rc) rc = gram_matcher_check_start(m, err);
    gram_matcher_free(m);
    return rc;
}

static void test_impossible(void) {
    expect_refused("endless root", "root ::= \"a\" root", "can never complete", 0.3);
    expect_refused("endless pair", "root ::= x\nx ::= \"a\" y\ny ::= \"b\" x", "can never complete", 0.3);
    gram_vocab *v = small_vocab();
    if (!v) return;
    tc_err err = {0};
    CHECK(start_check("root ::= \"q\" \"a\"", v, &err) == TC_ERR_INVALID && strstr(err.msg, "no token"));
    CHECK(start_check("root ::= [\\U0010FFFF]", v, &err) == TC_ERR_INVALID && strstr(err.msg, "no token"));
    CHECK_MSG(start_check("root ::= \"\"", v, &err) == 0, "%s", err.msg); // only the end: fine
    CHECK_MSG(start_check("root ::= \"ab\"+", v, &err) == 0, "%s", err.msg);
    gram_vocab_free(v);
}

// --- per-step bounds at run time: a failure with a reason, never a dropped alternative

static void test_runtime_bounds(void) {
    // each "a" leaves an optional "b" pending; ending pops them all within one step
    const char *src = "root ::= r\nr ::= \"a\" r n | \"\"\nn ::= \"\" | \"b\"";
    gram *g = NULL;
    gram_matcher *m = NULL;
    tc_err err = {0};
    CHECK_MSG(gram_parse(src, strlen(src), NULL, &g, &err) == 0, "%s", err.msg);
    if (!g || gram_matcher_new(g, NULL, &m, &err)) return;
    char as[600];
    memset(as, 'a', sizeof as);
    CHECK(gram_matcher_accept_str(m, as, 100) == 0 && gram_matcher_can_end(m)); // within the bound: exact
    CHECK(gram_matcher_accept_str(m, as, 500) == -1);
    const char *why = gram_matcher_error(m);
    CHECK_MSG(why && strstr(why, "deep"), "error: %s", why ? why : "(none)");
    CHECK(gram_matcher_accept_str(m, "b", 1) == -1); // stays failed
    gram_matcher_free(m);

    // 2,000 alternatives that all read any text (4,000 stacks open at every step) over a 40,000-token
    // vocabulary: one mask takes bounded time, and is exact or fails with the reason
    int nv = 40000;
    char **pieces = malloc((size_t)nv * sizeof *pieces);
    int *lens = malloc((size_t)nv * sizeof *lens);
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < nv; i++) {
        pieces[i] = malloc(8);
        int n = 1 + (int)(i % 6);
        for (int k = 0; k < n; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            pieces[i][k] = "\"{}:k0123456789 "[x % 16];
        }
        lens[i] = n;
    }
    gram_vocab *v = NULL;
    int32_t eog = 0;
    CHECK(gram_vocab_new((const char *const *)pieces, lens, nv, &eog, 1, &v, &err) == 0);
    buf b = {0};
    bprintf(&b, "root ::= ");
    for (int i = 0; i < 2000; i++) bprintf(&b, "%s[^x]* \"x%d\"", i ? " | " : "", i);
    bprintf(&b, "\n");
    g = NULL;
    if (v && gram_parse(b.p, b.n, NULL, &g, &err) == 0 && gram_matcher_new(g, v, &m, &err) == 0) {
        CHECK(gram_matcher_accept_str(m, "{\"", 2) == 0);
        CHECK(gram_matcher_error(m) == NULL);
        double t0 = cpu_now();
        const uint32_t *bits = gram_matcher_mask(m);
        double secs = cpu_now() - t0;
        CHECK_MSG(SLOW_BUILD || secs < 0.5, "one mask took %.3f s", secs);
        if (getenv("GRAM_TEST_VERBOSE"))
            fprintf(stderr, "mask of 4000 open stacks: %.3f s CPU, %s\n", secs, bits ? "exact" : gram_matcher_error(m));
        if (!bits) CHECK_MSG(strstr(gram_matcher_error(m), "work limit"), "%s", gram_matcher_error(m));
        for (int t = 0; bits && t < nv; t++) // exact: the mask agrees with the per-token check
            if ((int)((bits[t >> 5] >> (t & 31)) & 1) != gram_matcher_token_ok(m, t)) {
                CHECK_MSG(0, "token %d: mask and token check differ", t);
                break;
            }
        gram_matcher_free(m);
    } else CHECK_MSG(0, "%s", err.msg);
    gram_vocab_free(v);
    for (int i = 0; i < nv; i++) free(pieces[i]);
    free(pieces);
    free(lens);
    free(b.p);
}

// --- the cache: one compilation per distinct text, refusals included, LRU-bounded

static void test_cache(void) {
    gram_cache *c = NULL;
    tc_err err = {0};
    if (gram_cache_new(2, 1000, &c, &err)) return;
    const char *a = "root ::= \"a\"", *bad = "root ::= \"a\" root";
    gram *g1 = NULL, *g2 = NULL, *g3 = NULL;
    CHECK(gram_cache_get(c, a, strlen(a), &g1, &err) == 0);
    CHECK(gram_cache_get(c, a, strlen(a), &g2, &err) == 0);
    CHECK(g1 && g1 == g2); // shared, not compiled again
    long hits, compiles;
    gram_cache_stats(c, &hits, &compiles);
    CHECK(hits == 1 && compiles == 1);
    tc_err e1 = {0}, e2 = {0};
    CHECK(gram_cache_get(c, bad, strlen(bad), &g3, &e1) == TC_ERR_INVALID && !g3);
    CHECK(gram_cache_get(c, bad, strlen(bad), &g3, &e2) == TC_ERR_INVALID && !g3);
    CHECK(!strcmp(e1.msg, e2.msg) && strstr(e1.msg, "never complete"));
    gram_cache_stats(c, &hits, &compiles);
    CHECK(hits == 2 && compiles == 2);
    // two more texts evict the least recently used ("a" was used before the refusal)
    const char *t2 = "root ::= \"b\"", *t3 = "root ::= \"c\"";
    CHECK(gram_cache_get(c, t2, strlen(t2), &g3, &err) == 0);
    gram_free(g3);
    CHECK(gram_cache_get(c, t3, strlen(t3), &g3, &err) == 0);
    gram_free(g3);
    CHECK(gram_cache_get(c, a, strlen(a), &g3, &err) == 0);
    gram_cache_stats(c, &hits, &compiles);
    CHECK(compiles == 5);
    CHECK(g3 != g1); // compiled again; the evicted one lives on while referenced
    gram_matcher *m = NULL;
    if (gram_matcher_new(g1, NULL, &m, &err) == 0) CHECK(gram_matcher_accept_str(m, "a", 1) == 0);
    gram_matcher_free(m);
    gram_free(g2);
    gram_free(g3);
    gram_cache_free(c);
}

int main(void) {
    test_compile_cost();
    test_alternatives();
    test_impossible();
    test_runtime_bounds();
    test_cache();
    TEST_MAIN_END();
}
