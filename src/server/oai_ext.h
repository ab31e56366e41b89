// The structured-output and tool fields of a parsed request (oai_req.ext), and the llama-server / vLLM
// sampling and stopping fields that are not samp_params (oai_req.sx): plain data that oai.h embeds and
// oai_tools.c / oai_samp.c fill.
#ifndef TACHYON_SERVER_OAI_EXT_H
#define TACHYON_SERVER_OAI_EXT_H

#include <jansson.h>
#include <stdint.h>

typedef enum { OAI_TC_AUTO = 0, OAI_TC_NONE, OAI_TC_REQUIRED, OAI_TC_NAMED } oai_tool_choice;

typedef struct oai_tool {
    const char *name;        // borrowed from the request body
    const char *description; // borrowed, may be NULL
    json_t *params;          // borrowed JSON schema, may be NULL (no arguments constraint)
    int strict;
} oai_tool;

typedef struct oai_ext {
    char *grammar;   // owned GBNF the output must match (response_format or `grammar`), or NULL
    const char *grammar_param; // static: the field it came from, for errors when it is compiled
    oai_tool *tools; // (n_tools) owned array
    int n_tools;
    oai_tool_choice choice;
    int named;    // OAI_TC_NAMED: index into tools
    int parallel; // parallel_tool_calls: 1 true, 0 false, -1 not given (a forced choice then gives one call)
} oai_ext;

#define OAI_MAX_STOP_IDS 64     // stop_token_ids
#define OAI_MAX_DRY_BREAKERS 16 // dry_sequence_breakers
#define OAI_MAX_DRY_BREAKER_LEN 64

typedef struct oai_samp_ext {
    int32_t stop_ids[OAI_MAX_STOP_IDS]; // stop_token_ids: generation ends at any of them (not in the text)
    int n_stop_ids;
    const char *dry_breakers[OAI_MAX_DRY_BREAKERS]; // borrowed from the body; llama.cpp's defaults when not given
    int n_dry_breakers;
    int include_stop;        // include_stop_str_in_output: a matched stop string stays in the text
    int min_tokens;          // no end-of-generation token, stop token or stop string before this many tokens
    int keep_special;        // skip_special_tokens false: control tokens' text is written out
} oai_samp_ext;

#endif
