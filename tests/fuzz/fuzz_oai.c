// libFuzzer target: the OpenAI request parser (oai_parse, what every /v1/chat/completions and
// /v1/completions body goes through), then what the server does next with an accepted request: render the
// chat messages with every template family, and run the stop strings through the holdback buffer with the
// prompt text as "generated" text. Input: the first byte picks chat or completions, the rest is the body.
// Checks the contracts in server/oai.h: on error a 4xx/5xx status and a message, *out cleared; on success
// every field within its documented range.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/oai.h"

#define CHECK(c)                                                                                             \
    do {                                                                                                     \
        if (!(c)) __builtin_trap();                                                                          \
    } while (0)

static void check_request(const oai_req *r) {
    CHECK(r->root && r->n >= 1 && r->n <= OAI_MAX_N);
    CHECK(r->max_tokens == -1 || r->max_tokens >= 1);
    CHECK(r->n_stop >= 0 && r->n_stop <= OAI_MAX_STOP);
    for (int i = 0; i < r->n_stop; i++) CHECK(r->stop[i] && r->stop[i][0] && strlen(r->stop[i]) <= OAI_MAX_STOP_LEN);
    CHECK(r->top_logprobs >= 0 && r->top_logprobs <= SAMP_MAX_LOGPROBS);
    CHECK(r->sp.temperature >= 0 && r->sp.temperature <= 2);
    CHECK(r->sp.top_p > 0 && r->sp.top_p <= 1);
    CHECK(r->sp.top_k >= 0);
    CHECK(r->timeout >= 0);
    if (r->kind == OAI_CHAT) {
        CHECK(r->n_msgs >= 1 && r->n_msgs <= OAI_MAX_MSGS && r->msgs);
        for (int i = 0; i < r->n_msgs; i++) CHECK(r->msgs[i].role && r->msgs[i].content);
    } else {
        CHECK(r->prompt ? r->prompt_len == strlen(r->prompt) : (r->prompt_ids && r->n_prompt_ids > 0));
        for (int i = 0; i < r->n_prompt_ids; i++) CHECK(r->prompt_ids[i] >= 0);
    }
}

// What the server does with the messages: render them (the family comes from the model, so try each).
static void render_all(const oai_req *r) {
    for (int f = 1; f < CHAT_COUNT; f++) {
        char *out = NULL;
        tc_err err = {0};
        int rc = chat_render((chat_family)f, NULL, r->msgs, r->n_msgs, 1, "<s>", &out, &err);
        if (rc) {
            CHECK(!out && err.msg[0]);
            continue;
        }
        CHECK(out);
        free(out);
    }
}

// The stop strings against the prompt text pushed in small pieces: what is released is always a prefix of
// what was pushed, and never contains a stop string.
static void stop_strings(const oai_req *r, const char *text, size_t len) {
    if (!r->n_stop) return;
    oai_stopbuf b;
    oai_stopbuf_init(&b, r->stop, r->n_stop);
    char *released = malloc(len + 1);
    size_t n_rel = 0;
    if (!released) return;
    for (size_t i = 0; i < len && !b.matched;) {
        size_t step = 1 + (unsigned char)text[i] % 7;
        if (step > len - i) step = len - i;
        if (oai_stopbuf_push(&b, text + i, step) < 0) break;
        i += step;
        const char *p;
        size_t n;
        oai_stopbuf_take(&b, 0, &p, &n);
        CHECK(n_rel + n <= len);
        memcpy(released + n_rel, p, n);
        n_rel += n;
    }
    const char *p;
    size_t n;
    oai_stopbuf_take(&b, 1, &p, &n);
    CHECK(n_rel + n <= len);
    memcpy(released + n_rel, p, n);
    n_rel += n;
    CHECK(!memcmp(released, text, n_rel));
    released[n_rel] = 0;
    for (int i = 0; i < r->n_stop; i++) CHECK(!memmem(released, n_rel, r->stop[i], strlen(r->stop[i])));
    free(released);
    oai_stopbuf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    oai_kind kind = (data[0] & 1) ? OAI_COMPLETION : OAI_CHAT;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    oai_req r;
    oai_err e;
    memset(&e, 0, sizeof e);
    if (oai_parse(kind, body, len, &r, &e)) {
        CHECK(e.status >= 400 && e.status < 600 && e.msg[0] && e.type);
        CHECK(!r.root && !r.msgs && !r.owned && !r.prompt_ids); // cleared
        char *j = oai_err_json(&e);
        CHECK(j);
        free(j);
        return 0;
    }
    check_request(&r);
    if (kind == OAI_CHAT) {
        render_all(&r);
        for (int i = 0; i < r.n_msgs; i++) stop_strings(&r, r.msgs[i].content, strlen(r.msgs[i].content));
    } else if (r.prompt) {
        stop_strings(&r, r.prompt, r.prompt_len);
    }
    oai_req_free(&r);
    return 0;
}
