// Chat templates: render {role, content} messages for a model's template family. The family is detected
// from the template text stored in the GGUF (tokenizer.chat_template) or named explicitly.
#ifndef TACHYON_TOKENIZER_CHAT_H
#define TACHYON_TOKENIZER_CHAT_H

#include <stddef.h>

#include "common/err.h"
#include "tokenizer/tokenizer.h"

typedef struct chat_msg {
    const char *role;    // "system", "user", "assistant" (others → error for families that reject them)
    const char *content; // UTF-8, NUL-terminated
} chat_msg;

typedef enum {
    CHAT_UNKNOWN = 0,
    CHAT_CHATML,     // <|im_start|>role\n…<|im_end|>\n (SmolLM2, Qwen2/2.5, Hermes …)
    CHAT_LLAMA2,     // [INST] <<SYS>> … (Llama 2, TinyLlama-chat style)
    CHAT_LLAMA3,     // <|start_header_id|>role<|end_header_id|>\n\n…<|eot_id|>
    CHAT_MISTRAL,    // [INST] … [/INST] (v1/v3 spacing as detected)
    CHAT_GEMMA,      // <start_of_turn>user\n…<end_of_turn>\n
    CHAT_PHI3,       // <|user|>\n…<|end|>\n
    CHAT_ZEPHYR,     // <|user|>\n…</s>\n
    CHAT_DEEPSEEK,   // DeepSeek-R1 distill: <｜User｜>…<｜Assistant｜>
    CHAT_QWEN3,      // ChatML with <think> reasoning and the enable_thinking switch (Qwen3)
    CHAT_COUNT
} chat_family;

const char *chat_family_name(chat_family f);
chat_family chat_family_from_name(const char *name); // CHAT_UNKNOWN if unknown
// Detects the family from template source text; CHAT_UNKNOWN if not recognized.
chat_family chat_detect(const char *template_src);
// The family an architecture's models use when the GGUF carries no template (some Gemma 3 conversions drop
// it); CHAT_UNKNOWN when the architecture does not imply one.
chat_family chat_family_for_arch(const char *arch);

// Template variables beyond the messages (the request's chat_template_kwargs).
typedef struct chat_opts {
    int enable_thinking; // 0: the generation prompt closes an empty <think></think> (Qwen3); 1: the default
} chat_opts;
// 1 when the family's models reason in <think>…</think> before answering (qwen3, deepseek): the server
// returns that part as reasoning_content.
int chat_family_reasons(chat_family f);
// 1 when the family has an enable_thinking switch (qwen3).
int chat_family_has_thinking_switch(chat_family f);
// 1 when the generation prompt leaves the model inside an open <think> (deepseek: "<｜Assistant｜><think>\n"),
// so its output starts with reasoning and has no opening tag.
int chat_family_opens_think(chat_family f);

// Renders messages for the family. `template_src` (may be NULL) lets a family pick up details from the
// template text (e.g. SmolLM2's default system prompt). *out malloc'd, owned by caller.
int chat_render(chat_family f, const char *template_src, const chat_msg *msgs, int n_msgs,
                int add_generation_prompt, const char *bos_text, char **out, tc_err *err);
// chat_render, plus the byte ranges of *out that came from the messages (contents, and roles where the
// family passes any role through) rather than from the template: *plain malloc'd (caller frees; NULL when
// there are none), sorted and non-overlapping, for tok_encode_guarded.
int chat_render_guarded(chat_family f, const char *template_src, const chat_msg *msgs, int n_msgs,
                        int add_generation_prompt, const char *bos_text, char **out, tok_range **plain, int *n_plain,
                        tc_err *err);

// Renders and tokenizes a conversation the way an OpenAI-style chat API must: the template's markers (and
// bos_text, which the template places) are control tokens, message text is always plain text, so a message
// cannot forge a turn by typing "<|im_end|>". *ids malloc'd, owned by the caller (free()).
int chat_encode(const tok_vocab *v, chat_family f, const char *template_src, const chat_msg *msgs, int n_msgs,
                int add_generation_prompt, const char *bos_text, int32_t **ids, int *n_ids, tc_err *err);
// chat_render_guarded / chat_encode with template options (NULL: the defaults).
int chat_render_opts(chat_family f, const char *template_src, const chat_msg *msgs, int n_msgs,
                     int add_generation_prompt, const char *bos_text, const chat_opts *opts, char **out,
                     tok_range **plain, int *n_plain, tc_err *err);
int chat_encode_opts(const tok_vocab *v, chat_family f, const char *template_src, const chat_msg *msgs, int n_msgs,
                     int add_generation_prompt, const char *bos_text, const chat_opts *opts, int32_t **ids,
                     int *n_ids, tc_err *err);

#endif
