// Draft proposers that cost no model time: prompt lookup (n-gram) and predicted outputs.
#include <stdlib.h>
#include <string.h>

#include "speculation/spec.h"

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

// Draft length for a match of suffix length L (spec.h): a short match is often a common word or symbol, a long
// one the output copying a passage; cut short, a wrong guess costs few verify rows.
static int ngram_cap(int L, int k) {
    int cap = L < 2 ? 1 : L < 3 ? 2 : L < SPEC_NGRAM_LONG ? 4 : k;
    return cap < k ? cap : k;
}

int spec_ngram_match(const int32_t *tokens, int n_tokens, int *from) {
    if (n_tokens < 2) return 0;
    const int32_t last = tokens[n_tokens - 1];
    int best_l = 0, best_j = -1, work = 0;
    // candidates j: tokens[j] == the last token, newest first; L = the common suffix of tokens[..j] and the
    // whole sequence. Bounded work: a match of SPEC_NGRAM_MAX_L ends the search, and so does the budget (the
    // best so far is used), so no sequence makes a proposal cost more than ~SPEC_NGRAM_WORK comparisons.
    for (int j = n_tokens - 2; j >= 0 && work < SPEC_NGRAM_WORK; j--) {
        work++;
        if (tokens[j] != last) continue;
        int L = 1;
        while (L < SPEC_NGRAM_MAX_L && L <= j && tokens[j - L] == tokens[n_tokens - 1 - L]) L++;
        work += L;
        if (L > best_l) best_l = L, best_j = j;
        if (L == SPEC_NGRAM_MAX_L) break;
    }
    if (from) *from = best_j + 1;
    return best_l;
}

int spec_ngram_draft(const int32_t *tokens, int n_tokens, int len, int from, int k, int min_n, int32_t *out) {
    if (k <= 0 || len == 0 || len < (min_n > 1 ? min_n : 1)) return 0;
    const int cap = ngram_cap(len, k);
    const int m = n_tokens - from < cap ? n_tokens - from : cap;
    memcpy(out, tokens + from, (size_t)m * sizeof *out);
    return m;
}

int spec_ngram_propose_min(const int32_t *tokens, int n_tokens, int k, int min_n, int32_t *out) {
    if (k <= 0) return 0;
    int from = 0;
    const int len = spec_ngram_match(tokens, n_tokens, &from);
    return spec_ngram_draft(tokens, n_tokens, len, from, k, min_n, out);
}

void spec_pred_free(spec_pred *p) {
    free(p->tokens);
    memset(p, 0, sizeof *p);
}

// Re-aligns the cursor after the output left the prediction: the output's last n tokens (n = 4..1) are
// looked up in the prediction, first at or after the old cursor, else before it. Tokens found ahead of the
// cursor on 2 or more count as the prediction's tokens the output contains (one token alone is too common a
// match to say so). The n tokens matched are the agreement (run) the rejoin rule counts from.
static void pred_realign(spec_pred *p, const int32_t *gen, int n_gen) {
    for (int n = SPEC_NGRAM_MAX_N; n >= 1; n--) {
        if (n_gen < n || p->n < n) continue;
        const int32_t *tail = gen + n_gen - n;
        int j = -1;
        for (int f = p->pos; f + n <= p->n && j < 0; f++) // forward from the cursor: the usual case (an edit)
            if (!memcmp(p->tokens + f, tail, (size_t)n * sizeof *tail)) j = f;
        if (j >= 0 && n >= 2) p->n_followed += n;
        if (j < 0) j = find_back(p->tokens, p->pos - 1 < p->n - n ? p->pos - 1 : p->n - n, tail, n);
        if (j >= 0) {
            p->pos = j + n;
            p->run = n;
            if (n >= SPEC_PRED_REJOIN) p->left = 0;
            return;
        }
    }
    p->pos = p->n; // lost: propose nothing until the output matches again
}

void spec_pred_follow(spec_pred *p, const int32_t *gen, int n_gen) {
    if (!p->tokens) return;
    // a draft it could have made (it agrees with the output, after having left it once, and did not draft):
    // how far the output follows it is what such a draft would have had accepted, known for free
    const int shadow = p->strayed && !p->left && !p->drafting && p->pos < p->n;
    int lost = 0, m = 0;
    for (int i = p->n_seen; i < n_gen && !lost; i++) {
        if (p->pos < p->n && p->tokens[p->pos] == gen[i]) {
            p->pos++, p->n_followed++, m++;
            if (++p->run >= SPEC_PRED_REJOIN) p->left = 0;
        } else lost = 1;
    }
    if (shadow && m + lost > 0) p->sh_n = m + lost, p->sh_m = m;
    if (n_gen > p->n_seen) p->drafting = 0, p->n_seen = n_gen;
    if (!lost) return;
    p->run = 0, p->left = 1, p->strayed = 1;
    pred_realign(p, gen, n_gen);
}

int spec_pred_propose(spec_pred *p, const int32_t *gen, int n_gen, int k, int32_t *out) {
    if (!p->tokens) return 0;
    spec_pred_follow(p, gen, n_gen);
    if (k <= 0) return 0;
    int m = p->n - p->pos < k ? p->n - p->pos : k;
    if (m <= 0) return 0;
    memcpy(out, p->tokens + p->pos, (size_t)m * sizeof *out);
    p->drafting = 1;
    return m;
}
