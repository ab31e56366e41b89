// The structured-output and tool fields of a parsed request (oai_req.ext): plain data that oai.h embeds and
// oai_tools.h fills and reads.
#ifndef TACHYON_SERVER_OAI_EXT_H
#define TACHYON_SERVER_OAI_EXT_H

#include <jansson.h>

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

#endif
