#include "loadgen/lg_workload.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loadgen/lg_class.h"
#include "loadgen/lg_rng.h"
#include "loadgen/lg_spec_wl.h"

// Common short English words: each is one token (with its leading space) in typical BPE and SPM vocabularies,
// so N random words tokenize to roughly N tokens.
static const char *const WORDS[] = {
    "the",   "of",    "and",   "to",    "in",    "is",    "you",   "that",  "it",    "he",    "was",   "for",
    "on",    "are",   "as",    "with",  "his",   "they",  "at",    "be",    "this",  "have",  "from",  "or",
    "one",   "had",   "by",   "word",  "but",   "not",   "what",  "all",   "were",  "we",    "when",  "your",
    "can",   "said",  "there", "use",   "an",    "each",  "which", "she",   "do",    "how",   "their", "if",
    "will",  "up",    "other", "about", "out",   "many",  "then",  "them",  "these", "so",    "some",  "her",
    "would", "make",  "like",  "him",   "into",  "time",  "has",   "look",  "two",   "more",  "write", "go",
    "see",   "number", "no",   "way",   "could", "people", "my",   "than",  "first", "water", "been",  "call",
    "who",   "oil",   "its",   "now",   "find",  "long",  "down",  "day",   "did",   "get",   "come",  "made",
    "may",   "part",  "over",  "new",   "sound", "take",  "only",  "little", "work", "know",  "place", "year",
    "live",  "me",    "back",  "give",  "most",  "very",  "after", "thing", "our",   "just",  "name",  "good",
    "man",   "think", "say",   "great", "where", "help",  "through", "much", "before", "line", "right", "too",
    "mean",  "old",   "any",   "same",  "tell",  "boy",   "follow", "came", "want",  "show",  "also",  "around",
    "form",  "three", "small", "set",   "put",   "end",   "does",  "another", "well", "large", "must", "big",
    "even",  "such",  "because", "turn", "here", "why",   "ask",   "went",  "men",   "read",  "need",  "land",
    "home",  "us",    "move",  "try",   "kind",  "hand",  "picture", "again", "change", "off", "play", "spell",
    "air",   "away",  "animal", "house", "point", "page", "letter", "mother", "answer", "found", "study", "still",
};
#define N_WORDS (sizeof WORDS / sizeof WORDS[0])

struct lg_workload {
    lg_wl_cfg cfg;
    char **lines; // jsonl: owned lines
    size_t n_lines;
    json_t **hist; // multi-turn: per conversation slot, the messages so far (owned), (num_groups,)
};

// Streams of the per-request generator, so different uses of the seed never overlap.
enum { S_LEN = 1, S_TEXT = 2, S_PREFIX = 3, S_CODE = 4, S_CLASS = 5, S_PRIO = 6 };

static uint64_t stream_id(int kind, int64_t idx) { return ((uint64_t)idx << 4) | (uint64_t)kind; }

static int64_t spread(lg_rng *r, int64_t len, double ratio) {
    int64_t lo = (int64_t)((double)len * (1.0 - ratio)), hi = (int64_t)((double)len * (1.0 + ratio));
    if (lo < 1) lo = 1;
    if (hi < lo) hi = lo;
    return lg_rng_range(r, lo, hi);
}

// Appends n random words (space-separated) to a growing buffer. Returns NULL on OOM (buffer freed).
static char *words(char *buf, lg_rng *r, int64_t n) {
    size_t len = buf ? strlen(buf) : 0, cap = len + (size_t)n * 9 + 2;
    char *b = realloc(buf, cap);
    if (!b) {
        free(buf);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        const char *w = WORDS[lg_rng_u64(r) % N_WORDS];
        size_t wl = strlen(w);
        if (len) b[len++] = ' ';
        memcpy(b + len, w, wl);
        len += wl;
    }
    b[len] = 0;
    return b;
}

static const char *const IDENTS[] = {"count", "total", "value", "index", "result", "buffer", "offset", "limit",
                                     "width", "height", "scale", "score", "items", "node", "parent", "child"};
#define N_IDENTS (sizeof IDENTS / sizeof IDENTS[0])

