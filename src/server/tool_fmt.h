// Tool-call output formats: how a model writes its tool calls, chosen from its chat template (as llama.cpp's
// common/chat.cpp and vLLM's tool parsers do, by markers the template text contains). One table row per
// format (tool_fmt.c) says how calls are framed; a parser turns generated text into content, reasoning and
// calls (tool_parse.c, tool_parse_xml.c, tool_parse_py.c), and a grammar builder gives the GBNF a forced call
// (tool_choice required or named) must follow (tool_gram.c). Pure functions, no I/O: unit-tested in
// tests/unit/test_tool_fmt.c.
#ifndef TACHYON_SERVER_TOOL_FMT_H
#define TACHYON_SERVER_TOOL_FMT_H

#include <jansson.h>
#include <stddef.h>

#include "common/err.h"

// How each writes a call: docs/API.md (Tool calling) and the rows of tool_fmt.c.
typedef enum {
    TOOL_FMT_HERMES = 0,   // <tool_call> JSON </tool_call> (Hermes, Qwen2.5/3, ChatML models)
    TOOL_FMT_LLAMA3,       // [<|python_tag|>]{"name": …, "parameters": {…}} (Llama 3.1-3.3)
    TOOL_FMT_MISTRAL,      // [TOOL_CALLS][{"name": …, "arguments": {…}}, …] (Mistral v3, Nemo)
    TOOL_FMT_MISTRAL_ARGS, // [TOOL_CALLS]name[ARGS]{…} (Mistral Small 3.2, Devstral, Ministral 3)
    TOOL_FMT_QWEN3_CODER,  // <tool_call><function=name><parameter=key>value</parameter>… (Qwen3-Coder, 3.5)
    TOOL_FMT_DEEPSEEK_R1, // <｜tool▁call▁begin｜>function<｜tool▁sep｜>name\n```json\n{…}\n```…
    TOOL_FMT_DEEPSEEK_V31, // <｜tool▁call▁begin｜>name<｜tool▁sep｜>{…}<｜tool▁call▁end｜>
    TOOL_FMT_FUNCTIONARY_V31, // <function=name>{…}</function>
    TOOL_FMT_FUNCTIONARY_V32, // >>>name\n{…} (the prompt ends with ">>>"; ">>>all\n" is text)
    TOOL_FMT_COMMAND_R,       // Action:\n```json\n[{"tool_name": …, "parameters": {…}}]\n```
    TOOL_FMT_COMMAND_R7B,     // <|START_ACTION|>[{"tool_name": …, "parameters": {…}}]<|END_ACTION|>
    TOOL_FMT_GRANITE,         // <|tool_call|>[{"name": …, "arguments": {…}}]
    TOOL_FMT_HARMONY,         // gpt-oss: <|channel|>commentary to=functions.name … <|message|>{…}<|call|>
    TOOL_FMT_GLM45,           // <tool_call>name\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call>
    TOOL_FMT_KIMI_K2,         // <|tool_calls_section_begin|><|tool_call_begin|>functions.name:0… (tool_fmt.c)
    TOOL_FMT_MINIMAX_M2,      // <minimax:tool_call>\n<invoke name="n">\n<parameter name="k">v</parameter>…
    TOOL_FMT_SEED_OSS,        // <seed:tool_call>\n<function=name>\n<parameter=k>v</parameter>\n</function>…
    TOOL_FMT_LFM2,            // <|tool_call_start|>[name(k="v", n=1), …]<|tool_call_end|>
    TOOL_FMT_COUNT
} tool_fmt;

typedef enum {
    TOOL_SHAPE_JSON_TAGGED = 0, // each call: call_open, a JSON object, call_close
    TOOL_SHAPE_JSON_LIST,       // open, a JSON array of call objects, close
    TOOL_SHAPE_JSON_BARE,       // [open] JSON call objects separated by ';' or whitespace
    TOOL_SHAPE_NAMED,           // [open] (call_open name call_mid JSON-arguments call_close)+ [close]
    TOOL_SHAPE_XML,             // parameters as XML elements, spelled by the row's tool_xml
    TOOL_SHAPE_HARMONY,         // gpt-oss's channels
    TOOL_SHAPE_PYTHONIC,        // open name(key=value, …)[sep name(…)] close, values Python literals or JSON
} tool_shape;

