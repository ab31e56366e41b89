// Vocabulary loading from GGUF metadata (tokenizer.ggml.*): token texts, scores, types, merges, special
// ids and flags; the text → id hash, BPE merge table, byte tokens, special-token index, decoded pieces.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "tokenizer/tok_internal.h"

// --- string → id map over the vocab's text arena

static int strmap_init(tok_strmap *m, size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    m->slot_id = calloc(cap, sizeof *m->slot_id);
    m->slot_hash = calloc(cap, sizeof *m->slot_hash);
    m->mask = (uint32_t)(cap - 1);
    return (m->slot_id && m->slot_hash) ? 0 : TC_ERR_NOMEM;
}

static void strmap_free(tok_strmap *m) {
    free(m->slot_id);
    free(m->slot_hash);
}

typedef const char *(*key_fn)(const tok_vocab *v, int32_t id, uint32_t *len);

static const char *text_key(const tok_vocab *v, int32_t id, uint32_t *len) {
    *len = v->text_len[id];
    return v->arena + v->text_off[id];
}

static const char *piece_key(const tok_vocab *v, int32_t id, uint32_t *len) {
    *len = v->piece_len[id];
    return v->piece + v->piece_off[id];
}

static int32_t strmap_find(const tok_strmap *m, const tok_vocab *v, key_fn key, const char *s, size_t n) {
    uint64_t h = XXH3_64bits(s, n);
    uint32_t i = (uint32_t)(h >> 32) & m->mask, hl = (uint32_t)h;
    for (; m->slot_id[i]; i = (i + 1) & m->mask) {
        if (m->slot_hash[i] != hl) continue;
        uint32_t len;
        const char *k = key(v, (int32_t)m->slot_id[i] - 1, &len);
        if (len == n && !memcmp(k, s, n)) return (int32_t)m->slot_id[i] - 1;
    }
    return -1;
}

// Inserts id under its key; an existing equal key is overwritten when `replace` (later token wins, as in
// llama.cpp's token_to_id), else kept.
static void strmap_put(tok_strmap *m, const tok_vocab *v, key_fn key, int32_t id, int replace) {
    uint32_t n;
    const char *s = key(v, id, &n);
    uint64_t h = XXH3_64bits(s, n);
    uint32_t i = (uint32_t)(h >> 32) & m->mask, hl = (uint32_t)h;
    for (; m->slot_id[i]; i = (i + 1) & m->mask) {
        if (m->slot_hash[i] != hl) continue;
        uint32_t len;
        const char *k = key(v, (int32_t)m->slot_id[i] - 1, &len);
        if (len == n && !memcmp(k, s, n)) {
            if (replace) m->slot_id[i] = (uint32_t)id + 1;
            return;
        }
    }
    m->slot_id[i] = (uint32_t)id + 1;
    m->slot_hash[i] = hl;
}

int32_t tok_lookup(const tok_vocab *v, const char *s, size_t n) { return strmap_find(&v->map, v, text_key, s, n); }

int32_t tok_lookup_piece(const tok_vocab *v, const char *s, size_t n) {
    return v->piece_map.slot_id ? strmap_find(&v->piece_map, v, piece_key, s, n) : -1;
}

int tok_out_push(tok_out *o, int32_t id) {
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        int32_t *p = realloc(o->ids, cap * sizeof *p);
        if (!p) return TC_ERR_NOMEM;
        o->ids = p, o->cap = cap;
    }
    o->ids[o->n++] = id;
    return 0;
}

// --- arena of texts (token texts, then synthetic merge intermediates)