// A code snippet of roughly `tokens` tokens and an instruction to rename one identifier in it.
static char *code_edit_prompt(lg_rng *r, int64_t tokens) {
    size_t cap = (size_t)tokens * 12 + 512, len = 0;
    char *b = malloc(cap);
    if (!b) return NULL;
    const char *from = IDENTS[lg_rng_u64(r) % N_IDENTS];
    const char *to = "renamed_var";
    len += (size_t)snprintf(b + len, cap - len,
                            "Rewrite the following Python code, renaming the variable `%s` to `%s`. Change nothing "
                            "else and output the whole code.\n\n```python\ndef process(%s, data):\n",
                            from, to, from);
    int64_t lines = tokens / 12 + 1;
    for (int64_t i = 0; i < lines && len + 160 < cap; i++) {
        const char *a = IDENTS[lg_rng_u64(r) % N_IDENTS], *c = IDENTS[lg_rng_u64(r) % N_IDENTS];
        switch (lg_rng_u64(r) % 3) {
        case 0: len += (size_t)snprintf(b + len, cap - len, "    %s = %s + %s * %d\n", a, from, c, (int)(i % 97)); break;
        case 1: len += (size_t)snprintf(b + len, cap - len, "    if %s > %s:\n        %s -= 1\n", from, a, c); break;
        default: len += (size_t)snprintf(b + len, cap - len, "    data.append(%s(%s, %s))\n", a, c, from); break;
        }
    }
    snprintf(b + len, cap - len, "    return %s\n```\n", from);
    return b;
}

int lg_ds_parse(const char *s, lg_ds_kind *kind, const char **path, tc_err *err) {
    *path = NULL;
    if (!strcmp(s, "random")) *kind = LG_DS_RANDOM;
    else if (!strcmp(s, "shared-prefix")) *kind = LG_DS_SHARED_PREFIX;
    else if (!strcmp(s, "multi-turn")) *kind = LG_DS_MULTI_TURN;
    else if (!strcmp(s, "repetitive")) *kind = LG_DS_REPETITIVE;
    else if (!strcmp(s, "mixed-length")) *kind = LG_DS_MIXED_LENGTH;
    else if (!strncmp(s, "jsonl:", 6) && s[6]) *kind = LG_DS_JSONL, *path = s + 6;
    else if (!strcmp(s, "code-edit")) *kind = LG_DS_CODE_EDIT;
    else if (!strcmp(s, "code-edit-pred")) *kind = LG_DS_CODE_EDIT_PRED;
    else if (!strcmp(s, "quote")) *kind = LG_DS_QUOTE;
    else if (!strcmp(s, "creative")) *kind = LG_DS_CREATIVE;
    else
        return tc_err_set(err, TC_ERR_INVALID,
                          "unknown dataset '%s' (random, shared-prefix, multi-turn, repetitive, mixed-length, jsonl:FILE, "
                          "code-edit, code-edit-pred, quote, creative)", s);
    return 0;
}

