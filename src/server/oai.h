// OpenAI API mapping, free of I/O so it can be unit tested: request parsing and validation
// (/v1/chat/completions, /v1/completions), error bodies, response and stream-chunk JSON, logprobs in both
// formats, SSE framing, and the stop-string holdback buffer.
#ifndef TACHYON_SERVER_OAI_H
#define TACHYON_SERVER_OAI_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "sampling/sampling.h"
#include "server/oai_err.h"
#include "server/oai_text.h"
#include "server/oai_ext.h"
#include "tokenizer/chat.h"

typedef enum { OAI_CHAT = 1, OAI_COMPLETION = 2, OAI_EMBEDDING = 3 } oai_kind;


#define OAI_MAX_STOP 16   // stop strings per request
#define OAI_MAX_STOP_LEN 256
#define OAI_MAX_N 16      // choices per request
#define OAI_MAX_MSGS 4096 // chat messages per request
#define OAI_MAX_CHOICES 64 // prompts × n per completions request
#define OAI_MAX_BIAS 1024 // logit_bias entries

// --- the field table (oai_fields.c) -----------------------------------------------------------------
enum { OAI_FIELD_CHAT = 1, OAI_FIELD_COMPLETION = 2, OAI_FIELD_EMBEDDING = 4 };
typedef enum { OAI_F_HANDLED = 1, OAI_F_REFUSED, OAI_F_IGNORED } oai_field_status;
typedef struct oai_field {
    const char *name;
    unsigned kinds;          // OAI_FIELD_* mask: the endpoints whose schema has it
    oai_field_status status;
    const char *why;         // refused / ignored: the reason (static string); NULL when handled
} oai_field;
const oai_field *oai_field_table(int *n);                        // the whole table (static)
const oai_field *oai_field_find(oai_kind kind, const char *name); // NULL: unknown for this endpoint

// One completions prompt: text, or token ids.
typedef struct oai_prompt {
    const char *text;  // borrowed from root; NULL when the prompt is token ids
    size_t len;        // bytes
    int32_t *ids;      // (n_ids) owned, or NULL
    int n_ids;
} oai_prompt;

typedef struct oai_req {
    oai_kind kind;
    json_t *root;      // owned: the parsed body; the const char* below borrow from it
    const char *model; // NULL if absent
    // chat
    chat_msg *msgs;    // (n_msgs) owned array; contents borrowed from root or from owned[]
    int n_msgs;
    char **owned;      // (n_owned) strings joined from content parts, owned
    int n_owned;
    // completions: one or more prompts, each text or token ids; prompt/prompt_ids mirror prompts[0]
    oai_prompt *prompts; // (n_prompts) owned array
    int n_prompts;
    const char *prompt;  // NULL when the prompt is token ids
    size_t prompt_len;   // bytes
    int32_t *prompt_ids; // (n_prompt_ids) borrowed from prompts[0], or NULL
    int n_prompt_ids;
    int echo;            // completions: prepend the prompt to each choice
    const char *suffix;  // completions: text after the insertion (FIM), borrowed; NULL = none
    int stream, include_usage;
    int max_tokens; // -1: not given
    int n;          // choices (1..OAI_MAX_N)
    samp_params sp;
    int seed_given;
    int logprobs;     // 1: report logprobs of the chosen tokens
    int top_logprobs; // alternatives per token (0..SAMP_MAX_LOGPROBS)
    const char *stop[OAI_MAX_STOP]; // borrowed, non-empty, valid UTF-8
    int n_stop;
    double timeout; // seconds (extension "timeout"); 0 = none
    int priority;   // "priority": lower runs first (scheduling under --sched priority|slo), default 0
    double ttft_slo; // seconds (extension "ttft_slo_ms" / 1000): the TTFT target; 0 = the server's --ttft-slo
    int ignore_eos; // extension
    const char *cache_salt; // vLLM extension: prefix-cache namespace (borrowed from root), NULL = none
    size_t cache_salt_len;  // bytes
    const char *prediction; // Predicted Outputs text (borrowed from root or owned[]), NULL if none
    size_t prediction_len;  // bytes
    oai_ext ext;    // response_format, grammar, tools (oai_tools.c)
    oai_samp_ext sx; // llama-server / vLLM sampling and stopping fields (oai_samp.c)
    int enable_thinking; // chat_template_kwargs.enable_thinking: -1 not given, 0 or 1 (checked against the
                         // template where it is known: gen_prompt.c)
    samp_bias *bias; // (n_bias) owned logit_bias, validated ids >= 0 and values in [-100, 100]
    int n_bias;      // (the id's upper bound is the vocabulary's: checked where the model is known)
    int truncation;  // "truncation": -1 not given (server default), 0 "disabled", 1 "auto"
    char lenient_dropped[256]; // lenient parse: unknown/unsupported fields dropped, comma-separated ("" = none)
} oai_req;