static int arena_add(tok_vocab *v, const char *s, size_t n, uint32_t *off) {
    if (v->arena_len + n + 1 > UINT32_MAX) return TC_ERR_NOMEM;
    if (v->arena_len + n + 1 > v->arena_cap) {
        size_t cap = v->arena_cap ? v->arena_cap : 4096;
        while (cap < v->arena_len + n + 1) cap *= 2;
        char *p = realloc(v->arena, cap);
        if (!p) return TC_ERR_NOMEM;
        v->arena = p, v->arena_cap = cap;
    }
    if (n) memcpy(v->arena + v->arena_len, s, n);
    v->arena[v->arena_len + n] = 0;
    *off = (uint32_t)v->arena_len;
    v->arena_len += n + 1;
    return 0;
}

// Id of a string for the merge table: a vocab token, or a synthetic id >= n_vocab for an intermediate that
// is not a token (llama.cpp merges by rank regardless; such symbols fall back at output).
static int intern(tok_vocab *v, const char *s, size_t n, int32_t *text_cap, int32_t *id) {
    int32_t t = tok_lookup(v, s, n);
    if (t >= 0) return *id = t, 0;
    if ((size_t)v->n_text * 2 + 2 > ((size_t)v->map.mask + 1)) return TC_ERR_NOMEM; // table sized at load
    if (v->n_text == *text_cap) {
        int32_t cap = *text_cap * 2;
        uint32_t *a = realloc(v->text_off, (size_t)cap * sizeof *a);
        if (!a) return TC_ERR_NOMEM;
        v->text_off = a;
        uint32_t *b = realloc(v->text_len, (size_t)cap * sizeof *b);
        if (!b) return TC_ERR_NOMEM;
        v->text_len = b;
        *text_cap = cap;
    }
    uint32_t off;
    if (arena_add(v, s, n, &off)) return TC_ERR_NOMEM;
    v->text_off[v->n_text] = off;
    v->text_len[v->n_text] = (uint32_t)n;
    strmap_put(&v->map, v, text_key, v->n_text, 0);
    *id = v->n_text++;
    return 0;
}

static uint32_t merge_slot(const tok_vocab *v, uint64_t key) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32) & v->merge_mask;
}

static int load_merges(tok_vocab *v, const gguf_ctx *g, tc_err *err) {
    int64_t k = gguf_find_key(g, "tokenizer.ggml.merges");
    if (k < 0 || gguf_arr_type(g, k) != GGUF_TYPE_STRING)
        return tc_err_set(err, TC_ERR_FORMAT, "tokenizer.ggml.merges missing or not a string array");
    uint64_t n = gguf_arr_n(g, k);
    if (n > (1u << 26)) return tc_err_set(err, TC_ERR_FORMAT, "too many merges (%llu)", (unsigned long long)n);
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    v->merge_key = calloc(cap, sizeof *v->merge_key);
    v->merge_rank = calloc(cap, sizeof *v->merge_rank);
    v->merge_res = calloc(cap, sizeof *v->merge_res);
    if (!v->merge_key || !v->merge_rank || !v->merge_res) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    v->merge_mask = (uint32_t)(cap - 1);
    int32_t text_cap = v->n_text;
    char buf[1024];
    for (uint64_t r = 0; r < n; r++) {
        gguf_str s = gguf_arr_str(g, k, r);
        if (s.len < 3 || s.len >= sizeof buf) continue;
        const char *sp = memchr(s.ptr + 1, ' ', s.len - 1); // split at the first space after position 0
        if (!sp) continue;
        size_t nl = (size_t)(sp - s.ptr), nr = s.len - nl - 1;
        int32_t l, rr, m;
        memcpy(buf, s.ptr, nl);
        memcpy(buf + nl, sp + 1, nr);
        if (intern(v, s.ptr, nl, &text_cap, &l) || intern(v, sp + 1, nr, &text_cap, &rr) ||
            intern(v, buf, nl + nr, &text_cap, &m))
            return tc_err_set(err, TC_ERR_NOMEM, "out of memory building merges");
        uint64_t key = ((uint64_t)(uint32_t)l << 32 | (uint32_t)rr) + 1;
        uint32_t i = merge_slot(v, key);
        while (v->merge_key[i] && v->merge_key[i] != key) i = (i + 1) & v->merge_mask;
        if (v->merge_key[i]) continue; // duplicate pair: the first (lowest) rank wins
        v->merge_key[i] = key;
        v->merge_rank[i] = (uint32_t)r;
        v->merge_res[i] = m;
    }
    return 0;
}

