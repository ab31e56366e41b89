// The OpenAI Responses API wire (server/wire_responses*.c): request → chat body for every input item type
// and option, the refusals (400 naming the field), chat.completion → Response, and the event stream built
// from a list of chat chunks (names, order, sequence numbers, the final Response, errors mid-stream).
#include <event2/buffer.h>

#include "server/wire_responses_impl.h"
#include "test_util.h"

static json_t *J(const char *s) {
    json_error_t je;
    json_t *j = json_loads(s, JSON_DECODE_ANY, &je);
    if (!j) fprintf(stderr, "bad test JSON: %s: %s\n", je.text, s);
    return j;
}

// to_chat on a body written as JSON text; *e gets the error. Returns the chat body (owned) or NULL.
static json_t *chat_of(const char *body, oai_err *e) {
    json_t *in = J(body), *out = NULL;
    memset(e, 0, sizeof *e);
    int rc = wire_responses_ops.to_chat(in, &out, e);
    json_decref(in);
    CHECK(rc == 0 ? out != NULL : out == NULL);
    return out;
}

// 1 when the chat body's path equals the JSON text want.
static int eq(const json_t *v, const char *want) {
    json_t *w = J(want);
    int ok = json_equal((json_t *)v, w);
    if (!ok) {
        char *s = json_dumps(v, JSON_COMPACT);
        fprintf(stderr, "  got  %s\n  want %s\n", s ? s : "(null)", want);
        free(s);
    }
    json_decref(w);
    return ok;
}

static void test_request_basic(void) {
    oai_err e;
    json_t *c = chat_of("{\"model\":\"m\",\"input\":\"Hi\",\"instructions\":\"Be brief.\",\"max_output_tokens\":7,"
                        "\"temperature\":0,\"top_p\":0.5,\"stream\":true,\"store\":false,\"metadata\":{\"a\":\"b\"},"
                        "\"user\":\"u\",\"truncation\":\"auto\",\"parallel_tool_calls\":false,"
                        "\"reasoning\":{\"effort\":\"low\"},\"include\":[\"reasoning.encrypted_content\"]}", &e);
    CHECK(c != NULL);
    CHECK(eq(json_object_get(c, "messages"),
             "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi\"}]"));
    CHECK(eq(json_object_get(c, "max_tokens"), "7"));
    CHECK(eq(json_object_get(c, "model"), "\"m\""));
    CHECK(eq(json_object_get(c, "temperature"), "0"));
    CHECK(eq(json_object_get(c, "top_p"), "0.5"));
    CHECK(eq(json_object_get(c, "truncation"), "\"auto\""));
    CHECK(eq(json_object_get(c, "parallel_tool_calls"), "false"));
    CHECK(eq(json_object_get(c, "stream_options"), "{\"include_usage\":true}"));
    // ignored fields stay out of the chat body (the chat path's table would judge them otherwise)
    CHECK(!json_object_get(c, "metadata") && !json_object_get(c, "user") && !json_object_get(c, "store") &&
          !json_object_get(c, "reasoning") && !json_object_get(c, "include") && !json_object_get(c, "input"));
    json_decref(c);
    c = chat_of("{\"input\":\"Hi\"}", &e); // not streamed: no stream_options
    CHECK(c && !json_object_get(c, "stream_options") && !json_object_get(c, "max_tokens"));
    json_decref(c);
}

