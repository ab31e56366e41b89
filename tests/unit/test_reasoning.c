// The streaming <think> splitter (server/reasoning.c): every way of cutting an output into pieces gives the
// split of the whole output fed at once — tags cut anywhere, held prefixes that turn out not to be tags.
#include "server/reasoning.h"
#include "test_util.h"

typedef struct {
    const char *out;     // generated text
    int in_think;        // the prompt opened <think>
    const char *reason;  // expected reasoning_content
    const char *content; // expected content
} rcase;

static const rcase cases[] = {
    {"<think>\nLet me add.\n</think>\n\nIt is 4.", 0, "Let me add.\n", "It is 4."},
    {"<think></think>Answer", 0, "", "Answer"},
    {"<think>\n\n</think>\n\nAnswer", 0, "", "Answer"},
    {"Plain answer, no tags.", 0, "", "Plain answer, no tags."},
    {"<thin>not a tag", 0, "", "<thin>not a tag"},
    {"<", 0, "", "<"},
    {"a <think>late tag</think> stays", 0, "", "a <think>late tag</think> stays"},
    {"<think>unfinished reasoning </thi", 0, "unfinished reasoning </thi", ""},
    {"<think>x < y and </thinking> is not it</think>done", 0, "x < y and </thinking> is not it", "done"},
    {"<think>a</think>b</think>c", 0, "a", "b</think>c"},
    {"reasoning from the start\n</think>\n\nanswer", 1, "reasoning from the start\n", "answer"},
    {"\n\nr</think>a", 1, "r", "a"},
    {"", 0, "", ""},
    {"<think>é ünïcode ✓</think>ok ✓", 0, "é ünïcode ✓", "ok ✓"},
};

static void run(const rcase *t, const size_t *cuts, int n_cuts, tc_strbuf *r, tc_strbuf *c) {
    rsn_split s;
    rsn_init(&s, t->in_think);
    size_t len = strlen(t->out), at = 0;
    for (int i = 0; i <= n_cuts; i++) {
        size_t to = i < n_cuts ? cuts[i] : len;
        rsn_feed(&s, t->out + at, to - at, 0, r, c);
        at = to;
    }
    rsn_feed(&s, "", 0, 1, r, c);
}

static int same(const tc_strbuf *b, const char *want) { return !strcmp(b->p ? b->p : "", want); }

int main(void) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const rcase *t = &cases[i];
        size_t len = strlen(t->out);
        // whole, then every single cut, then every pair of cuts, then byte by byte
        for (size_t a = 0; a <= len; a++) {
            for (size_t b = a; b <= len; b++) {
                size_t cuts[2] = {a, b};
                tc_strbuf r = {0}, c = {0};
                run(t, cuts, 2, &r, &c);
                CHECK_MSG(same(&r, t->reason) && same(&c, t->content),
                          "case %zu cut at %zu,%zu: reasoning '%s' content '%s'", i, a, b, r.p ? r.p : "",
                          c.p ? c.p : "");
                free(r.p), free(c.p);
            }
        }
        size_t *bytes = malloc((len + 1) * sizeof *bytes);
        for (size_t k = 0; k < len; k++) bytes[k] = k + 1;
        tc_strbuf r = {0}, c = {0};
        run(t, bytes, (int)len, &r, &c);
        CHECK_MSG(same(&r, t->reason) && same(&c, t->content), "case %zu byte by byte: '%s' / '%s'", i,
                  r.p ? r.p : "", c.p ? c.p : "");
        free(r.p), free(c.p), free(bytes);
    }
    TEST_MAIN_END();
}
