// Tool calling formats per template family (the SmolLM2 integration tests cover Hermes end to end): the
// forced-call grammar accepts each family's call syntax, calls parse out of each family's output, and tool
// definitions / calls / results render into messages the family's template accepts.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram.h"
#include "server/oai.h"
#include "server/oai_tools.h"
#include "test_util.h"

static const char *BODY =
    "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":"
    "{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"21 C\"},{\"role\":\"user\",\"content\":\"And Rome?\"}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"weather\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"noop\"}}],\"tool_choice\":\"required\"}";

static int grammar_accepts(const char *gbnf, const char *text) {
    gram *g = NULL;
    gram_matcher *m = NULL;
    tc_err err = {0};
    if (gram_parse(gbnf, strlen(gbnf), NULL, &g, &err) || gram_matcher_new(g, NULL, &m, &err)) {
        fprintf(stderr, "grammar: %s\n", err.msg);
        return -1;
    }
    int ok = gram_matcher_accept_str(m, text, strlen(text)) == 0 && gram_matcher_can_end(m);
    gram_matcher_free(m);
    return ok;
}

static void check_family(oai_req *q, chat_family f, tool_fmt tf, const char *call_text, const char *in_prompt) {
    oai_err e = {0};
    char *gbnf = NULL;
    CHECK_MSG(oai_output_grammar(q, tf, &gbnf, &e) == 0 && gbnf, "%s: %s", chat_family_name(f), e.msg);
    if (gbnf) {
        CHECK_MSG(grammar_accepts(gbnf, call_text) == 1, "%s grammar rejects %s", chat_family_name(f), call_text);
        CHECK(grammar_accepts(gbnf, "Sure! It is sunny.") == 0);
    }
    free(gbnf);
    tool_parse_opts po = {.id_base = "call_x"};
    tool_parsed tp;
    CHECK(tool_fmt_parse(tf, call_text, strlen(call_text), &po, &tp) == 0);
    CHECK_MSG(tp.calls && json_array_size(tp.calls) == 1, "%s: no call parsed from %s", chat_family_name(f), call_text);
    json_t *fn = json_object_get(json_array_get(tp.calls, 0), "function");
    CHECK(fn && !strcmp(json_string_value(json_object_get(fn, "name")), "get_weather"));
    CHECK(fn && !strcmp(json_string_value(json_object_get(fn, "arguments")), "{\"city\":\"Rome\"}"));
    CHECK(tp.content == NULL);
    tool_parsed_free(&tp);
    CHECK(tool_fmt_parse(tf, "It is sunny.", 12, &po, &tp) == 0 && !tp.calls && tp.content);
    tool_parsed_free(&tp);
    char *out = NULL;
    // the conversation renders for the family
    chat_msg *msgs;
    char **owned;
    int n, n_owned;
    CHECK(oai_tools_messages(q, f, &msgs, &n, &owned, &n_owned, &e) == 0);
    tc_err err = {0};
    int rc = chat_render(f, NULL, msgs, n, 1, "", &out, &err);
    CHECK_MSG(rc == 0, "%s: %s", chat_family_name(f), err.msg);
    CHECK_MSG(out && strstr(out, in_prompt), "%s prompt lacks %s:\n%s", chat_family_name(f), in_prompt, out ? out : "");
    CHECK_MSG(out && strstr(out, "21 C"), "%s prompt lacks the tool result", chat_family_name(f));
    CHECK_MSG(out && strstr(out, "\"Paris\""), "%s prompt lacks the earlier call", chat_family_name(f));
    free(out);
    oai_tools_msgs_free(msgs, owned, n_owned);
}

int main(void) {
    oai_req q;
    oai_err e = {0};
    int rc = oai_parse(OAI_CHAT, BODY, strlen(BODY), &q, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc) TEST_MAIN_END();
    CHECK_EQ_INT(q.ext.n_tools, 2);
    CHECK_EQ_INT(q.ext.choice, OAI_TC_REQUIRED);
    check_family(&q, CHAT_CHATML, TOOL_FMT_HERMES, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>",
                 "<tools>\n{\"type\": \"function\"");
    check_family(&q, CHAT_LLAMA3, TOOL_FMT_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}",
                 "<|start_header_id|>ipython<|end_header_id|>");
    check_family(&q, CHAT_MISTRAL, TOOL_FMT_MISTRAL, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]",
                 "[AVAILABLE_TOOLS] [{\"type\": \"function\"");
    // a forced choice is one call unless parallel_tool_calls is true
    const char *two = "<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": "
                      "\"noop\", \"arguments\": {}}\n</tool_call>";
    char *gbnf = NULL;
    CHECK(oai_output_grammar(&q, TOOL_FMT_HERMES, &gbnf, &e) == 0 && gbnf && grammar_accepts(gbnf, two) == 0);
    free(gbnf);
    q.ext.parallel = 1; // as "parallel_tool_calls": true sets it
    CHECK(oai_output_grammar(&q, TOOL_FMT_HERMES, &gbnf, &e) == 0 && gbnf && grammar_accepts(gbnf, two) == 1);
    free(gbnf);
    oai_req_free(&q);
    // refusals
    static const char *bad[] = {
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"required\"}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
        "{\"name\":\"x\",\"strict\":true,\"schema\":{\"type\":\"string\",\"format\":\"hostname\"}}}}",
        "{\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        rc = oai_parse(OAI_CHAT, bad[i], strlen(bad[i]), &q, &e);
        CHECK_MSG(rc != 0 && e.status == 400, "accepted: %s", bad[i]);
        if (!rc) oai_req_free(&q);
    }
    // GBNF is not compiled while parsing (that is the server's worker's job, srv_grammar.c): a broken one
    // passes here, marked with the field its errors will name
    const char *later = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"grammar\":\"root ::= [\"}";
    rc = oai_parse(OAI_CHAT, later, strlen(later), &q, &e);
    CHECK_MSG(rc == 0 && q.ext.grammar && !strcmp(q.ext.grammar_param, "grammar"), "%s", e.msg);
    if (!rc) oai_req_free(&q);
    TEST_MAIN_END();
}
