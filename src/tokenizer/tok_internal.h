// Internal layout of tok_vocab shared by the tokenizer's files (vocab loading, pre-tokenizer, SPM, BPE,
// decoding). Not a public interface.
#ifndef TACHYON_TOK_INTERNAL_H
#define TACHYON_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

// GGUF tokenizer.ggml.token_type values.
enum {
    TOK_TYPE_NORMAL = 1,
    TOK_TYPE_UNKNOWN = 2,
    TOK_TYPE_CONTROL = 3,
    TOK_TYPE_USER_DEFINED = 4,
    TOK_TYPE_UNUSED = 5,
    TOK_TYPE_BYTE = 6,
};

// --- UTF-8 helpers (tok_utf8.c)
// Length of the sequence announced by a lead byte (1 for continuation/invalid bytes), as llama.cpp does.
static inline int tok_utf8_len(uint8_t c) {
    static const uint8_t lens[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lens[c >> 4];
}
// Length of the valid UTF-8 sequence at s (n bytes available), or 0 if the bytes there are not a
// complete valid sequence (overlong, surrogate, > U+10FFFF, truncated, stray continuation).
int tok_utf8_valid_len(const uint8_t *s, size_t n);
// Encodes code point cp into out (4 bytes room); returns bytes written.
int tok_utf8_put(uint32_t cp, char *out);
// Byte-level BPE: the code point standing for byte b, and back (-1 for a code point that stands for none).
uint32_t tok_byte_to_cp(uint8_t b);
int tok_cp_to_byte(uint32_t cp);

// --- string → id hash (tok_vocab.c)
typedef struct tok_strmap {
    uint32_t *slot_id;   // (cap) id + 1, 0 = empty
    uint32_t *slot_hash; // (cap) low 32 bits of the key hash
    uint32_t mask;       // cap - 1
} tok_strmap;

// --- pre-tokenizer (tok_pretok.c)
typedef struct tok_pretok tok_pretok; // compiled regex sequence, immutable after load

// Resolves a tokenizer.ggml.pre name; NULL pre_name means "default". Returns 0, or TC_ERR_UNSUPPORTED.
int tok_pretok_new(const char *pre_name, tok_pretok **out, int *ignore_merges, tc_err *err);
void tok_pretok_free(tok_pretok *p);

// A piece of the input: byte range [off, off+len).
typedef struct tok_span {
    uint32_t off, len;
} tok_span;

// Splits text[0..len) into words by the regex sequence (each regex splits the previous pieces into
// matches and the gaps between them, which are kept). *out malloc'd (caller frees), *n its length.
int tok_pretok_split(const tok_pretok *p, const char *text, size_t len, tok_span **out, size_t *n, tc_err *err);

// --- the vocabulary
struct tok_vocab {
    tok_kind kind;
    int32_t n_vocab;
    int32_t n_text;      // n_vocab + synthetic BPE intermediate strings (ids >= n_vocab)
    char *arena;         // token texts, each NUL-terminated
    size_t arena_len, arena_cap;
    uint32_t *text_off;  // (n_text) offsets into arena
    uint32_t *text_len;  // (n_text) bytes
    float *scores;       // (n_vocab)
    uint8_t *type;       // (n_vocab) TOK_TYPE_*
    tok_strmap map;      // token text → id (all n_text strings)
    tok_strmap piece_map; // BPE: decoded bytes of NORMAL tokens → id (for ignore_merges)

    // decoded pieces (bytes as they appear in text) for every id
    char *piece;          // arena
    uint32_t *piece_off;  // (n_vocab)
    uint32_t *piece_len;  // (n_vocab)

    // BPE merges: (left id, right id) → rank and merged id, open addressing on the packed pair
    uint64_t *merge_key;  // (merge_cap) (left << 32 | right) + 1, 0 = empty
    uint32_t *merge_rank; // (merge_cap)
    int32_t *merge_res;   // (merge_cap)
    uint32_t merge_mask;

    int32_t byte_tok[256]; // SPM: <0xNN> token; BPE: token of the byte's code point; -1 if none

    // special tokens (control, user-defined, unknown) sorted by text length, longest first, bucketed by
    // first byte: special_ids[special_start[b] .. special_start[b+1])
    int32_t *special_ids;
    uint32_t special_start[257];

    int32_t bos, eos, eot, eom, unk, pad;
    int add_bos, add_eos, add_space_prefix, ignore_merges;
    int spm_word_split; // SPM: no mergeable piece has a ▁ right after another character
    int32_t eog[16];
    int n_eog;

    tok_pretok *pre; // BPE only
    char pre_name[64];
};

static inline const char *tok_text(const tok_vocab *v, int32_t id) { return v->arena + v->text_off[id]; }
// id of an exact byte string, or -1.
int32_t tok_lookup(const tok_vocab *v, const char *s, size_t n);
int32_t tok_lookup_piece(const tok_vocab *v, const char *s, size_t n);

// Growable id output shared by the encoders.
typedef struct tok_out {
    int32_t *ids;
    size_t n, cap;
} tok_out;
int tok_out_push(tok_out *o, int32_t id);

// Encoders for one raw-text fragment (no special tokens inside).
int tok_spm_encode(const tok_vocab *v, const char *text, size_t len, int add_space, tok_out *o, tc_err *err);
int tok_bpe_encode(const tok_vocab *v, const char *text, size_t len, tok_out *o, tc_err *err);

#endif
