// The server's side of constrained decoding: the vocabulary trie (built once, by the loader thread), the
// request's grammar compiled once on the worker thread (srv_work.c) through a process-wide cache of compiled
// grammars (gram_cache.h: grammars do not depend on the model, so every model's server shares it), and a
// matcher per choice, all choices sharing the one compiled grammar.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_cache.h"
#include "server/oai_tools.h"
#include "server/srv_grammar.h"
#include "server/srv_model.h"

#define SRV_GRAMMAR_CACHE_ENTRIES 64
#define SRV_GRAMMAR_CACHE_ELEMENTS (4L << 20) // compiled elements in all (8 bytes each)

static gram_cache *g_cache; // created once (pthread_once), lives as long as the process
static pthread_once_t g_cache_once = PTHREAD_ONCE_INIT;

static void cache_init(void) {
    tc_err err = {0};
    if (gram_cache_new(SRV_GRAMMAR_CACHE_ENTRIES, SRV_GRAMMAR_CACHE_ELEMENTS, &g_cache, &err)) g_cache = NULL;
}

int srv_grammar_vocab(srv_model *s, tc_err *err) {
    int nv = tok_n_vocab(s->vocab);
    char **pieces = calloc((size_t)nv, sizeof *pieces);
    int *lens = calloc((size_t)nv, sizeof *lens);
    int rc = pieces && lens ? 0 : tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < nv && !rc; i++) {
        lens[i] = -1;
        char buf[256];
        int n = tok_piece(s->vocab, i, 0, buf, sizeof buf);
        if (n <= 0 || n > (int)sizeof buf) continue;
        // control tokens are never generated under a grammar (EOG: by the eog list), except the ones that
        // spell the model's tool-call markers, so a forced call writes them as the model was trained to
        if (tok_is_control(s->vocab, i) && !tool_fmt_marker_piece(s->tools, buf, (size_t)n)) continue;
        if (!(pieces[i] = malloc((size_t)n))) rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        else memcpy(pieces[i], buf, (size_t)n), lens[i] = n;
    }
    if (!rc) rc = gram_vocab_new((const char *const *)pieces, lens, nv, s->eog_ids, s->n_eog, &s->gvocab, err);
    for (int i = 0; pieces && i < nv; i++) free(pieces[i]);
    free(pieces);
    free(lens);
    return rc;
}

static int refuse(const oai_req *q, const tc_err *err, oai_err *e) {
    if (err->code == TC_ERR_NOMEM) return oai_err_set(e, 500, "server_error", NULL, NULL, "%s", err->msg);
    const char *param = q->ext.grammar ? q->ext.grammar_param : "tools";
    return oai_err_set(e, 400, "invalid_request_error", NULL, param, "%s", err->msg);
}

int srv_grammar_compile(srv_model *s, const oai_req *q, gram **out, oai_err *e) {
    *out = NULL;
    char *gbnf = NULL;
    if (oai_output_grammar(q, s->tools, &gbnf, e)) return -1;
    if (!gbnf) return 0;
    if (!s->gvocab) {
        free(gbnf);
        return oai_err_set(e, 500, "server_error", NULL, NULL, "grammars are not available");
    }
    pthread_once(&g_cache_once, cache_init);
    tc_err err = {0};
    gram *g = NULL;
    size_t len = strlen(gbnf);
    int rc = g_cache ? gram_cache_get(g_cache, gbnf, len, &g, &err) : gram_parse(gbnf, len, NULL, &g, &err);
    free(gbnf);
    if (rc) return refuse(q, &err, e);
    // the first mask: within the work bound, and not empty (a grammar the vocabulary cannot start is a 400
    // now rather than a failed generation)
    gram_matcher *m = NULL;
    if (gram_matcher_new(gram_ref(g), s->gvocab, &m, &err) || gram_matcher_check_start(m, &err)) {
        gram_matcher_free(m);
        gram_free(g);
        return refuse(q, &err, e);
    }
    gram_matcher_free(m);
    *out = g;
    return 0;
}

int srv_grammar_matcher(srv_model *s, gram *g, gram_matcher **out, oai_err *e) {
    *out = NULL;
    tc_err err = {0};
    if (gram_matcher_new(gram_ref(g), s->gvocab, out, &err)) {
        int oom = err.code == TC_ERR_NOMEM;
        return oai_err_set(e, oom ? 500 : 400, oom ? "server_error" : "invalid_request_error", NULL, NULL, "%s",
                           err.msg);
    }
    return 0;
}
