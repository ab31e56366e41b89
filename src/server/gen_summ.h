// --summarize-with: with truncation "auto", the chat turns truncation dropped are replaced by one summary
// message that another served model generates; summaries are cached on the front end.
#ifndef TACHYON_SERVER_GEN_SUMM_H
#define TACHYON_SERVER_GEN_SUMM_H

#include <jansson.h>
#include <stdint.h>
#include "server/oai.h"
#include "server/srv_model.h"

// What chat truncation dropped, for the summarization policy (--summarize-with, gen_summ.c).
typedef struct gen_summ_in {
    char *dropped; // (len) owned: the dropped messages as "role: content" paragraphs; NULL: nothing dropped
    size_t len;
    int ins;       // where the summary message goes in the kept messages (q->msgs index)
    int budget;    // prompt tokens at most (the context minus the completion's room)
} gen_summ_in;
int gen_summ_reserve(int budget); // prompt tokens truncation keeps free for the summary message
// Summarizes si->dropped (ownership taken) into one message inserted in q at si->ins, re-rendering *ids /
// *n_ids. *status gets "cached" or "failed" when this returns 0 (done now: a cache hit, or plain truncation
// stays); 1: a summary request is on the summarizer's engine queue, and done(arg) runs later on the loop
// thread once *status ("generated" or "failed"), q and *ids are final (they must stay valid until then).
int gen_summ_start(srv_model *s, oai_req *q, int32_t **ids, int *n_ids, gen_summ_in *si, const char **status,
                   void (*done)(void *arg), void *arg);
void gen_summ_free(server *fe); // the front end's summary cache
json_t *gen_summ_stats(const server *fe); // /stats "summary": {generated, cached, failed, cache_entries}

#endif
