// Server's OpenAI mapping: request parsing/validation (types, ranges, missing fields, malformed JSON,
// invalid UTF-8), error bodies, response/chunk shapes, SSE framing, UTF-8 sanitizing, and the stop-string
// holdback buffer checked against a brute-force reference over every split of the text into pieces.
#include <stdlib.h>
#include <string.h>

#include "server/oai.h"
#include "test_util.h"

static int parse(oai_kind k, const char *body, oai_req *r, oai_err *e) {
    memset(e, 0, sizeof *e);
    return oai_parse(k, body, strlen(body), r, e);
}

// Expects a 400 naming `param` ("" = null) for body.
static void expect_bad(oai_kind k, const char *body, const char *param) {
    oai_req r;
    oai_err e;
    int rc = parse(k, body, &r, &e);
    CHECK_MSG(rc == -1, "accepted bad body %s", body);
    if (rc == 0) {
        oai_req_free(&r);
        return;
    }
    CHECK_MSG(e.status == 400, "status %d for %s", e.status, body);
    CHECK_MSG(!strcmp(e.param, param), "param '%s' != '%s' for %s (%s)", e.param, param, body, e.msg);
    CHECK_MSG(e.msg[0] != 0, "empty message for %s", body);
}

static void test_parse_ok(void) {
    oai_req r;
    oai_err e;
    const char *b = "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"S\"},"
                    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]}],"
                    "\"stream\":true,\"stream_options\":{\"include_usage\":true},\"max_completion_tokens\":7,"
                    "\"temperature\":0,\"top_p\":0.5,\"seed\":42,\"stop\":[\"x\",\"\",\"yz\"],\"n\":3,"
                    "\"logprobs\":true,\"top_logprobs\":2,\"presence_penalty\":0.5,\"frequency_penalty\":-1,"
                    "\"top_k\":40,\"min_p\":0.05,\"repetition_penalty\":1.1,\"timeout\":2.5,\"user\":\"ignored\"}";
    CHECK(parse(OAI_CHAT, b, &r, &e) == 0);
    CHECK(!strcmp(r.model, "m"));
    CHECK_EQ_INT(r.n_msgs, 2);
    CHECK(!strcmp(r.msgs[0].role, "system") && !strcmp(r.msgs[0].content, "S"));
    CHECK(!strcmp(r.msgs[1].role, "user") && !strcmp(r.msgs[1].content, "ab"));
    CHECK_EQ_INT(r.stream, 1);
    CHECK_EQ_INT(r.include_usage, 1);
    CHECK_EQ_INT(r.max_tokens, 7);
    CHECK_NEAR(r.sp.temperature, 0, 0);
    CHECK_NEAR(r.sp.top_p, 0.5, 1e-7);
    CHECK_EQ_INT(r.sp.seed, 42);
    CHECK_EQ_INT(r.seed_given, 1);
    CHECK_EQ_INT(r.n_stop, 2); // "" dropped
    CHECK(!strcmp(r.stop[0], "x") && !strcmp(r.stop[1], "yz"));
    CHECK_EQ_INT(r.n, 3);
    CHECK_EQ_INT(r.logprobs, 1);
    CHECK_EQ_INT(r.top_logprobs, 2);
    CHECK_EQ_INT(r.sp.n_logprobs, 2);
    CHECK_NEAR(r.sp.presence_penalty, 0.5, 1e-7);
    CHECK_NEAR(r.sp.frequency_penalty, -1, 1e-7);
    CHECK_EQ_INT(r.sp.top_k, 40);
    CHECK_NEAR(r.sp.min_p, 0.05, 1e-7);
    CHECK_NEAR(r.sp.repetition_penalty, 1.1, 1e-6);
    CHECK_NEAR(r.timeout, 2.5, 0);
    oai_req_free(&r);

    // defaults
    CHECK(parse(OAI_COMPLETION, "{\"prompt\":\"hello\"}", &r, &e) == 0);
    CHECK(r.model == NULL);
    CHECK(r.prompt && r.prompt_len == 5);
    CHECK_EQ_INT(r.max_tokens, -1);
    CHECK_NEAR(r.sp.temperature, 1, 0);
    CHECK_EQ_INT(r.n, 1);
    CHECK_EQ_INT(r.stream, 0);
    CHECK_EQ_INT(r.logprobs, 0);
    CHECK_EQ_INT(r.n_stop, 0);
    oai_req_free(&r);

    CHECK(parse(OAI_COMPLETION, "{\"prompt\":[1,2,3],\"logprobs\":3,\"stop\":\"\\n\",\"max_tokens\":4.0}", &r, &e) ==
          0);
    CHECK(r.prompt == NULL);
    CHECK_EQ_INT(r.n_prompt_ids, 3);
    CHECK_EQ_INT(r.prompt_ids[2], 3);
    CHECK_EQ_INT(r.logprobs, 1);
    CHECK_EQ_INT(r.top_logprobs, 3);
    CHECK_EQ_INT(r.n_stop, 1);
    CHECK_EQ_INT(r.max_tokens, 4);
    oai_req_free(&r);
    CHECK(parse(OAI_COMPLETION, "{\"prompt\":[\"one\"],\"logprobs\":0}", &r, &e) == 0);
    CHECK(r.prompt && !strcmp(r.prompt, "one"));
    CHECK_EQ_INT(r.logprobs, 1);
    CHECK_EQ_INT(r.top_logprobs, 0);
    oai_req_free(&r);
}

