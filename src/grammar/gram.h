// Grammar-constrained decoding: a GBNF grammar (llama.cpp's `grammar` syntax) compiled to rules of
// elements, a pushdown matcher over Unicode code points (a set of element stacks, llama.cpp's approach),
// and the token mask: which vocabulary tokens keep the grammar alive, computed by walking a trie of the
// vocabulary's decoded bytes with the stacks (once per distinct matcher state, then cached).
// A token may hold part of a character (byte-level BPE vocabularies spell many characters only in UTF-8
// fragments): it is allowed when its bytes can lead to characters the grammar accepts there, and the matcher
// carries the unfinished character to the next token, which must complete it. Only well-formed UTF-8 is
// ever accepted (no overlong forms or surrogates). Control tokens are never allowed under a grammar; the
// end-of-generation tokens are allowed only where the grammar accepts (never inside a character).
#ifndef TACHYON_GRAMMAR_GRAM_H
#define TACHYON_GRAMMAR_GRAM_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct gram gram;                 // compiled grammar, immutable
typedef struct gram_vocab gram_vocab;     // the vocabulary as a trie; once per model, immutable, shared
typedef struct gram_matcher gram_matcher; // per-request state

// Limits that bound what one grammar may cost, at compile time and per generated token. Each exceeded one is
// a TC_ERR_INVALID naming it: a grammar is never cut to fit.
#define GRAM_MAX_RULES 65536      // rules, the generated ones (groups, repetitions) included
#define GRAM_MAX_ELEMENTS 1048576 // compiled elements (a literal's characters, references, set members)
#define GRAM_MAX_ALTS 4096        // alternatives of one rule
#define GRAM_MAX_FANOUT 4096      // ways the matcher can expand one position (alternatives reachable at once)
#define GRAM_MAX_DEPTH 512        // rule references nested at the start of a position
#define GRAM_MAX_COMPILE_S 0.5    // seconds of compile time

// Parses GBNF text (len bytes) with `root` as the start rule (NULL → "root"). Errors (syntax with line and
// column, undefined rules, left recursion, missing root, a root that can never complete, a limit above
// exceeded) → TC_ERR_INVALID with a message. Compile cost is linear in the size of the compiled grammar.
// *out owned: gram_free. A compiled grammar is immutable and reference counted, so threads may share it.
int gram_parse(const char *src, size_t len, const char *root, gram **out, tc_err *err);
gram *gram_ref(gram *g); // another reference (returns g); each is released by gram_free
void gram_free(gram *g); // releases one reference; the last frees
int gram_n_rules(const gram *g);
int gram_n_elements(const gram *g);

// Builds the trie from each token's decoded bytes (pieces[i], lens[i]; lens[i] < 0 or pieces[i] NULL: a
// control token, never allowed; bytes that can occur in no valid UTF-8: never allowed either). eog (n_eog)
// are allowed only where the grammar accepts. Copies everything.
int gram_vocab_new(const char *const *pieces, const int *lens, int n_vocab, const int32_t *eog, int n_eog,
                   gram_vocab **out, tc_err *err);
void gram_vocab_free(gram_vocab *v);
int gram_vocab_n(const gram_vocab *v);

// A matcher at the start of the grammar. Takes ownership of one reference to g (released with the matcher,
// also on error: gram_ref first to keep one); v is borrowed and must outlive the matcher. The matcher bounds
// its work per step (GRAM_MAX_FANOUT stacks, GRAM_MAX_DEPTH nesting, GRAM_MAX_STEP_WORK per mask or code
// point, or GRAM_STEP_WORK_PER_NODE per node of the vocabulary's trie when more): past a bound it fails
// (gram_matcher_error says which) instead of dropping alternatives. *out owned: gram_matcher_free.
int gram_matcher_new(gram *g, const gram_vocab *v, gram_matcher **out, tc_err *err);
void gram_matcher_free(gram_matcher *m);
// 1 if the token keeps the grammar alive (for an end-of-generation token: the grammar accepts here).
int gram_matcher_token_ok(gram_matcher *m, int32_t tok);
// Advances by the token's text; returns 0, or -1 (state unchanged) if the grammar rejects it. An
// end-of-generation token leaves the state unchanged (returns 0 iff the grammar accepts).
int gram_matcher_accept_token(gram_matcher *m, int32_t tok);
// Advances by the bytes of UTF-8 text (tests, prompts), as a token's: they may finish the character the
// state ends inside and may end inside one. -1 and state unchanged if rejected or not valid UTF-8.
int gram_matcher_accept_str(gram_matcher *m, const char *s, size_t n);
int gram_matcher_can_end(const gram_matcher *m); // the text so far is a complete sentence (whole characters)
int gram_matcher_done(const gram_matcher *m);    // complete, and nothing can follow
// The allowed tokens as a bit set: bits[(n_vocab + 31) / 32], bit t set iff gram_matcher_token_ok(t).
// Cached per matcher state; the pointer is borrowed until the next call on m. NULL when out of memory or
// past a work bound (gram_matcher_error).
const uint32_t *gram_matcher_mask(gram_matcher *m);
// Work units the last mask (or the last code point of accepted text) took: at most the matcher's limit.
long gram_matcher_work(const gram_matcher *m);
// NULL, or why the matcher failed (a bound exceeded, out of memory); once set, every call fails.
const char *gram_matcher_error(const gram_matcher *m);
// Request-time check: the first token mask fits the work bound, and some token can start the output (or
// the grammar accepts the empty output). TC_ERR_INVALID with a message otherwise.
int gram_matcher_check_start(gram_matcher *m, tc_err *err);

// Work units (stack expansions, stacks stepped, stack words copied or hashed, character-set members and
// alternatives' elements read) one token mask may take: 35 to 100 ms on a current x86 core; ordinary JSON
// schemas' masks take a small fraction of it. A mask where most of the vocabulary is open (inside a JSON
// string) visits every node of the vocabulary's byte trie with the few stacks of the string's rules, about 20
// units per node, so a large vocabulary gets GRAM_STEP_WORK_PER_NODE units per trie node when that is more
// (Gemma 3's 262k tokens: ~590k nodes; SmolLM2's 49k stay under the fixed bound).
#define GRAM_MAX_STEP_WORK (1L << 23)
#define GRAM_STEP_WORK_PER_NODE 32L

#endif
