// The Anthropic Messages wire (server/wire_anthropic*.c): request bodies into chat completions bodies (blocks,
// tools, tool_choice, thinking, stop_sequences, refused and unknown fields), chat completions into messages
// (content blocks, stop_reason, usage), the SSE event sequence for a list of chat chunks, and error shapes.
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

#include "server/wire_anthropic.h"
#include "test_util.h"

static json_t *J(const char *s) {
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    if (!j) fprintf(stderr, "bad test JSON: %s: %s\n", je.text, s);
    return j;
}

// The chat body for a Messages body equals `want` (JSON text).
static void expect_chat(const char *in, const char *want) {
    json_t *i = J(in), *w = J(want), *out = NULL;
    oai_err e = {0};
    int rc = wire_anthropic_ops.to_chat(i, &out, &e);
    char *got = out ? json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    CHECK_MSG(rc == 0 && json_equal(out, w), "%s\n  got  %s (%s)\n  want %s", in, got ? got : "-", e.msg, want);
    free(got);
    json_decref(i), json_decref(w), json_decref(out);
}

// The Messages body is refused with 400 and the message mentions `needle`.
static void expect_bad(const char *in, const char *needle) {
    json_t *i = J(in), *out = NULL;
    oai_err e = {0};
    int rc = wire_anthropic_ops.to_chat(i, &out, &e);
    CHECK_MSG(rc == -1 && e.status == 400 && strstr(e.msg, needle), "%s: rc %d status %d msg '%s' (want '%s')", in, rc,
              e.status, e.msg, needle);
    CHECK(out == NULL);
    json_decref(i), json_decref(out);
}

