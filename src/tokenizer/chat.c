// Chat templates without a Jinja interpreter: each family is a small renderer, and the details that vary
// between models of one family (default system prompt, BOS placement, Mistral spacing, Llama 3.1 date
// preamble, DeepSeek end-of-sentence after user turns) are read from the template text with distinctive
// markers. The reference is what HF transformers' Jinja rendering gives for plain system/user/assistant
// messages without tools; tests/ref/test_chat_ref.py checks it byte for byte.
// Every byte that comes from a message (content, and the role where a family passes any role through) is
// recorded as a plain-text range, so that chat_encode recognizes control tokens only in the template's own
// text: a user who types "<|im_end|><|im_start|>system" gets those characters, not a forged turn.
#include "tokenizer/chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// DeepSeek markers: <｜User｜> <｜Assistant｜> <｜end▁of▁sentence｜> (fullwidth bars, U+2581)
#define DS_USER "<\xef\xbd\x9cUser\xef\xbd\x9c>"
#define DS_ASSISTANT "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"
#define DS_EOS "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"

// --- names

static const char *const fam_names[CHAT_COUNT] = {
    [CHAT_UNKNOWN] = "unknown", [CHAT_CHATML] = "chatml", [CHAT_LLAMA2] = "llama2",
    [CHAT_LLAMA3] = "llama3",   [CHAT_MISTRAL] = "mistral", [CHAT_GEMMA] = "gemma",
    [CHAT_PHI3] = "phi3",       [CHAT_ZEPHYR] = "zephyr",   [CHAT_DEEPSEEK] = "deepseek",
    [CHAT_QWEN3] = "qwen3",
};

int chat_family_reasons(chat_family f) { return f == CHAT_QWEN3 || f == CHAT_DEEPSEEK; }
int chat_family_has_thinking_switch(chat_family f) { return f == CHAT_QWEN3; }
int chat_family_opens_think(chat_family f) { return f == CHAT_DEEPSEEK; }

const char *chat_family_name(chat_family f) {
    return (f >= 0 && f < CHAT_COUNT) ? fam_names[f] : "unknown";
}

chat_family chat_family_from_name(const char *name) {
    if (!name) return CHAT_UNKNOWN;
    for (int f = 1; f < CHAT_COUNT; f++)
        if (!strcmp(name, fam_names[f])) return (chat_family)f;
    // a few common aliases (model family names)
    static const struct { const char *alias; chat_family f; } aliases[] = {
        {"smollm2", CHAT_CHATML}, {"qwen2", CHAT_CHATML},  {"qwen2.5", CHAT_CHATML},   {"hermes", CHAT_CHATML},
        {"llama-2", CHAT_LLAMA2}, {"llama-3", CHAT_LLAMA3}, {"gemma2", CHAT_GEMMA},    {"gemma3", CHAT_GEMMA},
        {"phi-3", CHAT_PHI3},     {"phi3.5", CHAT_PHI3},    {"tinyllama", CHAT_ZEPHYR}, {"deepseek-r1", CHAT_DEEPSEEK},
    };
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcmp(name, aliases[i].alias)) return aliases[i].f;
    return CHAT_UNKNOWN;
}

// --- detection

static int has(const char *s, const char *needle) { return strstr(s, needle) != NULL; }

chat_family chat_family_for_arch(const char *arch) {
    return arch && !strncmp(arch, "gemma", 5) ? CHAT_GEMMA : CHAT_UNKNOWN;
}

chat_family chat_detect(const char *t) {
    if (!t || !*t) return CHAT_UNKNOWN;
    // Tool-calling formats whose plain-chat rendering is their own (not one of ours): Command-R, functionary,
    // firefunction. Checked first because they reuse Llama 3 header tokens.
    if (has(t, "<|START_OF_TURN_TOKEN|>")) return CHAT_UNKNOWN;
    if (has(t, "functools[") || has(t, "<function=") || has(t, ">>>all") || has(t, "{# version=v3"))
        return CHAT_UNKNOWN;
    if (has(t, "<|im_start|>")) {
        // Phi-4 (<|im_sep|>) and SmolVLM (<end_of_utterance>) look like ChatML but are not.
        if (has(t, "<|im_sep|>") || has(t, "<end_of_utterance>")) return CHAT_UNKNOWN;
        if (has(t, "<think>") && has(t, "enable_thinking")) return CHAT_QWEN3;
        return CHAT_CHATML;
    }
    if (has(t, "[INST]")) return has(t, "<<SYS>>") ? CHAT_LLAMA2 : CHAT_MISTRAL;
    if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>")) return CHAT_LLAMA3;
    if (has(t, "<start_of_turn>")) return CHAT_GEMMA;
    if (has(t, "<|assistant|>") && has(t, "<|end|>")) return CHAT_PHI3;
    if (has(t, "<|user|>") && has(t, "<|assistant|>")) return CHAT_ZEPHYR;
    if (has(t, DS_USER) && has(t, DS_ASSISTANT)) return CHAT_DEEPSEEK;
    return CHAT_UNKNOWN;
}

