// Draft proposers that cost no model time: prompt lookup (n-gram) and predicted outputs.
#include <stdlib.h>
#include <string.h>

#include "spec/spec.h"

int spec_mode_parse(const char *s) {
    if (!strcmp(s, "off")) return SPEC_OFF;
    if (!strcmp(s, "ngram")) return SPEC_NGRAM;
    if (!strcmp(s, "auto")) return SPEC_AUTO;
    if (!strcmp(s, "draft")) return SPEC_DRAFT;
    if (!strcmp(s, "self")) return SPEC_SELF;
    return -1;
}

const char *spec_mode_name(spec_mode m) {
    switch (m) {
    case SPEC_OFF: return "off";
    case SPEC_NGRAM: return "ngram";
    case SPEC_AUTO: return "auto";
    case SPEC_DRAFT: return "draft";
    case SPEC_SELF: return "self";
    }
    return "unknown";
}

const char *spec_method_name(spec_method m) {
    static const char *names[SPEC_N_METHODS] = {"ngram", "prediction", "draft", "self"};
    return m >= 0 && m < SPEC_N_METHODS ? names[m] : "unknown";
}

// Most recent j < limit - n with hay[j..j+n) == needle[0..n), scanning down from start; -1 if none.
static int find_back(const int32_t *hay, int start, const int32_t *needle, int n) {
    for (int j = start; j >= 0; j--) {
        if (hay[j] != needle[0]) continue;
        int m = 1;
        while (m < n && hay[j + m] == needle[m]) m++;
        if (m == n) return j;
    }
    return -1;
}

int spec_ngram_propose(const int32_t *tokens, int n_tokens, int k, int32_t *out) {
    return spec_ngram_propose_min(tokens, n_tokens, k, 1, out);
}

int spec_ngram_propose_min(const int32_t *tokens, int n_tokens, int k, int min_n, int32_t *out) {
    if (k <= 0) return 0;
    for (int n = SPEC_NGRAM_MAX_N; n >= (min_n > 1 ? min_n : 1); n--) {
        if (n_tokens <= n) continue;
        const int32_t *tail = tokens + n_tokens - n;
        // an occurrence ending before the tail starts has at least one follower
        int j = find_back(tokens, n_tokens - n - 1, tail, n);
        if (j < 0) continue;
        int from = j + n, m = n_tokens - from < k ? n_tokens - from : k;
        memcpy(out, tokens + from, (size_t)m * sizeof *out);
        return m;
    }
    return 0;
}

void spec_pred_free(spec_pred *p) {
    free(p->tokens);
    p->tokens = NULL;
    p->n = p->pos = 0;
}

// Re-aligns the cursor after the output left the prediction: the output's last n tokens (n = 4..1) are
// looked up in the prediction, first at or after the old cursor, else before it.
static void pred_realign(spec_pred *p, const int32_t *gen, int n_gen) {
    for (int n = SPEC_NGRAM_MAX_N; n >= 1; n--) {
        if (n_gen < n || p->n < n) continue;
        const int32_t *tail = gen + n_gen - n;
        for (int j = p->pos; j + n <= p->n; j++) // forward from the cursor: the usual case (an edit)
            if (!memcmp(p->tokens + j, tail, (size_t)n * sizeof *tail)) {
                p->pos = j + n;
                return;
            }
        int start = p->pos - 1 < p->n - n ? p->pos - 1 : p->n - n;
        int j = find_back(p->tokens, start, tail, n);
        if (j >= 0) {
            p->pos = j + n;
            return;
        }
    }
    p->pos = p->n; // lost: propose nothing until the output matches again
}

int spec_pred_propose(spec_pred *p, const int32_t *gen, int n_gen, int k, int32_t *out) {
    if (!p->tokens) return 0;
    // Follow the output generated since the last call: the cursor advances while it matches.
    int lost = 0;
    for (int i = p->n_seen; i < n_gen && !lost; i++) {
        if (p->pos < p->n && p->tokens[p->pos] == gen[i]) p->pos++;
        else lost = 1;
    }
    p->n_seen = n_gen;
    if (lost) pred_realign(p, gen, n_gen);
    if (k <= 0) return 0;
    int m = p->n - p->pos < k ? p->n - p->pos : k;
    if (m > 0) memcpy(out, p->tokens + p->pos, (size_t)m * sizeof *out);
    return m > 0 ? m : 0;
}