static void test_request(void) {
    expect_chat("{\"model\":\"m\",\"max_tokens\":5,\"system\":\"S\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                "\"temperature\":0,\"top_k\":3,\"top_p\":0.5,\"stop_sequences\":[\"X\"],\"metadata\":{\"user_id\":\"u\"},"
                "\"grammar\":\"root ::= [a]\"}",
                "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\","
                "\"content\":\"hi\"}],\"temperature\":0,\"top_k\":3,\"top_p\":0.5,\"stop\":[\"X\"],\"grammar\":\"root ::= [a]\"}");
    // blocks: system text blocks, user text, assistant text + tool_use, tool_result (string, blocks, error)
    expect_chat("{\"model\":\"m\",\"max_tokens\":5,\"stream\":true,\"system\":[{\"type\":\"text\",\"text\":\"S\"}],"
                "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"}]},"
                "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"t\",\"signature\":\"\"},"
                "{\"type\":\"text\",\"text\":\"b\"},{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\",\"input\":{\"x\":1}}]},"
                "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t1\",\"content\":\"r\"},"
                "{\"type\":\"tool_result\",\"tool_use_id\":\"t2\",\"is_error\":true,\"content\":[{\"type\":\"text\",\"text\":\"e\"}]},"
                "{\"type\":\"text\",\"text\":\"c\"}]}]}",
                "{\"model\":\"m\",\"max_tokens\":5,\"stream\":true,\"stream_options\":{\"include_usage\":true},\"messages\":["
                "{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"S\"}]},"
                "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"}]},"
                "{\"role\":\"assistant\",\"content\":\"b\",\"tool_calls\":[{\"id\":\"t1\",\"type\":\"function\",\"function\":"
                "{\"name\":\"f\",\"arguments\":\"{\\\"x\\\":1}\"}}]},"
                "{\"role\":\"tool\",\"tool_call_id\":\"t1\",\"content\":\"r\"},"
                "{\"role\":\"tool\",\"tool_call_id\":\"t2\",\"content\":[{\"type\":\"text\",\"text\":\"Error: \"},"
                "{\"type\":\"text\",\"text\":\"e\"}]},"
                "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"c\"}]}]}");
    // tools and each tool_choice; thinking
    const char *tools = "\"tools\":[{\"name\":\"f\",\"description\":\"d\",\"input_schema\":{\"type\":\"object\"}}]";
    const char *ctools = "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\","
                         "\"parameters\":{\"type\":\"object\"}}}]";
    const char *choices[][2] = {
        {"{\"type\":\"auto\"}", "\"tool_choice\":\"auto\""},
        {"{\"type\":\"none\"}", "\"tool_choice\":\"none\""},
        {"{\"type\":\"any\",\"disable_parallel_tool_use\":true}", "\"tool_choice\":\"required\",\"parallel_tool_calls\":false"},
        {"{\"type\":\"tool\",\"name\":\"f\"}",
         "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}},\"parallel_tool_calls\":false"},
        {"{\"type\":\"tool\",\"name\":\"f\",\"disable_parallel_tool_use\":false}",
         "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}},\"parallel_tool_calls\":true"},
    };
    for (size_t k = 0; k < sizeof choices / sizeof choices[0]; k++) {
        char in[512], want[512];
        snprintf(in, sizeof in, "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[],%s,\"tool_choice\":%s}", tools, choices[k][0]);
        snprintf(want, sizeof want, "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[],%s,%s}", ctools, choices[k][1]);
        expect_chat(in, want);
    }
    expect_chat("{\"model\":\"m\",\"max_tokens\":9,\"messages\":[],\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":4}}",
                "{\"model\":\"m\",\"max_tokens\":9,\"messages\":[],\"chat_template_kwargs\":{\"enable_thinking\":true}}");
    expect_chat("{\"model\":\"m\",\"max_tokens\":9,\"messages\":[],\"thinking\":{\"type\":\"disabled\"}}",
                "{\"model\":\"m\",\"max_tokens\":9,\"messages\":[],\"chat_template_kwargs\":{\"enable_thinking\":false}}");
    expect_chat("{\"model\":\"m\",\"max_tokens\":9,\"messages\":[],\"cache_control\":{\"type\":\"ephemeral\"},"
                "\"output_config\":{\"format\":{\"type\":\"json_schema\",\"schema\":{\"type\":\"object\"}}}}",
                "{\"model\":\"m\",\"max_tokens\":9,\"messages\":[],\"response_format\":{\"type\":\"json_schema\","
                "\"json_schema\":{\"name\":\"output\",\"schema\":{\"type\":\"object\"}}}}");
    // refused
    expect_bad("{\"model\":\"m\",\"max_tokens\":1,\"messages\":[],\"output_config\":{\"effort\":\"high\"}}", "effort");
    expect_bad("{\"model\":\"m\",\"messages\":[]}", "max_tokens");
    expect_bad("{\"model\":\"m\",\"max_tokens\":1,\"messages\":[],\"frobnicate\":1}", "frobnicate");
    expect_bad("{\"model\":\"m\",\"max_tokens\":1,\"messages\":[],\"mcp_servers\":[]}", "mcp_servers");
    expect_bad("{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"system\",\"content\":\"x\"}]}", "role");
    expect_bad("{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\"}]}]}",
               "image");
    expect_bad("{\"model\":\"m\",\"max_tokens\":1,\"messages\":[],\"tool_choice\":{\"type\":\"some\"}}", "tool_choice");
    expect_bad("{\"model\":\"m\",\"max_tokens\":1,\"messages\":[],\"tools\":[{\"type\":\"web_search_20250305\",\"name\":\"w\"}]}",
               "web_search");
    expect_bad("{\"model\":\"m\",\"max_tokens\":1,\"messages\":[],\"thinking\":{\"type\":\"enabled\"}}", "budget_tokens");
    // count_tokens: max_tokens optional
    json_t *i = J("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}"), *out = NULL;
    oai_err e = {0};
    CHECK_MSG(wire_anth_to_chat(i, 1, &out, &e) == 0 && !json_object_get(out, "max_tokens"), "count_tokens: %s", e.msg);
    json_decref(i), json_decref(out);
}

// --- the reply ---------------------------------------------------------------------------------------

static void expect_reply(const char *chat, const char *want) {
    json_t *c = J(chat), *w = J(want), *in = J("{\"model\":\"asked\"}");
    json_t *got = wire_anthropic_ops.from_chat(c, in);
    char *gs = got ? json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    CHECK_MSG(json_equal(got, w), "\n  got  %s\n  want %s", gs ? gs : "-", want);
    free(gs);
    json_decref(c), json_decref(w), json_decref(in), json_decref(got);
}

#define USAGE "\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":4}}"
#define AUSAGE                                                                                                       \
    "\"usage\":{\"input_tokens\":6,\"output_tokens\":3,\"cache_read_input_tokens\":4,\"cache_creation_input_tokens\":0}"