// --- output buffer

typedef struct {
    char *p;
    size_t n, cap;
    int oom;
    tok_range *rg; // (n_rg) message-supplied byte ranges of p, sorted, non-overlapping
    int n_rg, cap_rg;
} sbuf;

static void sb_addn(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->n + n + 1 > cap) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_add(sbuf *b, const char *s) {
    if (s) sb_addn(b, s, strlen(s));
}

// Marks [off, off + n) as message text (merged with a range that ends where it starts).
static void sb_mark(sbuf *b, size_t off, size_t n) {
    if (b->oom || n == 0) return;
    if (b->n_rg > 0 && b->rg[b->n_rg - 1].off + b->rg[b->n_rg - 1].len == off) {
        b->rg[b->n_rg - 1].len += n;
        return;
    }
    if (b->n_rg == b->cap_rg) {
        int cap = b->cap_rg ? 2 * b->cap_rg : 16;
        tok_range *q = realloc(b->rg, (size_t)cap * sizeof *q);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->rg = q, b->cap_rg = cap;
    }
    b->rg[b->n_rg++] = (tok_range){off, n};
}

// Appends message-supplied text (content, a role name): plain text for the tokenizer.
static void sb_user(sbuf *b, const char *s) {
    size_t off = b->n;
    sb_add(b, s);
    if (!b->oom) sb_mark(b, off, b->n - off);
}

static void sb_free(sbuf *b) {
    free(b->p);
    free(b->rg);
}