static void test_parse_new_fields(void) {
    oai_req r;
    oai_err e;
    CHECK(parse(OAI_COMPLETION, "{\"prompt\":[\"a\",\"bc\"],\"n\":2,\"best_of\":2,\"echo\":true,"
                                "\"logit_bias\":{\"7\":-100,\"12\":2.5},\"user\":\"u\",\"priority\":0}", &r, &e) == 0);
    CHECK_EQ_INT(r.n_prompts, 2);
    CHECK(r.prompts[1].text && r.prompts[1].len == 2);
    CHECK_EQ_INT(r.echo, 1);
    CHECK_EQ_INT(r.n_bias, 2);
    CHECK_EQ_INT(r.sp.n_bias, 2);
    CHECK(r.bias[0].id == 7 && r.bias[0].bias == -100.0f && r.bias[1].id == 12);
    oai_req_free(&r);
    CHECK(parse(OAI_COMPLETION, "{\"prompt\":[[1,2],[3]]}", &r, &e) == 0);
    CHECK_EQ_INT(r.n_prompts, 2);
    CHECK(r.prompts[1].n_ids == 1 && r.prompts[1].ids[0] == 3);
    CHECK(r.prompt_ids == r.prompts[0].ids && r.n_prompt_ids == 2);
    oai_req_free(&r);
    const char *b;
    // main's structured-output, tool and prediction fields have handled rows (not refused as unknown)
    b = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_object\"},"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],"
        "\"tool_choice\":\"auto\",\"parallel_tool_calls\":false,\"prediction\":{\"type\":\"content\",\"content\":\"y\"}}";
    CHECK_MSG(oai_parse(OAI_CHAT, b, strlen(b), &r, &e) == 0, "%s", e.msg);
    oai_req_free(&r);
    b = "{\"prompt\":\"x\",\"grammar\":\"root ::= \\\"a\\\"\",\"prediction\":{\"type\":\"content\",\"content\":\"y\"}}";
    CHECK_MSG(oai_parse(OAI_COMPLETION, b, strlen(b), &r, &e) == 0, "%s", e.msg);
    oai_req_free(&r);
    // lenient: unknown and refused fields are dropped and listed
    b = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"functions\":[],\"frob\":1}";
    CHECK(oai_parse_ex(OAI_CHAT, b, strlen(b), 1, &r, &e) == 0);
    CHECK_MSG(!strcmp(r.lenient_dropped, "functions, frob") || !strcmp(r.lenient_dropped, "frob, functions"), "dropped '%s'",
              r.lenient_dropped);
    oai_req_free(&r);
    // every row of the table names a real endpoint and refused/ignored rows say why
    int n;
    const oai_field *f = oai_field_table(&n);
    for (int i = 0; i < n; i++) {
        CHECK_MSG(f[i].kinds != 0, "field %s has no endpoint", f[i].name);
        CHECK_MSG(f[i].status == OAI_F_HANDLED || (f[i].why && f[i].why[0]), "field %s has no reason", f[i].name);
    }
}

