// Grammar engine: GBNF parsing (valid and invalid grammars), the matcher accepting and rejecting strings,
// completion states, and the token mask against brute-force per-token checking on a small vocabulary.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram.h"
#include "grammar/gram_utf8.h"
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

// --- characters in UTF-8 fragments: byte-level BPE vocabularies hold "｜" (U+FF5C, EF BD 9C) and "▁"
// (U+2581, E2 96 81) only as pieces of their bytes, which a grammar must be able to write

static void test_utf8_decoder(void) {
    struct {
        const char *bytes;
        int want; // the last byte's result
        uint32_t cp_or_lo, hi; // GRAM_UTF8_CHAR: the code point; GRAM_UTF8_MORE: the range still possible
    } cases[] = {
        {"A", GRAM_UTF8_CHAR, 'A', 0},
        {"\xef", GRAM_UTF8_MORE, 0xF000, 0xFFFF},
        {"\xef\xbd", GRAM_UTF8_MORE, 0xFF40, 0xFF7F},
        {"\xef\xbd\x9c", GRAM_UTF8_CHAR, 0xFF5C, 0},
        {"\xe2\x96\x81", GRAM_UTF8_CHAR, 0x2581, 0},
        {"\xe0", GRAM_UTF8_MORE, 0x800, 0xFFF},           // E0 80..9F would be overlong
        {"\xed", GRAM_UTF8_MORE, 0xD000, 0xD7FF},         // ED A0..BF would be surrogates
        {"\xf0", GRAM_UTF8_MORE, 0x10000, 0x3FFFF},
        {"\xf4", GRAM_UTF8_MORE, 0x100000, 0x10FFFF},
        {"\xf0\x9f\x98\x80", GRAM_UTF8_CHAR, 0x1F600, 0},
        {"\xed\x9f\xbf", GRAM_UTF8_CHAR, 0xD7FF, 0},
        {"\xc0", GRAM_UTF8_BAD, 0, 0},                   // overlong ASCII
        {"\xc1", GRAM_UTF8_BAD, 0, 0},
        {"\xe0\x80", GRAM_UTF8_BAD, 0, 0},               // overlong
        {"\xf0\x8f", GRAM_UTF8_BAD, 0, 0},               // overlong
        {"\xed\xa0", GRAM_UTF8_BAD, 0, 0},               // surrogate
        {"\xf4\x90", GRAM_UTF8_BAD, 0, 0},               // above U+10FFFF
        {"\xf5", GRAM_UTF8_BAD, 0, 0},
        {"\x80", GRAM_UTF8_BAD, 0, 0},                   // a continuation with no lead
        {"\xc3" "A", GRAM_UTF8_BAD, 0, 0},               // a lead without its continuation
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gram_utf8 st = {0};
        const char *b = cases[i].bytes;
        size_t n = strlen(b);
        int r = GRAM_UTF8_BAD;
        uint32_t cp = 0, lo = 0, hi = 0;
        for (size_t k = 0; k < n; k++) r = gram_utf8_feed(&st, (uint8_t)b[k], &cp);
        CHECK_MSG(r == cases[i].want, "case %zu: result %d, want %d", i, r, cases[i].want);
        if (r == GRAM_UTF8_CHAR) CHECK_MSG(cp == cases[i].cp_or_lo && !st.need, "case %zu: U+%X", i, cp);
        if (r == GRAM_UTF8_MORE)
            CHECK_MSG(gram_utf8_range(&st, &lo, &hi) && lo == cases[i].cp_or_lo && hi == cases[i].hi,
                      "case %zu: range U+%X..U+%X", i, lo, hi);
    }
}

// No token holds a whole "｜", "▁" or CJK character: only fragments, some across two characters.
static const char *ftoks[] = {
    "<", ">", "tool", "calls", "_", "a", "!",
    "\xef",                 // 7: ｜'s lead
    "\xef\xbd",             // 8: ｜'s first two bytes
    "\x9c",                 // 9: ｜'s last
    "\xbd\x9c",             // 10
    "\x9c>",                // 11: completes ｜, then ASCII
    "\xe2",                 // 12: ▁'s lead
    "\x96\x81",             // 13
    "\x96\x81\xef\xbd",     // 14: completes ▁ and starts ｜
    "\x81" "calls",         // 15
    "\xef\xbc",             // 16: EF BC: U+FF00..FF3F, never ｜
    "\xe4\xb8",             // 17: a CJK prefix (U+4E00..4E3F)
    "\xad",                 // 18: 中 = E4 B8 AD
    "\xe9\xbe",             // 19: U+9F80..9FBF
    "\xa5",                 // 20
    "\xc0\x80",             // 21: overlong NUL
    "\xe0\x80\x80",         // 22: overlong
    "\xed\xa0\x80",         // 23: a surrogate, U+D800
    "\xed",                 // 24
    "\xa0\x80",             // 25
    "\xf4\x90\x80\x80",     // 26: above U+10FFFF
    "\xe0",                 // 27
    "\xa0",                 // 28
    "\xf0\x9f\x98",         // 29: 😀 = F0 9F 98 80
    "\x80",                 // 30
    "\xff",                 // 31
    "\xe4\xb8\xad!",        // 32
};
#define N_FTOK ((int)(sizeof ftoks / sizeof ftoks[0]))