static int load_jsonl(lg_workload *w, tc_err *err) {
    FILE *f = fopen(w->cfg.path, "r");
    if (!f) return tc_err_set(err, TC_ERR_IO, "cannot open dataset '%s'", w->cfg.path);
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t n;
    int rc = 0;
    while ((n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ')) line[--n] = 0;
        if (n == 0) continue;
        json_error_t je;
        json_t *o = json_loadb(line, (size_t)n, 0, &je);
        int good = json_is_object(o) && (json_is_string(json_object_get(o, "prompt")) ||
                                         json_is_array(json_object_get(o, "messages")));
        json_decref(o);
        if (!good) {
            rc = tc_err_set(err, TC_ERR_FORMAT, "%s:%zu: expected a JSON object with \"prompt\" or \"messages\"",
                            w->cfg.path, lineno);
            break;
        }
        char **l = realloc(w->lines, (w->n_lines + 1) * sizeof *l);
        char *copy = strdup(line);
        if (!l || !copy) {
            free(copy);
            if (l) w->lines = l;
            rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory reading dataset");
            break;
        }
        w->lines = l;
        w->lines[w->n_lines++] = copy;
    }
    free(line);
    fclose(f);
    if (!rc && w->n_lines == 0) rc = tc_err_set(err, TC_ERR_FORMAT, "dataset '%s' has no requests", w->cfg.path);
    return rc;
}

int lg_workload_init(lg_workload **out, const lg_wl_cfg *cfg, tc_err *err) {
    *out = NULL;
    if (cfg->input_len < 1 || cfg->output_len < 1 || cfg->range_ratio < 0 || cfg->range_ratio >= 1 ||
        cfg->num_groups < 1 || cfg->turns < 1 || cfg->prefix_len < 0 ||
        (cfg->kind == LG_DS_MIXED_LENGTH && (cfg->long_len < 1 || cfg->long_frac < 0 || cfg->long_frac > 1)))
        return tc_err_set(err, TC_ERR_INVALID, "workload: lengths must be >= 1 and 0 <= range-ratio < 1");
    lg_workload *w = calloc(1, sizeof *w);
    if (!w) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    w->cfg = *cfg;
    int rc = 0;
    if (cfg->kind == LG_DS_JSONL) rc = load_jsonl(w, err);
    if (!rc && cfg->kind == LG_DS_MULTI_TURN) {
        w->hist = calloc((size_t)cfg->num_groups, sizeof *w->hist);
        if (!w->hist) rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    }
    if (rc) {
        lg_workload_free(w);
        return rc;
    }
    *out = w;
    return 0;
}

void lg_workload_reset(lg_workload *w) {
    if (!w->hist) return;
    for (int64_t i = 0; i < w->cfg.num_groups; i++) {
        json_decref(w->hist[i]);
        w->hist[i] = NULL;
    }
}

void lg_workload_reseed(lg_workload *w, uint64_t seed) {
    lg_workload_reset(w);
    w->cfg.seed = seed;
}

void lg_workload_free(lg_workload *w) {
    if (!w) return;
    lg_workload_reset(w);
    free(w->hist);
    for (size_t i = 0; i < w->n_lines; i++) free(w->lines[i]);
    free(w->lines);
    free(w);
}

void lg_workload_class(const lg_workload *w, int64_t idx, int *has_prio, int *prio, int *len_class) {
    const lg_wl_cfg *c = &w->cfg;
    lg_rng r;
    *has_prio = c->prio != NULL;
    *prio = 0;
    if (c->prio) {
        lg_rng_seed(&r, c->seed, stream_id(S_PRIO, idx));
        *prio = lg_prio_mix_pick(c->prio, lg_rng_uniform(&r));
    }
    *len_class = LG_LEN_NONE;
    if (c->kind == LG_DS_MIXED_LENGTH) {
        lg_rng_seed(&r, c->seed, stream_id(S_CLASS, idx));
        *len_class = lg_rng_uniform(&r) < c->long_frac ? LG_LEN_LONG : LG_LEN_SHORT;
    }
}

int64_t lg_workload_depends_on(const lg_workload *w, int64_t idx) {
    if (w->cfg.kind != LG_DS_MULTI_TURN) return -1;
    int64_t g = w->cfg.num_groups, turn = (idx / g) % w->cfg.turns;
    return turn > 0 ? idx - g : -1;
}

int lg_workload_wants_text(const lg_workload *w) { return w->cfg.kind == LG_DS_MULTI_TURN; }

static json_t *msg(const char *role, const char *content) {
    return json_pack("{s:s, s:s}", "role", role, "content", content);
}

// The user text of multi-turn request idx.
static char *turn_text(const lg_workload *w, int64_t idx) {
    lg_rng r;
    lg_rng_seed(&r, w->cfg.seed, stream_id(S_TEXT, idx));
    return words(NULL, &r, spread(&r, w->cfg.input_len, w->cfg.range_ratio));
}

int lg_workload_complete(lg_workload *w, int64_t idx, const char *text, size_t len, tc_err *err) {
    if (w->cfg.kind != LG_DS_MULTI_TURN) return 0;
    int64_t slot = idx % w->cfg.num_groups;
    if (lg_workload_depends_on(w, idx) < 0) { // first turn starts a new conversation
        json_decref(w->hist[slot]);
        w->hist[slot] = json_array();
    }
    char *u = turn_text(w, idx);
    json_t *a = json_stringn(text ? text : "", text ? len : 0);
    if (!a) a = json_string(""); // invalid UTF-8 from the server: keep the turn, drop its text
    if (!u || !w->hist[slot] || !a) {
        free(u);
        json_decref(a);
        return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    }
    json_array_append_new(w->hist[slot], msg("user", u));
    json_array_append_new(w->hist[slot], json_pack("{s:s, s:o}", "role", "assistant", "content", a));
    free(u);
    return 0;
}

// Joins messages into a plain prompt for the completions endpoint.
static char *flatten(json_t *msgs) {
    size_t cap = 64, len = 0, i;
    char *b = malloc(cap);
    json_t *m;
    if (!b) return NULL;
    b[0] = 0;
    json_array_foreach(msgs, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        const char *c = json_string_value(json_object_get(m, "content"));
        size_t need = len + (role ? strlen(role) : 4) + (c ? strlen(c) : 0) + 8;
        if (need > cap) {
            while (cap < need) cap *= 2;
            char *nb = realloc(b, cap);
            if (!nb) {
                free(b);
                return NULL;
            }
            b = nb;
        }
        len += (size_t)snprintf(b + len, cap - len, "%s: %s\n", role ? role : "user", c ? c : "");
    }
    return b;
}

// The messages of request idx by dataset kind (lr: its length stream, in_len its drawn prompt length), appended
// to msgs; *text (owned; NULL: out of memory) the prompt's text, *pred (owned, or NULL) a predicted output;
// *out_len (a jsonl max_tokens) and *est_input (the estimated prompt tokens) as the dataset sets them.
static void wl_messages(lg_workload *w, int64_t idx, lg_rng *lr, int64_t in_len, json_t *msgs, char **text,
                        char **pred, int64_t *out_len, int64_t *est_input) {
    const lg_wl_cfg *c = &w->cfg;
    lg_rng r;
    lg_rng_seed(&r, c->seed, stream_id(S_TEXT, idx));
    switch (c->kind) {
    case LG_DS_RANDOM:
        *text = words(NULL, &r, in_len);
        if (*text) json_array_append_new(msgs, msg("user", *text));
        break;
    case LG_DS_SHARED_PREFIX: {
        lg_rng pr;
        lg_rng_seed(&pr, c->seed, stream_id(S_PREFIX, idx % c->num_groups));
        char *prefix = words(NULL, &pr, c->prefix_len);
        *text = words(NULL, &r, in_len);
        if (prefix && *text) {
            json_array_append_new(msgs, msg("system", prefix));
            json_array_append_new(msgs, msg("user", *text));
        }
        *est_input = c->prefix_len + in_len;
        free(prefix);
        break;
    }
    case LG_DS_MULTI_TURN: {
        *text = turn_text(w, idx);
        json_t *h = w->hist[idx % c->num_groups];
        if (lg_workload_depends_on(w, idx) >= 0 && h) {
            size_t i;
            json_t *m;
            json_array_foreach(h, i, m) {
                json_array_append(msgs, m);
                const char *s = json_string_value(json_object_get(m, "content"));
                *est_input += s ? (int64_t)strlen(s) / 5 : 0;
            }
        }
        if (*text) json_array_append_new(msgs, msg("user", *text));
        break;
    }
    case LG_DS_MIXED_LENGTH: {
        int hp, pr, lc;
        lg_workload_class(w, idx, &hp, &pr, &lc);
        if (lc == LG_LEN_LONG) *est_input = in_len = spread(lr, c->long_len, c->range_ratio);
        *text = words(NULL, &r, in_len);
        if (*text) json_array_append_new(msgs, msg("user", *text));
        break;
    }
    case LG_DS_REPETITIVE:
        *text = code_edit_prompt(&r, in_len);
        if (*text) json_array_append_new(msgs, msg("user", *text));
        break;
    case LG_DS_CODE_EDIT:
    case LG_DS_CODE_EDIT_PRED:
    case LG_DS_QUOTE:
    case LG_DS_CREATIVE: {
        static const lg_spec_wl map[] = {LG_SPEC_CODE_EDIT, LG_SPEC_CODE_EDIT_PRED, LG_SPEC_QUOTE,
                                            LG_SPEC_CREATIVE};
        if (lg_spec_wl_build(map[c->kind - LG_DS_CODE_EDIT], &r, in_len, text, pred) == 0) {
            json_array_append_new(msgs, msg("user", *text));
            *est_input = (int64_t)strlen(*text) / 4;
        }
        break;
    }
    case LG_DS_JSONL: {
        json_t *o = json_loads(w->lines[(size_t)idx % w->n_lines], 0, NULL);
        json_t *p = json_object_get(o, "prompt"), *m = json_object_get(o, "messages");
        json_t *mt = json_object_get(o, "max_tokens");
        if (json_is_integer(mt) && json_integer_value(mt) > 0) *out_len = (int64_t)json_integer_value(mt);
        if (json_is_string(p)) {
            *text = strdup(json_string_value(p));
            if (*text) json_array_append_new(msgs, msg("user", *text));
        } else if (json_is_array(m)) {
            json_array_extend(msgs, m);
            *text = strdup("");
        }
        char *flat = flatten(msgs);
        *est_input = flat ? (int64_t)strlen(flat) / 4 : 0;
        free(flat);
        json_decref(o);
        break;
    }
    }
}

// The request's fields around its messages: model, messages (chat) or one prompt string (completions),
// max_tokens, prediction (pred, or NULL), sampling and streaming, ignore_eos, the class's priority and the TTFT
// target. 0, or TC_ERR_NOMEM with err set.
static int wl_request(lg_workload *w, int64_t idx, json_t *msgs, int64_t out_len, const char *pred, json_t *req,
                      tc_err *err) {
    const lg_wl_cfg *c = &w->cfg;
    json_object_set_new(req, "model", json_string(c->model ? c->model : ""));
    if (c->chat) {
        json_object_set(req, "messages", msgs);
    } else {
        json_t *only = json_array_size(msgs) == 1 ? json_object_get(json_array_get(msgs, 0), "content") : NULL;
        char *flat = json_is_string(only) ? strdup(json_string_value(only)) : flatten(msgs);
        if (!flat) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        json_object_set_new(req, "prompt", json_string(flat));
        free(flat);
    }
    json_object_set_new(req, "max_tokens", json_integer(out_len));
    if (pred) json_object_set_new(req, "prediction", json_pack("{s:s, s:s}", "type", "content", "content", pred));
    json_object_set_new(req, "temperature", json_real(0.0));
    json_object_set_new(req, "stream", json_true());
    json_object_set_new(req, "stream_options", json_pack("{s:b}", "include_usage", 1));
    if (c->ignore_eos) {
        json_object_set_new(req, "ignore_eos", json_true());
        json_object_set_new(req, "min_tokens", json_integer(out_len));
    }
    int hp, pr, lc;
    lg_workload_class(w, idx, &hp, &pr, &lc);
    if (hp) json_object_set_new(req, c->prio_field ? c->prio_field : "priority", json_integer(pr));
    if (c->ttft_slo_ms > 0)
        json_object_set_new(req, c->ttft_field ? c->ttft_field : "ttft_slo_ms", json_real(c->ttft_slo_ms));
    return 0;
}

int lg_workload_body(lg_workload *w, int64_t idx, char **body, int64_t *est_input, tc_err *err) {
    const lg_wl_cfg *c = &w->cfg;
    lg_rng lr;
    lg_rng_seed(&lr, c->seed, stream_id(S_LEN, idx));
    int64_t in_len = spread(&lr, c->input_len, c->range_ratio);
    int64_t out_len = spread(&lr, c->output_len, c->range_ratio);
    json_t *msgs = json_array(), *req = json_object();
    char *text = NULL, *pred = NULL;
    int rc = 0;
    *body = NULL;
    *est_input = in_len;
    wl_messages(w, idx, &lr, in_len, msgs, &text, &pred, &out_len, est_input);
    if (!text || !msgs || !req) {
        rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory building request %lld", (long long)idx);
        goto done;
    }
    rc = wl_request(w, idx, msgs, out_len, pred, req, err);
    if (rc) goto done;
    *body = json_dumps(req, JSON_COMPACT);
    if (!*body) rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
done:
    free(text);
    free(pred);
    json_decref(msgs);
    json_decref(req);
    return rc;
}
