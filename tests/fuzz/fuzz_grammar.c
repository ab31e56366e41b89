// libFuzzer target: the grammar compilers, what a request's `grammar` and `response_format` go through.
// Input: the first byte picks the front end (bit 0: GBNF text, or a JSON schema compiled to GBNF first;
// bit 1: strict schema), the rest is the text. Then the matcher runs on a small vocabulary: the first-mask
// check, the input's own text fed back as output, and each mask against the per-token check.
// Contracts checked: an error has a message and no result; the matcher's mask agrees with token_ok; and
// what an input costs a request, refused or not (schema and GBNF compilation, the first-mask check), is at
// most 1 s of CPU (the compile limit is 0.5 s, a mask's work is bounded), as is each later token step of
// the walk: an input over the budget is a failure.
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

#define FG_BUDGET_S 1.0 // CPU seconds per input

static const char *VOCAB[] = {"a", "b", "ab", "\"", "{", "}", "[", "]", ":", ",", " ", "\n", "0", "12", "true",
                              "null", "\"a\"", "\xc3\xa9", "x", "-", ".", "e", "\\", "{\"", "\":"};
#define N_VOCAB ((int)(sizeof VOCAB / sizeof *VOCAB))

static gram_vocab *fg_vocab;

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

// The mask against token_ok for every token.
static void check_mask(gram_matcher *m) {
    const uint32_t *bits = gram_matcher_mask(m);
    if (!bits) {
        CHECK(gram_matcher_error(m) != NULL);
        return;
    }
    uint32_t copy[(N_VOCAB + 1 + 31) / 32];
    memcpy(copy, bits, sizeof copy);
    for (int t = 0; t <= N_VOCAB; t++) CHECK((int)((copy[t >> 5] >> (t & 31)) & 1) == gram_matcher_token_ok(m, t));
}

// Request time (from t0): the matcher and the first-mask check; then each step on its own budget.
static void run_matcher(gram *g, const uint8_t *text, size_t n, double t0) {
    gram_matcher *m = NULL;
    tc_err err = {0};
    if (gram_matcher_new(g, fg_vocab, &m, &err)) {
        CHECK(err.msg[0] && !m);
        return;
    }
    if (gram_matcher_check_start(m, &err) == 0) check_mask(m);
    else CHECK(err.msg[0]);
    CHECK(cpu_now() - t0 < FG_BUDGET_S);
    // the input's bytes as output, a few at a time; then a greedy walk through the masks
    for (size_t i = 0; i < n && i < 64; i += 4) {
        double ts = cpu_now();
        int rc = gram_matcher_accept_str(m, (const char *)text + i, n - i < 4 ? n - i : 4);
        CHECK(cpu_now() - ts < FG_BUDGET_S);
        if (rc) break;
    }
    for (int step = 0; step < 16 && !gram_matcher_error(m); step++) {
        double ts = cpu_now();
        check_mask(m);
        CHECK(cpu_now() - ts < FG_BUDGET_S);
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
    if (!fg_vocab) make_vocab();
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
            CHECK(cpu_now() - t0 < FG_BUDGET_S);
            return 0;
        }
        CHECK(gbnf);
    }
    const char *src = gbnf ? gbnf : text;
    size_t len = gbnf ? strlen(gbnf) : n;
    gram *g = NULL;
    int rc = gram_parse(src, len, NULL, &g, &err);
    CHECK(cpu_now() - t0 < FG_BUDGET_S);
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