static void test_request_items(void) {
    oai_err e;
    json_t *c = chat_of(
        "{\"input\":["
        "{\"role\":\"developer\",\"content\":\"Use tools.\"},"
        "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"Weather \"},"
        "{\"type\":\"input_text\",\"text\":\"in Paris?\"}]},"
        "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[]},"
        "{\"type\":\"message\",\"role\":\"assistant\",\"id\":\"msg_1\",\"status\":\"completed\","
        "\"content\":[{\"type\":\"output_text\",\"text\":\"Checking.\",\"annotations\":[]}]},"
        "{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"wx\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"},"
        "{\"type\":\"function_call\",\"call_id\":\"c2\",\"name\":\"tz\",\"arguments\":\"{}\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"sunny\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"c2\",\"output\":[{\"type\":\"input_text\",\"text\":\"CET\"}]},"
        "{\"type\":\"function_call\",\"call_id\":\"c3\",\"name\":\"wx\",\"arguments\":\"{}\"},"
        "{\"role\":\"system\",\"content\":\"s\"}]}",
        &e);
    CHECK_MSG(c != NULL, "%s", e.msg);
    CHECK(eq(json_object_get(c, "messages"),
             "[{\"role\":\"developer\",\"content\":\"Use tools.\"},"
             "{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
             "{\"role\":\"assistant\",\"content\":\"Checking.\",\"tool_calls\":["
             "{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"wx\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}},"
             "{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"tz\",\"arguments\":\"{}\"}}]},"
             "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"sunny\"},"
             "{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"content\":\"CET\"},"
             "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":["
             "{\"id\":\"c3\",\"type\":\"function\",\"function\":{\"name\":\"wx\",\"arguments\":\"{}\"}}]},"
             "{\"role\":\"system\",\"content\":\"s\"}]"));
    json_decref(c);
}

static void test_request_tools_format(void) {
    oai_err e;
    json_t *c = chat_of("{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"wx\",\"description\":\"d\","
                        "\"parameters\":{\"type\":\"object\"},\"strict\":true}],"
                        "\"tool_choice\":{\"type\":\"function\",\"name\":\"wx\"},"
                        "\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"S\",\"schema\":{\"type\":\"object\"},"
                        "\"strict\":true},\"verbosity\":\"medium\"}}", &e);
    CHECK_MSG(c != NULL, "%s", e.msg);
    CHECK(eq(json_object_get(c, "tools"), "[{\"type\":\"function\",\"function\":{\"name\":\"wx\",\"description\":\"d\","
                                          "\"parameters\":{\"type\":\"object\"},\"strict\":true}}]"));
    CHECK(eq(json_object_get(c, "tool_choice"), "{\"type\":\"function\",\"function\":{\"name\":\"wx\"}}"));
    CHECK(eq(json_object_get(c, "response_format"), "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"S\","
                                                    "\"schema\":{\"type\":\"object\"},\"strict\":true}}"));
    json_decref(c);
    c = chat_of("{\"input\":\"x\",\"tool_choice\":\"required\",\"text\":{\"format\":{\"type\":\"json_object\"}}}", &e);
    CHECK(c && eq(json_object_get(c, "tool_choice"), "\"required\"") &&
          eq(json_object_get(c, "response_format"), "{\"type\":\"json_object\"}"));
    json_decref(c);
}

// Each body is refused with a 400 whose param is `param` and whose message contains `says`.
static void refused(const char *body, const char *param, const char *says) {
    oai_err e;
    json_t *c = chat_of(body, &e);
    CHECK_MSG(!c && e.status == 400 && !strcmp(e.param, param) && strstr(e.msg, says),
              "%s → status %d param '%s' msg '%s'", body, e.status, e.param, e.msg);
    json_decref(c);
}

