// Streaming text with tools in play (server/gen_tstream.h): fed a model's output a few bytes at a time, the
// content released while it grows, plus the rest released at the end, equals the content the tool-call parser
// returns for the whole text (so a streamed reply equals the non-streamed one), and call markup never goes out
// early; text before a call streams before the call ends; formats without a distinctive marker hold all.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/gen_tstream.h"
#include "test_util.h"

// Streams text (step bytes at a time) for format f; *early gets what went out before the end, the return
// value is the whole streamed content (malloc'd). *before_end: bytes released before the text's last step.
static char *stream_all(tool_fmt f, const char *text, size_t step, char **early) {
    const tool_fmt_row *row = tool_fmt_get(f);
    gen_tstream t = {0};
    size_t len = strlen(text), cap = len + 1, n_out = 0;
    char *out = calloc(cap, 1);
    for (size_t have = step; have < len + step; have += step) {
        size_t l = have < len ? have : len;
        const char *p;
        size_t n;
        gen_tstream_take(&t, row, text, l, &p, &n);
        memcpy(out + n_out, p, n), n_out += n;
    }
    *early = strndup(out, n_out);
    tool_parse_opts o = {.id_base = "call", .reasoning = 1};
    tool_parsed tp;
    tool_fmt_parse(f, text, len, &o, &tp);
    const char *p;
    size_t n;
    gen_tstream_rest(&t, text, tp.content, &p, &n);
    out = realloc(out, n_out + n + 1);
    memcpy(out + n_out, p, n), n_out += n;
    out[n_out] = 0;
    CHECK_MSG(!strcmp(out, tp.content ? tp.content : ""), "streamed %s != parsed %s (text %s)", out,
              tp.content ? tp.content : "(null)", text);
    tool_parsed_free(&tp);
    return out;
}

static void check(tool_fmt f, const char *text, const char *early_want) {
    for (size_t step = 1; step <= 7; step += 3) {
        char *early = NULL, *all = stream_all(f, text, step, &early);
        CHECK_MSG(!strstr(early, "<tool_call") && !strstr(early, "[TOOL_CALLS") && !strstr(early, "<think"),
                  "markup released early: %s", early);
        if (early_want)
            CHECK_MSG(!strncmp(early, early_want, strlen(early_want)), "step %zu: early %s, want it to start %s",
                      step, early, early_want);
        free(early), free(all);
    }
}

int main(void) {
    const char *call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    char buf[512];
    check(TOOL_FMT_HERMES, "  The sea is wide and deep.  \n", "The sea is wide and deep.");
    snprintf(buf, sizeof buf, "Let me check the weather.\n%s", call);
    check(TOOL_FMT_HERMES, buf, "Let me check the weather.");
    snprintf(buf, sizeof buf, "Checking. %s Done, then %s\nAll set.", call, call);
    check(TOOL_FMT_HERMES, buf, "Checking.");
    snprintf(buf, sizeof buf, "%s", call);
    check(TOOL_FMT_HERMES, buf, NULL);
    check(TOOL_FMT_HERMES, "Cut short <tool_call>\n{\"name\": \"get_we", "Cut short");
    check(TOOL_FMT_HERMES, "Not a call <tool_call>oops</tool_call> after", "Not a call");
    check(TOOL_FMT_HERMES, "a < b and x <tool", "a < b and x");
    check(TOOL_FMT_HERMES, "<think>hmm</think>Answer.", NULL);
    check(TOOL_FMT_HERMES, "Before <think>hmm</think> after", "Before");
    check(TOOL_FMT_MISTRAL, "Sure. [TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]", "Sure.");
    // text streams before the call is complete: the early part is the whole text before the marker
    char *early = NULL, *all = stream_all(TOOL_FMT_HERMES, "Hello there <tool_call>\n{\"name\"", 1, &early);
    CHECK_MSG(!strcmp(early, "Hello there"), "early %s", early);
    free(early), free(all);
    // bare JSON calls start like text: nothing before the end
    CHECK(!gen_tstream_on(tool_fmt_get(TOOL_FMT_LLAMA3)));
    CHECK(gen_tstream_on(tool_fmt_get(TOOL_FMT_HERMES)));
    all = stream_all(TOOL_FMT_LLAMA3, "Some text.", 1, &early);
    CHECK_MSG(!*early && !strcmp(all, "Some text."), "llama3 early %s all %s", early, all);
    free(early), free(all);
    TEST_MAIN_END();
}