static void test_parse_bad(void) {
    expect_bad(OAI_CHAT, "", "");
    expect_bad(OAI_CHAT, "{\"messages\":[", "");
    expect_bad(OAI_CHAT, "[1,2]", "");
    expect_bad(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", ""); // invalid UTF-8
    expect_bad(OAI_CHAT, "{}", "messages");
    expect_bad(OAI_CHAT, "{\"messages\":\"hi\"}", "messages");
    expect_bad(OAI_CHAT, "{\"messages\":[]}", "messages");
    expect_bad(OAI_CHAT, "{\"messages\":[{\"content\":\"x\"}]}", "messages[0].role");
    expect_bad(OAI_CHAT, "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", "messages[0].role");
    expect_bad(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "messages[0].content");
    expect_bad(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
               "messages[0].content");
    const char *M = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],";
    struct {
        const char *tail, *param;
    } cases[] = {
        {"\"model\":3}", "model"},
        {"\"stream\":\"yes\"}", "stream"},
        {"\"max_tokens\":-1}", "max_tokens"},
        {"\"max_tokens\":0}", "max_tokens"},
        {"\"max_tokens\":1e30}", "max_tokens"},
        {"\"max_tokens\":99999999999}", "max_tokens"},
        {"\"max_tokens\":\"10\"}", "max_tokens"},
        {"\"max_completion_tokens\":-5}", "max_completion_tokens"},
        {"\"temperature\":\"hot\"}", "temperature"},
        {"\"temperature\":-0.1}", "temperature"},
        {"\"temperature\":3}", "temperature"},
        {"\"top_p\":0}", "top_p"},
        {"\"top_p\":1.5}", "top_p"},
        {"\"n\":0}", "n"},
        {"\"n\":1000}", "n"},
        {"\"seed\":1.5}", "seed"},
        {"\"stop\":5}", "stop"},
        {"\"stop\":[\"a\",1]}", "stop"},
        {"\"logprobs\":1}", "logprobs"},
        {"\"top_logprobs\":3}", "top_logprobs"},
        {"\"logprobs\":true,\"top_logprobs\":21}", "top_logprobs"},
        {"\"presence_penalty\":3}", "presence_penalty"},
        {"\"frequency_penalty\":null,\"min_p\":2}", "min_p"},
        {"\"stream_options\":{\"include_usage\":true}}", "stream_options"},
        {"\"stream\":true,\"stream_options\":{\"include_usage\":1}}", "stream_options.include_usage"},
        {"\"stream\":true,\"stream_options\":[]}", "stream_options"},
        {"\"timeout\":-1}", "timeout"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "%s%s", M, cases[i].tail);
        expect_bad(OAI_CHAT, body, cases[i].param);
    }
    expect_bad(OAI_COMPLETION, "{}", "prompt");
    expect_bad(OAI_COMPLETION, "{\"prompt\":7}", "prompt");
    expect_bad(OAI_COMPLETION, "{\"prompt\":[]}", "prompt");
    expect_bad(OAI_COMPLETION, "{\"prompt\":[\"a\",7]}", "prompt");
    expect_bad(OAI_COMPLETION, "{\"prompt\":[[1],[]]}", "prompt");
    expect_bad(OAI_COMPLETION, "{\"prompt\":[[1],[-1]]}", "prompt");
    expect_bad(OAI_COMPLETION, "{\"prompt\":[1,-2]}", "prompt");
    expect_bad(OAI_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":true}", "logprobs");
    expect_bad(OAI_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":50}", "logprobs");
    expect_bad(OAI_COMPLETION, "{\"prompt\":\"x\",\"best_of\":3}", "best_of");
    expect_bad(OAI_COMPLETION, "{\"prompt\":\"x\",\"suffix\":5}", "suffix");
    expect_bad(OAI_COMPLETION, "{\"prompt\":\"x\",\"messages\":[]}", "messages"); // chat-only field
    expect_bad(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"echo\":true}", "echo");
    const char *bad_bias[] = {"[1]", "{\"a\":1}", "{\"-1\":1}", "{\"1.5\":1}", "{\"\":1}", "{\"5\":101}",
                              "{\"5\":-100.5}", "{\"5\":\"1\"}", "{\"5\":null}", "{\"99999999999\":1}"};
    for (size_t i = 0; i < sizeof bad_bias / sizeof *bad_bias; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"prompt\":\"x\",\"logit_bias\":%s}", bad_bias[i]);
        expect_bad(OAI_COMPLETION, body, "logit_bias");
    }
    expect_bad(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"frobnicate\":1}", "frobnicate");
    expect_bad(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"functions\":[]}", "functions");
    expect_bad(OAI_COMPLETION, "{\"prompt\":\"x\",\"tools\":[]}", "tools"); // chat-only row
    expect_bad(OAI_COMPLETION, "{\"prompt\":\"a\",\"prompt\":\"b\"}", ""); // duplicate keys
}

