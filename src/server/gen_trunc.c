// Context-overflow policy `truncation: "auto"` (request field, or the --truncation default) applied to a
// prepared generation request. Chat: the oldest conversation turns are dropped (trunc.h says what a turn is
// and what is pinned) until prompt + room fits the context, found by bisecting over the number of dropped
// turns with one render + tokenize per probe (the template decides the token count, so counting per message
// would be a guess). Completions: middle-out on each prompt's token ids. Room is max_tokens when given,
// else min(TRUNC_MIN_ROOM, ctx / 4); gen_launch then caps an absent max_tokens to what is left as always.
// What does not fit even so is left for gen_launch to refuse with context_length_exceeded.
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/gen_prompt.h"
#include "server/gen_summ.h"
#include "server/gen_trunc.h"
#include "server/srv_model.h"
#include "server/trunc.h"

// The prompt of q with only the messages keep[0..m) (a shallow view: the body's other fields and the kept
// message objects are shared, so tools and tool_call_ids render as in the full request).
static int render_kept(srv_model *s, const oai_req *q, const int *keep, int m, int32_t **ids, int *n, oai_err *e) {
    oai_req v = *q;
    chat_msg *msgs = malloc((size_t)(m ? m : 1) * sizeof *msgs);
    json_t *root = json_copy(q->root), *arr = json_array(), *jm = json_object_get(q->root, "messages");
    int rc = -1;
    if (!msgs || !root || !arr) {
        oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
        goto out;
    }
    for (int i = 0; i < m; i++) {
        msgs[i] = q->msgs[keep[i]];
        json_array_append(arr, json_array_get(jm, (size_t)keep[i]));
    }
    json_object_set(root, "messages", arr);
    v.root = root;
    v.msgs = msgs;
    v.n_msgs = m;
    rc = gen_prompt_ids_at(s, &v, 0, ids, n, e);
out:
    json_decref(arr);
    json_decref(root);
    free(msgs);
    return rc;
}

typedef struct trunc_probe {
    srv_model *s;
    const oai_req *q;
    const int *turn;
    int *keep;
    int budget;     // prompt tokens at most
    int best_k;     // smallest k seen to fit (INT_MAX-like until one does)
    int32_t *best;  // (n_best) its prompt ids, owned
    int n_best;
    oai_err *e;
} trunc_probe;

static int probe_fits(void *ctx, int k) {
    trunc_probe *p = ctx;
    int m = trunc_keep(p->turn, p->q->n_msgs, k, p->keep);
    int32_t *ids = NULL;
    int n = 0;
    if (render_kept(p->s, p->q, p->keep, m, &ids, &n, p->e)) return -1;
    if (n > p->budget) {
        free(ids);
        return 0;
    }
    if (k < p->best_k) {
        free(p->best);
        p->best = ids;
        p->n_best = n;
        p->best_k = k;
    } else free(ids);
    return 1;
}

// With --summarize-with: the dropped messages as "role: content" paragraphs (what the summarizer reads and
// the cache key hashes), and where the summary goes among the kept ones (before the first kept message that
// came after a dropped one). 0, or -1 on OOM.
static int dropped_text(const oai_req *q, const int *keep, int m, gen_summ_in *si) {
    size_t cap = 1, len = 0;
    int first = -1, j = 0;
    for (int i = 0; i < q->n_msgs; i++) {
        if (j < m && keep[j] == i) { j++; continue; }
        if (first < 0) first = i;
        cap += strlen(q->msgs[i].role) + (q->msgs[i].content ? strlen(q->msgs[i].content) : 0) + 4;
    }
    char *t = malloc(cap);
    if (!t) return -1;
    j = 0;
    for (int i = 0; i < q->n_msgs; i++) {
        if (j < m && keep[j] == i) { j++; continue; }
        len += (size_t)snprintf(t + len, cap - len, "%s%s: %s", len ? "\n\n" : "", q->msgs[i].role,
                                q->msgs[i].content ? q->msgs[i].content : "");
    }
    si->dropped = t;
    si->len = len;
    si->ins = 0;
    while (si->ins < m && keep[si->ins] < first) si->ins++;
    return 0;
}

