// Context-overflow truncation (`truncation: "auto"`), the pure part: which chat messages form droppable
// turns, which messages survive dropping the k oldest turns, the smallest k that fits (binary search over a
// caller's "does it fit" probe, so a conversation of T turns costs about log2(T) renders), and middle-out
// truncation of a token sequence. No I/O, no tokenizer: gen_trunc.c applies it to requests.
#ifndef TACHYON_SERVER_TRUNC_H
#define TACHYON_SERVER_TRUNC_H

#include <stdint.h>

#include "tokenizer/chat.h"

// Tokens kept free for the completion when a request gives no max_tokens: min(TRUNC_MIN_ROOM, ctx / 4).
#define TRUNC_MIN_ROOM 256

// A turn is a user message and the assistant / tool messages that answer it (so an assistant tool call and
// its results always go together); messages before the first user message form a turn of their own.
// Pinned: every system message (developer is parsed as system) and the last user turn, i.e. everything from
// the last user message on (with no user message at all, everything is pinned). turn[i] (n entries) gets the
// droppable turn index of message i, oldest first from 0, or -1 when pinned. Returns the number of
// droppable turns.
int trunc_turns(const chat_msg *msgs, int n, int *turn);

// Indices of the messages kept after dropping the k oldest droppable turns: keep[] (n entries) gets them in
// order; returns how many.
int trunc_keep(const int *turn, int n, int k, int *keep);

// Probe for trunc_search: 1 when dropping the k oldest turns fits, 0 when not, < 0 on an error (returned).
typedef int (*trunc_fits_fn)(void *ctx, int k);

// The smallest k in [0, n_turns] for which fits(k) holds, assuming fits is monotone in k (dropping more
// never makes the prompt longer). Probes k = 0, then n_turns, then bisects: at most 2 + ceil(log2(n_turns))
// calls. Returns k, TRUNC_NOFIT when even k = n_turns does not fit, or the probe's negative error.
#define TRUNC_NOFIT (-1000)
int trunc_search(int n_turns, trunc_fits_fn fits, void *ctx);

// Middle-out: keeps the first head and the last (keep - head) of ids[0..n) with head = keep / 2, moving the
// tail down in place. Returns the new length (n unchanged when n <= keep; keep must be >= 0).
int trunc_middle_out(int32_t *ids, int n, int keep);

#endif
