// Tool-call formats (server/tool_fmt.h): the format each real template in tests/ref/chat-templates selects;
// for every format, the forced-call grammar accepts the format's calls (one, or several only when parallel)
// and refuses plain text, and the parser reads real-shaped outputs: one call, parallel calls with nested and
// non-ASCII arguments, text or reasoning before the call, and a call cut short (dropped, never content).
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram.h"
#include "server/tool_fmt.h"
#include "test_util.h"

#define DSB "<｜tool▁calls▁begin｜>"
#define DSE "<｜tool▁calls▁end｜>"
#define DCB "<｜tool▁call▁begin｜>"
#define DCE "<｜tool▁call▁end｜>"
#define DSP "<｜tool▁sep｜>"
#define KSB "<|tool_calls_section_begin|>"
#define KSE "<|tool_calls_section_end|>"
#define KCB "<|tool_call_begin|>functions.get_weather:"
#define KCA "<|tool_call_argument_begin|>"
#define KCE "<|tool_call_end|>"
#define GLM_CALL1 "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Rome</arg_value>\n</tool_call>"
#define MM_CALL1 "<invoke name=\"get_weather\">\n<parameter name=\"city\">Rome</parameter>\n</invoke>\n"
#define SEED_CALL1                                                                                           \
    "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Rome</parameter>\n</function>\n</"            \
    "seed:tool_call>"