static void test_reply(void) {
    expect_reply("{\"id\":\"chatcmpl-abc\",\"model\":\"srv\",\"choices\":[{\"message\":{\"role\":\"assistant\","
                 "\"content\":\"hi\",\"reasoning_content\":\"hmm\"},\"finish_reason\":\"length\"}]," USAGE "}",
                 "{\"id\":\"msg_abc\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"asked\",\"content\":["
                 "{\"type\":\"thinking\",\"thinking\":\"hmm\",\"signature\":\"\"},{\"type\":\"text\",\"text\":\"hi\"}],"
                 "\"stop_reason\":\"max_tokens\",\"stop_sequence\":null," AUSAGE "}");
    expect_reply("{\"id\":\"chatcmpl-abc\",\"choices\":[{\"message\":{\"content\":\"a\"},\"finish_reason\":\"stop\","
                 "\"stop_reason\":\"END\"}]," USAGE "}",
                 "{\"id\":\"msg_abc\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"asked\",\"content\":["
                 "{\"type\":\"text\",\"text\":\"a\"}],\"stop_reason\":\"stop_sequence\",\"stop_sequence\":\"END\"," AUSAGE "}");
    expect_reply("{\"id\":\"chatcmpl-abc\",\"choices\":[{\"message\":{\"content\":null,\"tool_calls\":[{\"id\":\"c1\","
                 "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\":1}\"}}]},"
                 "\"finish_reason\":\"tool_calls\"}]," USAGE "}",
                 "{\"id\":\"msg_abc\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"asked\",\"content\":["
                 "{\"type\":\"tool_use\",\"id\":\"c1\",\"name\":\"f\",\"input\":{\"x\":1}}],\"stop_reason\":\"tool_use\","
                 "\"stop_sequence\":null," AUSAGE "}");
    CHECK(!strcmp(wire_anth_stop_reason("stop", NULL), "end_turn"));
}

// --- streaming ---------------------------------------------------------------------------------------

// Feeds the chunks (a JSON array) and returns the event names joined by spaces; checks that every event's
// data names the same type (ping, message_start, …) and that index fields count blocks from 0.
static char *run_stream(const char *chunks, int error_at_end, struct evbuffer **keep) {
    json_t *a = J(chunks), *in = J("{\"model\":\"asked\"}");
    wire_stream *st = wire_anthropic_ops.stream_new(in);
    struct evbuffer *out = evbuffer_new();
    size_t i;
    json_t *c;
    json_array_foreach(a, i, c) wire_anthropic_ops.stream_chunk(st, c, out);
    if (error_at_end) {
        oai_err e;
        oai_err_set(&e, 500, "server_error", NULL, NULL, "boom");
        wire_anthropic_ops.stream_error(st, &e, out);
    }
    wire_anthropic_ops.stream_end(st, out);
    wire_anthropic_ops.stream_free(st);
    json_decref(a), json_decref(in);
    size_t n = evbuffer_get_length(out);
    char *text = calloc(1, n + 1), *names = calloc(1, n + 1);
    evbuffer_copyout(out, text, n);
    for (char *p = text; (p = strstr(p, "event: ")); p++) {
        char name[64] = "", data[4096] = "";
        if (sscanf(p, "event: %63[^\n]\ndata: %4095[^\n]", name, data) != 2) {
            CHECK_MSG(0, "malformed event at: %.60s", p);
            break;
        }
        json_t *d = J(data);
        CHECK_MSG(d && !strcmp(json_string_value(json_object_get(d, "type")), name), "event %s data %s", name, data);
        json_decref(d);
        strcat(names, names[0] ? " " : ""), strcat(names, name);
    }
    free(text);
    if (keep) *keep = out;
    else evbuffer_free(out);
    return names;
}

#define CH(delta, fin) "{\"id\":\"chatcmpl-q\",\"choices\":[{\"index\":0,\"delta\":" delta ",\"finish_reason\":" fin "}]}"
#define UCHUNK "{\"id\":\"chatcmpl-q\",\"choices\":[]," USAGE "}"

static void expect_events(const char *chunks, int err, const char *want) {
    char *got = run_stream(chunks, err, NULL);
    CHECK_MSG(!strcmp(got, want), "\n  got  %s\n  want %s", got, want);
    free(got);
}

