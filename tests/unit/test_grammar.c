// Grammar engine: GBNF parsing (valid and invalid grammars), the matcher accepting and rejecting strings,
// completion states, and the token mask against brute-force per-token checking on a small vocabulary.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram.h"
#include "test_util.h"

static gram_matcher *mk(const char *src, const gram_vocab *v) {
    gram *g = NULL;
    gram_matcher *m = NULL;
    tc_err err = {0};
    int rc = gram_parse(src, strlen(src), NULL, &g, &err);
    CHECK_MSG(rc == 0, "parse failed: %s\n%s", err.msg, src);
    if (rc) return NULL;
    rc = gram_matcher_new(g, v, &m, &err);
    CHECK_MSG(rc == 0, "matcher failed: %s", err.msg);
    return m;
}

// 1 if the whole string is a sentence of the grammar.
static int matches(const char *src, const char *s) {
    gram_matcher *m = mk(src, NULL);
    if (!m) return -1;
    int ok = gram_matcher_accept_str(m, s, strlen(s)) == 0 && gram_matcher_can_end(m);
    gram_matcher_free(m);
    return ok;
}

static void expect(const char *src, const char *s, int want) {
    int got = matches(src, s);
    CHECK_MSG(got == want, "grammar %s on \"%s\": got %d, want %d", src, s, got, want);
}

static void test_match(void) {
    const char *g1 = "root ::= \"a\" [b-d]+ (\"x\" | \"yz\")? # comment\n";
    expect(g1, "ab", 1);
    expect(g1, "abcdx", 1);
    expect(g1, "abyz", 1);
    expect(g1, "a", 0);
    expect(g1, "abe", 0);
    expect(g1, "abxx", 0);
    const char *g2 = "root ::= [^a-c\\n]* \"!\"";
    expect(g2, "xyz!", 1);
    expect(g2, "!", 1);
    expect(g2, "xay!", 0);
    expect(g2, "\xc3\xa9t\xc3\xa9!", 1); // non-ASCII code points
    const char *g3 = "root ::= d{2,3} \"-\" d{2} \"-\" d{3,}\nd ::= [0-9]";
    expect(g3, "12-34-567", 1);
    expect(g3, "123-34-5678", 1);
    expect(g3, "1-34-567", 0);
    expect(g3, "1234-34-567", 0);
    expect(g3, "12-34-56", 0);
    const char *g4 = "root ::= list\nlist ::= \"[\" (item (\",\" item)*)? \"]\"\nitem ::= list | [a-z]";
    expect(g4, "[]", 1);
    expect(g4, "[a,[b,[]],c]", 1);
    expect(g4, "[a,]", 0);
    expect(g4, "[[a]", 0);
    const char *g5 = "root ::=\n  \"x\" |\n  \"y\" . \"z\"\n";
    expect(g5, "x", 1);
    expect(g5, "y\xe2\x82\xacz", 1);
    expect(g5, "yz", 0);
    const char *g6 = "root ::= \"\\x41\\u00e9\\t\" [\\]\\-]?";
    expect(g6, "A\xc3\xa9\t", 1);
    expect(g6, "A\xc3\xa9\t]", 1);
    expect(g6, "A\xc3\xa9\t-", 1);
    // completion: done only when nothing can follow
    gram_matcher *m = mk("root ::= \"ab\" \"c\"?", NULL);
    if (m) {
        CHECK(!gram_matcher_can_end(m));
        CHECK(gram_matcher_accept_str(m, "ab", 2) == 0);
        CHECK(gram_matcher_can_end(m) && !gram_matcher_done(m));
        CHECK(gram_matcher_accept_str(m, "x", 1) == -1); // rejected, state unchanged
        CHECK(gram_matcher_accept_str(m, "c", 1) == 0);
        CHECK(gram_matcher_done(m));
        gram_matcher_free(m);
    }
}

static void expect_bad(const char *src, const char *needle) {
    gram *g = NULL;
    tc_err err = {0};
    int rc = gram_parse(src, strlen(src), NULL, &g, &err);
    CHECK_MSG(rc != 0 && strstr(err.msg, needle), "grammar %s: rc %d, message \"%s\" (want \"%s\")", src, rc,
              err.msg, needle);
    gram_free(g);
}

static void test_errors(void) {
    expect_bad("root ::= foo", "undefined rule 'foo'");
    expect_bad("start ::= \"a\"", "no rule named 'root'");
    expect_bad("root ::= \"a", "unterminated string");
    expect_bad("root ::= [a-", "unterminated character class");
    expect_bad("root ::= root \"a\" | \"b\"", "left recursive");
    expect_bad("root ::= x* root\nx ::= \"a\"", "left recursive");
    expect_bad("root ::= \"a\"{3,1}", "max < min");
    expect_bad("root ::= * \"a\"", "without a preceding symbol");
    expect_bad("root ::= (\"a\"", "expected ')'");
    expect_bad("root ::= \"a\"\nroot ::= \"b\"", "defined twice");
    expect_bad("root = \"a\"", "expected '::='");
    expect_bad("root ::= \"\\q\"", "unknown escape");
}

