// The model-dependent half of the sampler fields (gen_samp.c): stop_token_ids checked against the
// vocabulary and DRY's sequence breakers turned into token ids, before a request is submitted.
#ifndef TACHYON_SERVER_GEN_SAMP_H
#define TACHYON_SERVER_GEN_SAMP_H

#include <stdint.h>

#include "sampling/sampling.h"

struct srv_model;
struct oai_req;
struct oai_err;

// Sets sp->end_ids (borrowed from q) and sp->dry_breakers (written into brk, SAMP_MAX_IDS entries, which
// must outlive engine_submit). 0, or -1 with *e (400 naming the field).
int gen_samp_ids(struct srv_model *s, const struct oai_req *q, samp_params *sp, int32_t *brk, struct oai_err *e);

#endif