static void test_stream(void) {
    expect_events("[" CH("{\"role\":\"assistant\",\"content\":\"\"}", "null") "," CH("{\"content\":\"He\"}", "null") ","
                  CH("{\"content\":\"llo\"}", "null") "," CH("{}", "\"stop\"") "," UCHUNK "]", 0,
                  "message_start content_block_start ping content_block_delta content_block_delta content_block_stop "
                  "message_delta message_stop");
    // thinking, then text, then a tool call in pieces: three blocks
    expect_events("[" CH("{\"role\":\"assistant\",\"content\":\"\"}", "null") "," CH("{\"reasoning_content\":\"r\"}", "null")
                  "," CH("{\"content\":\"t\"}", "null") ","
                  CH("{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\","
                     "\"arguments\":\"\"}}]}", "null") ","
                  CH("{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{}\"}}]}", "null") ","
                  CH("{}", "\"tool_calls\"") "," UCHUNK "]", 0,
                  "message_start content_block_start ping content_block_delta content_block_delta content_block_stop "
                  "content_block_start content_block_delta content_block_stop content_block_start content_block_delta "
                  "content_block_stop message_delta message_stop");
    // an error ends the stream: nothing after it
    expect_events("[" CH("{\"role\":\"assistant\",\"content\":\"\"}", "null") "," CH("{\"content\":\"a\"}", "null") "]", 1,
                  "message_start content_block_start ping content_block_delta error");
    // message_delta: stop_reason, stop_sequence and the usage of the last chunk
    struct evbuffer *out = NULL;
    free(run_stream("[" CH("{\"content\":\"a\"}", "null") ","
                    "{\"id\":\"chatcmpl-q\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\","
                    "\"stop_reason\":\"END\"}]}," UCHUNK "]", 0, &out));
    size_t n = evbuffer_get_length(out);
    char *text = calloc(1, n + 1);
    evbuffer_copyout(out, text, n);
    char *md = strstr(text, "event: message_delta\ndata: ");
    json_t *d = md ? json_loads(md + strlen("event: message_delta\ndata: "), JSON_DISABLE_EOF_CHECK, NULL) : NULL;
    json_t *w = J("{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"stop_sequence\",\"stop_sequence\":\"END\"},"
                  AUSAGE "}");
    CHECK_MSG(json_equal(d, w), "message_delta in: %s", text);
    CHECK_MSG(strstr(text, "\"index\":0") && strstr(text, "msg_q"), "ids and indices: %s", text);
    json_decref(d), json_decref(w);
    free(text);
    evbuffer_free(out);
}

static void test_errors(void) {
    const struct {
        int status;
        const char *type;
    } map[] = {{400, "invalid_request_error"}, {401, "authentication_error"}, {403, "permission_error"},
               {404, "not_found_error"},       {429, "rate_limit_error"},     {500, "api_error"},
               {503, "overloaded_error"},      {413, "request_too_large"},    {405, "invalid_request_error"}};
    for (size_t k = 0; k < sizeof map / sizeof map[0]; k++) {
        oai_err e;
        oai_err_set(&e, map[k].status, "invalid_request_error", NULL, NULL, "m%d", map[k].status);
        char *t = wire_anthropic_ops.error_json(&e);
        char want[160];
        snprintf(want, sizeof want, "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":\"m%d\"}}", map[k].type,
                 map[k].status);
        json_t *g = t ? J(t) : NULL, *w = J(want);
        CHECK_MSG(json_equal(g, w), "status %d: got %s want %s", map[k].status, t ? t : "-", want);
        json_decref(g), json_decref(w);
        free(t);
    }
    oai_err e; // an error of the chat path about a field the translation made names the Messages field
    oai_err_set(&e, 400, "invalid_request_error", NULL, "chat_template_kwargs", "no switch");
    json_t *o = wire_anth_error_obj(&e);
    const char *m = json_string_value(json_object_get(json_object_get(o, "error"), "message"));
    CHECK_MSG(m && !strcmp(m, "thinking: no switch"), "message %s", m ? m : "-");
    json_decref(o);
}

// --lenient: the fields the table does not accept (unknown, refused and not null) are dropped and named.
static void test_lenient(void) {
    json_t *in = json_loads("{\"model\":\"m\",\"max_tokens\":5,\"messages\":[],\"bogus\":1,\"container\":\"c\","
                            "\"mcp_servers\":null,\"metadata\":{}}", 0, NULL);
    char dropped[64] = "";
    wire_drop_unaccepted(&wire_anthropic_ops, in, dropped, sizeof dropped);
    CHECK_MSG(!strcmp(dropped, "bogus, container"), "dropped %s", dropped);
    CHECK(!json_object_get(in, "bogus") && !json_object_get(in, "container"));
    CHECK(json_object_get(in, "model") && json_object_get(in, "mcp_servers") && json_object_get(in, "metadata"));
    json_decref(in);
    in = json_loads("{\"input\":\"x\",\"previous_response_id\":\"r\",\"bogus\":1,\"user\":\"u\"}", 0, NULL);
    dropped[0] = 0;
    wire_drop_unaccepted(&wire_responses_ops, in, dropped, sizeof dropped);
    CHECK_MSG(!strcmp(dropped, "previous_response_id, bogus"), "dropped %s", dropped);
    CHECK(json_object_size(in) == 2);
    json_decref(in);
}

int main(void) {
    test_lenient();
    test_request();
    test_reply();
    test_stream();
    test_errors();
    TEST_MAIN_END();
}