static gram_vocab *fragment_vocab(void) {
    const char *pieces[N_FTOK + 1];
    int lens[N_FTOK + 1];
    for (int i = 0; i < N_FTOK; i++) pieces[i] = ftoks[i], lens[i] = (int)strlen(ftoks[i]);
    pieces[N_FTOK] = "</s>", lens[N_FTOK] = 4;
    int32_t eog = N_FTOK;
    gram_vocab *v = NULL;
    tc_err err = {0};
    CHECK_MSG(gram_vocab_new(pieces, lens, N_FTOK + 1, &eog, 1, &v, &err) == 0, "%s", err.msg);
    return v;
}

static int bit(const uint32_t *bits, int t) { return (int)((bits[t >> 5] >> (t & 31)) & 1); }

// The mask equals token_ok and a fresh matcher replaying the text (accept_str: no trie, no cache).
static void check_mask_exact(const char *src, gram_matcher *m, const char *text, const gram_vocab *v) {
    const uint32_t *bits = gram_matcher_mask(m);
    CHECK_MSG(bits, "%s", gram_matcher_error(m) ? gram_matcher_error(m) : "no mask");
    for (int t = 0; bits && t <= N_FTOK; t++) {
        gram_matcher *b = mk(src, v);
        int want = b && gram_matcher_accept_str(b, text, strlen(text)) == 0;
        if (t == N_FTOK) want = want && gram_matcher_can_end(b);
        else want = want && gram_matcher_accept_str(b, ftoks[t], strlen(ftoks[t])) == 0;
        gram_matcher_free(b);
        CHECK_MSG(bit(bits, t) == want, "%s after \"%s\": token %d: mask %d, replay %d", src, text, t, bit(bits, t),
                  want);
        CHECK_EQ_INT(gram_matcher_token_ok(m, t), want);
    }
}

// Generates greedily (the longest allowed token, checking every mask) until the grammar is done; the text.
static void force(const char *src, const gram_vocab *v, char *out, size_t cap) {
    gram_matcher *m = mk(src, v);
    size_t n = 0;
    out[0] = 0;
    for (int step = 0; m && step < 64 && !gram_matcher_done(m); step++) {
        check_mask_exact(src, m, out, v);
        const uint32_t *bits = gram_matcher_mask(m);
        int best = -1;
        for (int t = 0; bits && t < N_FTOK; t++)
            if (bit(bits, t) && (best < 0 || strlen(ftoks[t]) > strlen(ftoks[best]))) best = t;
        CHECK_MSG(best >= 0, "%s: no token can continue \"%s\"", src, out);
        if (best < 0 || gram_matcher_accept_token(m, best)) break;
        size_t k = strlen(ftoks[best]);
        if (n + k >= cap) break;
        memcpy(out + n, ftoks[best], k + 1);
        n += k;
    }
    CHECK_MSG(m && gram_matcher_done(m) && gram_matcher_accept_token(m, N_FTOK) == 0, "%s: not done at \"%s\"",
              src, out);
    gram_matcher_free(m);
}