static void test_error_json(void) {
    oai_err e;
    oai_err_set(&e, 404, "invalid_request_error", "model_not_found", "model", "The model `%s` does not exist", "x");
    char *s = oai_err_json(&e);
    json_t *j = json_loads(s, 0, NULL);
    CHECK(j != NULL);
    json_t *er = json_object_get(j, "error");
    CHECK(!strcmp(json_string_value(json_object_get(er, "message")), "The model `x` does not exist"));
    CHECK(!strcmp(json_string_value(json_object_get(er, "type")), "invalid_request_error"));
    CHECK(!strcmp(json_string_value(json_object_get(er, "param")), "model"));
    CHECK(!strcmp(json_string_value(json_object_get(er, "code")), "model_not_found"));
    json_decref(j);
    free(s);
    oai_err_set(&e, 400, NULL, NULL, NULL, "bad \xff byte");
    s = oai_err_json(&e);
    j = json_loads(s, 0, NULL);
    er = json_object_get(j, "error");
    CHECK(json_is_null(json_object_get(er, "param")) && json_is_null(json_object_get(er, "code")));
    CHECK(!strcmp(json_string_value(json_object_get(er, "message")), "bad \xEF\xBF\xBD byte"));
    json_decref(j);
    free(s);
}

static void test_utf8(void) {
    json_t *j = oai_json_text("a\xC3\xA9" "b", 4);
    CHECK(j && !strcmp(json_string_value(j), "a\xC3\xA9" "b"));
    json_decref(j);
    j = oai_json_text("a\xC3", 2); // truncated sequence
    CHECK(j && !strcmp(json_string_value(j), "a\xEF\xBF\xBD"));
    json_decref(j);
    j = oai_json_text("\xED\xA0\x80" "x", 4); // surrogate: 3 invalid bytes
    CHECK(j && !strcmp(json_string_value(j), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" "x"));
    json_decref(j);
    CHECK_EQ_INT(oai_utf8_complete_prefix("ab\xE2\x82", 4), 2);
    CHECK_EQ_INT(oai_utf8_complete_prefix("ab\xE2\x82\xAC", 5), 5);
    CHECK_EQ_INT(oai_utf8_complete_prefix("ab\xFF", 3), 3);
}

static void test_shapes(void) {
    json_t *c = oai_chunk(OAI_CHAT, "chatcmpl-1", 1700000000, "m", 0, "assistant", "", 0, NULL, NULL);
    size_t n;
    char *f = oai_sse_frame(c, &n);
    CHECK(f && n == strlen(f));
    CHECK_MSG(!strncmp(f, "data: {", 7) && !strcmp(f + n - 2, "\n\n") && !strchr(f, '\n') + 0 == 0,
              "frame: %s", f);
    CHECK(strchr(f, '\n') == f + n - 2); // no newline inside the JSON
    json_t *p = json_loads(f + 6, JSON_DISABLE_EOF_CHECK, NULL);
    CHECK(p != NULL);
    CHECK(!strcmp(json_string_value(json_object_get(p, "object")), "chat.completion.chunk"));
    CHECK_EQ_INT(json_integer_value(json_object_get(p, "created")), 1700000000);
    json_t *ch = json_array_get(json_object_get(p, "choices"), 0);
    json_t *d = json_object_get(ch, "delta");
    CHECK(!strcmp(json_string_value(json_object_get(d, "role")), "assistant"));
    CHECK(!strcmp(json_string_value(json_object_get(d, "content")), ""));
    CHECK(json_is_null(json_object_get(ch, "finish_reason")));
    json_decref(p);
    free(f);
    json_decref(c);

    c = oai_chunk(OAI_COMPLETION, "cmpl-1", 1, "m", 2, NULL, "hi", 2, "length", NULL);
    ch = json_array_get(json_object_get(c, "choices"), 0);
    CHECK(!strcmp(json_string_value(json_object_get(c, "object")), "text_completion"));
    CHECK(!strcmp(json_string_value(json_object_get(ch, "text")), "hi"));
    CHECK_EQ_INT(json_integer_value(json_object_get(ch, "index")), 2);
    CHECK(!strcmp(json_string_value(json_object_get(ch, "finish_reason")), "length"));
    json_decref(c);

    json_t *u = oai_usage(10, 5, 4);
    CHECK_EQ_INT(json_integer_value(json_object_get(u, "total_tokens")), 15);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens")), 4);
    c = oai_usage_chunk(OAI_CHAT, "chatcmpl-1", 1, "m", u);
    CHECK(json_array_size(json_object_get(c, "choices")) == 0);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(c, "usage"), "prompt_tokens")), 10);
    json_decref(c);

    oai_lp_tok chosen = {"he", 2, -0.5f}, top[2] = {{"he", 2, -0.5f}, {"\xE2\x82", 2, -1.5f}};
    json_t *lp = oai_lp_chat_new();
    json_array_append_new(json_object_get(lp, "content"), oai_lp_chat_entry(&chosen, top, 2));
    json_t *choices = json_array();
    json_array_append_new(choices, oai_choice(OAI_CHAT, 0, "hello", 5, "stop", lp));
    json_t *r = oai_response(OAI_CHAT, "chatcmpl-2", 5, "m", choices, oai_usage(3, 1, 0));
    CHECK(!strcmp(json_string_value(json_object_get(r, "object")), "chat.completion"));
    json_t *c0 = json_array_get(json_object_get(r, "choices"), 0);
    json_t *msg = json_object_get(c0, "message");
    CHECK(!strcmp(json_string_value(json_object_get(msg, "role")), "assistant"));
    CHECK(!strcmp(json_string_value(json_object_get(msg, "content")), "hello"));
    json_t *e0 = json_array_get(json_object_get(json_object_get(c0, "logprobs"), "content"), 0);
    CHECK(!strcmp(json_string_value(json_object_get(e0, "token")), "he"));
    CHECK_NEAR(json_real_value(json_object_get(e0, "logprob")), -0.5, 1e-6);
    CHECK_EQ_INT(json_array_size(json_object_get(e0, "bytes")), 2);
    json_t *t1 = json_array_get(json_object_get(e0, "top_logprobs"), 1);
    CHECK_EQ_INT(json_integer_value(json_array_get(json_object_get(t1, "bytes"), 0)), 0xE2);
    json_decref(r);

    lp = oai_lp_cmpl_new();
    oai_lp_cmpl_append(lp, &chosen, top, 2, 0);
    oai_lp_cmpl_append(lp, &top[1], NULL, 0, 2);
    CHECK_EQ_INT(json_array_size(json_object_get(lp, "tokens")), 2);
    CHECK_EQ_INT(json_integer_value(json_array_get(json_object_get(lp, "text_offset"), 1)), 2);
    json_t *d0 = json_array_get(json_object_get(lp, "top_logprobs"), 0);
    CHECK_NEAR(json_real_value(json_object_get(d0, "he")), -0.5, 1e-6);
    json_decref(lp);
}