static void test_refusals(void) {
    refused("{\"input\":\"x\",\"previous_response_id\":\"resp_1\"}", "previous_response_id", "does not store responses");
    refused("{\"input\":\"x\",\"conversation\":\"c\"}", "conversation", "conversations");
    refused("{\"input\":\"x\",\"frobnicate\":1}", "frobnicate", "Unrecognized");
    refused("{\"input\":\"x\",\"messages\":[]}", "messages", "Unrecognized");
    refused("{\"input\":\"x\",\"tools\":[{\"type\":\"web_search\"}]}", "tools", "'web_search'");
    refused("{\"input\":\"x\",\"tool_choice\":{\"type\":\"file_search\"}}", "tool_choice", "'file_search'");
    refused("{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"image_url\":\"u\"}]}]}",
            "input[0].content", "'input_image'");
    refused("{\"input\":[{\"type\":\"item_reference\",\"id\":\"msg_1\"}]}", "input[0]", "stored");
    refused("{\"input\":[{\"type\":\"web_search_call\"}]}", "input[0]", "'web_search_call'");
    refused("{\"input\":[{\"role\":\"tool\",\"content\":\"x\"}]}", "input[0]", "role");
    refused("{\"input\":[{\"type\":\"function_call\",\"name\":\"f\"}]}", "input[0]", "call_id");
    refused("{\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c\"}]}", "input[0].output", "Missing");
    refused("{\"input\":\"x\",\"include\":[\"message.output_text.logprobs\"]}", "include", "logprobs");
    refused("{\"input\":\"x\",\"background\":true}", "background", "background");
    refused("{\"input\":\"x\",\"max_output_tokens\":0}", "max_output_tokens", "positive");
    refused("{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"yaml\"}}}", "text.format.type", "json_schema");
    refused("{\"input\":\"x\",\"text\":{\"verbosity\":\"high\"}}", "text.verbosity", "verbosity");
    refused("{\"input\":\"x\",\"reasoning\":{\"budget\":3}}", "reasoning", "budget");
    refused("{\"input\":\"x\",\"metadata\":\"m\"}", "metadata", "an object");
    refused("{\"input\":\"x\",\"instructions\":3}", "instructions", "string");
    refused("{\"model\":\"m\"}", "input", "Missing");
    refused("{\"input\":[]}", "input", "at least one");
    // an explicit null is the default: accepted
    oai_err e;
    json_t *c = chat_of("{\"input\":\"x\",\"previous_response_id\":null,\"store\":true}", &e);
    CHECK(c != NULL);
    json_decref(c);
}

// --- the Response ------------------------------------------------------------------------------------------

static void test_from_chat(void) {
    json_t *in = J("{\"model\":\"m\",\"input\":\"x\",\"instructions\":\"I\",\"max_output_tokens\":5,"
                   "\"tools\":[{\"type\":\"function\",\"name\":\"wx\"}],\"tool_choice\":\"required\"}");
    json_t *chat = J("{\"id\":\"chatcmpl-abc\",\"object\":\"chat.completion\",\"created\":123,\"model\":\"smol\","
                     "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Hello\","
                     "\"reasoning_content\":\"think\"},\"finish_reason\":\"length\"}],"
                     "\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5,\"total_tokens\":15,"
                     "\"prompt_tokens_details\":{\"cached_tokens\":4}}}");
    json_t *r = wire_responses_ops.from_chat(chat, in);
    CHECK(eq(json_object_get(r, "id"), "\"resp_abc\""));
    CHECK(eq(json_object_get(r, "object"), "\"response\""));
    CHECK(eq(json_object_get(r, "created_at"), "123"));
    CHECK(eq(json_object_get(r, "model"), "\"smol\""));
    CHECK(eq(json_object_get(r, "status"), "\"incomplete\""));
    CHECK(eq(json_object_get(r, "incomplete_details"), "{\"reason\":\"max_output_tokens\"}"));
    CHECK(eq(json_object_get(r, "instructions"), "\"I\""));
    CHECK(eq(json_object_get(r, "max_output_tokens"), "5"));
    CHECK(eq(json_object_get(r, "tool_choice"), "\"required\""));
    CHECK(eq(json_object_get(r, "tools"), "[{\"type\":\"function\",\"name\":\"wx\"}]"));
    CHECK(eq(json_object_get(r, "parallel_tool_calls"), "true"));
    CHECK(eq(json_object_get(r, "error"), "null") && eq(json_object_get(r, "store"), "false"));
    CHECK(!json_object_get(r, "output_text")); // the SDK computes it
    CHECK(eq(json_object_get(r, "output"),
             "[{\"type\":\"reasoning\",\"id\":\"rs_abc\",\"status\":\"completed\",\"summary\":[],"
             "\"content\":[{\"type\":\"reasoning_text\",\"text\":\"think\"}]},"
             "{\"type\":\"message\",\"id\":\"msg_abc\",\"status\":\"incomplete\",\"role\":\"assistant\","
             "\"content\":[{\"type\":\"output_text\",\"text\":\"Hello\",\"annotations\":[]}]}]"));
    CHECK(eq(json_object_get(r, "usage"), "{\"input_tokens\":10,\"input_tokens_details\":{\"cached_tokens\":4},"
                                          "\"output_tokens\":5,\"output_tokens_details\":{\"reasoning_tokens\":0},"
                                          "\"total_tokens\":15}"));
    json_decref(r), json_decref(chat);
    chat = J("{\"id\":\"chatcmpl-t\",\"created\":1,\"model\":\"smol\",\"choices\":[{\"index\":0,\"message\":"
             "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
             "\"function\":{\"name\":\"wx\",\"arguments\":\"{\\\"c\\\":1}\"}}]},\"finish_reason\":\"tool_calls\"}]}");
    r = wire_responses_ops.from_chat(chat, in);
    CHECK(eq(json_object_get(r, "status"), "\"completed\"") && eq(json_object_get(r, "incomplete_details"), "null"));
    CHECK(eq(json_object_get(r, "output"), "[{\"type\":\"function_call\",\"id\":\"fc_t_0\",\"call_id\":\"call_1\","
                                           "\"name\":\"wx\",\"arguments\":\"{\\\"c\\\":1}\",\"status\":\"completed\"}]"));
    CHECK(eq(json_object_get(r, "usage"), "null"));
    json_decref(r), json_decref(chat), json_decref(in);
}