// The format each template selects by its own markers, wherever they appear ("none": the template has no
// tool-call syntax of the table's; the family's format applies). MiniMax M3 writes "]<]minimax[>[<tool_call>"
// and its invoke elements: detected as hermes, whose parser does not read that (a format not in the table).
// Kimi K3's tool markup and DeepSeek V3.2/V4's are not in the table either. LFM2-8B-A1B and LFM2.5-Instruct
// show no call syntax, so nothing tells their models' lfm2 calls apart: "none".
static const struct {
    const char *file, *fmt;
} TEMPLATES[] = {
    {"Apertus-8B-Instruct.jinja", "none"},
    {"Apriel-1.6-15b-Thinker-fixed.jinja", "none"},
    {"Bielik-11B-v3.0-Instruct.jinja", "hermes"},
    {"ByteDance-Seed-OSS.jinja", "seed-oss"},
    {"Cohere2MoE.jinja", "command-r7b"},
    {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", "command-r"},
    {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "command-r7b"},
    {"GLM-4.6.jinja", "glm-4.5"},
    {"GLM-4.7-Flash.jinja", "glm-4.5"},
    {"GigaChat3-10B-A1.8B.jinja", "none"},
    {"GigaChat3.1-10B-A1.8B.jinja", "none"},
    {"HuggingFaceTB-SmolLM3-3B.jinja", "none"},
    {"Kimi-K2-Instruct.jinja", "kimi-k2"},
    {"Kimi-K2-Thinking.jinja", "kimi-k2"},
    {"Kimi-K3.jinja", "none"},
    {"LFM2-8B-A1B.jinja", "none"},
    {"LFM2.5-8B-A1B.jinja", "lfm2"},
    {"LFM2.5-Instruct.jinja", "none"},
    {"MiMo-VL.jinja", "hermes"},
    {"MiniMax-M1.jinja", "none"},
    {"MiniMax-M2.jinja", "minimax-m2"},
    {"MiniMax-M3.jinja", "hermes"},
    {"Mistral-Small-3.2-24B-Instruct-2506.jinja", "mistral-args"},
    {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", "qwen3-coder"},
    {"NVIDIA-Nemotron-Nano-v2.jinja", "none"},
    {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "hermes"},
    {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "hermes"},
    {"Qwen-QwQ-32B.jinja", "hermes"},
    {"Qwen-Qwen2.5-7B-Instruct.jinja", "hermes"},
    {"Qwen-Qwen3-0.6B.jinja", "hermes"},
    {"Qwen3-Coder.jinja", "qwen3-coder"},
    {"Qwen3.5-4B.jinja", "qwen3-coder"},
    {"Reka-Edge.jinja", "hermes"},
    {"Spark2.5.jinja", "glm-4.5"},
    {"StepFun3.5-Flash.jinja", "qwen3-coder"},
    {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "deepseek-r1"},
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "deepseek-r1"},
    {"deepseek-ai-DeepSeek-V3.1.jinja", "deepseek-v3.1"},
    {"deepseek-ai-DeepSeek-V3.2.jinja", "none"},
    {"deepseek-ai-DeepSeek-V4-Flash-0731.jinja", "none"},
    {"deepseek-ai-DeepSeek-V4.jinja", "none"},
    {"fireworks-ai-llama-3-firefunction-v2.jinja", "none"},
    {"google-gemma-2-2b-it.jinja", "none"},
    {"google-gemma-4-31B-it-interleaved.jinja", "none"},
    {"google-gemma-4-31B-it.jinja", "none"},
    {"ibm-granite-granite-3.3-2B-Instruct.jinja", "granite"},
    {"ibm-granite-granite-4.0.jinja", "hermes"},
    {"ibm-granite-granite-4.1.jinja", "hermes"},
    {"inclusionai-ling-3.0-flash.jinja", "glm-4.5"},
    {"llama-cpp-deepseek-r1.jinja", "deepseek-r1"},
    {"llama-cpp-rwkv-world.jinja", "none"},
    {"meetkai-functionary-medium-v3.1.jinja", "functionary-v3.1"},
    {"meetkai-functionary-medium-v3.2.jinja", "functionary-v3.2"},
    {"meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3"},
    {"meta-llama-Llama-3.2-3B-Instruct.jinja", "llama3"},
    {"meta-llama-Llama-3.3-70B-Instruct.jinja", "llama3"},
    {"microsoft-Phi-3.5-mini-instruct.jinja", "none"},
    {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", "mistral-args"},
    {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "mistral"},
    {"moonshotai-Kimi-K2.jinja", "kimi-k2"},
    {"muse-glimmer.jinja", "none"},
    {"openai-gpt-oss-120b.jinja", "gpt-oss"},
    {"openbmb-MiniCPM5-1B.jinja", "none"},
    {"poolside-Laguna-S-2.1.jinja", "glm-4.5"},
    {"poolside-Laguna-XS-2.1.jinja", "glm-4.5"},
    {"poolside-Laguna-XS.2.jinja", "glm-4.5"},
    {"tencent-Hy3.jinja", "none"},
    {"unsloth-Apriel-1.5.jinja", "hermes"},
    {"unsloth-mistral-Devstral-Small-2507.jinja", "mistral-args"},
    {"upstage-Solar-Open-100B.jinja", "none"},
};

// W1: get_weather {"city": "Rome"}; W2: get_weather {"city": "Zürich", "opts": {"units": ["c"]}}.
#define A1 "{\"city\": \"Rome\"}"
#define A2 "{\"city\": \"Zürich\", \"opts\": {\"units\": [\"c\"]}}"
#define J1 "{\"city\":\"Rome\"}"
#define J2 "{\"city\":\"Zürich\",\"opts\":{\"units\":[\"c\"]}}"

typedef struct {
    tool_fmt f;
    const char *one, *two; // one call; the two calls W1 then W2
    const char *before;    // prefix written before `one`; its text is content (or reasoning: gpt-oss)
} fmt_case;

static const fmt_case CASES[] = {
    {TOOL_FMT_HERMES, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " A1 "}\n</tool_call>",
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " A1 "}\n</tool_call>\n<tool_call>\n{\"name\": "
     "\"get_weather\", \"arguments\": " A2 "}\n</tool_call>",
     "I will check.\n"},
    {TOOL_FMT_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": " A1 "}",
     "{\"name\": \"get_weather\", \"parameters\": " A1 "}\n{\"name\": \"get_weather\", \"parameters\": " A2
     "}",
     "I will check.<|python_tag|>"},
    {TOOL_FMT_MISTRAL, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": " A1 "}]",
     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": " A1
     "}, {\"name\": \"get_weather\", \"arguments\": " A2 "}]",
     "I will check.\n"},
    {TOOL_FMT_MISTRAL_ARGS, "[TOOL_CALLS]get_weather[ARGS]" A1,
     "[TOOL_CALLS]get_weather[ARGS]" A1 "[TOOL_CALLS]get_weather[ARGS]" A2, "I will check.\n"},
    {TOOL_FMT_QWEN3_CODER,
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>\n</tool_call>",
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>\n</tool_call>\n"
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nZürich\n</parameter>\n<parameter=opts>\n"
     "{\"units\": [\"c\"]}\n</parameter>\n</function>\n</tool_call>",
     "I will check.\n"},
    {TOOL_FMT_DEEPSEEK_R1, DSB DCB "function" DSP "get_weather\n```json\n" A1 "\n```" DCE DSE,
     DSB DCB "function" DSP "get_weather\n```json\n" A1 "\n```" DCE "\n" DCB "function" DSP
             "get_weather\n```json\n" A2 "\n```" DCE DSE,
     "I will check.\n"},
    {TOOL_FMT_DEEPSEEK_V31, DSB DCB "get_weather" DSP A1 DCE DSE,
     DSB DCB "get_weather" DSP A1 DCE DCB "get_weather" DSP A2 DCE DSE, "I will check.\n"},
    {TOOL_FMT_FUNCTIONARY_V31, "<function=get_weather>" A1 "</function>",
     "<function=get_weather>" A1 "</function>\n<function=get_weather>" A2 "</function>", "I will check.\n"},
    {TOOL_FMT_FUNCTIONARY_V32, "get_weather\n" A1, "get_weather\n" A1 "\n>>>get_weather\n" A2,
     "all\nI will check.\n>>>"},
    {TOOL_FMT_COMMAND_R, "Action:\n```json\n[{\"tool_name\": \"get_weather\", \"parameters\": " A1 "}]\n```",
     "Action:\n```json\n[{\"tool_name\": \"get_weather\", \"parameters\": " A1
     "}, {\"tool_name\": \"get_weather\", "
     "\"parameters\": " A2 "}]\n```",
     "I will check.\n"},
    {TOOL_FMT_COMMAND_R7B,
     "<|START_ACTION|>[{\"tool_name\": \"get_weather\", \"parameters\": " A1 "}]<|END_ACTION|>",
     "<|START_ACTION|>[{\"tool_name\": \"get_weather\", \"parameters\": " A1
     "}, {\"tool_name\": \"get_weather\", "
     "\"parameters\": " A2 "}]<|END_ACTION|>",
     "I will check.\n"},
    {TOOL_FMT_GRANITE, "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": " A1 "}]",
     "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": " A1
     "}, {\"name\": \"get_weather\", \"arguments\": " A2 "}]",
     "I will check.\n"},
    {TOOL_FMT_HARMONY,
     "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" A1 "<|call|>",
     "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" A1
     "<|call|><|start|>assistant"
     "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" A2 "<|call|>",
     "<|channel|>analysis<|message|>I will check.<|end|><|start|>assistant"},
    {TOOL_FMT_GLM45, GLM_CALL1,
     GLM_CALL1
     "\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Zürich</arg_value>\n<arg_key>opts"
     "</arg_key>\n<arg_value>{\"units\": [\"c\"]}</arg_value>\n</tool_call>",
     "I will check.\n"},
    {TOOL_FMT_KIMI_K2, KSB KCB "0" KCA A1 KCE KSE, KSB KCB "0" KCA A1 KCE KCB "1" KCA A2 KCE KSE,
     "I will check.\n"},
    {TOOL_FMT_MINIMAX_M2, "<minimax:tool_call>\n" MM_CALL1 "</minimax:tool_call>",
     "<minimax:tool_call>\n" MM_CALL1
     "<invoke name=\"get_weather\">\n<parameter name=\"city\">Zürich</parameter>\n"
     "<parameter name=\"opts\">{\"units\": [\"c\"]}</parameter>\n</invoke>\n</minimax:tool_call>",
     "I will check.\n"},
    {TOOL_FMT_SEED_OSS, SEED_CALL1,
     SEED_CALL1
     "\n<seed:tool_call>\n<function=get_weather>\n<parameter=city>Zürich</parameter>\n<parameter=opts>"
     "{\"units\": [\"c\"]}</parameter>\n</function>\n</seed:tool_call>",
     "I will check.\n"},
    {TOOL_FMT_LFM2, "<|tool_call_start|>[get_weather(city=\"Rome\")]<|tool_call_end|>",
     "<|tool_call_start|>[get_weather(city=\"Rome\"), get_weather(city=\"Zürich\", opts={\"units\": "
     "[\"c\"]})]"
     "<|tool_call_end|>",
     "I will check.\n"},
};

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":"
    "{\"city\":{\"type\":\"string\"},\"opts\":{\"type\":\"object\"}},\"required\":[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"noop\"}}]";

