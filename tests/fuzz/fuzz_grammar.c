// libFuzzer target: the grammar compilers, what a request's `grammar` and `response_format` go through.
// Input: the first byte picks the front end (bit 0: GBNF text, or a JSON schema compiled to GBNF first;
// bit 1: strict schema), the rest is the text. Then the matcher runs on a small vocabulary: the first-mask
// check, the input's own text fed back as output, and each mask against the per-token check.
// Contracts checked: an error has a message and no result; the matcher's mask agrees with token_ok; and
// what an input costs a request stays within the matcher's bounds: compilation (refused or not) within its
// time limit, and every mask or code point of accepted text within a few times what the matcher's work
// limit (GRAM_MAX_STEP_WORK) takes in this build on this machine, and within a few times what its own work
// units take. The time per unit is measured once (fg_calibrate), so the checks hold in the sanitized build
// and on any CPU, and they fail when a step does work the matcher does not count. The per-token check (token_ok for every
// token) is this harness's oracle, not a request's cost: it is not timed.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "grammar/gram.h"
#include "grammar/gram_schema.h"

#define CHECK(c)                                                                                             \
    do {                                                                                                     \
        if (!(c)) __builtin_trap();                                                                          \
    } while (0)

#define FG_COMPILE_S 1.0 // CPU seconds: schema conversion and compilation (GRAM_MAX_COMPILE_S, and slack)
#define FG_STEP_X 3.0    // a mask or code point may take this many times a full work limit's time
#define FG_UNIT_X 5.0    // a mask may take this many times what its work units take in fg_calibrate

static const char *VOCAB[] = {"a", "b", "ab", "\"", "{", "}", "[", "]", ":", ",", " ", "\n", "0", "12", "true",
                              "null", "\"a\"", "\xc3\xa9", "x", "-", ".", "e", "\\", "{\"", "\":"};
#define N_VOCAB ((int)(sizeof VOCAB / sizeof *VOCAB))

static gram_vocab *fg_vocab;
static double fg_rate; // CPU seconds per work unit of the matcher (fg_calibrate)

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void make_vocab(void) {
    const char *pieces[N_VOCAB + 1];
    int lens[N_VOCAB + 1];
    for (int i = 0; i < N_VOCAB; i++) pieces[i] = VOCAB[i], lens[i] = (int)strlen(VOCAB[i]);
    pieces[N_VOCAB] = NULL, lens[N_VOCAB] = -1; // end of generation
    int32_t eog = N_VOCAB;
    tc_err err = {0};
    CHECK(gram_vocab_new(pieces, lens, N_VOCAB + 1, &eog, 1, &fg_vocab, &err) == 0);
}

// Times the matcher's work units in this build on this machine, on work the units plainly count: a
// vocabulary of one chain of NC_TRIE nodes (the tokens "a", "aa", ...) and a grammar of NC_ALTS
// alternatives that stay open side by side (r_i ::= "a" r_i | "b"), so each node of the chain steps NC_ALTS
// short stacks, none a duplicate. fg_rate: CPU seconds per unit.
#define NC_TRIE 160
#define NC_ALTS 2000
static void fg_calibrate(void) {
    const char *pieces[NC_TRIE];
    int lens[NC_TRIE];
    static char as[NC_TRIE];
    memset(as, 'a', sizeof as);
    for (int i = 0; i < NC_TRIE; i++) pieces[i] = as, lens[i] = i + 1;
    gram_vocab *v = NULL;
    tc_err err = {0};
    CHECK(gram_vocab_new(pieces, lens, NC_TRIE, NULL, 0, &v, &err) == 0);
    size_t cap = (size_t)NC_ALTS * 40 + 64, n = 0;
    char *src = malloc(cap);
    CHECK(src);
    n += (size_t)snprintf(src + n, cap - n, "root ::= r0");
    for (int i = 1; i < NC_ALTS; i++) n += (size_t)snprintf(src + n, cap - n, " | r%d", i);
    for (int i = 0; i < NC_ALTS; i++)
        n += (size_t)snprintf(src + n, cap - n, "\nr%d ::= \"a\" r%d | \"b\"", i, i);
    gram *g = NULL;
    gram_matcher *m = NULL;
    CHECK(gram_parse(src, n, NULL, &g, &err) == 0);
    free(src);
    CHECK(gram_matcher_new(g, v, &m, &err) == 0);
    double t = cpu_now();
    CHECK(gram_matcher_mask(m) != NULL);
    t = cpu_now() - t;
    long units = gram_matcher_work(m);
    CHECK(units > 1L << 20);
    fg_rate = t / (double)units;
    gram_matcher_free(m);
    gram_vocab_free(v);
}