// --- the stream --------------------------------------------------------------------------------------------

// The SSE text of out parsed into [{event data}] (checks the framing: "event: X" matches data.type, and the
// sequence numbers count from 0). Drains out.
static json_t *events_of(struct evbuffer *out) {
    size_t n = evbuffer_get_length(out);
    char *s = malloc(n + 1);
    evbuffer_remove(out, s, n);
    s[n] = 0;
    json_t *evs = json_array();
    char *p = s;
    for (char *end; (end = strstr(p, "\n\n")); p = end + 2) {
        *end = 0;
        char name[96];
        char *nl = strchr(p, '\n');
        CHECK_MSG(nl && !strncmp(p, "event: ", 7) && !strncmp(nl + 1, "data: ", 6), "bad frame: %s", p);
        if (!nl) break;
        snprintf(name, sizeof name, "%.*s", (int)(nl - p - 7), p + 7);
        json_t *d = J(nl + 7);
        CHECK_MSG(d && !strcmp(json_string_value(json_object_get(d, "type")), name), "event %s type mismatch", name);
        CHECK_EQ_INT(json_integer_value(json_object_get(d, "sequence_number")), (long)json_array_size(evs));
        json_array_append_new(evs, d);
    }
    CHECK_MSG(!*p, "trailing bytes: %s", p);
    free(s);
    return evs;
}

// "a,b,c": the events' types in order.
static char *types_of(const json_t *evs) {
    static char buf[4096];
    size_t k, off = 0;
    json_t *ev;
    buf[0] = 0;
    json_array_foreach(evs, k, ev)
        off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", k ? "," : "", json_string_value(json_object_get(ev, "type")));
    return buf;
}

// Feeds the chunks (a JSON array text) through a stream, then stream_end; returns the parsed events.
static json_t *run_stream(const char *in_text, const char *chunks_text, const oai_err *err) {
    json_t *in = J(in_text), *chunks = J(chunks_text), *ch;
    struct evbuffer *out = evbuffer_new();
    wire_stream *st = wire_responses_ops.stream_new(in);
    size_t k;
    json_array_foreach(chunks, k, ch) wire_responses_ops.stream_chunk(st, ch, out);
    if (err) wire_responses_ops.stream_error(st, err, out);
    wire_responses_ops.stream_end(st, out);
    wire_responses_ops.stream_free(st);
    json_t *evs = events_of(out);
    evbuffer_free(out), json_decref(chunks), json_decref(in);
    return evs;
}