// --- decoded pieces

static int hexval(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static int build_pieces(tok_vocab *v) {
    size_t cap = v->arena_len + 16, len = 0;
    v->piece = malloc(cap);
    v->piece_off = malloc((size_t)v->n_vocab * sizeof *v->piece_off);
    v->piece_len = malloc((size_t)v->n_vocab * sizeof *v->piece_len);
    if (!v->piece || !v->piece_off || !v->piece_len) return TC_ERR_NOMEM;
    for (int32_t id = 0; id < v->n_vocab; id++) {
        const uint8_t *s = (const uint8_t *)tok_text(v, id);
        uint32_t n = v->text_len[id];
        if (len + n + 1 > cap) { // pieces never grow beyond the text except by nothing; keep a guard
            cap = (len + n + 1) * 2;
            char *p = realloc(v->piece, cap);
            if (!p) return TC_ERR_NOMEM;
            v->piece = p;
        }
        v->piece_off[id] = (uint32_t)len;
        char *o = v->piece + len;
        uint32_t w = 0;
        uint8_t t = v->type[id];
        if (t == TOK_TYPE_UNUSED) {
            // renders as nothing
        } else if (t == TOK_TYPE_CONTROL || t == TOK_TYPE_UNKNOWN || t == TOK_TYPE_USER_DEFINED) {
            memcpy(o, s, n), w = n;
        } else if (v->kind == TOK_KIND_SPM) {
            int hi = n == 6 ? hexval(s[3]) : -1, lo = n == 6 ? hexval(s[4]) : -1;
            if (t == TOK_TYPE_BYTE && hi >= 0 && lo >= 0 && !memcmp(s, "<0x", 3) && s[5] == '>')
                o[w++] = (char)(hi << 4 | lo);
            else
                for (uint32_t i = 0; i < n;) {
                    if (i + 2 < n && s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81)
                        o[w++] = ' ', i += 3;
                    else
                        o[w++] = (char)s[i++];
                }
        } else { // byte-level BPE: each code point stands for one byte
            for (uint32_t i = 0; i < n;) {
                int l = tok_utf8_valid_len(s + i, n - i);
                uint32_t cp = 0;
                if (l == 1) cp = s[i];
                else if (l == 2) cp = (uint32_t)(s[i] & 0x1F) << 6 | (s[i + 1] & 0x3F);
                int b = l > 0 && l <= 2 ? tok_cp_to_byte(cp) : -1;
                if (b < 0) { // not a byte-level symbol: keep the text as is
                    int k = l > 0 ? l : 1;
                    memcpy(o + w, s + i, (size_t)k), w += (uint32_t)k, i += (uint32_t)k;
                } else {
                    o[w++] = (char)b, i += (uint32_t)l;
                }
            }
        }
        v->piece_len[id] = w;
        len += w;
    }
    return 0;
}

// --- special tokens and end-of-generation set

static int spec_cmp(const void *a, const void *b, void *arg) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    const tok_vocab *v = arg;
    uint8_t bx = (uint8_t)tok_text(v, x)[0], by = (uint8_t)tok_text(v, y)[0];
    if (bx != by) return bx < by ? -1 : 1;
    if (v->text_len[x] != v->text_len[y]) return v->text_len[x] > v->text_len[y] ? -1 : 1;
    return (x > y) - (x < y);
}

