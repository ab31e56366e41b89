// The table of tool-call formats (see tool_fmt.h): how each template family frames its calls, and the
// template markers that select it. docs/API.md lists the same table.
#include "server/tool_fmt.h"

#include <string.h>

#define DS_CALLS "<｜tool▁calls▁begin｜>"
#define DS_CALLS_END "<｜tool▁calls▁end｜>"
#define DS_CALL "<｜tool▁call▁begin｜>"
#define DS_CALL_END "<｜tool▁call▁end｜>"
#define DS_SEP "<｜tool▁sep｜>"

#define KIMI_CALLS "<|tool_calls_section_begin|>"

static const tool_xml QWEN3_XML = {"<parameter=", ">\n", "\n</parameter>\n"},
                      SEED_XML = {"<parameter=", ">", "</parameter>\n"},
                      MINIMAX_XML = {"<parameter name=\"", "\">", "</parameter>\n"},
                      GLM_XML = {"<arg_key>", "</arg_key>\n<arg_value>", "</arg_value>\n"};

// Ordered for detection: a row whose markers are a superset of a later row's comes first (Qwen3-Coder's
// templates also contain "<tool_call>", Seed-OSS's also "<function=" and "<parameter="; DeepSeek R1's
// "```json" tells it from V3.1).
// clang-format off
static const tool_fmt_row ROWS[] = {
    {TOOL_FMT_KIMI_K2, "kimi-k2", {KIMI_CALLS, NULL}, TOOL_SHAPE_NAMED, KIMI_CALLS, "<|tool_calls_section_end|>",
     "<|tool_call_begin|>functions.", "<|tool_call_argument_begin|>", "<|tool_call_end|>", NULL, NULL, "", 0,
     NULL, 1},
    {TOOL_FMT_SEED_OSS, "seed-oss", {"<seed:tool_call>", NULL}, TOOL_SHAPE_XML, "", "",
     "<seed:tool_call>\n<function=", ">\n", "</function>\n</seed:tool_call>", NULL, NULL, "\n", 0, &SEED_XML, 0},
    {TOOL_FMT_MINIMAX_M2, "minimax-m2", {"<minimax:tool_call>", NULL}, TOOL_SHAPE_XML, "<minimax:tool_call>\n",
     "</minimax:tool_call>", "<invoke name=\"", "\">\n", "</invoke>\n", NULL, NULL, "", 0, &MINIMAX_XML, 0},
    {TOOL_FMT_GLM45, "glm-4.5", {"<arg_key>", NULL}, TOOL_SHAPE_XML, "", "", "<tool_call>", "\n", "</tool_call>",
     NULL, NULL, "\n", 0, &GLM_XML, 0},
    {TOOL_FMT_LFM2, "lfm2", {"<|tool_call_start|>", NULL}, TOOL_SHAPE_PYTHONIC, "<|tool_call_start|>[",
     "]<|tool_call_end|>", "", "(", ")", NULL, NULL, ", ", 0, NULL, 0},
    {TOOL_FMT_HARMONY, "gpt-oss", {"<|channel|>", NULL}, TOOL_SHAPE_HARMONY, "", "",
     "<|channel|>commentary to=functions.", " <|constrain|>json<|message|>", "<|call|>", NULL, NULL,
     "<|start|>assistant", 0, NULL, 0},
    {TOOL_FMT_QWEN3_CODER, "qwen3-coder", {"<function=", "<parameter=", NULL}, TOOL_SHAPE_XML, "", "",
     "<tool_call>\n<function=", ">\n", "</function>\n</tool_call>", NULL, NULL, "\n", 0, &QWEN3_XML, 0},
    {TOOL_FMT_FUNCTIONARY_V31, "functionary-v3.1", {"<function=", NULL}, TOOL_SHAPE_NAMED, "", "", "<function=", ">",
     "</function>", NULL, NULL, "\n", 0, NULL, 0},
    {TOOL_FMT_FUNCTIONARY_V32, "functionary-v3.2", {">>>", NULL}, TOOL_SHAPE_NAMED, "", "", ">>>", "\n", "", NULL,
     NULL, "\n", 1, NULL, 0},
    {TOOL_FMT_DEEPSEEK_R1, "deepseek-r1", {DS_CALLS, "```json", NULL}, TOOL_SHAPE_NAMED, DS_CALLS, DS_CALLS_END,
     DS_CALL "function" DS_SEP, "\n```json\n", "\n```" DS_CALL_END, NULL, NULL, "\n", 0, NULL, 0},
    {TOOL_FMT_DEEPSEEK_V31, "deepseek-v3.1", {DS_CALLS, NULL}, TOOL_SHAPE_NAMED, DS_CALLS, DS_CALLS_END, DS_CALL,
     DS_SEP, DS_CALL_END, NULL, NULL, "", 0, NULL, 0},
    {TOOL_FMT_COMMAND_R7B, "command-r7b", {"<|START_ACTION|>", NULL}, TOOL_SHAPE_JSON_LIST, "<|START_ACTION|>",
     "<|END_ACTION|>", "", "", "", "tool_name", "parameters", ", ", 0, NULL, 0},
    {TOOL_FMT_COMMAND_R, "command-r", {"Action:", "```json", NULL}, TOOL_SHAPE_JSON_LIST, "Action:\n```json\n",
     "\n```", "", "", "", "tool_name", "parameters", ", ", 0, NULL, 0},
    {TOOL_FMT_GRANITE, "granite", {"<|tool_call|>", NULL}, TOOL_SHAPE_JSON_LIST, "<|tool_call|>", "", "", "", "",
     "name", "arguments", ", ", 0, NULL, 0},
    {TOOL_FMT_MISTRAL_ARGS, "mistral-args", {"[TOOL_CALLS]", "[ARGS]", NULL}, TOOL_SHAPE_NAMED, "", "", "[TOOL_CALLS]",
     "[ARGS]", "", NULL, NULL, "", 0, NULL, 0},
    {TOOL_FMT_MISTRAL, "mistral", {"[TOOL_CALLS]", NULL}, TOOL_SHAPE_JSON_LIST, "[TOOL_CALLS]", "", "", "", "", "name",
     "arguments", ", ", 0, NULL, 0},
    {TOOL_FMT_HERMES, "hermes", {"<tool_call>", NULL}, TOOL_SHAPE_JSON_TAGGED, "", "", "<tool_call>\n", "",
     "\n</tool_call>", "name", "arguments", "\n", 0, NULL, 0},
    {TOOL_FMT_LLAMA3, "llama3", {"<|python_tag|>", NULL}, TOOL_SHAPE_JSON_BARE, "<|python_tag|>", "", "", "", "",
     "name", "parameters", "\n", 0, NULL, 0},
};
// clang-format on