#define CHUNK(delta, fr) "{\"id\":\"chatcmpl-s\",\"object\":\"chat.completion.chunk\",\"created\":9,\"model\":\"smol\"," \
                         "\"choices\":[{\"index\":0,\"delta\":" delta ",\"finish_reason\":" fr "}]}"
#define USAGE "{\"id\":\"chatcmpl-s\",\"created\":9,\"model\":\"smol\",\"choices\":[],\"usage\":{\"prompt_tokens\":3," \
              "\"completion_tokens\":2,\"total_tokens\":5,\"prompt_tokens_details\":{\"cached_tokens\":0}}}"

static void test_stream_text(void) {
    json_t *evs = run_stream("{\"input\":\"x\",\"stream\":true}",
                             "[" CHUNK("{\"role\":\"assistant\",\"content\":\"\"}", "null") ","
                             CHUNK("{\"content\":\"Hel\"}", "null") "," CHUNK("{\"content\":\"lo\"}", "null") ","
                             CHUNK("{}", "\"stop\"") "," USAGE "]", NULL);
    CHECK_MSG(!strcmp(types_of(evs), "response.created,response.in_progress,response.output_item.added,"
                                     "response.content_part.added,response.output_text.delta,response.output_text.delta,"
                                     "response.output_text.done,response.content_part.done,response.output_item.done,"
                                     "response.completed"), "%s", types_of(evs));
    json_t *created = json_object_get(json_array_get(evs, 0), "response");
    CHECK(eq(json_object_get(created, "status"), "\"in_progress\"") && eq(json_object_get(created, "id"), "\"resp_s\""));
    CHECK(eq(json_object_get(json_array_get(evs, 4), "delta"), "\"Hel\""));
    CHECK(eq(json_object_get(json_array_get(evs, 4), "item_id"), "\"msg_s\""));
    CHECK(eq(json_object_get(json_array_get(evs, 6), "text"), "\"Hello\""));
    json_t *fin = json_object_get(json_array_get(evs, 9), "response");
    CHECK(eq(json_object_get(fin, "status"), "\"completed\""));
    CHECK(eq(json_object_get(fin, "output"), "[{\"type\":\"message\",\"id\":\"msg_s\",\"status\":\"completed\","
                                             "\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\","
                                             "\"text\":\"Hello\",\"annotations\":[]}]}]"));
    CHECK(eq(json_object_get(json_object_get(fin, "usage"), "total_tokens"), "5"));
    json_decref(evs);
}

static void test_stream_reasoning_cut(void) {
    json_t *evs = run_stream("{\"input\":\"x\"}",
                             "[" CHUNK("{\"role\":\"assistant\",\"content\":\"\"}", "null") ","
                             CHUNK("{\"reasoning_content\":\"hm\"}", "null") ","
                             CHUNK("{\"content\":\"A\"}", "null") "," CHUNK("{}", "\"length\"") "," USAGE "]", NULL);
    CHECK_MSG(!strcmp(types_of(evs), "response.created,response.in_progress,response.output_item.added,"
                                     "response.content_part.added,response.reasoning_text.delta,"
                                     "response.reasoning_text.done,response.content_part.done,response.output_item.done,"
                                     "response.output_item.added,response.content_part.added,response.output_text.delta,"
                                     "response.output_text.done,response.content_part.done,response.output_item.done,"
                                     "response.incomplete"), "%s", types_of(evs));
    json_t *fin = json_object_get(json_array_get(evs, 14), "response");
    CHECK(eq(json_object_get(fin, "status"), "\"incomplete\""));
    CHECK(eq(json_object_get(fin, "incomplete_details"), "{\"reason\":\"max_output_tokens\"}"));
    CHECK(eq(json_object_get(json_array_get(json_object_get(fin, "output"), 0), "type"), "\"reasoning\""));
    CHECK(eq(json_object_get(json_array_get(json_object_get(fin, "output"), 1), "status"), "\"incomplete\""));
    CHECK(eq(json_object_get(json_array_get(evs, 10), "output_index"), "1"));
    json_decref(evs);
}

