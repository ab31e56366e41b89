// Generators of the speculation workloads (see lg_spec_wl.h). Each builds its text in a growing buffer.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loadgen/lg_spec_wl.h"

typedef struct { char *p; size_t len, cap; int oom; } sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap ? 2 * b->cap : 1024) + (size_t)n;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q, b->cap = cap;
    }
}

static const char *pick(lg_rng *r, const char *const *v, size_t n) { return v[lg_rng_u64(r) % n]; }
#define PICK(r, arr) pick(r, arr, sizeof arr / sizeof arr[0])

static const char *const IDENT[] = {"count", "total", "value", "index", "result", "buffer", "offset", "limit",
                                    "width", "height", "scale", "score", "items", "node", "parent", "child"};
static const char *const FUNCS[] = {"clamp", "merge", "lookup", "normalize", "flush", "render", "parse", "emit"};

// One Python function of ~n_lines lines using `var`; written with `as` in place of var (the renamed copy).
static void code_body(sbuf *b, lg_rng *r, const char *var, const char *as, int64_t n_lines, int fn) {
    put(b, "def %s_%d(%s, data):\n", FUNCS[fn % 8], fn, as);
    for (int64_t i = 0; i < n_lines; i++) {
        const char *a = PICK(r, IDENT), *c = PICK(r, IDENT);
        if (!strcmp(a, var)) a = "tmp";
        if (!strcmp(c, var)) c = "acc";
        switch (lg_rng_u64(r) % 4) {
        case 0: put(b, "    %s = %s + %s * %d\n", a, as, c, (int)(lg_rng_u64(r) % 97)); break;
        case 1: put(b, "    if %s > %s:\n        %s -= 1\n", as, a, c); break;
        case 2: put(b, "    data.append(%s(%s, %s))\n", FUNCS[lg_rng_u64(r) % 8], c, as); break;
        default: put(b, "    %s[\"%s\"] = %s\n", "data", a, as); break;
        }
    }
    put(b, "    return %s\n\n", as);
}

static int code_edit(lg_rng *r, int64_t tokens, char **prompt, char **prediction) {
    const char *var = PICK(r, IDENT), *to = "renamed_value";
    int64_t lines = tokens / 11 + 1, n_fn = lines / 12 + 1;
    lg_rng copy = *r; // the renamed copy draws the same lines
    sbuf p = {0}, q = {0};
    put(&p, "Rewrite the following Python code, renaming the variable `%s` to `%s`. Change nothing else and "
            "output the whole code.\n\n```python\n", var, to);
    for (int64_t f = 0; f < n_fn; f++) code_body(&p, r, var, var, lines / n_fn + 1, (int)f);
    put(&p, "```\n");
    put(&q, "```python\n");
    for (int64_t f = 0; f < n_fn; f++) code_body(&q, &copy, var, to, lines / n_fn + 1, (int)f);
    put(&q, "```\n");
    if (p.oom || q.oom) {
        free(p.p), free(q.p);
        return -1;
    }
    *prompt = p.p;
    if (prediction) *prediction = q.p;
    else free(q.p);
    return 0;
}

static const char *const SUBJ[] = {"The river", "The old bridge", "The northern market", "The library",
                                   "The harbour", "The clock tower", "The orchard", "The observatory"};
static const char *const VERB[] = {"was rebuilt", "was first mentioned", "was expanded", "was flooded",
                                   "was sold", "was painted", "was closed", "was reopened"};
static const char *const WHY[] = {"after a long winter", "by the town council", "for the spring festival",
                                  "with money from the guild", "despite many protests", "to everyone's surprise"};

static int quote(lg_rng *r, int64_t tokens, char **prompt) {
    int64_t n_par = tokens / 60 + 2, target = (int64_t)(lg_rng_u64(r) % (uint64_t)n_par);
    sbuf p = {0};
    put(&p, "Read the town chronicle below, then answer the question by quoting the relevant section word "
            "for word.\n\n");
    for (int64_t i = 0; i < n_par; i++) {
        put(&p, "Section %lld.", (long long)i + 1);
        for (int s = 0; s < 4; s++)
            put(&p, " %s %s in %d %s.", PICK(r, SUBJ), PICK(r, VERB), 1700 + (int)(lg_rng_u64(r) % 300),
                PICK(r, WHY));
        put(&p, "\n\n");
    }
    put(&p, "Question: what does section %lld say? Quote it exactly.\n", (long long)target + 1);
    if (p.oom) return free(p.p), -1;
    *prompt = p.p;
    return 0;
}

static const char *const TOPIC[] = {"a lighthouse keeper who finds a map", "a robot learning to paint",
                                    "two rival bakers in a small village", "a dragon afraid of the dark",
                                    "a letter that arrives fifty years late", "a city where it never stops raining"};

static int creative(lg_rng *r, int64_t tokens, char **prompt) {
    sbuf p = {0};
    put(&p, "Write an original short story about %s. Use vivid, varied language and do not repeat yourself.",
        PICK(r, TOPIC));
    for (int64_t n = 20; n < tokens; n += 12) put(&p, " Include a moment involving %s.", PICK(r, TOPIC));
    put(&p, "\n");
    if (p.oom) return free(p.p), -1;
    *prompt = p.p;
    return 0;
}

int lg_spec_wl_build(lg_spec_wl kind, lg_rng *r, int64_t tokens, char **prompt, char **prediction) {
    *prompt = NULL;
    if (prediction) *prediction = NULL;
    switch (kind) {
    case LG_SPEC_CODE_EDIT: return code_edit(r, tokens, prompt, NULL);
    case LG_SPEC_CODE_EDIT_PRED: return code_edit(r, tokens, prompt, prediction);
    case LG_SPEC_QUOTE: return quote(r, tokens, prompt);
    case LG_SPEC_CREATIVE: return creative(r, tokens, prompt);
    }
    return -1;
}