// An XML shape's parameters: kv_open KEY kv_mid VALUE kv_close, once per argument (as the grammar writes
// them; the parser lets any whitespace of these stand for any whitespace, none included). String values are
// raw text, others JSON.
typedef struct tool_xml {
    const char *kv_open, *kv_mid, *kv_close;
} tool_xml;

typedef struct tool_fmt_row {
    tool_fmt id;
    const char *name;       // as docs/API.md lists it
    const char *markers[3]; // detection: the template contains all of them (NULL-ended); the first row that
                            // matches wins, so rows with more specific markers come first
    tool_shape shape;
    const char *open, *close; // around all the calls ("" when none)
    const char *call_open, *call_mid,
        *call_close;                 // around each call (NAMED: call_open name call_mid args call_close)
    const char *name_key, *args_key; // JSON shapes: the keys of a call object
    const char *sep;                 // between two calls in the forced grammar
    int prompt_opens; // 1: the generation prompt ends with call_open (Functionary v3.2's ">>>")
    const tool_xml *xml; // XML shape: how parameters are written
    int numbered;        // NAMED: the name is followed by ':' and the call's index (Kimi's functions.NAME:0)
} tool_fmt_row;

const tool_fmt_row *tool_fmt_get(tool_fmt f); // f < TOOL_FMT_COUNT
const char *tool_fmt_name(tool_fmt f);
int tool_fmt_from_name(const char *name); // -1 if unknown
// The format a template's text asks for, or fallback when it names none of the table's markers.
tool_fmt tool_fmt_detect(const char *template_src, tool_fmt fallback);
// Whether the n bytes of piece (a token's text, n >= 2) occur in one of the format's call markers: a control
// token of the vocabulary that spells a marker (Kimi's <|tool_call_begin|>) may be generated under a forced
// call's grammar.
int tool_fmt_marker_piece(tool_fmt f, const char *piece, size_t n);

// --- parsing ---------------------------------------------------------------------------------------------

typedef struct tool_parsed {
    json_t *calls; // new array of {"id","type":"function","function":{"name","arguments"}} (arguments a JSON
                   // string), NULL when the text holds no complete call
    char *content; // malloc'd text outside calls and reasoning (trimmed), NULL when none
    char *reasoning; // malloc'd <think>…</think> text or gpt-oss's analysis channel, NULL when none
} tool_parsed;

typedef struct tool_parse_opts {
    const char *id_base; // call ids are id_base + "_" + index
    int reasoning;       // 1: split <think>…</think> off into reasoning
    int in_think;        // with reasoning: the prompt left the model inside an open <think>
    const json_t *tools; // the request's tools array (borrowed, may be NULL): Qwen3-Coder's parameter values
                         // stay strings where the schema says string, others are read as JSON
} tool_parse_opts;

// Splits generated text. Complete calls become calls; markup of a call cut short (the output ended inside
// it) is dropped, so raw call syntax never reaches content. Returns 0, or TC_ERR_NOMEM (out is then empty).
int tool_fmt_parse(tool_fmt f, const char *text, size_t len, const tool_parse_opts *o, tool_parsed *out);
void tool_parsed_free(tool_parsed *p);

// --- the forced-call grammar ---------------------------------------------------------------------------

typedef struct tool_gram_fn {
    const char *name;
    const json_t *params; // JSON schema of the arguments; NULL: the arguments are exactly {}
    int strict;
} tool_gram_fn;

// GBNF (with root) for output that is exactly one call of one of fns (n >= 1) in format f, or with
// parallel one or more calls. *gbnf malloc'd. TC_ERR_INVALID with a message for a schema the grammar
// cannot express.
int tool_fmt_grammar(tool_fmt f, const tool_gram_fn *fns, int n, int parallel, char **gbnf, tc_err *err);

#endif
