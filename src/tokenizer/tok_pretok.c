// Byte-level BPE pre-tokenizers: the regex sequence named by tokenizer.ggml.pre, compiled once with PCRE2
// (UTF + UCP, JIT when available). Splitting follows llama.cpp's semantics: each regex of the sequence
// splits every piece from the previous stage into its matches and the gaps between them, and both are kept.
// The compiled patterns and the match context are read-only after load; match data is per call, so
// splitting is thread-safe.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

#define TOK_MAX_RX 6

struct tok_pretok {
    pcre2_code *rx[TOK_MAX_RX];
    int n_rx;
    pcre2_match_context *mctx;
};

// The regexes, as llama.cpp uses them per pre-tokenizer type. \s is widened to Unicode White_Space at compile
// time (PCRE2's UCP \s lacks U+0085, which HF/Oniguruma and llama.cpp count as space).
#define RX_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RX_LLAMA3_HEAD                                                                                       \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
#define RX_LLAMA3_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_LLAMA3 RX_LLAMA3_HEAD "\\p{N}{1,3}" RX_LLAMA3_TAIL
#define RX_QWEN2 RX_LLAMA3_HEAD "\\p{N}" RX_LLAMA3_TAIL
#define RX_CJK "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
#define RX_PORO " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}\\x{06D4}\\x{060C})]+"
#define RX_TEKKEN                                                                                            \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"             \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"             \
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

// o200k (gpt-oss, GPT-4o): tiktoken's pattern as tokenizer.json writes it; the case-insensitive
// contraction group is PCRE2's own (?i:...)
#define RX_O200K_UPPER "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define RX_O200K_LOWER "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
#define RX_O200K_CONTRACTION "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
#define RX_O200K                                                                                             \
    "[^\\r\\n\\p{L}\\p{N}]?" RX_O200K_UPPER "*" RX_O200K_LOWER "+" RX_O200K_CONTRACTION "|"                  \
    "[^\\r\\n\\p{L}\\p{N}]?" RX_O200K_UPPER "+" RX_O200K_LOWER "*" RX_O200K_CONTRACTION "|"                  \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

typedef struct {
    const char *names; // '|'-separated tokenizer.ggml.pre values
    int ignore_merges;
    const char *rx[TOK_MAX_RX];
} pretok_def;

static const pretok_def defs[] = {
    {"default", 0, {"[\\p{P}\\$\\+<=>\\^~\\|]+", RX_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}},
    {"llama3|llama-v3|llama-bpe|falcon3", 1, {RX_LLAMA3}},
    {"dbrx|smaug-bpe|chatglm-bpe", 0, {RX_LLAMA3}},
    {"deepseek-llm",
     0,
     {"[\\r\\n]", "\\s?\\p{L&}+",
      "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
      // `\s+$` with a look-behind so a long inner run of spaces is not rescanned from every position
      "(?<!\\s)\\s+$", RX_CJK, "\\p{N}+"}},
    {"deepseek-coder", 0, {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RX_CJK, "\\p{N}"}},
    {"deepseek-v3",
     0,
     {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
      "?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"falcon", 0, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RX_GPT2, "[0-9][0-9][0-9]"}},
    {"starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b", 0, {"\\p{N}", RX_GPT2}},
    {"gpt-2|gpt2|phi-2|mpt|olmo|gpt-neox|jais|jina-es|jina-de|gigachat|jina-v1-en|jina-v2-es|jina-v2-de|"
     "jina-v2-code|roberta-bpe|trillion",
     0,
     {RX_GPT2}},
    {"qwen2|qwen2.5|qwen-2.5|deepseek-r1-qwen|megrez|stablelm2|hunyuan", 0, {RX_QWEN2}},
    {"poro-chat|bloom|gpt3-finnish", 0, {RX_PORO}},
    {"viking", 0, {RX_PORO, "\\p{N}"}},
    {"tekken", 1, {RX_TEKKEN}},
    {"gpt-4o", 1, {RX_O200K}},
};

static int name_in(const char *names, const char *name) {
    size_t n = strlen(name);
    for (const char *p = names; *p;) {
        const char *e = strchr(p, '|');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && !memcmp(p, name, n)) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

// Widens \s / \S to include U+0085. out must hold 4 * strlen(rx) + 1 bytes.
static void widen_space(const char *rx, char *out) {
    int in_class = 0;
    char *o = out;
    for (const char *p = rx; *p; p++) {
        if (*p == '\\' && p[1]) {
            if (p[1] == 's' || p[1] == 'S') {
                const char *rep = in_class ? "\\s\\x{85}" : p[1] == 's' ? "[\\s\\x{85}]" : "[^\\s\\x{85}]";
                size_t l = strlen(rep);
                memcpy(o, rep, l), o += l, p++;
                continue;
            }
            *o++ = *p++;
            *o++ = *p;
            continue;
        }
        if (*p == '[' && !in_class) {
            in_class = 1;
            *o++ = *p;
            if (p[1] == '^') *o++ = *++p;
            continue;
        }
        if (*p == ']' && in_class) in_class = 0;
        *o++ = *p;
    }
    *o = 0;
}

void tok_pretok_free(tok_pretok *p) {
    if (!p) return;
    for (int i = 0; i < p->n_rx; i++)
        pcre2_code_free(p->rx[i]);
    pcre2_match_context_free(p->mctx);
    free(p);
}

int tok_pretok_new(const char *pre_name, tok_pretok **out, int *ignore_merges, tc_err *err) {
    *out = NULL;
    const char *name = pre_name ? pre_name : "default";
    const pretok_def *d = NULL;
    for (size_t i = 0; i < sizeof defs / sizeof defs[0] && !d; i++)
        if (name_in(defs[i].names, name)) d = &defs[i];
    if (!d)
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "unsupported pre-tokenizer '%s' (tokenizer.ggml.pre)",
                          name);
    tok_pretok *p = calloc(1, sizeof *p);
    if (!p) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    p->mctx = pcre2_match_context_create(NULL);
    if (!p->mctx) goto nomem;
    // a safety net only: the patterns are linear on any input, but a hostile one must not hang a request
    pcre2_set_match_limit(p->mctx, 20u * 1000 * 1000);
    for (int i = 0; i < TOK_MAX_RX && d->rx[i]; i++) {
        size_t n = strlen(d->rx[i]);
        char *w = malloc(4 * n + 1);
        if (!w) goto nomem;
        widen_space(d->rx[i], w);
        int ec;
        PCRE2_SIZE eo;
        p->rx[i] = pcre2_compile((PCRE2_SPTR)w, PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY, &ec,
                                 &eo, NULL);
        free(w);
        if (!p->rx[i]) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(ec, msg, sizeof msg);
            tok_pretok_free(p);
            return tc_err_set(err, TC_ERR, "pre-tokenizer '%s' regex %d: %s at %zu", name, i, (char *)msg,
                              (size_t)eo);
        }
        p->n_rx = i + 1;
        (void)pcre2_jit_compile(p->rx[i], PCRE2_JIT_COMPLETE); // falls back to the interpreter if unavailable
    }
    *ignore_merges = d->ignore_merges;
    *out = p;
    return 0;
nomem:
    tok_pretok_free(p);
    return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
}

typedef struct {
    tok_span *s;
    size_t n, cap;
} span_vec;

static int span_push(span_vec *v, uint32_t off, uint32_t len) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 256;
        tok_span *p = realloc(v->s, cap * sizeof *p);
        if (!p) return TC_ERR_NOMEM;
        v->s = p, v->cap = cap;
    }
    v->s[v->n++] = (tok_span){off, len};
    return 0;
}