static int accepts(const char *gbnf, const char *text) {
    gram *g = NULL;
    gram_matcher *m = NULL;
    tc_err err = {0};
    if (gram_parse(gbnf, strlen(gbnf), NULL, &g, &err) || gram_matcher_new(g, NULL, &m, &err)) {
        fprintf(stderr, "grammar: %s\n%s\n", err.msg, gbnf);
        gram_free(g);
        return -1;
    }
    int ok = gram_matcher_accept_str(m, text, strlen(text)) == 0 && gram_matcher_can_end(m);
    gram_matcher_free(m);
    return ok;
}

static char *grammar_of(tool_fmt f, const json_t *tools, int only, int parallel) {
    tool_gram_fn fns[2];
    int n = 0;
    for (size_t i = 0; i < json_array_size(tools); i++) {
        if (only >= 0 && (int)i != only) continue;
        json_t *fn = json_object_get(json_array_get(tools, i), "function");
        fns[n++] = (tool_gram_fn){json_string_value(json_object_get(fn, "name")),
                                  json_object_get(fn, "parameters"), 0};
    }
    char *g = NULL;
    tc_err err = {0};
    CHECK_MSG(tool_fmt_grammar(f, fns, n, parallel, &g, &err) == 0, "%s: %s", tool_fmt_name(f), err.msg);
    return g;
}