// Parses and validates a request body (len bytes, need not be NUL-terminated). Defaults follow OpenAI
// (temperature 1, top_p 1, n 1). On failure returns -1 with *e filled (status 400, param named) and *out
// cleared; on success *out must be released with oai_req_free.
int oai_parse(oai_kind kind, const char *body, size_t len, oai_req *out, oai_err *e);
// Same; lenient = 1 drops unknown and refused fields (listed in out->lenient_dropped) instead of a 400.
int oai_parse_ex(oai_kind kind, const char *body, size_t len, int lenient, oai_req *out, oai_err *e);
// Same for a body already parsed (another API's request translated by its wire): root is stolen (owned by
// *out on success as out->root, released on failure).
int oai_parse_json(oai_kind kind, json_t *root, int lenient, oai_req *out, oai_err *e);
// Checks r->root's keys against the field table (called by oai_parse_ex; see oai_fields.c).
int oai_check_fields(oai_kind kind, int lenient, oai_req *r, oai_err *e);
void oai_req_free(oai_req *r);

// --- responses -------------------------------------------------------------------------------------

// Stream chunk for one choice. role/content/finish_reason may be NULL (omitted or null as OpenAI does);
// logprobs is stolen (may be NULL → null). New reference.
json_t *oai_chunk(oai_kind kind, const char *id, long created, const char *model, int index, const char *role,
                  const char *content, size_t content_len, const char *finish_reason, json_t *logprobs);
// Final usage chunk ("choices": []). New reference.
json_t *oai_usage_chunk(oai_kind kind, const char *id, long created, const char *model, json_t *usage);
json_t *oai_usage(int prompt_tokens, int completion_tokens, int cached_tokens); // new reference
// Adds usage.completion_tokens_details {accepted,rejected}_prediction_tokens (Predicted Outputs) to usage.
void oai_usage_prediction(json_t *usage, int accepted, int rejected);
// Adds usage.prompt_tokens_details.truncated_tokens (prompt tokens dropped by truncation "auto").
void oai_usage_truncated(json_t *usage, int truncated);
// Complete (non-stream) response. choices is stolen: an array built with oai_choice. New reference.
json_t *oai_response(oai_kind kind, const char *id, long created, const char *model, json_t *choices,
                     json_t *usage);
json_t *oai_choice(oai_kind kind, int index, const char *text, size_t len, const char *finish_reason,
                   json_t *logprobs); // logprobs stolen (may be NULL)

// Logprobs. A token as reported: its text bytes (any bytes) and log-probability.
typedef struct oai_lp_tok {
    const char *text;
    int len;
    float logprob;
} oai_lp_tok;
// Chat format: one element of logprobs.content: {"token","logprob","bytes","top_logprobs":[…]}.
json_t *oai_lp_chat_entry(const oai_lp_tok *chosen, const oai_lp_tok *top, int n_top);
json_t *oai_lp_chat_new(void); // {"content": []}
// Completions format: {"tokens":[], "token_logprobs":[], "top_logprobs":[], "text_offset":[]}.
json_t *oai_lp_cmpl_new(void);
void oai_lp_cmpl_append(json_t *lp, const oai_lp_tok *chosen, const oai_lp_tok *top, int n_top, long text_offset);

// SSE framing: "data: <compact json>\n\n". *out malloc'd, owned by the caller; NULL on OOM.
char *oai_sse_frame(const json_t *j, size_t *len);
#define OAI_SSE_DONE "data: [DONE]\n\n"

// --- stop strings ----------------------------------------------------------------------------------
// Accumulates generated text and releases only what can no longer be the start of a stop string. A
// matched stop string (and everything after it) is never released.
typedef struct oai_stopbuf {
    char *text; // (len) generated text so far, truncated at a match; owned
    size_t len, cap;
    size_t emitted; // bytes already released
    const char *const *stops; // borrowed
    int n_stops;
    int matched; // 1 once a stop string matched
    const char *which; // the stop string that matched (one of stops, borrowed); NULL before a match
    int keep_stop;      // 1: a matched stop string is released too (include_stop_str_in_output)
    size_t search_from; // a match starts at or after this offset (text of the first min_tokens tokens)
} oai_stopbuf;

void oai_stopbuf_init(oai_stopbuf *b, const char *const *stops, int n_stops);
void oai_stopbuf_free(oai_stopbuf *b);
// Appends text; returns 1 if a stop string matched now (ignored once matched), 0 otherwise, -1 on OOM.
int oai_stopbuf_push(oai_stopbuf *b, const char *s, size_t n);
// Releases what is safe to send: *p/*n are the new bytes (borrowed until the next push). final=1 releases
// everything left (generation ended without a match).
void oai_stopbuf_take(oai_stopbuf *b, int final, const char **p, size_t *n);
// The end of the text that is safe to send (b->text[0..safe) can no longer start a stop string); releases
// nothing.
size_t oai_stopbuf_safe(const oai_stopbuf *b);

#endif
