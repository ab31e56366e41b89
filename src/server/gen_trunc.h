// The context-overflow policy of generation requests (truncation "auto"; the pure part is trunc.c).
#ifndef TACHYON_SERVER_GEN_TRUNC_H
#define TACHYON_SERVER_GEN_TRUNC_H

#include <event2/http.h>
#include <stdint.h>
#include "server/gen_summ.h"
#include "server/oai.h"
#include "server/srv_model.h"

// The context-overflow policy. With truncation "auto" (request field, else --truncation), drops
// the oldest chat turns (re-rendering ids[0]; q's messages are reduced to those kept) or middle-out truncates
// each completions prompt until prompt + room fits; *n_tok / *n_msg get what was dropped. What cannot fit
// is left as it is (gen_launch refuses it). With si (may be NULL) and --summarize-with, chat truncation
// leaves gen_summ_reserve(budget) more tokens free and fills *si (si->dropped NULL when plain truncation was
// used). 0, or -1 with *e filled.
int gen_truncate(srv_model *s, oai_req *q, int32_t **ids, int *n_ids, int n_pr, int *n_tok, int *n_msg,
                 gen_summ_in *si, oai_err *e);
int gen_trunc_auto(const srv_model *s, const oai_req *q); // 1: truncation "auto" applies to q
// x-tachyon-truncated-tokens (and -messages for chat) on the reply, when truncation "auto" applies.
void gen_trunc_headers(const srv_model *s, struct evhttp_request *req, const oai_req *q, int n_tok, int n_msg);

#endif