// Reference: the output is the text up to the earliest occurrence of any stop string (or all of it); and at
// every point the released bytes are a prefix of that, never containing a stop string start that could
// still match.
static void run_stop_case(const char *text, const char *const *stops, int n_stops, const int *cuts, int n_cuts) {
    size_t len = strlen(text), best = len;
    int any = 0;
    for (int i = 0; i < n_stops; i++) {
        const char *m = strstr(text, stops[i]);
        if (m && (size_t)(m - text) < best) best = (size_t)(m - text), any = 1;
        else if (m) any = 1;
    }
    oai_stopbuf b;
    oai_stopbuf_init(&b, stops, n_stops);
    char out[256];
    size_t on = 0;
    int prev = 0, matched = 0;
    for (int c = 0; c <= n_cuts && !matched; c++) {
        int end = c < n_cuts ? cuts[c] : (int)len;
        int rc = oai_stopbuf_push(&b, text + prev, (size_t)(end - prev));
        prev = end;
        if (rc == 1) matched = 1;
        const char *p;
        size_t n;
        oai_stopbuf_take(&b, 0, &p, &n);
        memcpy(out + on, p, n);
        on += n;
        CHECK_MSG(on <= best && !memcmp(out, text, on), "released too much of '%s': %.*s", text, (int)on, out);
    }
    const char *p;
    size_t n;
    oai_stopbuf_take(&b, 1, &p, &n);
    memcpy(out + on, p, n);
    on += n;
    CHECK_MSG(on == best && !memcmp(out, text, on), "text '%s': got '%.*s' want '%.*s'", text, (int)on, out,
              (int)best, text);
    CHECK_EQ_INT(b.matched, any);
    oai_stopbuf_free(&b);
}

