// Tokenizers from GGUF metadata (tokenizer.ggml.*): SentencePiece-style ("llama") and byte-level BPE
// ("gpt2") with the pre-tokenizer named by tokenizer.ggml.pre (PCRE2 regexes). Usable with a vocab-only
// GGUF. Thread-safe for concurrent encode/decode on one tok_vocab after loading.
#ifndef TACHYON_TOKENIZER_H
#define TACHYON_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "gguf/gguf.h"

typedef struct tok_vocab tok_vocab; // opaque

typedef enum { TOK_KIND_SPM = 1, TOK_KIND_BPE = 2 } tok_kind;

// Builds the vocabulary from an open GGUF; copies what it needs (the gguf_ctx may be closed after).
// An unknown tokenizer.ggml.model or tokenizer.ggml.pre is TC_ERR_UNSUPPORTED naming it.
// *out owned by caller: free with tok_free.
int tok_load(const gguf_ctx *g, tok_vocab **out, tc_err *err);
void tok_free(tok_vocab *v);

tok_kind tok_get_kind(const tok_vocab *v);
int32_t tok_n_vocab(const tok_vocab *v);
int32_t tok_bos(const tok_vocab *v); // -1 if none
int32_t tok_eos(const tok_vocab *v); // -1 if none
int tok_add_bos(const tok_vocab *v); // tokenizer.ggml.add_bos_token (or the kind's default)
int tok_is_eog(const tok_vocab *v, int32_t id); // end of generation: EOS, EOT, <|im_end|>, <end_of_turn> …
int tok_is_control(const tok_vocab *v, int32_t id);
// Token id of an exact token text (e.g. "<|im_end|>"), or -1.
int32_t tok_find(const tok_vocab *v, const char *text);

enum {
    TOK_ENC_ADD_BOS = 1,       // prepend BOS (callers pass it when tok_add_bos says so)
    TOK_ENC_PARSE_SPECIAL = 2, // recognize control-token texts in the input; otherwise they are plain text
};
// Encodes len bytes of text (need not be NUL-terminated; invalid UTF-8 is handled, not rejected).
// *ids is malloc'd, owned by the caller (free()); *n_ids its length.
int tok_encode(const tok_vocab *v, const char *text, size_t len, int flags, int32_t **ids, int *n_ids,
               tc_err *err);

// A byte range [off, off + len) of a text.
typedef struct tok_range {
    size_t off, len;
} tok_range;
// tok_encode, except that no control token is recognized where its text would overlap one of the `plain`
// ranges (sorted by offset, non-overlapping; n_plain may be 0): those bytes are plain text wherever
// TOK_ENC_PARSE_SPECIAL applies elsewhere. Chat prompts use it so that the template's markers become
// control tokens while message content (user-controlled) never does, e.g. a "<|im_end|>" typed by a user.
// Splitting happens only at control tokens, so without such text in the ranges the ids equal tok_encode's.
int tok_encode_guarded(const tok_vocab *v, const char *text, size_t len, int flags, const tok_range *plain,
                       int n_plain, int32_t **ids, int *n_ids, tc_err *err);

enum {
    TOK_DEC_SKIP_SPECIAL = 1, // control tokens render as nothing
    TOK_DEC_CONTINUATION = 2, // (streams) the tokens continue earlier text (generated after a prompt): the
                              // SPM leading-space rule does not apply, so " there" keeps its space
};
// Bytes of one token as it appears in detokenized text (SPM leading-space handling is done by
// tok_decode; this is the raw piece with ▁ → ' ' and <0xNN> → byte). Writes up to cap bytes into buf and
// returns the full length (may exceed cap), or a negative error for an invalid id.
int tok_piece(const tok_vocab *v, int32_t id, int flags, char *buf, int cap);
// Detokenizes a whole sequence; *text malloc'd (NUL-terminated), *len without the NUL.
int tok_decode(const tok_vocab *v, const int32_t *ids, int n_ids, int flags, char **text, size_t *len,
               tc_err *err);

// Streaming detokenization: feed tokens one at a time, get only complete UTF-8 text (bytes of a split
// multi-byte character are held back until it completes; the first token's SPM leading space is handled
// like tok_decode). Owned by caller; free with tok_stream_free.
typedef struct tok_stream tok_stream;
tok_stream *tok_stream_new(const tok_vocab *v, int flags);
void tok_stream_free(tok_stream *s);
// Appends the text that became complete to out (up to cap bytes; returns bytes written, or the needed
// size if larger than cap, in which case nothing is consumed).
int tok_stream_push(tok_stream *s, int32_t id, char *out, int cap);
// Flushes held-back bytes at the end (invalid leftovers become U+FFFD).
int tok_stream_flush(tok_stream *s, char *out, int cap);

#endif
