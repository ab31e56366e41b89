// The sampler's state, shared by sampling.c (the OpenAI chain, history, RNG) and samp_chain.c
// (llama-server's chains). Internal to src/sampling/.
#ifndef TACHYON_SAMP_IMPL_H
#define TACHYON_SAMP_IMPL_H

#include "sampling/samp_ext.h"
#include "sampling/samp_kernels.h"
#include "sampling/sampling.h"

typedef enum { SAMP_CHAIN_OAI = 0, SAMP_CHAIN_LLAMA, SAMP_CHAIN_MIROSTAT } samp_chain;
typedef enum { SAMP_XTC_DRAW = 0, SAMP_XTC_SKIP, SAMP_XTC_APPLY } samp_xtc_mode;

struct samp_state {
    samp_params p;
    samp_chain chain;
    int n_vocab;
    uint64_t rng[4];   // xoshiro256** state
    samp_cand *cand;   // (n_vocab) scratch; after prepare: the final weights in cand[0..n_kept)
    samp_bias *bias;   // (n_bias) owned copy of p.bias
    int n_bias;
    // penalty window: the last penalty_last_n accepted tokens (prompt and generated), as a ring buffer;
    // with penalty_last_n == -1 nothing is ever evicted and the ring is not used.
    int32_t *ring;     // (ring_cap) token ids; negative id = -(id+1) marks a prompt token
    int ring_cap, ring_len, ring_head; // ring_head: index of the oldest entry
    int32_t *cnt_all;  // (n_vocab) occurrences in the window (repetition penalty)
    int32_t *cnt_gen;  // (n_vocab) occurrences of generated tokens in the window (presence/frequency)
    int32_t *uniq;     // (n_vocab) distinct ids with cnt_all > 0
    int32_t *uniq_pos; // (n_vocab) index into uniq, or -1
    int n_uniq;
    // result of the last prepare(): cand[0..n_kept) with weights summing to z_kept
    int n_kept;
    double z_kept;
    // llama-server's chains (allocated only when used)
    samp_td *td;       // (3 * n_vocab): the list, then typical-p's scratch
    int32_t *dry_h;    // (2 * dry_cap) accepted tokens, oldest first, from dry_h[0]; slides down when full
    int dry_cap, dry_len;
    uint8_t *dry_brk;  // (n_vocab) 1 for sequence breakers
    int *dry_scratch;  // (2 * dry_cap)
    int *dry_best;     // (n_vocab) zeros between calls
    float mu;          // mirostat's target surprise, bits, carried across steps (starts at 2 tau)
    int miro_pending;  // 1 after a mirostat prepare: the next samp_accept updates mu from cand's weights
    // min_tokens
    int n_gen;         // generated tokens accepted
    int32_t *ban;      // (n_ban) end-of-generation ids then end_ids, banned while n_gen < min_tokens
    int n_ban, n_eog;
};

// Banned ids apply (min_tokens not reached yet).
static inline int samp_ban_on(const samp_state *s) { return s->n_gen < s->p.min_tokens && s->n_ban > 0; }

// Builds llama-server's chain's final distribution into cand[0..n_kept) (weights summing to z_kept);
// penalties are applied by the callback on cand in id order first (sampling.c).
void samp_chain_prepare(samp_state *s, const float *logits, samp_xtc_mode xtc);
// The mirostat update after `token` was accepted (uses the last prepare's weights).
void samp_chain_accept(samp_state *s, int32_t token);
// Penalties and logit bias on cand[0..n_vocab) in id order (sampling.c); returns the new maximum.
float samp_penalize(samp_state *s, float vmax);

#endif
