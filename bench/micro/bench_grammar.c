// Grammar-constrained decoding costs on a real vocabulary (SmolLM2's 49k tokens by default): building the
// trie, a full token mask at typical JSON states (uncached), a cached mask, and the fast path (checking one
// token). Prints times; asserts nothing.
//   build/bench_grammar [MODEL.gguf]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/timeutil.h"
#include "grammar/gram.h"
#include "grammar/gram_schema.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    tc_err err = {0};
    gguf_ctx *gg;
    tok_vocab *v;
    if (gguf_open(path, &gg, &err) || tok_load(gg, &v, &err)) {
        fprintf(stderr, "skip %s: %s\n", path, err.msg);
        return 0;
    }
    gguf_close(gg);
    int nv = tok_n_vocab(v);
    char **pieces = calloc((size_t)nv, sizeof *pieces);
    int *lens = calloc((size_t)nv, sizeof *lens), n_eog = 0;
    int32_t *eog = calloc((size_t)nv, sizeof *eog);
    for (int i = 0; i < nv; i++) {
        char buf[256];
        lens[i] = -1;
        if (tok_is_eog(v, i)) eog[n_eog++] = i;
        if (tok_is_control(v, i)) continue;
        int n = tok_piece(v, i, 0, buf, sizeof buf);
        if (n > 0 && n <= 256) pieces[i] = strndup(buf, (size_t)n), lens[i] = n;
    }
    double t0 = tc_now();
    gram_vocab *gv;
    if (gram_vocab_new((const char *const *)pieces, lens, nv, eog, n_eog, &gv, &err)) return 1;
    printf("vocab %d tokens: trie built in %.1f ms\n", nv, (tc_now() - t0) * 1e3);
    json_t *schema = json_loads("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":"
                                "\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},"
                                "\"required\":[\"name\",\"age\",\"tags\"]}", 0, NULL);
    char *gbnf;
    if (gram_schema_gbnf(schema, 1, &gbnf, &err)) return 1;
    static const char *prefixes[] = {"", "{\"name\": \"", "{\"name\": \"Bob", "{\"name\": \"Bob\", \"age\": ",
                                     "{\"name\": \"Bob\", \"age\": 12, \"tags\": [\"a\""};
    for (size_t k = 0; k < sizeof prefixes / sizeof *prefixes; k++) {
        gram *g;
        gram_matcher *m;
        if (gram_parse(gbnf, strlen(gbnf), NULL, &g, &err) || gram_matcher_new(g, gv, &m, &err)) return 1;
        gram_matcher_accept_str(m, prefixes[k], strlen(prefixes[k]));
        t0 = tc_now();
        const uint32_t *bits = gram_matcher_mask(m);
        double t_mask = tc_now() - t0;
        if (!bits) {
            printf("state %-45s mask failed: %s\n", prefixes[k], gram_matcher_error(m));
            gram_matcher_free(m);
            continue;
        }
        int allowed = 0;
        for (int i = 0; i < nv; i++) allowed += (bits[i >> 5] >> (i & 31)) & 1;
        t0 = tc_now();
        for (int r = 0; r < 100; r++) gram_matcher_mask(m);
        double t_cached = (tc_now() - t0) / 100;
        t0 = tc_now();
        int ok = 0;
        for (int i = 0; i < nv; i++) ok += gram_matcher_token_ok(m, i);
        double t_check = (tc_now() - t0) / nv;
        printf("state %-45s allowed %5d: mask %7.3f ms, cached %6.4f ms, one-token check %6.3f us\n", prefixes[k],
               allowed, t_mask * 1e3, t_cached * 1e3, t_check * 1e6);
        if (ok != allowed) printf("  MISMATCH: per-token checks allow %d\n", ok);
        gram_matcher_free(m);
    }
    // Replay of a whole document token by token, as a generation would see it: the fast path (check the sampled
    // token, advance) per token, and the worst case where every token is first rejected (mask, from the cache
    // when the state repeats, then advance).
    const char *doc = "{\"name\": \"Bob Smith\", \"age\": 42, \"tags\": [\"engineer\", \"runner\", \"father of "
                      "two\", \"likes long walks on the beach\"]}";
    int32_t *ids;
    int n_ids;
    if (tok_encode(v, doc, strlen(doc), 0, &ids, &n_ids, &err)) return 1;
    for (int worst = 0; worst < 2; worst++) {
        gram *g;
        gram_matcher *m;
        if (gram_parse(gbnf, strlen(gbnf), NULL, &g, &err) || gram_matcher_new(g, gv, &m, &err)) return 1;
        t0 = tc_now();
        int ok = 1;
        for (int i = 0; i < n_ids && ok; i++) {
            if (worst) ok = gram_matcher_mask(m) != NULL;
            else ok = gram_matcher_token_ok(m, ids[i]);
            ok = ok && gram_matcher_accept_token(m, ids[i]) == 0;
        }
        double dt = tc_now() - t0;
        printf("replay of a %d-token document, %s: %.3f ms/token%s%s\n", n_ids,
               worst ? "a mask at every step (worst case)" : "check + advance (fast path)", dt * 1e3 / n_ids,
               ok ? "" : " (REJECTED)", gram_matcher_done(m) ? ", complete" : "");
        gram_matcher_free(m);
    }
    free(ids);
    free(gbnf);
    json_decref(schema);
    gram_vocab_free(gv);
    for (int i = 0; i < nv; i++) free(pieces[i]);
    free(pieces), free(lens), free(eog);
    tok_free(v);
    return 0;
}