static int build_specials(tok_vocab *v) {
    int32_t n = 0;
    for (int32_t id = 0; id < v->n_vocab; id++) {
        uint8_t t = v->type[id];
        if ((t == TOK_TYPE_CONTROL || t == TOK_TYPE_USER_DEFINED || t == TOK_TYPE_UNKNOWN) && v->text_len[id]) n++;
    }
    v->special_ids = malloc((size_t)(n ? n : 1) * sizeof *v->special_ids);
    if (!v->special_ids) return TC_ERR_NOMEM;
    n = 0;
    for (int32_t id = 0; id < v->n_vocab; id++) {
        uint8_t t = v->type[id];
        if ((t == TOK_TYPE_CONTROL || t == TOK_TYPE_USER_DEFINED || t == TOK_TYPE_UNKNOWN) && v->text_len[id])
            v->special_ids[n++] = id;
    }
    qsort_r(v->special_ids, (size_t)n, sizeof *v->special_ids, spec_cmp, v);
    uint32_t i = 0;
    for (int b = 0; b < 256; b++) {
        v->special_start[b] = i;
        while (i < (uint32_t)n && (uint8_t)tok_text(v, v->special_ids[i])[0] == b) i++;
    }
    v->special_start[256] = (uint32_t)n;
    return 0;
}

static void add_eog(tok_vocab *v, int32_t id) {
    if (id < 0 || id >= v->n_vocab || v->n_eog == (int)(sizeof v->eog / sizeof v->eog[0])) return;
    for (int i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) return;
    v->eog[v->n_eog++] = id;
}

static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>", // DeepSeek <｜end▁of▁sentence｜>
    "<|end_of_text|>", "<end_of_utterance>", "<|eom_id|>",
};

// --- load

static void get_id(const gguf_ctx *g, const char *key, int32_t n_vocab, int32_t *id) {
    uint32_t u;
    if (gguf_get_u32(g, key, &u) == 0 && u < (uint32_t)n_vocab) *id = (int32_t)u;
}

static void get_flag(const gguf_ctx *g, const char *key, int *flag) {
    int b;
    if (gguf_get_bool(g, key, &b) == 0) *flag = b;
}

static int load_tokens(tok_vocab *v, const gguf_ctx *g, tc_err *err) {
    int64_t k = gguf_find_key(g, "tokenizer.ggml.tokens");
    if (k < 0 || gguf_arr_type(g, k) != GGUF_TYPE_STRING)
        return tc_err_set(err, TC_ERR_FORMAT, "tokenizer.ggml.tokens missing or not a string array");
    uint64_t n = gguf_arr_n(g, k);
    if (n == 0 || n > (1u << 24))
        return tc_err_set(err, TC_ERR_FORMAT, "bad vocabulary size %llu", (unsigned long long)n);
    v->n_vocab = v->n_text = (int32_t)n;
    v->text_off = malloc(n * sizeof *v->text_off);
    v->text_len = malloc(n * sizeof *v->text_len);
    v->scores = calloc(n, sizeof *v->scores);
    v->type = malloc(n);
    if (!v->text_off || !v->text_len || !v->scores || !v->type) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < n; i++) {
        gguf_str s = gguf_arr_str(g, k, i);
        if (s.len > (1u << 20)) return tc_err_set(err, TC_ERR_FORMAT, "token %llu too long", (unsigned long long)i);
        if (arena_add(v, s.ptr, s.len, &v->text_off[i])) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        v->text_len[i] = (uint32_t)s.len;
        v->type[i] = TOK_TYPE_NORMAL;
    }
    int64_t ks = gguf_find_key(g, "tokenizer.ggml.scores");
    if (ks >= 0 && gguf_arr_type(g, ks) == GGUF_TYPE_FLOAT32 && gguf_arr_n(g, ks) == n)
        memcpy(v->scores, gguf_arr_data(g, ks), n * sizeof(float));
    int64_t kt = gguf_find_key(g, "tokenizer.ggml.token_type");
    if (kt >= 0 && gguf_arr_type(g, kt) == GGUF_TYPE_INT32 && gguf_arr_n(g, kt) == n) {
        const uint8_t *p = gguf_arr_data(g, kt);
        for (uint64_t i = 0; i < n; i++) {
            int32_t t;
            memcpy(&t, p + 4 * i, 4);
            v->type[i] = (t >= TOK_TYPE_NORMAL && t <= TOK_TYPE_BYTE) ? (uint8_t)t : TOK_TYPE_UNUSED;
        }
    }
    // the map is sized for the tokens plus merge intermediates (at most 3 per merge)
    int64_t km = gguf_find_key(g, "tokenizer.ggml.merges");
    uint64_t extra = km >= 0 ? 3 * gguf_arr_n(g, km) : 0;
    if (extra > (1u << 26)) extra = 1u << 26;
    if (strmap_init(&v->map, n + extra)) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < v->n_vocab; i++)
        if (v->text_len[i]) strmap_put(&v->map, v, text_key, i, 1);
    return 0;
}