static void test_stream_tool_calls(void) {
    json_t *evs = run_stream(
        "{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"wx\"}]}",
        "[" CHUNK("{\"role\":\"assistant\",\"content\":\"\"}", "null") ","
        CHUNK("{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"wx\","
              "\"arguments\":\"\"}}]}", "null") ","
        CHUNK("{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"c\\\":\"}}]}", "null") ","
        CHUNK("{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"1}\"}}]}", "null") ","
        CHUNK("{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"tz\","
              "\"arguments\":\"\"}}]}", "null") ","
        CHUNK("{}", "\"tool_calls\"") "," USAGE "]", NULL);
    CHECK_MSG(!strcmp(types_of(evs), "response.created,response.in_progress,response.output_item.added,"
                                     "response.function_call_arguments.delta,response.function_call_arguments.delta,"
                                     "response.output_item.added,response.function_call_arguments.done,"
                                     "response.output_item.done,response.function_call_arguments.done,"
                                     "response.output_item.done,response.completed"), "%s", types_of(evs));
    CHECK(eq(json_object_get(json_array_get(evs, 6), "arguments"), "\"{\\\"c\\\":1}\""));
    CHECK(eq(json_object_get(json_array_get(evs, 6), "item_id"), "\"fc_s_0\""));
    json_t *fin = json_object_get(json_array_get(evs, 10), "response");
    CHECK(eq(json_object_get(fin, "output"),
             "[{\"type\":\"function_call\",\"id\":\"fc_s_0\",\"call_id\":\"call_a\",\"name\":\"wx\","
             "\"arguments\":\"{\\\"c\\\":1}\",\"status\":\"completed\"},"
             "{\"type\":\"function_call\",\"id\":\"fc_s_1\",\"call_id\":\"call_b\",\"name\":\"tz\","
             "\"arguments\":\"\",\"status\":\"completed\"}]"));
    json_decref(evs);
}

static void test_stream_error(void) {
    oai_err e;
    oai_err_set(&e, 500, "server_error", NULL, NULL, "engine failed");
    json_t *evs = run_stream("{\"input\":\"x\"}",
                             "[" CHUNK("{\"role\":\"assistant\",\"content\":\"\"}", "null") ","
                             CHUNK("{\"content\":\"A\"}", "null") "]", &e);
    CHECK_MSG(!strcmp(types_of(evs), "response.created,response.in_progress,response.output_item.added,"
                                     "response.content_part.added,response.output_text.delta,error,response.failed"),
              "%s", types_of(evs));
    CHECK(eq(json_object_get(json_array_get(evs, 5), "message"), "\"engine failed\""));
    json_t *fin = json_object_get(json_array_get(evs, 6), "response");
    CHECK(eq(json_object_get(fin, "status"), "\"failed\""));
    CHECK(eq(json_object_get(fin, "error"), "{\"code\":\"server_error\",\"message\":\"engine failed\"}"));
    json_decref(evs);
    // an error before any chunk still gives a well-formed stream
    evs = run_stream("{\"input\":\"x\"}", "[]", &e);
    CHECK_MSG(!strcmp(types_of(evs), "response.created,response.in_progress,error,response.failed"), "%s", types_of(evs));
    json_decref(evs);
}

int main(void) {
    test_request_basic();
    test_request_items();
    test_request_tools_format();
    test_refusals();
    test_from_chat();
    test_stream_text();
    test_stream_reasoning_cut();
    test_stream_tool_calls();
    test_stream_error();
    TEST_MAIN_END();
}
