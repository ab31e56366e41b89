// Structured outputs and tool calling for the OpenAI API, kept apart from the field table in oai_req.c
// (which calls oai_ext_parse once): response_format (json_object / json_schema), the llama.cpp `grammar`
// field (GBNF), tools / tool_choice / parallel_tool_calls; rendering tool definitions, assistant tool calls
// and tool results into messages for a chat-template family; the grammar that forces a tool call (in the
// formats of tool_fmt.h, which also parses calls out of generated text). Free of I/O so it can be unit tested.
#ifndef TACHYON_SERVER_OAI_TOOLS_H
#define TACHYON_SERVER_OAI_TOOLS_H

#include <jansson.h>

#include "server/oai_ext.h"
#include "server/tool_fmt.h"
#include "tokenizer/chat.h"

struct oai_req;
struct oai_err;

// How a template family writes tool calls.
typedef enum { OAI_TS_HERMES = 0, OAI_TS_LLAMA3, OAI_TS_MISTRAL } oai_tool_style;
oai_tool_style oai_tool_style_of(chat_family f);

// Reads the fields above from r->root into r->ext (validating schemas: errors are 400 naming the parameter;
// GBNF is compiled, and its errors found, when the request is prepared: srv_grammar.c). Also checks tool messages (tool_call_id) and assistant tool_calls.
int oai_ext_parse(struct oai_req *r, struct oai_err *e);
void oai_ext_free(oai_ext *x);
// Tool definitions are in play: tools given and tool_choice is not "none".
int oai_tools_active(const struct oai_req *r);
// True when the request has tools or tool messages to render (the prompt must go through oai_tools_messages).
int oai_tools_needed(const struct oai_req *r);

// The conversation with tools rendered for the family: definitions in the system (or, for Llama 3, the
// first user) message, assistant tool calls and tool results as the family writes them. All of it is
// message text (plain for the tokenizer). *msgs malloc'd; its strings live in *owned (n_owned), all freed
// by oai_tools_msgs_free.
int oai_tools_messages(const struct oai_req *r, chat_family f, chat_msg **msgs, int *n_msgs, char ***owned,
                       int *n_owned, struct oai_err *e);
void oai_tools_msgs_free(chat_msg *msgs, char **owned, int n_owned);

int oai_wants_grammar(const struct oai_req *r); // 1 if oai_output_grammar gives a grammar
// GBNF the output must follow, or *gbnf = NULL: the request's grammar / response_format, or, with
// tool_choice "required" or a named function, one call in the model's tool-call format f (several when
// parallel_tool_calls is true) with arguments per the schema. *gbnf malloc'd. Calls in the output are
// parsed by tool_fmt_parse (tool_fmt.h).
int oai_output_grammar(const struct oai_req *r, tool_fmt f, char **gbnf, struct oai_err *e);

// Rewrites a chat choice (from oai_choice) to carry tool calls: content null, tool_calls, finish_reason
// "tool_calls". calls stolen.
void oai_choice_set_tool_calls(json_t *choice, json_t *calls, const char *content);
// Stream chunks for the calls in OpenAI's incremental shape: per call, one chunk with index, id, type and
// the name (arguments ""), then the arguments in fragments. Returns a new array of chunk objects.
json_t *oai_tool_call_chunks(const char *id, long created, const char *model, int choice_index, const json_t *calls);

#endif