int tok_load(const gguf_ctx *g, tok_vocab **out, tc_err *err) {
    *out = NULL;
    gguf_str model;
    if (gguf_get_str(g, "tokenizer.ggml.model", &model))
        return tc_err_set(err, TC_ERR_FORMAT, "tokenizer.ggml.model missing: no vocabulary in this file");
    tok_vocab *v = calloc(1, sizeof *v);
    if (!v) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    int rc;
    if (model.len == 5 && !memcmp(model.ptr, "llama", 5)) {
        v->kind = TOK_KIND_SPM;
    } else if (model.len == 4 && !memcmp(model.ptr, "gpt2", 4)) {
        v->kind = TOK_KIND_BPE;
    } else {
        rc = tc_err_set(err, TC_ERR_UNSUPPORTED, "unsupported tokenizer model '%.*s' (supported: llama, gpt2)",
                        (int)(model.len > 64 ? 64 : model.len), model.ptr);
        goto fail;
    }
    if ((rc = load_tokens(v, g, err))) goto fail;

    v->bos = v->eos = v->eot = v->eom = v->unk = v->pad = -1;
    if (v->kind == TOK_KIND_SPM) {
        if (v->n_vocab > 2) v->unk = 0, v->bos = 1, v->eos = 2;
        v->add_bos = 1, v->add_space_prefix = 1;
    } else {
        gguf_str pre = {NULL, 0};
        char name[64] = "default";
        if (gguf_get_str(g, "tokenizer.ggml.pre", &pre) == 0) {
            if (pre.len >= sizeof name) {
                rc = tc_err_set(err, TC_ERR_UNSUPPORTED, "unsupported pre-tokenizer '%.48s…'", pre.ptr);
                goto fail;
            }
            memcpy(name, pre.ptr, pre.len);
            name[pre.len] = 0;
        }
        memcpy(v->pre_name, name, sizeof name);
        if ((rc = tok_pretok_new(name, &v->pre, &v->ignore_merges, err))) goto fail;
        // llama.cpp's per-pre defaults: llama3-style and tekken vocabularies add BOS
        v->add_bos = v->ignore_merges;
        if ((rc = load_merges(v, g, err))) goto fail;
    }
    get_id(g, "tokenizer.ggml.bos_token_id", v->n_vocab, &v->bos);
    get_id(g, "tokenizer.ggml.eos_token_id", v->n_vocab, &v->eos);
    get_id(g, "tokenizer.ggml.eot_token_id", v->n_vocab, &v->eot);
    get_id(g, "tokenizer.ggml.eom_token_id", v->n_vocab, &v->eom);
    get_id(g, "tokenizer.ggml.unknown_token_id", v->n_vocab, &v->unk);
    get_id(g, "tokenizer.ggml.padding_token_id", v->n_vocab, &v->pad);
    get_flag(g, "tokenizer.ggml.add_bos_token", &v->add_bos);
    get_flag(g, "tokenizer.ggml.add_eos_token", &v->add_eos);
    get_flag(g, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix);
    if (v->kind == TOK_KIND_BPE) v->add_space_prefix = 0; // only SentencePiece prepends a space

    add_eog(v, v->eos);
    add_eog(v, v->eot);
    add_eog(v, v->eom);
    for (size_t i = 0; i < sizeof eog_texts / sizeof eog_texts[0]; i++) {
        int32_t id = tok_lookup(v, eog_texts[i], strlen(eog_texts[i]));
        if (id < 0 || id >= v->n_vocab) continue;
        if (v->type[id] != TOK_TYPE_CONTROL) v->type[id] = TOK_TYPE_CONTROL; // as llama.cpp: control-looking
        if (v->eot < 0) v->eot = id;
        add_eog(v, id);
    }

    for (int b = 0; b < 256; b++) {
        char s[8];
        int n;
        if (v->kind == TOK_KIND_SPM) {
            n = snprintf(s, sizeof s, "<0x%02X>", b);
            v->byte_tok[b] = tok_lookup(v, s, (size_t)n);
            if (v->byte_tok[b] < 0) v->byte_tok[b] = tok_lookup(v, (const char *)&(char){(char)b}, 1);
        } else {
            n = tok_utf8_put(tok_byte_to_cp((uint8_t)b), s);
            v->byte_tok[b] = tok_lookup(v, s, (size_t)n);
        }
        if (v->byte_tok[b] >= v->n_vocab) v->byte_tok[b] = -1;
    }
    if (build_pieces(v) || build_specials(v)) {
        rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (v->kind == TOK_KIND_SPM) {
        v->spm_word_split = 1;
        for (int32_t i = 0; i < v->n_vocab && v->spm_word_split; i++) {
            if (v->type[i] != TOK_TYPE_NORMAL && v->type[i] != TOK_TYPE_USER_DEFINED) continue;
            const char *t = tok_text(v, i);
            for (uint32_t k = 1; k + 3 <= v->text_len[i]; k++)
                if (!memcmp(t + k, "\xe2\x96\x81", 3) && (k < 3 || memcmp(t + k - 3, "\xe2\x96\x81", 3))) {
                    v->spm_word_split = 0;
                    break;
                }
        }
    }
    if (v->kind == TOK_KIND_BPE && v->ignore_merges) {
        if (strmap_init(&v->piece_map, (size_t)v->n_vocab)) {
            rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
            goto fail;
        }
        for (int32_t i = 0; i < v->n_vocab; i++)
            if (v->type[i] == TOK_TYPE_NORMAL && v->piece_len[i]) strmap_put(&v->piece_map, v, piece_key, i, 0);
    }
    *out = v;
    return 0;
fail:
    tok_free(v);
    return rc;
}

void tok_free(tok_vocab *v) {
    if (!v) return;
    free(v->arena);
    free(v->text_off);
    free(v->text_len);
    free(v->scores);
    free(v->type);
    strmap_free(&v->map);
    strmap_free(&v->piece_map);
    free(v->piece);
    free(v->piece_off);
    free(v->piece_len);
    free(v->merge_key);
    free(v->merge_rank);
    free(v->merge_res);
    free(v->special_ids);
    tok_pretok_free(v->pre);
    free(v);
}

// --- queries

tok_kind tok_get_kind(const tok_vocab *v) { return v->kind; }
int32_t tok_n_vocab(const tok_vocab *v) { return v->n_vocab; }
int32_t tok_bos(const tok_vocab *v) { return v->bos; }
int32_t tok_eos(const tok_vocab *v) { return v->eos; }
int tok_add_bos(const tok_vocab *v) { return v->add_bos && v->bos >= 0; }

int tok_is_eog(const tok_vocab *v, int32_t id) {
    for (int i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) return 1;
    return 0;
}

int tok_is_control(const tok_vocab *v, int32_t id) {
    return id >= 0 && id < v->n_vocab && v->type[id] == TOK_TYPE_CONTROL;
}

int32_t tok_find(const tok_vocab *v, const char *text) {
    if (!text) return -1;
    int32_t id = tok_lookup(v, text, strlen(text));
    return id < v->n_vocab ? id : -1;
}
