// A model's own chat template (the GGUF's tokenizer.chat_template, or a Jinja file), rendered by the Jinja
// interpreter with the variables transformers' apply_chat_template passes, and tokenized so that the template's
// markers become control tokens while message text stays plain text.
#ifndef TACHYON_TOKENIZER_CHAT_TMPL_H
#define TACHYON_TOKENIZER_CHAT_TMPL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

// Parsed once; rendering only reads it, from any thread.
typedef struct chat_tmpl chat_tmpl;

// Parses src (n bytes). v (may be NULL) supplies bos_token and eos_token as text. *out owned by the caller
// (chat_tmpl_free). A template that does not parse is TC_ERR_FORMAT with the line in err.
int chat_tmpl_new(const char *src, size_t n, const tok_vocab *v, chat_tmpl **out, tc_err *err);
// chat_tmpl_new on the contents of the file at path (an unreadable file is TC_ERR_IO naming it).
int chat_tmpl_load_file(const char *path, const tok_vocab *v, chat_tmpl **out, tc_err *err);
void chat_tmpl_free(chat_tmpl *t);
const char *chat_tmpl_src(const chat_tmpl *t); // the source, NUL-terminated (owned by t)
// 1 when the template reads the variable `name` (e.g. enable_thinking: it has a thinking switch).
int chat_tmpl_reads(const chat_tmpl *t, const char *name);

// Renders a conversation. messages: an array of OpenAI-shaped messages ({role, content, tool_calls …});
// tools: the request's tools array or NULL; kwargs: more variables (chat_template_kwargs) or NULL. All three
// are untrusted: their text is returned in *plain (sorted, disjoint; malloc'd, NULL when none). *out malloc'd
// and NUL-terminated. A template error (raise_exception, an undefined value misused) is TC_ERR with the
// template's message in err.
int chat_tmpl_render(const chat_tmpl *t, const json_t *messages, const json_t *tools, const json_t *kwargs,
                     int add_generation_prompt, char **out, size_t *out_n, tok_range **plain, int *n_plain,
                     tc_err *err);
// chat_tmpl_render, then tok_encode_guarded with the template's text parsed for control tokens (no BOS is
// added: the template places it). *ids malloc'd.
int chat_tmpl_encode(const chat_tmpl *t, const tok_vocab *v, const json_t *messages, const json_t *tools,
                     const json_t *kwargs, int add_generation_prompt, int32_t **ids, int *n_ids, tc_err *err);
// The messages of msgs as a JSON array of {role, content} (new reference, NULL when out of memory).
json_t *chat_msgs_json(const chat_msg *msgs, int n_msgs);

#endif