// CPU seconds of a whole work limit, at the calibrated rate.
static double limit_s(void) {
    return fg_rate * (double)GRAM_MAX_STEP_WORK;
}

// What a mask or a code point may take: a few times the whole work limit's time.
static double step_budget(void) {
    return FG_STEP_X * limit_s() + 0.01;
}

// The mask (timed: a request computes it) against token_ok for every token (the oracle: not timed).
static void check_mask(gram_matcher *m) {
    double t = cpu_now();
    const uint32_t *bits = gram_matcher_mask(m);
    t = cpu_now() - t;
    CHECK(t < step_budget());
    // and no more than its units say (a cached mask takes no time; its units are the last call's)
    CHECK(t < FG_UNIT_X * fg_rate * (double)gram_matcher_work(m) + 0.02);
    if (!bits) {
        CHECK(gram_matcher_error(m) != NULL);
        return;
    }
    uint32_t copy[(N_VOCAB + 1 + 31) / 32];
    memcpy(copy, bits, sizeof copy);
    for (int t = 0; t <= N_VOCAB; t++) CHECK((int)((copy[t >> 5] >> (t & 31)) & 1) == gram_matcher_token_ok(m, t));
}

// Request time (from t0): compilation, the matcher and the first-mask check; then each step on its own
// budget.
static void run_matcher(gram *g, const uint8_t *text, size_t n, double t0) {
    gram_matcher *m = NULL;
    tc_err err = {0};
    if (gram_matcher_new(g, fg_vocab, &m, &err)) {
        CHECK(err.msg[0] && !m);
        return;
    }
    int rc = gram_matcher_check_start(m, &err);
    CHECK(cpu_now() - t0 < FG_COMPILE_S + step_budget());
    if (rc == 0) check_mask(m);
    else CHECK(err.msg[0]);
    // the input's bytes as output, a few at a time (each code point has its own work limit); then a
    // greedy walk through the masks, for at most a quarter of the limit's time (then one more step: the
    // oracle costs twice its mask, and an ambiguous grammar's masks double at each step until the limit stops
    // them: walking to the limit took ~4 s per input in the sanitized build and most of the fuzzer's time)
    double walk_end = cpu_now() + 0.25 * limit_s();
    for (size_t i = 0; i < n && i < 64 && cpu_now() < walk_end; i += 4) {
        double ts = cpu_now();
        rc = gram_matcher_accept_str(m, (const char *)text + i, n - i < 4 ? n - i : 4);
        CHECK(cpu_now() - ts < 4 * step_budget());
        if (rc) break;
    }
    for (int step = 0; step < 16 && !gram_matcher_error(m) && cpu_now() < walk_end; step++) {
        check_mask(m);
        const uint32_t *bits = gram_matcher_mask(m);
        int tok = -1;
        for (int t = 0; bits && t < N_VOCAB && tok < 0; t++)
            if ((bits[t >> 5] >> (t & 31)) & 1) tok = t;
        if (tok < 0 || gram_matcher_accept_token(m, tok)) break;
    }
    gram_matcher_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (!fg_vocab) make_vocab(), fg_calibrate();
    double t0 = cpu_now();
    uint8_t mode = data[0];
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    char *gbnf = NULL;
    tc_err err = {0};
    if (mode & 1) { // JSON schema → GBNF
        json_t *schema = json_loadb(text, n, JSON_DECODE_ANY, NULL);
        if (!schema) return 0;
        int rc = gram_schema_gbnf(schema, (mode & 2) != 0, &gbnf, &err);
        json_decref(schema);
        if (rc) {
            CHECK(err.msg[0] && !gbnf);
            CHECK(cpu_now() - t0 < FG_COMPILE_S);
            return 0;
        }
        CHECK(gbnf);
    }
    const char *src = gbnf ? gbnf : text;
    size_t len = gbnf ? strlen(gbnf) : n;
    gram *g = NULL;
    int rc = gram_parse(src, len, NULL, &g, &err);
    CHECK(cpu_now() - t0 < FG_COMPILE_S);
    if (rc) CHECK(rc == TC_ERR_INVALID && err.msg[0] && !g);
    else {
        CHECK(g && gram_n_rules(g) >= 1 && gram_n_rules(g) <= GRAM_MAX_RULES);
        run_matcher(g, data + 1, n, t0); // takes g
    }
    // the schema compiler writes valid GBNF: refused only for what it means (recursion, limits), not syntax
    if (gbnf) CHECK(rc == 0 || (!strstr(err.msg, " at line ") && !strstr(err.msg, "undefined rule")));
    free(gbnf);
    return 0;
}
