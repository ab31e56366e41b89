// Sampler fields that need the model's vocabulary (see gen_samp.h).
#include "server/gen_samp.h"

#include <string.h>

#include "server/oai.h"
#include "server/srv_model.h"

// DRY's breakers, as llama.cpp's single-token restart sequences: every token whose text contains one of
// the breaker strings. (llama.cpp also matches a breaker spread over several tokens; this does not.)
static int dry_breaker_ids(const tok_vocab *v, const oai_samp_ext *x, int32_t *brk) {
    int n = 0, nv = tok_n_vocab(v);
    char piece[256];
    for (int32_t id = 0; id < nv && n < SAMP_MAX_IDS; id++) {
        int len = tok_piece(v, id, 0, piece, (int)sizeof piece - 1);
        if (len <= 0 || len >= (int)sizeof piece) continue;
        piece[len] = 0;
        for (int i = 0; i < x->n_dry_breakers; i++)
            if (strstr(piece, x->dry_breakers[i])) {
                brk[n++] = id;
                break;
            }
    }
    return n;
}

int gen_samp_ids(srv_model *s, const oai_req *q, samp_params *sp, int32_t *brk, oai_err *e) {
    int nv = tok_n_vocab(s->vocab);
    for (int i = 0; i < q->sx.n_stop_ids; i++)
        if (q->sx.stop_ids[i] >= nv)
            return oai_err_set(e, 400, "invalid_request_error", NULL, "stop_token_ids",
                               "'stop_token_ids' holds %d, outside the vocabulary (%d tokens)", q->sx.stop_ids[i], nv);
    sp->end_ids = q->sx.stop_ids;
    sp->n_end_ids = q->sx.n_stop_ids;
    sp->dry_breakers = NULL;
    sp->n_dry_breakers = 0;
    if (sp->dry_multiplier > 0.0f && sp->dry_penalty_last_n != 0) {
        sp->n_dry_breakers = dry_breaker_ids(s->vocab, &q->sx, brk);
        sp->dry_breakers = brk;
    }
    return 0;
}