// Splits one piece by one regex into matches and gaps, appended to out.
static int split_one(const tok_pretok *p, const pcre2_code *rx, pcre2_match_data *md, const char *text,
                     tok_span sp, span_vec *out) {
    PCRE2_SPTR subj = (PCRE2_SPTR)(text + sp.off);
    PCRE2_SIZE len = sp.len, pos = 0, last = 0;
    while (pos < len) {
        int rc = pcre2_match(rx, subj, len, pos, 0, md, p->mctx);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) rc = pcre2_match(rx, subj, len, pos, PCRE2_NO_JIT, md, p->mctx);
        if (rc < 0) break; // no match, or a limit hit: the rest stays one piece
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        PCRE2_SIZE ms = ov[0], me = ov[1];
        if (me <= ms) { // empty match (no pattern here produces one): step over one character
            pos = ms + (PCRE2_SIZE)tok_utf8_len(subj[ms]);
            continue;
        }
        if (ms > last && span_push(out, sp.off + (uint32_t)last, (uint32_t)(ms - last))) return TC_ERR_NOMEM;
        if (span_push(out, sp.off + (uint32_t)ms, (uint32_t)(me - ms))) return TC_ERR_NOMEM;
        last = pos = me;
    }
    if (last < len && span_push(out, sp.off + (uint32_t)last, (uint32_t)(len - last))) return TC_ERR_NOMEM;
    return 0;
}

int tok_pretok_split(const tok_pretok *p, const char *text, size_t len, tok_span **out, size_t *n,
                     tc_err *err) {
    *out = NULL, *n = 0;
    if (len == 0) return 0;
    if (len > UINT32_MAX / 2)
        return tc_err_set(err, TC_ERR_INVALID, "text too long to tokenize (%zu bytes)", len);
    span_vec cur = {0}, next = {0};
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    int rc = (!md || span_push(&cur, 0, (uint32_t)len)) ? TC_ERR_NOMEM : 0;
    for (int r = 0; r < p->n_rx && !rc; r++) {
        next.n = 0;
        for (size_t i = 0; i < cur.n && !rc; i++)
            rc = split_one(p, p->rx[r], md, text, cur.s[i], &next);
        span_vec t = cur;
        cur = next, next = t;
    }
    pcre2_match_data_free(md);
    free(next.s);
    if (rc) {
        free(cur.s);
        return tc_err_set(err, rc, "out of memory in pre-tokenizer");
    }
    *out = cur.s, *n = cur.n;
    return 0;
}