static void check_call(const char *what, const json_t *calls, size_t i, const char *args) {
    json_t *fn = json_object_get(json_array_get(calls, i), "function");
    const char *name = json_string_value(json_object_get(fn, "name")),
               *a = json_string_value(json_object_get(fn, "arguments"));
    CHECK_MSG(name && !strcmp(name, "get_weather"), "%s: call %zu name %s", what, i, name ? name : "(none)");
    CHECK_MSG(a && !strcmp(a, args), "%s: call %zu arguments %s, want %s", what, i, a ? a : "(none)", args);
}

static void parse(tool_fmt f, const char *text, size_t len, int reasoning, const json_t *tools,
                  tool_parsed *tp) {
    tool_parse_opts o = {.id_base = "call_t", .reasoning = reasoning, .tools = tools};
    CHECK(tool_fmt_parse(f, text, len, &o, tp) == 0);
}

static void check_format(const fmt_case *c, const json_t *tools) {
    const char *nm = tool_fmt_name(c->f);
    char what[160];
    tool_parsed tp;
    // grammar: one call (not two, not text) unless parallel
    char *g1 = grammar_of(c->f, tools, -1, 0), *g2 = grammar_of(c->f, tools, -1, 1);
    if (g1 && g2) {
        CHECK_MSG(accepts(g1, c->one) == 1, "%s grammar rejects %s", nm, c->one);
        CHECK_MSG(accepts(g1, c->two) == 0, "%s grammar (one call) accepts two calls", nm);
        CHECK_MSG(accepts(g2, c->two) == 1, "%s grammar (parallel) rejects %s", nm, c->two);
        CHECK_MSG(accepts(g1, "It is sunny.") == 0, "%s grammar accepts text", nm);
    }
    free(g1), free(g2);
    // one call
    snprintf(what, sizeof what, "%s one", nm);
    parse(c->f, c->one, strlen(c->one), 0, tools, &tp);
    CHECK_MSG(json_array_size(tp.calls) == 1, "%s: %zu calls", what, json_array_size(tp.calls));
    check_call(what, tp.calls, 0, J1);
    CHECK_MSG(!tp.content, "%s: content %s", what, tp.content);
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(tp.calls, 0), "id")), "call_t_0"));
    tool_parsed_free(&tp);
    // parallel calls, nested and non-ASCII arguments
    snprintf(what, sizeof what, "%s two", nm);
    parse(c->f, c->two, strlen(c->two), 0, tools, &tp);
    CHECK_MSG(json_array_size(tp.calls) == 2, "%s: %zu calls", what, json_array_size(tp.calls));
    check_call(what, tp.calls, 0, J1);
    check_call(what, tp.calls, 1, J2);
    CHECK_MSG(!tp.content, "%s: content %s", what, tp.content);
    tool_parsed_free(&tp);
    // text before the call
    char buf[1024];
    snprintf(what, sizeof what, "%s text before", nm);
    snprintf(buf, sizeof buf, "%s%s", c->before, c->one);
    parse(c->f, buf, strlen(buf), 0, tools, &tp);
    CHECK_MSG(json_array_size(tp.calls) == 1, "%s: %zu calls", what, json_array_size(tp.calls));
    const char *said = c->f == TOOL_FMT_HARMONY ? tp.reasoning : tp.content;
    CHECK_MSG(said && !strcmp(said, "I will check."), "%s: got '%s'", what, said ? said : "(none)");
    tool_parsed_free(&tp);
    // reasoning first
    if (c->f != TOOL_FMT_HARMONY && c->f != TOOL_FMT_FUNCTIONARY_V32) {
        snprintf(what, sizeof what, "%s reasoning", nm);
        snprintf(buf, sizeof buf, "<think>\nLet me think.\n</think>\n\n%s", c->one);
        parse(c->f, buf, strlen(buf), 1, tools, &tp);
        CHECK_MSG(json_array_size(tp.calls) == 1, "%s: %zu calls", what, json_array_size(tp.calls));
        CHECK_MSG(tp.reasoning && !strcmp(tp.reasoning, "Let me think."), "%s: %s", what, tp.reasoning);
        CHECK_MSG(!tp.content, "%s: content %s", what, tp.content);
        tool_parsed_free(&tp);
        // the prompt opened <think> (DeepSeek R1): reasoning up to </think>, or none when it never closes
        tool_parse_opts o = {.id_base = "call_t", .reasoning = 1, .in_think = 1, .tools = tools};
        CHECK(tool_fmt_parse(c->f, buf + 8, strlen(buf + 8), &o, &tp) == 0);
        CHECK_MSG(json_array_size(tp.calls) == 1 && tp.reasoning && !strcmp(tp.reasoning, "Let me think."),
                  "%s: in think", what);
        tool_parsed_free(&tp);
        CHECK(tool_fmt_parse(c->f, c->one, strlen(c->one), &o, &tp) == 0);
        CHECK_MSG(json_array_size(tp.calls) == 1 && !tp.reasoning, "%s: forced call after an open <think>",
                  what);
        tool_parsed_free(&tp);
    }
    // cut inside the second call: the first stays a call, the markup of the second is not content
    snprintf(what, sizeof what, "%s cut", nm);
    const char *cut = strstr(c->two, "Zür");
    parse(c->f, c->two, (size_t)(cut + 3 - c->two), 0, tools, &tp);
    CHECK_MSG(json_array_size(tp.calls) == 1, "%s: %zu calls", what, json_array_size(tp.calls));
    check_call(what, tp.calls, 0, J1);
    CHECK_MSG(!tp.content, "%s: content %s", what, tp.content);
    tool_parsed_free(&tp);
    // every cut of the two calls: complete calls only, never markup in content
    for (size_t i = 0, n = strlen(c->two); i <= n; i++) {
        parse(c->f, c->two, i, 0, tools, &tp);
        CHECK_MSG(!tp.content, "%s cut at %zu: content '%s'", nm, i, tp.content);
        CHECK_MSG(json_array_size(tp.calls) <= 2, "%s cut at %zu", nm, i);
        tool_parsed_free(&tp);
    }
    // plain text is content
    parse(c->f, "It is sunny.", 12, 0, tools, &tp);
    CHECK_MSG(!tp.calls && tp.content && !strcmp(tp.content, "It is sunny."), "%s: plain text", nm);
    tool_parsed_free(&tp);
}

