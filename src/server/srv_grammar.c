// The server's side of constrained decoding: the vocabulary trie (built once, by the loader thread) and a
// matcher per choice for requests with a grammar, response_format or a forced tool call.
#include <stdlib.h>
#include <string.h>

#include "server/srv_grammar.h"
#include "server/srv_model.h"

int srv_grammar_vocab(srv_model *s, tc_err *err) {
    int nv = tok_n_vocab(s->vocab);
    char **pieces = calloc((size_t)nv, sizeof *pieces);
    int *lens = calloc((size_t)nv, sizeof *lens);
    int rc = pieces && lens ? 0 : tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < nv && !rc; i++) {
        lens[i] = -1;
        if (tok_is_control(s->vocab, i)) continue; // never generated under a grammar (EOG: by the eog list)
        char buf[256];
        int n = tok_piece(s->vocab, i, 0, buf, sizeof buf);
        if (n <= 0 || n > (int)sizeof buf) continue;
        if (!(pieces[i] = malloc((size_t)n))) rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        else memcpy(pieces[i], buf, (size_t)n), lens[i] = n;
    }
    if (!rc) rc = gram_vocab_new((const char *const *)pieces, lens, nv, s->eog_ids, s->n_eog, &s->gvocab, err);
    for (int i = 0; pieces && i < nv; i++) free(pieces[i]);
    free(pieces);
    free(lens);
    return rc;
}

int srv_grammar_matcher(srv_model *s, const char *gbnf, gram_matcher **out, oai_err *e) {
    *out = NULL;
    if (!s->gvocab) return oai_err_set(e, 500, "server_error", NULL, NULL, "grammars are not available");
    gram *g = NULL;
    tc_err err = {0};
    if (gram_parse(gbnf, strlen(gbnf), NULL, &g, &err) || gram_matcher_new(g, s->gvocab, out, &err))
        return oai_err_set(e, err.code == TC_ERR_NOMEM ? 500 : 400, err.code == TC_ERR_NOMEM ? "server_error" : "invalid_request_error",
                           NULL, NULL, "%s", err.msg);
    return 0;
}
