// The server's side of constrained decoding: one model's grammar vocabulary and per-choice matchers.
#ifndef TACHYON_SERVER_SRV_GRAMMAR_H
#define TACHYON_SERVER_SRV_GRAMMAR_H

#include "common/err.h"
#include "grammar/gram.h"
#include "server/oai_err.h"
#include "server/srv_model.h"

int srv_grammar_vocab(srv_model *s, tc_err *err); // builds s->gvocab (loader thread, after eog_ids)
// A matcher for one choice over s->gvocab; errors → 400 (grammar) or 500 (memory).
int srv_grammar_matcher(srv_model *s, const char *gbnf, gram_matcher **out, oai_err *e);

#endif