// A function without parameters is called with exactly {}.
static void check_no_params(const json_t *tools) {
    char *g = grammar_of(TOOL_FMT_HERMES, tools, 1, 0);
    if (!g) return;
    CHECK(accepts(g, "<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>") == 1);
    CHECK(accepts(g, "<tool_call>\n{\"name\": \"noop\", \"arguments\": {\"a\": 1}}\n</tool_call>") == 0);
    CHECK(accepts(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " A1 "}\n</tool_call>") == 0);
    free(g);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) free(s), s = NULL;
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

static void check_detection(void) {
    for (size_t i = 0; i < sizeof TEMPLATES / sizeof *TEMPLATES; i++) {
        char path[256];
        snprintf(path, sizeof path, "tests/ref/chat-templates/%s", TEMPLATES[i].file);
        char *src = slurp(path);
        CHECK_MSG(src, "cannot read %s", path);
        if (!src) continue;
        tool_fmt f = tool_fmt_detect(src, TOOL_FMT_COUNT);
        const char *got = f == TOOL_FMT_COUNT ? "none" : tool_fmt_name(f);
        CHECK_MSG(!strcmp(got, TEMPLATES[i].fmt), "%s: %s, want %s", TEMPLATES[i].file, got,
                  TEMPLATES[i].fmt);
        free(src);
    }
    // every template of the folder has its expected format here
    DIR *d = opendir("tests/ref/chat-templates");
    CHECK(d != NULL);
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t n = strlen(e->d_name), known = 0;
        if (n < 6 || strcmp(e->d_name + n - 6, ".jinja")) continue;
        for (size_t i = 0; i < sizeof TEMPLATES / sizeof *TEMPLATES; i++)
            known += !strcmp(TEMPLATES[i].file, e->d_name);
        CHECK_MSG(known == 1, "%s: no expected tool-call format in TEMPLATES", e->d_name);
    }
    if (d) closedir(d);
    for (int f = 0; f < TOOL_FMT_COUNT; f++)
        CHECK_EQ_INT(tool_fmt_from_name(tool_fmt_name((tool_fmt)f)), f);
}