// --- mask vs brute force

static const char *toks[] = {
    "a", "b", "ab", "abc", "{", "}", "{\"", "\"", "\":", " ", "  ", "1", "12", "123", "-", ".", "0", "true",
    "tr", "ue", "false", "null", ",", ", ", "\"a", "x\"", "\xc3\xa9", "\xc3", "[", "]", "[]", "{}", "a\"", "\n",
    "", "abcabc", "e", "E", "+",
};
#define N_TOK ((int)(sizeof toks / sizeof toks[0]))

static gram_vocab *small_vocab(void) {
    int lens[N_TOK + 2];
    const char *pieces[N_TOK + 2];
    for (int i = 0; i < N_TOK; i++) pieces[i] = toks[i], lens[i] = (int)strlen(toks[i]);
    pieces[N_TOK] = NULL, lens[N_TOK] = -1;      // a control token
    pieces[N_TOK + 1] = "</s>", lens[N_TOK + 1] = 4; // end of generation
    int32_t eog = N_TOK + 1;
    gram_vocab *v = NULL;
    tc_err err = {0};
    CHECK(gram_vocab_new(pieces, lens, N_TOK + 2, &eog, 1, &v, &err) == 0);
    return v;
}

// Brute force: a fresh matcher replaying the accepted prefix, then the token's text.
static int brute_ok(const char *src, const char *prefix, int tok) {
    if (tok == N_TOK) return 0;
    gram_matcher *m = mk(src, NULL);
    int ok = gram_matcher_accept_str(m, prefix, strlen(prefix)) == 0;
    if (tok == N_TOK + 1) ok = ok && gram_matcher_can_end(m);
    else if (!toks[tok][0]) ok = 0;
    else ok = ok && gram_matcher_accept_str(m, toks[tok], strlen(toks[tok])) == 0;
    gram_matcher_free(m);
    return ok;
}

static void test_mask(void) {
    gram_vocab *v = small_vocab();
    if (!v) return;
    static const char *grammars[] = {
        "root ::= \"{\" ws (str \":\" ws val (\",\" ws str \":\" ws val)*)? \"}\"\nstr ::= \"\\\"\" [a-z]* \"\\\"\"\n"
        "val ::= str | num | \"true\" | \"false\" | \"null\" | \"[\" ws \"]\"\nnum ::= \"-\"? [0-9]+ (\".\" [0-9]+)?\n"
        "ws ::= [ \\n]*",
        "root ::= (\"ab\" | \"c\")+ \"\\\"\"?",
        "root ::= [^\"]* \"\\\"\" ",
    };
    static const char *prefixes[][6] = {
        {"", "{", "{\"a", "{\"ab\":", "{\"a\": 1", "{\"a\": tr"},
        {"", "ab", "abc", "abcab", "c\"", "cc"},
        {"", "a", "\xc3\xa9", "xyz", "a\"", "{}"},
    };
    for (int gi = 0; gi < 3; gi++) {
        for (int pi = 0; pi < 6; pi++) {
            gram_matcher *m = mk(grammars[gi], v);
            if (!m) continue;
            const char *pre = prefixes[gi][pi];
            CHECK_MSG(gram_matcher_accept_str(m, pre, strlen(pre)) == 0, "prefix \"%s\" rejected", pre);
            for (int rep = 0; rep < 2; rep++) { // the second time from the cache
                const uint32_t *bits = gram_matcher_mask(m);
                for (int t = 0; t < N_TOK + 2 && bits; t++) {
                    int got = (bits[t >> 5] >> (t & 31)) & 1, want = brute_ok(grammars[gi], pre, t);
                    CHECK_MSG(got == want, "grammar %d prefix \"%s\" token %d \"%s\": mask %d, brute force %d", gi,
                              pre, t, t < N_TOK ? toks[t] : "(special)", got, want);
                    CHECK_EQ_INT(gram_matcher_token_ok(m, t), want);
                }
            }
            gram_matcher_free(m);
        }
    }
    // accept_token advances like the text
    gram_matcher *m = mk(grammars[0], v);
    if (m) {
        CHECK(gram_matcher_accept_token(m, 6) == 0);  // {"
        CHECK(gram_matcher_accept_token(m, 3) == 0);  // abc
        CHECK(gram_matcher_accept_token(m, 8) == 0);  // ":
        CHECK(gram_matcher_accept_token(m, 4) == -1); // { not a value
        CHECK(gram_matcher_accept_token(m, 17) == 0); // true
        CHECK(gram_matcher_accept_token(m, N_TOK + 1) == -1); // not complete yet
        CHECK(gram_matcher_accept_token(m, 5) == 0);  // }
        CHECK(gram_matcher_done(m));
        CHECK(gram_matcher_accept_token(m, N_TOK + 1) == 0);
        gram_matcher_free(m);
    }
    gram_vocab_free(v);
}

int main(void) {
    test_match();
    test_errors();
    test_mask();
    TEST_MAIN_END();
}