static void test_fragments(void) {
    gram_vocab *v = fragment_vocab();
    if (!v) return;
    char out[256];
    // DeepSeek's markers, forced through fragments only
    force("root ::= \"<\xef\xbd\x9ctool\xe2\x96\x81\x63\x61lls\xef\xbd\x9c>\"", v, out, sizeof out);
    CHECK_MSG(!strcmp(out, "<\xef\xbd\x9ctool\xe2\x96\x81\x63\x61lls\xef\xbd\x9c>"), "got \"%s\"", out);
    force("root ::= \"\xe2\x96\x81\xef\xbd\x9c\"", v, out, sizeof out); // a token completes ▁ and starts ｜
    CHECK_MSG(!strcmp(out, "\xe2\x96\x81\xef\xbd\x9c"), "got \"%s\"", out);
    // a class range of multi-byte characters (CJK ideographs) and an emoji
    force("root ::= [\\u4e00-\\u9fa5]{2} \"!\"", v, out, sizeof out);
    CHECK_MSG(!strcmp(out, "\xe4\xb8\x9c\xe4\xb8\xad!"), "got \"%s\"", out); // 东 (E4 B8 9C), then 中!
    force("root ::= \"\xf0\x9f\x98\x80\"", v, out, sizeof out);

    // which fragments lead to an accepted character, step by step
    const char *lit = "root ::= \"<\xef\xbd\x9c\" [a-z]*";
    gram_matcher *m = mk(lit, v);
    if (m) {
        CHECK(gram_matcher_accept_token(m, 0) == 0);  // <
        CHECK(gram_matcher_token_ok(m, 7) && gram_matcher_token_ok(m, 8));
        CHECK(!gram_matcher_token_ok(m, 16));         // EF BC: U+FF00..FF3F
        CHECK(!gram_matcher_token_ok(m, 17));         // a CJK prefix
        CHECK(!gram_matcher_token_ok(m, 9));          // a continuation with nothing pending
        CHECK(gram_matcher_accept_token(m, 8) == 0);  // EF BD: ｜ pending
        CHECK(!gram_matcher_can_end(m) && !gram_matcher_token_ok(m, N_FTOK)); // never inside a character
        CHECK(gram_matcher_token_ok(m, 9) && !gram_matcher_token_ok(m, 5) && !gram_matcher_token_ok(m, 10));
        CHECK(gram_matcher_accept_token(m, 11) == -1); // "\x9c>": ">" is not [a-z]
        CHECK(gram_matcher_accept_token(m, 9) == 0);
        CHECK(gram_matcher_can_end(m));
        gram_matcher_free(m);
    }
    // masks against replay, prefixes ending inside characters included
    static const char *grammars[] = {
        "root ::= \"<\xef\xbd\x9c\" (\"tool\" | \"\xe2\x96\x81\")* \">\"",
        "root ::= [\\u4e00-\\u4e3f\\uff5c]* \"!\"",
        "root ::= [^\\uff00-\\uff3f\\u4e00-\\u9fff]*",
        "root ::= .*",
    };
    static const char *prefixes[] = {"", "<", "<\xef", "<\xef\xbd", "<\xef\xbd\x9ctool\xe2", "\xe4", "\xe4\xb8",
                                      "\xef\xbd\x9c\xe4\xb8\xad", "a\xf0\x9f", "\xed", "\xe0"};
    for (int gi = 0; gi < 4; gi++)
        for (int pi = 0; pi < (int)(sizeof prefixes / sizeof prefixes[0]); pi++) {
            gram_matcher *p = mk(grammars[gi], v);
            if (p && gram_matcher_accept_str(p, prefixes[pi], strlen(prefixes[pi])) == 0)
                for (int rep = 0; rep < 2; rep++) check_mask_exact(grammars[gi], p, prefixes[pi], v);
            gram_matcher_free(p);
        }
    // a negated class: a fragment whose every completion is excluded is masked out
    m = mk(grammars[2], v);
    if (m) {
        const uint32_t *bits = gram_matcher_mask(m);
        CHECK(bits && !bit(bits, 16) && !bit(bits, 17) && !bit(bits, 19)); // FF00..FF3F, 4E00.., 9F80..9FBF
        CHECK(bits && bit(bits, 7) && bit(bits, 8) && bit(bits, 12) && bit(bits, 29)); // ｜ (FF5C), ▁, 😀 may follow
        gram_matcher_free(m);
    }
    // invalid UTF-8 is never accepted, even where the grammar takes any character
    m = mk("root ::= .*", v);
    if (m) {
        const uint32_t *bits = gram_matcher_mask(m);
        int bad[] = {9, 10, 21, 22, 23, 25, 26, 28, 30, 31};
        for (int i = 0; bits && i < (int)(sizeof bad / sizeof bad[0]); i++)
            CHECK_MSG(!bit(bits, bad[i]), "token %d allowed", bad[i]);
        CHECK(bits && bit(bits, 24) && bit(bits, 27) && bit(bits, 29)); // leads that can still be valid
        CHECK(gram_matcher_accept_str(m, "\xed\xa0\x80", 3) == -1);   // U+D800
        CHECK(gram_matcher_accept_str(m, "\xc0\xaf", 2) == -1);       // overlong '/'
        CHECK(gram_matcher_accept_token(m, 24) == 0);                 // ED
        CHECK(!gram_matcher_token_ok(m, 25) && !gram_matcher_token_ok(m, 28)); // ED A0: a surrogate
        CHECK(gram_matcher_accept_str(m, "\x9f\xbf", 2) == 0);        // U+D7FF
        CHECK(gram_matcher_accept_token(m, 27) == 0);                 // E0
        CHECK(!gram_matcher_token_ok(m, 30) && gram_matcher_token_ok(m, 28)); // E0 80 overlong, E0 A0 fine
        gram_matcher_free(m);
    }
    // a grammar of surrogates only: no valid UTF-8 spells it
    m = mk("root ::= [\\ud800-\\udfff]", v);
    tc_err err = {0};
    CHECK(m && gram_matcher_check_start(m, &err) == TC_ERR_INVALID);
    gram_matcher_free(m);
    gram_vocab_free(v);
}

int main(void) {
    test_match();
    test_errors();
    test_mask();
    test_utf8_decoder();
    test_fragments();
    TEST_MAIN_END();
}