// LFM2's values as the model writes them: Python literals (quotes, True/None, escapes), or JSON.
static void check_pythonic(const json_t *tools) {
    static const char *const IN[][2] = {
        {"<|tool_call_start|>[get_weather(city='Rome', opts={'units': ['c'], 'n': -1.5}, a=True, b=None, "
         "c=\"it's\", d='\\u00fc\\n')]<|tool_call_end|>",
         "{\"city\":\"Rome\",\"opts\":{\"units\":[\"c\"],\"n\":-1.5},\"a\":true,\"b\":null,\"c\":\"it's\","
         "\"d\":\"ü\\n\"}"},
        {"<|tool_call_start|> [get_weather(city='Rome',)] <|tool_call_end|>", J1},
    };
    for (size_t i = 0; i < sizeof IN / sizeof *IN; i++) {
        tool_parsed tp;
        parse(TOOL_FMT_LFM2, IN[i][0], strlen(IN[i][0]), 0, tools, &tp);
        CHECK_MSG(json_array_size(tp.calls) == 1 && !tp.content, "lfm2 %zu: %zu calls", i,
                  json_array_size(tp.calls));
        check_call("lfm2 python", tp.calls, 0, IN[i][1]);
        tool_parsed_free(&tp);
    }
}

// Control tokens that spell a format's markers may be generated under its grammar; others may not.
static void check_marker_pieces(void) {
    static const struct {
        tool_fmt f;
        const char *piece;
        int want;
    } P[] = {
        {TOOL_FMT_KIMI_K2, "<|tool_call_begin|>", 1},
        {TOOL_FMT_KIMI_K2, "<|tool_calls_section_end|>", 1},
        {TOOL_FMT_KIMI_K2, "<|im_end|>", 0},
        {TOOL_FMT_MISTRAL, "[TOOL_CALLS]", 1},
        {TOOL_FMT_MISTRAL_ARGS, "[ARGS]", 1},
        {TOOL_FMT_HARMONY, "<|channel|>", 1},
        {TOOL_FMT_HARMONY, "<|message|>", 1},
        {TOOL_FMT_HARMONY, "<|return|>", 0},
        {TOOL_FMT_DEEPSEEK_V31, DSP, 1},
        {TOOL_FMT_HERMES, "[TOOL_CALLS]", 0},
        {TOOL_FMT_HERMES, "<", 0},
    };
    for (size_t i = 0; i < sizeof P / sizeof *P; i++)
        CHECK_MSG(tool_fmt_marker_piece(P[i].f, P[i].piece, strlen(P[i].piece)) == P[i].want, "%s: %s",
                  tool_fmt_name(P[i].f), P[i].piece);
}