static void test_stopbuf(void) {
    const char *stops[] = {"END", "\n\n", "abab"};
    const char *texts[] = {"hello world", "hello END there", "a\n\nb", "xENxEND", "aba abab", "ababab", "EN",
                           "tail E", "ababENDx"};
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        int len = (int)strlen(texts[t]);
        // every split into 1, 2 or 3 pieces
        run_stop_case(texts[t], stops, 3, NULL, 0);
        for (int i = 1; i < len; i++) {
            int c1[1] = {i};
            run_stop_case(texts[t], stops, 3, c1, 1);
            for (int j = i + 1; j < len; j++) {
                int c2[2] = {i, j};
                run_stop_case(texts[t], stops, 3, c2, 2);
            }
        }
        // one byte at a time
        int cuts[64];
        for (int i = 1; i < len; i++) cuts[i - 1] = i;
        run_stop_case(texts[t], stops, 3, cuts, len - 1);
    }
    // holdback: "tail E" keeps "E" back until the end
    oai_stopbuf b;
    oai_stopbuf_init(&b, stops, 3);
    oai_stopbuf_push(&b, "tail E", 6);
    const char *p;
    size_t n;
    oai_stopbuf_take(&b, 0, &p, &n);
    CHECK_EQ_INT(n, 5);
    oai_stopbuf_push(&b, "x", 1);
    oai_stopbuf_take(&b, 0, &p, &n);
    CHECK(n == 2 && !memcmp(p, "Ex", 2));
    oai_stopbuf_free(&b);
    // no stop strings: everything is released at once
    oai_stopbuf_init(&b, NULL, 0);
    oai_stopbuf_push(&b, "abc", 3);
    oai_stopbuf_take(&b, 0, &p, &n);
    CHECK_EQ_INT(n, 3);
    oai_stopbuf_free(&b);
}