static int trunc_chat(srv_model *s, oai_req *q, int32_t **ids, int *n_ids, int budget, int *n_tok, int *n_msg,
                      gen_summ_in *si, oai_err *e) {
    int n = q->n_msgs;
    int *turn = malloc((size_t)n * sizeof *turn), *keep = malloc((size_t)n * sizeof *keep);
    trunc_probe p = {s, q, turn, keep, budget, n + 1, NULL, 0, e};
    int rc = -1;
    if (!turn || !keep) {
        oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
        goto out;
    }
    int n_turns = trunc_turns(q->msgs, n, turn);
    if (n_turns == 0) { rc = 0; goto out; } // nothing droppable: gen_launch refuses
    int k = trunc_search(n_turns, probe_fits, &p);
    if (k == TRUNC_NOFIT || k == 0) { rc = 0; goto out; } // k = 0 cannot happen: the caller saw an overflow
    if (k < 0) goto out;
    // commit: the request now holds only the kept messages (body array too, for anything rendering later)
    int m = trunc_keep(turn, n, k, keep);
    if (si && dropped_text(q, keep, m, si)) {
        oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
        goto out;
    }
    json_t *jm = json_object_get(q->root, "messages"), *arr = json_array();
    if (!arr) {
        oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
        goto out;
    }
    for (int i = 0; i < m; i++) {
        json_array_append(arr, json_array_get(jm, (size_t)keep[i]));
        q->msgs[i] = q->msgs[keep[i]];
    }
    json_object_set_new(q->root, "messages", arr); // drops the removed messages (nothing borrows them now)
    q->n_msgs = m;
    *n_tok = *n_ids - p.n_best;
    *n_msg = n - m;
    free(*ids);
    *ids = p.best;
    *n_ids = p.n_best;
    p.best = NULL;
    rc = 0;
out:
    free(p.best);
    free(turn);
    free(keep);
    return rc;
}

int gen_truncate(srv_model *s, oai_req *q, int32_t **ids, int *n_ids, int n_pr, int *n_tok, int *n_msg,
                 gen_summ_in *si, oai_err *e) {
    *n_tok = *n_msg = 0;
    if (si) *si = (gen_summ_in){0};
    if (!gen_trunc_auto(s, q)) return 0;
    int room = q->max_tokens > 0 ? q->max_tokens : TRUNC_MIN_ROOM < s->ctx_size / 4 ? TRUNC_MIN_ROOM : s->ctx_size / 4;
    int budget = s->ctx_size - room;
    if (budget < 1) return 0; // max_tokens alone fills the context: gen_launch refuses
    if (q->kind == OAI_CHAT) {
        if (n_ids[0] <= budget) return 0;
        // --summarize-with: drop enough for the summary message too (gen_summ.c fills that room); when the
        // pinned messages leave no such room, plain truncation
        int reserve = si && s->fe->o.summarize_with ? gen_summ_reserve(budget) : 0;
        if (reserve > 0) {
            int rc = trunc_chat(s, q, &ids[0], &n_ids[0], budget - reserve, n_tok, n_msg, si, e);
            if (rc || *n_msg > 0) {
                si->budget = budget;
                return rc;
            }
        }
        return trunc_chat(s, q, &ids[0], &n_ids[0], budget, n_tok, n_msg, NULL, e);
    }
    for (int pi = 0; pi < n_pr; pi++) {
        int n = trunc_middle_out(ids[pi], n_ids[pi], budget);
        *n_tok += n_ids[pi] - n;
        n_ids[pi] = n;
    }
    return 0;
}

int gen_trunc_auto(const srv_model *s, const oai_req *q) {
    return q->kind != OAI_EMBEDDING && (q->truncation >= 0 ? q->truncation : s->o.truncation) == 1;
}

void gen_trunc_headers(const srv_model *s, struct evhttp_request *req, const oai_req *q, int n_tok, int n_msg) {
    if (!gen_trunc_auto(s, q)) return;
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    char v[16];
    snprintf(v, sizeof v, "%d", n_tok);
    evhttp_add_header(h, "x-tachyon-truncated-tokens", v);
    if (q->kind != OAI_CHAT) return;
    snprintf(v, sizeof v, "%d", n_msg);
    evhttp_add_header(h, "x-tachyon-truncated-messages", v);
}