// A cut inside a multi-byte character of a marker: the decoder's U+FFFD after the marker's first bytes is the
// marker cut short, not content; a U+FFFD after other text stays.
static void check_cut_inside_marker_char(json_t *tools) {
    static const struct {
        const char *text, *want;
    } C[] = {
        {"Sure.<\xEF\xBF\xBD", "Sure."},
        {"Sure.<\xEF\xBF\xBD\xEF\xBF\xBD", "Sure."},
        {"Sure. \xEF\xBF\xBD", "Sure. \xEF\xBF\xBD"},
        {"Sure.\xEF\xBF\xBD", "Sure.\xEF\xBF\xBD"},
    };
    tool_parse_opts o = {.id_base = "call", .tools = tools};
    for (size_t i = 0; i < sizeof C / sizeof *C; i++) {
        tool_parsed tp;
        CHECK(tool_fmt_parse(TOOL_FMT_DEEPSEEK_R1, C[i].text, strlen(C[i].text), &o, &tp) == 0);
        CHECK_MSG(tp.content && !strcmp(tp.content, C[i].want), "case %zu: content %s", i,
                  tp.content ? tp.content : "(none)");
        CHECK(tp.calls == NULL);
        tool_parsed_free(&tp);
    }
}

int main(void) {
    json_t *tools = json_loads(TOOLS, 0, NULL);
    CHECK(tools != NULL);
    CHECK_EQ_INT(sizeof CASES / sizeof *CASES, TOOL_FMT_COUNT);
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++)
        check_format(&CASES[i], tools);
    check_no_params(tools);
    check_detection();
    check_marker_pieces();
    check_pythonic(tools);
    check_cut_inside_marker_char(tools);
    json_decref(tools);
    TEST_MAIN_END();
}