// Whitespace as Python's str.strip() sees it in ASCII (Jinja's |trim and .strip()).
static int is_pyspace(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

// Message text with Python-style strip().
static void sb_user_trim(sbuf *b, const char *s) {
    size_t n = strlen(s), i = 0;
    while (i < n && is_pyspace((unsigned char)s[i])) i++;
    while (n > i && is_pyspace((unsigned char)s[n - 1])) n--;
    size_t off = b->n;
    sb_addn(b, s + i, n - i);
    if (!b->oom) sb_mark(b, off, n - i);
}

// Appends the text of src (stripped when strip is set) with its message ranges, clipped and shifted.
static void sb_add_sbuf(sbuf *b, const sbuf *src, int strip) {
    if (src->oom) b->oom = 1;
    size_t i = 0, n = src->p ? src->n : 0;
    while (strip && i < n && is_pyspace((unsigned char)src->p[i])) i++;
    while (strip && n > i && is_pyspace((unsigned char)src->p[n - 1])) n--;
    size_t base = b->n;
    sb_addn(b, src->p ? src->p + i : "", n - i);
    for (int k = 0; k < src->n_rg && !b->oom; k++) {
        size_t lo = src->rg[k].off, hi = lo + src->rg[k].len;
        lo = lo < i ? i : lo;
        hi = hi > n ? n : hi;
        if (hi > lo) sb_mark(b, base + lo - i, hi - lo);
    }
}

// --- details read from the template text

enum { MV_V3 = 0, MV_V1, MV_TEKKEN, MV_V7, MV_LEGACY }; // Mistral spacing/system variants

typedef struct {
    int bos;              // emit bos_text at the start
    int bos_each_turn;    // llama2: bos before every [INST]
    int strip;            // llama2: .strip() contents
    char default_sys[512]; // chatml: system prompt inserted when the first message is not a system message
    int llama3_preamble;  // llama 3.1+: system header with knowledge/today dates
    char knowledge[64];   // "December 2023"
    char today[64];       // "26 Jul 2024" or today's date (strftime_now)
    int mistral;          // MV_*
    int eos_after_user;   // deepseek (llama.cpp's fixed template): <｜end▁of▁sentence｜> after user turns
    int eos_no_gen;       // phi3: eos_token when add_generation_prompt is false
} chat_style;

// Copies a Jinja string literal body (up to a terminator) with \n, \t, \\ unescaped. Returns 0 when the
// text is not a plain literal (contains quotes or template syntax).
static int copy_literal(const char *s, const char *end, char *out, size_t cap) {
    size_t n = 0;
    for (; s < end; s++) {
        char c = *s;
        if (c == '\'' || c == '"' || c == '{' || c == '}') return 0;
        if (c == '\\' && s + 1 < end) {
            s++;
            c = *s == 'n' ? '\n' : *s == 't' ? '\t' : *s;
        }
        if (n + 1 >= cap) return 0;
        out[n++] = c;
    }
    out[n] = 0;
    return 1;
}

// ChatML default system prompt: a literal "<|im_start|>system\n<text><|im_end|>" in the template
// (SmolLM2, Qwen2.5). The first occurrence whose body is a plain literal wins.
static void find_default_sys(const char *t, char *out, size_t cap) {
    static const char tag[] = "<|im_start|>system";
    out[0] = 0;
    for (const char *p = strstr(t, tag); p; p = strstr(p + 1, tag)) {
        const char *s = p + sizeof tag - 1;
        if (*s == '\n') s++;
        else if (s[0] == '\\' && s[1] == 'n') s += 2;
        else continue;
        const char *e = strstr(s, "<|im_end|>");
        if (!e || e == s) continue;
        if (copy_literal(s, e, out, cap)) return;
        out[0] = 0;
    }
}

// Copies the text after `key` up to a quote, backslash or newline.
static void copy_after(const char *t, const char *key, char *out, size_t cap, const char *dflt) {
    const char *p = strstr(t, key);
    snprintf(out, cap, "%s", dflt);
    if (!p) return;
    p += strlen(key);
    size_t n = strcspn(p, "\"'\\\n");
    if (n == 0 || n >= cap) return;
    memcpy(out, p, n);
    out[n] = 0;
}

static void style_from_template(chat_family f, const char *t, chat_style *st) {
    memset(st, 0, sizeof *st);
    int given = t && *t;
    if (!t) t = "";
    switch (f) {
    case CHAT_CHATML:
        st->bos = has(t, "bos_token");
        if (given) find_default_sys(t, st->default_sys, sizeof st->default_sys);
        break;
    case CHAT_LLAMA2:
        // Official Llama-2-chat: bos before each [INST], contents stripped. Detected variants drop either.
        st->bos_each_turn = !given || has(t, "bos_token + '[INST]") || has(t, "bos_token + \"[INST]");
        st->bos = !st->bos_each_turn && has(t, "bos_token");
        st->strip = !given || has(t, ".strip()");
        break;
    case CHAT_LLAMA3:
        st->bos = 1;
        st->llama3_preamble = !given || has(t, "Cutting Knowledge Date");
        copy_after(t, "Cutting Knowledge Date: ", st->knowledge, sizeof st->knowledge, "December 2023");
        if (has(t, "strftime_now")) {
            time_t now = time(NULL);
            struct tm tm;
            localtime_r(&now, &tm);
            strftime(st->today, sizeof st->today, "%d %b %Y", &tm);
        } else {
            copy_after(t, "date_string = \"", st->today, sizeof st->today, "26 Jul 2024");
        }
        break;
    case CHAT_MISTRAL:
        st->bos = 1;
        if (!given) st->mistral = MV_V3;
        else if (has(t, "[SYSTEM_PROMPT]")) st->mistral = MV_V7;
        else if (has(t, "' [INST] '") || has(t, "\" [INST] \"")) st->mistral = MV_V1;
        else if (has(t, "\"[INST]\" +") || has(t, "'[INST]' +")) st->mistral = MV_TEKKEN;
        else if (has(t, "' [/INST]'") || has(t, "\" [/INST]\"")) st->mistral = MV_LEGACY;
        else st->mistral = MV_V3;
        break;
    case CHAT_GEMMA:
    case CHAT_DEEPSEEK:
        st->bos = 1;
        st->eos_after_user = f == CHAT_DEEPSEEK && has(t, "'" DS_USER "' + message['content'] + '" DS_EOS "'");
        break;
    case CHAT_PHI3:
        st->bos = has(t, "bos_token");
        st->eos_no_gen = !given || has(t, "eos_token");
        break;
    case CHAT_ZEPHYR:
        st->bos = has(t, "bos_token");
        break;
    default:
        break;
    }
}

// --- renderers (one per family); msgs are validated (non-NULL role and content) by chat_render

typedef struct {
    const chat_msg *m;
    int n;
    int gen;          // add_generation_prompt
    const char *bos;  // "" when none
    const chat_style *st;
    int thinking;     // chat_opts.enable_thinking
} rctx;

static int is_role(const chat_msg *m, const char *r) { return !strcmp(m->role, r); }

static void r_chatml(const rctx *c, sbuf *b) {
    if (c->st->bos) sb_add(b, c->bos);
    if (c->n > 0 && !is_role(&c->m[0], "system") && c->st->default_sys[0]) {
        sb_add(b, "<|im_start|>system\n");
        sb_add(b, c->st->default_sys);
        sb_add(b, "<|im_end|>\n");
    }
    for (int i = 0; i < c->n; i++) {
        sb_add(b, "<|im_start|>");
        sb_user(b, c->m[i].role); // ChatML passes any role through
        sb_add(b, "\n");
        sb_user(b, c->m[i].content);
        sb_add(b, "<|im_end|>\n");
    }
    if (c->gen) sb_add(b, "<|im_start|>assistant\n");
}

// Llama 2: [INST] <<SYS>>\nsys\n<</SYS>>\n\nuser [/INST] answer </s><s>[INST] … (no generation prompt).
static void r_llama2(const rctx *c, sbuf *b) {
    const chat_style *st = c->st;
    int i0 = 0;
    const char *sys = NULL;
    if (c->n > 0 && is_role(&c->m[0], "system")) sys = c->m[0].content, i0 = 1;
    if (st->bos) sb_add(b, c->bos);
    for (int i = i0; i < c->n; i++) {
        const chat_msg *m = &c->m[i];
        sbuf content = {0};
        if (i == i0 && sys) {
            sb_add(&content, "<<SYS>>\n");
            sb_user(&content, sys);
            sb_add(&content, "\n<</SYS>>\n\n");
        }
        sb_user(&content, m->content);
        if (is_role(m, "user")) {
            if (st->bos_each_turn) sb_add(b, c->bos);
            sb_add(b, "[INST] ");
            sb_add_sbuf(b, &content, st->strip);
            sb_add(b, " [/INST]");
        } else if (is_role(m, "assistant")) {
            sb_add(b, " ");
            sb_add_sbuf(b, &content, st->strip);
            sb_add(b, " </s>");
        }
        sb_free(&content);
    }
}

// Mistral: spacing and the place of the system prompt differ per tokenizer version (see MV_*).
static void r_mistral(const rctx *c, sbuf *b) {
    int v = c->st->mistral;
    int i0 = 0;
    const char *sys = NULL;
    if (v != MV_V7 && c->n > 0 && is_role(&c->m[0], "system")) sys = c->m[0].content, i0 = 1;
    const char *open = v == MV_V1 ? " [INST] " : (v == MV_V3 || v == MV_LEGACY) ? "[INST] " : "[INST]";
    const char *close = (v == MV_V1 || v == MV_LEGACY) ? " [/INST]" : "[/INST]";
    sb_add(b, c->bos);
    for (int i = i0; i < c->n; i++) {
        const chat_msg *m = &c->m[i];
        if (is_role(m, "user")) {
            sb_add(b, open);
            // v1/legacy: system prompt before the first user turn; v3/tekken: before the last message when
            // it is a user turn (as mistral-common and the official templates do).
            int here = (v == MV_V1 || v == MV_LEGACY) ? i == i0 : i == c->n - 1;
            if (sys && here) {
                sb_user(b, sys);
                sb_add(b, "\n\n");
            }
            sb_user(b, m->content);
            sb_add(b, close);
        } else if (is_role(m, "assistant")) {
            if (v == MV_V1) sb_add(b, " ");
            if (v == MV_V3) {
                sb_add(b, " ");
                sb_user_trim(b, m->content);
            } else {
                sb_user(b, m->content);
            }
            sb_add(b, "</s>");
        } else if (is_role(m, "system")) { // only reached for v7
            sb_add(b, "[SYSTEM_PROMPT]");
            sb_user(b, m->content);
            sb_add(b, "[/SYSTEM_PROMPT]");
        }
    }
}

static void r_llama3(const rctx *c, sbuf *b) {
    const chat_style *st = c->st;
    int i0 = 0;
    if (st->llama3_preamble) {
        sb_add(b, c->bos);
        sb_add(b, "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: ");
        sb_add(b, st->knowledge);
        sb_add(b, "\nToday Date: ");
        sb_add(b, st->today);
        sb_add(b, "\n\n");
        if (c->n > 0 && is_role(&c->m[0], "system")) {
            sb_user_trim(b, c->m[0].content);
            i0 = 1;
        }
        sb_add(b, "<|eot_id|>");
    } else if (c->n > 0) {
        sb_add(b, c->bos); // Llama 3.0 puts BOS before the first message
    }
    for (int i = i0; i < c->n; i++) {
        sb_add(b, "<|start_header_id|>");
        sb_add(b, c->m[i].role); // system/user/assistant, or ipython (checked by chat_render)
        sb_add(b, "<|end_header_id|>\n\n");
        sb_user_trim(b, c->m[i].content);
        sb_add(b, "<|eot_id|>");
    }
    if (c->gen) sb_add(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// Gemma: no system role; a system message becomes a prefix of the first turn (Gemma 3 semantics).
static void r_gemma(const rctx *c, sbuf *b) {
    int i0 = 0;
    const char *sys = NULL;
    if (c->n > 0 && is_role(&c->m[0], "system")) sys = c->m[0].content, i0 = 1;
    sb_add(b, c->bos);
    for (int i = i0; i < c->n; i++) {
        const chat_msg *m = &c->m[i];
        if (is_role(m, "system")) continue; // a later system message has no place in Gemma's format
        sb_add(b, "<start_of_turn>");
        sb_add(b, is_role(m, "assistant") ? "model" : m->role);
        sb_add(b, "\n");
        if (i == i0 && sys) {
            sb_user(b, sys);
            sb_add(b, "\n\n");
        }
        sb_user_trim(b, m->content);
        sb_add(b, "<end_of_turn>\n");
    }
    if (c->gen) sb_add(b, "<start_of_turn>model\n");
}

static void r_phi3(const rctx *c, sbuf *b) {
    if (c->st->bos) sb_add(b, c->bos);
    for (int i = 0; i < c->n; i++) {
        const chat_msg *m = &c->m[i];
        if (is_role(m, "system") && !m->content[0]) continue;
        sb_add(b, "<|");
        sb_add(b, m->role);
        sb_add(b, "|>\n");
        sb_user(b, m->content);
        sb_add(b, "<|end|>\n");
    }
    if (c->gen) sb_add(b, "<|assistant|>\n");
    else if (c->st->eos_no_gen) sb_add(b, "<|endoftext|>");
}

static void r_zephyr(const rctx *c, sbuf *b) {
    if (c->st->bos) sb_add(b, c->bos);
    for (int i = 0; i < c->n; i++) {
        sb_add(b, "<|");
        sb_add(b, c->m[i].role);
        sb_add(b, "|>\n");
        sb_user(b, c->m[i].content);
        sb_add(b, "</s>\n");
    }
    if (c->gen && c->n > 0) sb_add(b, "<|assistant|>\n");
}


// DeepSeek R1 (distill): the last system message goes first, unmarked; earlier reasoning (<think>…</think>)
// is dropped from assistant turns.
static void r_deepseek(const rctx *c, sbuf *b) {
    sb_add(b, c->bos);
    const char *sys = NULL;
    for (int i = 0; i < c->n; i++)
        if (is_role(&c->m[i], "system")) sys = c->m[i].content;
    if (sys) sb_user(b, sys);
    for (int i = 0; i < c->n; i++) {
        const chat_msg *m = &c->m[i];
        if (is_role(m, "user")) {
            sb_add(b, DS_USER);
            sb_user(b, m->content);
            if (c->st->eos_after_user) sb_add(b, DS_EOS);
        } else if (is_role(m, "assistant")) {
            const char *txt = m->content;
            for (const char *p = strstr(txt, "</think>"); p; p = strstr(p + 1, "</think>")) txt = p + 8;
            sb_add(b, DS_ASSISTANT);
            sb_user(b, txt);
            sb_add(b, DS_EOS);
        }
    }
    if (c->gen) sb_add(b, DS_ASSISTANT "<think>\n");
}

// Qwen3 (Qwen/Qwen3-0.6B's template, tests/ref/chat-templates/): ChatML without a default system prompt;
// assistant turns after the last user query keep their reasoning as "<think>\n…\n</think>\n\n" (the last
// one always), earlier ones lose it; tool results are grouped into one user turn of <tool_response>s; with
// enable_thinking false the generation prompt closes an empty think block so the model answers directly.
static int starts_with(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }
static int ends_with(const char *s, const char *p) {
    size_t n = strlen(s), k = strlen(p);
    return n >= k && !memcmp(s + n - k, p, k);
}

// Appends s[a..e) of message text with Python's lstrip('\n') / rstrip('\n') as asked.
static void sb_user_range(sbuf *b, const char *s, size_t a, size_t e, int lstrip, int rstrip) {
    while (lstrip && a < e && s[a] == '\n') a++;
    while (rstrip && e > a && s[e - 1] == '\n') e--;
    size_t off = b->n;
    sb_addn(b, s + a, e - a);
    if (!b->oom) sb_mark(b, off, e - a);
}

static void r_qwen3(const rctx *c, sbuf *b) {
    if (c->n > 0 && is_role(&c->m[0], "system")) {
        sb_add(b, "<|im_start|>system\n");
        sb_user(b, c->m[0].content);
        sb_add(b, "<|im_end|>\n");
    }
    // the last real user query (tool results sent as user turns do not count)
    int last_query = c->n - 1;
    for (int i = c->n - 1; i >= 0; i--) {
        const char *t = c->m[i].content;
        if (is_role(&c->m[i], "user") && !(starts_with(t, "<tool_response>") && ends_with(t, "</tool_response>"))) {
            last_query = i;
            break;
        }
    }
    for (int i = 0; i < c->n; i++) {
        const chat_msg *m = &c->m[i];
        if (is_role(m, "user") || (is_role(m, "system") && i > 0)) {
            sb_add(b, "<|im_start|>");
            sb_add(b, m->role);
            sb_add(b, "\n");
            sb_user(b, m->content);
            sb_add(b, "<|im_end|>\n");
        } else if (is_role(m, "assistant")) {
            const char *t = m->content, *end = strstr(t, "</think>");
            size_t n = strlen(t), ca = 0, ra = 0, re = 0; // content from ca; reasoning t[ra..re)
            if (end) {
                // content: after the last </think>; reasoning: before the first one, after the last <think> there
                for (const char *p = end; p; p = strstr(p + 1, "</think>")) ca = (size_t)(p - t) + 8;
                re = (size_t)(end - t);
                while (re > 0 && t[re - 1] == '\n') re--;
                for (const char *p = strstr(t, "<think>"); p && (size_t)(p - t) + 7 <= re; p = strstr(p + 1, "<think>"))
                    ra = (size_t)(p - t) + 7;
                while (ra < re && t[ra] == '\n') ra++;
            }
            sb_add(b, "<|im_start|>assistant\n");
            if (i > last_query && (i == c->n - 1 || re > ra)) {
                sb_add(b, "<think>\n");
                sb_user_range(b, t, ra, re, 1, 1);
                sb_add(b, "\n</think>\n\n");
                sb_user_range(b, t, ca, n, 1, 0);
            } else {
                sb_user_range(b, t, ca, n, end != NULL, 0);
            }
            sb_add(b, "<|im_end|>\n");
        } else if (is_role(m, "tool")) {
            if (i == 0 || !is_role(&c->m[i - 1], "tool")) sb_add(b, "<|im_start|>user");
            sb_add(b, "\n<tool_response>\n");
            sb_user(b, m->content);
            sb_add(b, "\n</tool_response>");
            if (i == c->n - 1 || !is_role(&c->m[i + 1], "tool")) sb_add(b, "<|im_end|>\n");
        }
    }
    if (c->gen) sb_add(b, c->thinking ? "<|im_start|>assistant\n" : "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

// --- public entry

int chat_render_guarded(chat_family f, const char *template_src, const chat_msg *msgs, int n_msgs,
                        int add_generation_prompt, const char *bos_text, char **out, tok_range **plain, int *n_plain,
                        tc_err *err) {
    return chat_render_opts(f, template_src, msgs, n_msgs, add_generation_prompt, bos_text, NULL, out, plain, n_plain,
                            err);
}

int chat_render_opts(chat_family f, const char *template_src, const chat_msg *msgs, int n_msgs,
                     int add_generation_prompt, const char *bos_text, const chat_opts *opts, char **out,
                     tok_range **plain, int *n_plain, tc_err *err) {
    *out = NULL;
    if (plain) *plain = NULL, *n_plain = 0;
    if (f <= CHAT_UNKNOWN || f >= CHAT_COUNT)
        return tc_err_set(err, TC_ERR_INVALID, "chat template: unknown family %d", (int)f);
    if (n_msgs < 0 || (n_msgs > 0 && !msgs))
        return tc_err_set(err, TC_ERR_INVALID, "chat template: bad message list");
    for (int i = 0; i < n_msgs; i++) {
        if (!msgs[i].role || !msgs[i].content)
            return tc_err_set(err, TC_ERR_INVALID, "chat message %d: missing role or content", i);
        int std = !strcmp(msgs[i].role, "system") || !strcmp(msgs[i].role, "user") ||
                  !strcmp(msgs[i].role, "assistant");
        // ChatML passes any role through; Llama 3.1+ has "ipython" for tool results
        if (!std && f != CHAT_CHATML && !(f == CHAT_LLAMA3 && !strcmp(msgs[i].role, "ipython")) &&
            !(f == CHAT_QWEN3 && !strcmp(msgs[i].role, "tool")))
            return tc_err_set(err, TC_ERR_INVALID, "chat message %d: role '%s' is not supported by the %s template",
                              i, msgs[i].role, chat_family_name(f));
        if (!msgs[i].role[0]) return tc_err_set(err, TC_ERR_INVALID, "chat message %d: empty role", i);
    }
    chat_style st;
    style_from_template(f, template_src, &st);
    rctx c = {.m = msgs, .n = n_msgs, .gen = add_generation_prompt, .bos = bos_text ? bos_text : "", .st = &st,
              .thinking = !opts || opts->enable_thinking};
    sbuf b = {0};
    switch (f) {
    case CHAT_CHATML: r_chatml(&c, &b); break;
    case CHAT_LLAMA2: r_llama2(&c, &b); break;
    case CHAT_LLAMA3: r_llama3(&c, &b); break;
    case CHAT_MISTRAL: r_mistral(&c, &b); break;
    case CHAT_GEMMA: r_gemma(&c, &b); break;
    case CHAT_PHI3: r_phi3(&c, &b); break;
    case CHAT_ZEPHYR: r_zephyr(&c, &b); break;
    case CHAT_DEEPSEEK: r_deepseek(&c, &b); break;
    case CHAT_QWEN3: r_qwen3(&c, &b); break;
    default: break;
    }
    sb_addn(&b, "", 0); // make sure an empty rendering is still a valid string
    if (b.oom) {
        sb_free(&b);
        return tc_err_set(err, TC_ERR_NOMEM, "chat template: out of memory");
    }
    *out = b.p;
    if (plain) {
        *plain = b.rg, *n_plain = b.n_rg;
    } else {
        free(b.rg);
    }
    return 0;
}

int chat_render(chat_family f, const char *template_src, const chat_msg *msgs, int n_msgs,
                int add_generation_prompt, const char *bos_text, char **out, tc_err *err) {
    return chat_render_guarded(f, template_src, msgs, n_msgs, add_generation_prompt, bos_text, out, NULL, NULL, err);
}

int chat_encode(const tok_vocab *v, chat_family f, const char *template_src, const chat_msg *msgs, int n_msgs,
                int add_generation_prompt, const char *bos_text, int32_t **ids, int *n_ids, tc_err *err) {
    return chat_encode_opts(v, f, template_src, msgs, n_msgs, add_generation_prompt, bos_text, NULL, ids, n_ids, err);
}

int chat_encode_opts(const tok_vocab *v, chat_family f, const char *template_src, const chat_msg *msgs, int n_msgs,
                     int add_generation_prompt, const char *bos_text, const chat_opts *opts, int32_t **ids,
                     int *n_ids, tc_err *err) {
    *ids = NULL, *n_ids = 0;
    char *text = NULL;
    tok_range *plain = NULL;
    int n_plain = 0;
    int rc = chat_render_opts(f, template_src, msgs, n_msgs, add_generation_prompt, bos_text, opts, &text, &plain,
                              &n_plain, err);
    if (rc) return rc;
    // BOS comes from the template text (bos_text), so no TOK_ENC_ADD_BOS here.
    rc = tok_encode_guarded(v, text, strlen(text), TOK_ENC_PARSE_SPECIAL, plain, n_plain, ids, n_ids, err);
    free(plain);
    free(text);
    return rc;
}
