// KV block bookkeeping (no KV data here: the storage is the backend's KV pool, kv_store.h on the CPU; this
// module decides which sequence owns which block). A pool of n_blocks fixed-size blocks with reference counts; free blocks sit
// in one list in LRU order (head = evicted first). A block that holds a FULL block of computed tokens gets
// a hash chained over its prefix: XXH3_64(seed = parent block's hash, the block's token ids). After its
// last owner lets go it stays findable by that hash (prefix caching across requests) until the allocator
// takes it from the head of the free list. Only full blocks are ever shared, so nobody writes into a shared
// block. Running out of blocks is TC_ERR_FULL, never a crash. Single-threaded: the engine thread owns it.
#ifndef TACHYON_KV_H
#define TACHYON_KV_H

#include <stdint.h>

#include "common/err.h"

typedef struct kv_pool kv_pool; // opaque

// A sequence's block table. Embedded in the owner's request; blocks (cap) is allocated once by
// kv_seq_init, so growing the table on the hot path never allocates.
typedef struct kv_seq {
    int32_t *blocks;    // (cap) block ids; blocks[i] holds positions [i*block_size, (i+1)*block_size)
    int n_blocks;       // blocks in use
    int cap;            // most blocks this sequence may ever hold
    int n_hashed;       // leading blocks whose chain hash is known (registered, or matched from the cache)
    int n_released;     // leading entries given back (-1): positions behind a sliding window (kv_seq_release_before)
    uint64_t last_hash; // chain hash of block n_hashed-1 (parent of the next one)
    uint64_t salt;      // 0 = none; else mixed into the root of the chain (per tenant / cache_salt), so a
                        // sequence with another salt can never match these blocks. Set with kv_seq_set_salt.
} kv_seq;

typedef struct kv_stats {
    int n_blocks;   // total
    int n_used;     // ref count > 0
    int n_free;     // allocatable (includes n_cached)
    int n_cached;   // free but still findable by hash
    uint64_t hits;  // blocks served from the cache by kv_seq_match_prefix
    uint64_t evictions; // hashed blocks reclaimed by the allocator
} kv_stats;

// Owned by the caller: free with kv_pool_free.
int kv_pool_new(int n_blocks, int block_size, kv_pool **out, tc_err *err);
void kv_pool_free(kv_pool *p);
int kv_pool_block_size(const kv_pool *p);
int kv_pool_n_free(const kv_pool *p); // blocks an allocation can take right now
void kv_pool_stats(const kv_pool *p, kv_stats *s);

// Table for a sequence of at most max_tokens tokens. Owned by the caller: kv_seq_destroy (after kv_seq_free).
int kv_seq_init(kv_seq *s, int max_tokens, int block_size, tc_err *err);
void kv_seq_destroy(kv_seq *s);

// Sets the prefix-cache salt of an EMPTY sequence (0 = unsalted, the shared namespace).
void kv_seq_set_salt(kv_seq *s, uint64_t salt);

// Ensures the table covers positions [0, n_tokens). All or nothing: TC_ERR_FULL (table unchanged) when the
// pool lacks blocks, TC_ERR_INVALID past the table's capacity.
int kv_seq_alloc_to(kv_pool *p, kv_seq *s, int n_tokens);
// Returns the sequence's blocks to the pool (last block first, so a prefix's tail is evicted before its
// head); the table becomes empty and can be reused.
void kv_seq_free(kv_pool *p, kv_seq *s);

// Rolls the table back to cover positions [0, n_tokens) only (speculative tokens the target rejected): the
// blocks past it go back to the pool. Hashed (registered) blocks are kept: only verified tokens are ever
// registered, so a rollback never reaches them.
void kv_seq_truncate(kv_pool *p, kv_seq *s, int n_tokens);

// Sliding-window tables (the local layers' own pool): gives back the blocks whose positions all lie
// before pos (no query from now on looks at them); their entries become -1 and n_released grows. A hashed
// block stays findable in the cache. Blocks are only ever released from the front.
void kv_seq_release_before(kv_pool *p, kv_seq *s, int pos);
// Prefix hit on an EMPTY sliding-window table (query positions see the last `window` positions): the
// largest m <= max_blocks such that the blocks the next query (at position m·block_size) reads, [first, m)
// with first = max(0, m·block_size + 1 - window) / block_size, are all cached in the chain over tokens; takes
// those blocks (entries before first stay -1, released) and returns m, or 0 (nothing taken). One pass over
// the chain. tokens holds at least max_blocks full blocks.
int kv_seq_match_window(kv_pool *p, kv_seq *s, const int32_t *tokens, int max_blocks, int window);

// Looks up the longest cached chain of full blocks that is a prefix of tokens (n); at most (n-1)/block_size
// blocks so at least the last token is left to compute (its logits are needed). Does not change anything.
// Returns the number of cached tokens (a multiple of block_size).
int kv_lookup_prefix(const kv_pool *p, const int32_t *tokens, int n);
// Same lookup on an EMPTY sequence, and takes the matched blocks (ref count +1; a free one leaves the free
// list). Returns the number of cached tokens; their KV is already in the backend storage.
int kv_seq_match_prefix(kv_pool *p, kv_seq *s, const int32_t *tokens, int n);
// Call after the KV of positions [0, n_computed) has been written: hashes the sequence's newly complete
// full blocks (tokens = the sequence's ids) so later requests can find them. A block whose hash is already
// registered by another block stays private (first writer wins).
void kv_seq_commit(kv_pool *p, kv_seq *s, const int32_t *tokens, int n_computed);

#endif
