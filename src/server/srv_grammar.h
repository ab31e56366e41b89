// The server's side of constrained decoding: one model's grammar vocabulary and per-choice matchers.
#ifndef TACHYON_SERVER_SRV_GRAMMAR_H
#define TACHYON_SERVER_SRV_GRAMMAR_H

#include "common/err.h"
#include "grammar/gram.h"
#include "server/oai.h"
#include "server/oai_err.h"
#include "server/srv_model.h"

int srv_grammar_vocab(srv_model *s, tc_err *err); // builds s->gvocab (loader thread, after eog_ids and tools)
// The grammar q's output must follow, compiled (cached) and checked against s->gvocab: *out a reference
// (gram_free), or NULL when q has none. Errors → 400 naming the field, or 500 (memory). Slow: worker thread.
int srv_grammar_compile(srv_model *s, const oai_req *q, gram **out, oai_err *e);
// A matcher for one choice over s->gvocab, sharing g (a reference is taken); errors → 400 or 500 (memory).
int srv_grammar_matcher(srv_model *s, gram *g, gram_matcher **out, oai_err *e);

#endif
