#include "sched/request.h"

#include <stdlib.h>
#include <string.h>

int sched_req_new(const int32_t *prompt, int n_prompt, int max_tokens, int block_size, sched_req **out,
                  tc_err *err) {
    *out = NULL;
    if (n_prompt < 1 || max_tokens < 1 || n_prompt > (1 << 28) || max_tokens > (1 << 28))
        return tc_err_set(err, TC_ERR_INVALID, "request: bad sizes (prompt %d, max_tokens %d)", n_prompt, max_tokens);
    sched_req *r = calloc(1, sizeof *r);
    if (!r) return tc_err_set(err, TC_ERR_NOMEM, "request: out of memory");
    r->cap = n_prompt + max_tokens;
    r->tokens = malloc((size_t)r->cap * sizeof(int32_t));
    if (!r->tokens) {
        int cap = r->cap;
        free(r);
        return tc_err_set(err, TC_ERR_NOMEM, "request: out of memory for %d tokens", cap);
    }
    int rc = kv_seq_init(&r->kv, r->cap, block_size, err);
    if (!rc && (rc = kv_seq_init(&r->kv_swa, r->cap, block_size, err))) kv_seq_destroy(&r->kv);
    if (rc) {
        free(r->tokens);
        free(r);
        return rc;
    }
    memcpy(r->tokens, prompt, (size_t)n_prompt * sizeof(int32_t));
    r->n_tokens = r->n_prompt = n_prompt;
    r->max_tokens = max_tokens;
    r->plan_idx = -1;
    *out = r;
    return 0;
}

void sched_req_free(sched_req *r) {
    if (!r) return;
    kv_seq_destroy(&r->kv);
    kv_seq_destroy(&r->kv_swa);
    free(r->tokens);
    free(r);
}