#define N_ROWS (sizeof ROWS / sizeof *ROWS)

const tool_fmt_row *tool_fmt_get(tool_fmt f) {
    for (size_t i = 0; i < N_ROWS; i++)
        if (ROWS[i].id == f) return &ROWS[i];
    return &ROWS[N_ROWS - 2]; // hermes: unreachable for valid f (every format has a row)
}

const char *tool_fmt_name(tool_fmt f) { return tool_fmt_get(f)->name; }

int tool_fmt_from_name(const char *name) {
    for (size_t i = 0; i < N_ROWS; i++)
        if (!strcmp(ROWS[i].name, name)) return (int)ROWS[i].id;
    return -1;
}

tool_fmt tool_fmt_detect(const char *src, tool_fmt fallback) {
    if (!src) return fallback;
    for (size_t i = 0; i < N_ROWS; i++) {
        int all = 1;
        for (int k = 0; all && ROWS[i].markers[k]; k++) all = strstr(src, ROWS[i].markers[k]) != NULL;
        if (all) return ROWS[i].id;
    }
    // Llama 3.2's template has no <|python_tag|>, but it asks for {"name": …, "parameters": …} calls
    if (strstr(src, "<|start_header_id|>") && strstr(src, "\"parameters\"")) return TOOL_FMT_LLAMA3;
    return fallback;
}

int tool_fmt_marker_piece(tool_fmt f, const char *piece, size_t n) {
    const tool_fmt_row *r = tool_fmt_get(f);
    const char *mk[] = {r->open, r->close, r->call_open, r->call_mid, r->call_close, r->sep};
    if (n < 2) return 0;
    for (size_t i = 0; i < sizeof mk / sizeof *mk; i++)
        if (mk[i] && memmem(mk[i], strlen(mk[i]), piece, n)) return 1;
    return 0;
}