// llama-server / vLLM sampler fields: values reach samp_params and oai_samp_ext; aliases; guided_* to GBNF.
static void test_parse_sampler_fields(void) {
    oai_req r;
    oai_err e;
    const char *b = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"typical_p\":0.5,\"mirostat\":2,"
                    "\"mirostat_tau\":3,\"xtc_probability\":0.5,\"xtc_threshold\":0.2,\"dry_multiplier\":0.8,"
                    "\"dry_sequence_breakers\":[\"\\n\"],\"top_n_sigma\":1.5,\"dynatemp_range\":0.3,\"n_predict\":9,"
                    "\"repeat_penalty\":1.2,\"repeat_last_n\":32,\"stop_token_ids\":[5,6],\"min_tokens\":3,"
                    "\"include_stop_str_in_output\":true,\"skip_special_tokens\":false,\"n_probs\":2,"
                    "\"cache_prompt\":true,\"id_slot\":1}";
    CHECK_MSG(oai_parse(OAI_CHAT, b, strlen(b), &r, &e) == 0, "%s", e.msg);
    CHECK(r.sp.typical_p == 0.5f && r.sp.mirostat == 2 && r.sp.mirostat_tau == 3.0f && r.sp.xtc_probability == 0.5f);
    CHECK(r.sp.xtc_threshold == 0.2f && r.sp.dry_multiplier == 0.8f && r.sp.top_n_sigma == 1.5f);
    CHECK(r.sp.dynatemp_range == 0.3f && r.max_tokens == 9 && r.sp.repetition_penalty == 1.2f);
    CHECK(r.sp.penalty_last_n == 32 && r.sx.n_stop_ids == 2 && r.sx.stop_ids[1] == 6 && r.sp.min_tokens == 3);
    CHECK(r.sx.include_stop == 1 && r.sx.keep_special == 1 && r.logprobs == 1 && r.top_logprobs == 2);
    CHECK(r.sx.n_dry_breakers == 1 && !strcmp(r.sx.dry_breakers[0], "\n"));
    oai_req_free(&r);
    // defaults: llama.cpp's breakers, every sampler off, special tokens skipped
    b = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}";
    CHECK(oai_parse(OAI_CHAT, b, strlen(b), &r, &e) == 0);
    CHECK(r.sx.n_dry_breakers == 4 && r.sp.typical_p == 1.0f && r.sp.mirostat == 0 && r.sp.dry_multiplier == 0.0f);
    CHECK(r.sx.keep_special == 0 && r.sp.min_tokens == 0 && r.sp.dry_base == 1.75f);
    oai_req_free(&r);
    b = "{\"prompt\":\"x\",\"guided_choice\":[\"a\\\"b\",\"c\"]}";
    CHECK_MSG(oai_parse(OAI_COMPLETION, b, strlen(b), &r, &e) == 0, "%s", e.msg);
    CHECK_MSG(r.ext.grammar && !strcmp(r.ext.grammar, "root ::= \"a\\\"b\" | \"c\""), "grammar %s", r.ext.grammar);
    oai_req_free(&r);
    expect_bad(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"mirostat\":3}", "mirostat");
    expect_bad(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"typical_p\":0}", "typical_p");
    expect_bad(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"guided_regex\":\"a+\"}",
               "guided_regex");
    expect_bad(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n_predict\":4,\"max_tokens\":5}",
               "n_predict");
    expect_bad(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop_token_ids\":[-1]}",
               "stop_token_ids");
}

// include_stop_str_in_output keeps the match; search_from skips text before it (min_tokens).
static void test_stopbuf_options(void) {
    const char *stops[] = {"END"};
    oai_stopbuf b;
    const char *p;
    size_t n;
    oai_stopbuf_init(&b, stops, 1);
    b.keep_stop = 1;
    CHECK(oai_stopbuf_push(&b, "abEN", 4) == 0 && oai_stopbuf_push(&b, "Dzz", 3) == 1);
    oai_stopbuf_take(&b, 1, &p, &n);
    CHECK_MSG(n == 5 && !memcmp(p, "abEND", 5), "kept '%.*s'", (int)n, p);
    oai_stopbuf_free(&b);
    oai_stopbuf_init(&b, stops, 1);
    b.search_from = (size_t)-1;
    CHECK(oai_stopbuf_push(&b, "xEND", 4) == 0);
    b.search_from = b.len;
    CHECK(oai_stopbuf_push(&b, "yEND", 4) == 1);
    oai_stopbuf_take(&b, 1, &p, &n);
    CHECK_MSG(n == 5 && !memcmp(p, "xENDy", 5), "text '%.*s'", (int)n, p);
    oai_stopbuf_free(&b);
}

int main(void) {
    test_parse_sampler_fields();
    test_stopbuf_options();
    test_parse_ok();
    test_parse_bad();
    test_parse_new_fields();
    test_error_json();
    test_utf8();
    test_shapes();
    test_stopbuf();
    TEST_MAIN_END();
}
