// Prompt token ids of generation requests: chat rendered with the model's template, completions as sent
// (FIM with suffix), and the text completions `echo` prepends.
#ifndef TACHYON_SERVER_GEN_PROMPT_H
#define TACHYON_SERVER_GEN_PROMPT_H

#include <stddef.h>
#include <stdint.h>
#include "server/oai.h"
#include "server/srv_model.h"

// Prompt token ids of a parsed request exactly as generation uses them (chat: rendered with the template,
// message text plain); *ids malloc'd. Also serves /tokenize {"messages": …}.
int gen_prompt_ids(srv_model *s, const oai_req *q, int32_t **ids, int *n, oai_err *e);
// gen_prompt.c: the same for prompt pi of a completions request (0 for chat); with `suffix`, the FIM prompt
// (400 naming suffix when the vocabulary has no FIM tokens).
int gen_prompt_ids_at(srv_model *s, const oai_req *q, int pi, int32_t **ids, int *n, oai_err *e);
// The text a completions `echo` prepends for prompt p (*out malloc'd): the text as sent, or the ids decoded.
int gen_echo_text(srv_model *s, const oai_prompt *p, char **out, size_t *len);

#endif
