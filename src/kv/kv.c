// Block pool: ref counts, an intrusive doubly-linked free list in LRU order, and a chained hash table
// (hash → block) over blocks that hold a full, computed block of tokens. Each hashed block also keeps its
// token ids and parent hash, so a hit is verified exactly (a 64-bit collision can never hand out wrong KV).
#include "kv/kv.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define KV_NONE (-1)
#define KV_ROOT_HASH 0x9e3779b97f4a7c15ull // parent "hash" of a sequence's first block

typedef struct kv_block {
    int32_t ref;        // owners
    int32_t prev, next; // free-list links (KV_NONE at the ends); valid while ref == 0
    int32_t hnext;      // next block in the same hash bucket
    int32_t hashed;     // 1: registered in the table under `hash`
    uint64_t hash;      // chain hash of this block (valid if hashed)
    uint64_t parent;    // chain hash of the previous block (KV_ROOT_HASH for the first)
} kv_block;

struct kv_pool {
    int n_blocks, block_size;
    kv_block *b;        // (n_blocks)
    int32_t *tok;       // (n_blocks, block_size) token ids of hashed blocks, for exact verification
    int32_t *bucket;    // (n_buckets) first block of each chain, KV_NONE if empty
    uint64_t mask;      // n_buckets - 1
    int32_t free_head, free_tail;
    int n_free, n_cached;
    uint64_t hits, evictions;
};

// --- free list (head = least recently used = next to be taken)
static void fl_remove(kv_pool *p, int32_t i) {
    kv_block *b = &p->b[i];
    if (b->prev != KV_NONE) p->b[b->prev].next = b->next;
    else p->free_head = b->next;
    if (b->next != KV_NONE) p->b[b->next].prev = b->prev;
    else p->free_tail = b->prev;
    b->prev = b->next = KV_NONE;
    p->n_free--;
    if (b->hashed) p->n_cached--;
}

static void fl_push_tail(kv_pool *p, int32_t i) {
    kv_block *b = &p->b[i];
    b->next = KV_NONE;
    b->prev = p->free_tail;
    if (p->free_tail != KV_NONE) p->b[p->free_tail].next = i;
    else p->free_head = i;
    p->free_tail = i;
    p->n_free++;
    if (b->hashed) p->n_cached++;
}

static void fl_push_head(kv_pool *p, int32_t i) {
    kv_block *b = &p->b[i];
    b->prev = KV_NONE;
    b->next = p->free_head;
    if (p->free_head != KV_NONE) p->b[p->free_head].prev = i;
    else p->free_tail = i;
    p->free_head = i;
    p->n_free++;
    if (b->hashed) p->n_cached++;
}

// --- hash table
static uint64_t block_hash(uint64_t parent, const int32_t *tokens, int n) {
    return XXH3_64bits_withSeed(tokens, (size_t)n * sizeof(int32_t), parent);
}

static int32_t ht_find(const kv_pool *p, uint64_t h, uint64_t parent, const int32_t *tokens) {
    for (int32_t i = p->bucket[h & p->mask]; i != KV_NONE; i = p->b[i].hnext) {
        const kv_block *b = &p->b[i];
        if (b->hash == h && b->parent == parent &&
            !memcmp(&p->tok[(size_t)i * p->block_size], tokens, (size_t)p->block_size * sizeof(int32_t)))
            return i;
    }
    return KV_NONE;
}

static void ht_insert(kv_pool *p, int32_t i, uint64_t h, uint64_t parent, const int32_t *tokens) {
    kv_block *b = &p->b[i];
    b->hash = h;
    b->parent = parent;
    b->hashed = 1;
    memcpy(&p->tok[(size_t)i * p->block_size], tokens, (size_t)p->block_size * sizeof(int32_t));
    int32_t *head = &p->bucket[h & p->mask];
    b->hnext = *head;
    *head = i;
}

static void ht_remove(kv_pool *p, int32_t i) {
    kv_block *b = &p->b[i];
    int32_t *link = &p->bucket[b->hash & p->mask];
    while (*link != i) link = &p->b[*link].hnext;
    *link = b->hnext;
    b->hnext = KV_NONE;
    b->hashed = 0;
}

// --- pool
int kv_pool_new(int n_blocks, int block_size, kv_pool **out, tc_err *err) {
    *out = NULL;
    if (n_blocks < 1 || block_size < 1 || block_size > (1 << 16))
        return tc_err_set(err, TC_ERR_INVALID, "kv pool: bad size (%d blocks of %d tokens)", n_blocks, block_size);
    kv_pool *p = calloc(1, sizeof *p);
    if (!p) return tc_err_set(err, TC_ERR_NOMEM, "kv pool: out of memory");
    uint64_t nb = 1;
    while (nb < (uint64_t)n_blocks * 2) nb <<= 1;
    p->n_blocks = n_blocks;
    p->block_size = block_size;
    p->mask = nb - 1;
    p->b = calloc((size_t)n_blocks, sizeof *p->b);
    p->tok = malloc((size_t)n_blocks * block_size * sizeof(int32_t));
    p->bucket = malloc(nb * sizeof(int32_t));
    if (!p->b || !p->tok || !p->bucket) {
        kv_pool_free(p);
        return tc_err_set(err, TC_ERR_NOMEM, "kv pool: out of memory for %d blocks", n_blocks);
    }
    for (uint64_t i = 0; i < nb; i++) p->bucket[i] = KV_NONE;
    p->free_head = p->free_tail = KV_NONE;
    for (int32_t i = 0; i < n_blocks; i++) {
        p->b[i].hnext = KV_NONE;
        fl_push_tail(p, i);
    }
    *out = p;
    return 0;
}

void kv_pool_free(kv_pool *p) {
    if (!p) return;
    free(p->b);
    free(p->tok);
    free(p->bucket);
    free(p);
}

int kv_pool_block_size(const kv_pool *p) { return p->block_size; }
int kv_pool_n_free(const kv_pool *p) { return p->n_free; }

void kv_pool_stats(const kv_pool *p, kv_stats *s) {
    s->n_blocks = p->n_blocks;
    s->n_free = p->n_free;
    s->n_used = p->n_blocks - p->n_free;
    s->n_cached = p->n_cached;
    s->hits = p->hits;
    s->evictions = p->evictions;
}

// --- sequences
// The parent "hash" of a sequence's first block: the salt enters the chain here, so every block hash (and
// the parent check in ht_find) differs between salts from the first block on.
static uint64_t root_hash(uint64_t salt) {
    return salt ? XXH3_64bits_withSeed(&salt, sizeof salt, KV_ROOT_HASH) : KV_ROOT_HASH;
}

void kv_seq_set_salt(kv_seq *s, uint64_t salt) {
    if (s->n_blocks != 0) return;
    s->salt = salt;
    s->last_hash = root_hash(salt);
}

int kv_seq_init(kv_seq *s, int max_tokens, int block_size, tc_err *err) {
    memset(s, 0, sizeof *s);
    if (max_tokens < 1 || block_size < 1) return tc_err_set(err, TC_ERR_INVALID, "kv seq: bad size %d", max_tokens);
    s->cap = (max_tokens + block_size - 1) / block_size;
    s->blocks = malloc((size_t)s->cap * sizeof(int32_t));
    if (!s->blocks) return tc_err_set(err, TC_ERR_NOMEM, "kv seq: out of memory");
    s->last_hash = KV_ROOT_HASH;
    return 0;
}

void kv_seq_destroy(kv_seq *s) {
    free(s->blocks);
    s->blocks = NULL;
    s->cap = 0;
}

int kv_seq_alloc_to(kv_pool *p, kv_seq *s, int n_tokens) {
    int need = (n_tokens + p->block_size - 1) / p->block_size;
    if (need > s->cap) return TC_ERR_INVALID;
    if (need - s->n_blocks > p->n_free) return TC_ERR_FULL;
    while (s->n_blocks < need) {
        int32_t i = p->free_head;
        fl_remove(p, i);
        if (p->b[i].hashed) { // evict: its cached contents are about to be overwritten
            ht_remove(p, i);
            p->evictions++;
        }
        p->b[i].ref = 1;
        s->blocks[s->n_blocks++] = i;
    }
    return 0;
}

// Drops one reference to block i. A hashed block may be wanted again: most recently used end. An unhashed
// one holds nothing reusable (or rejected speculative KV): hand it out first.
static void block_put(kv_pool *p, int32_t i) {
    if (--p->b[i].ref > 0) return;
    if (p->b[i].hashed) fl_push_tail(p, i);
    else fl_push_head(p, i);
}

void kv_seq_free(kv_pool *p, kv_seq *s) {
    for (int k = s->n_blocks - 1; k >= s->n_released; k--) block_put(p, s->blocks[k]);
    s->n_blocks = 0;
    s->n_hashed = 0;
    s->n_released = 0;
    s->last_hash = root_hash(s->salt);
}

void kv_seq_truncate(kv_pool *p, kv_seq *s, int n_tokens) {
    int keep = n_tokens > 0 ? (n_tokens + p->block_size - 1) / p->block_size : 0;
    if (keep < s->n_hashed) keep = s->n_hashed; // verified, registered blocks are never rolled back
    if (keep < s->n_released) keep = s->n_released;
    for (int k = s->n_blocks - 1; k >= keep; k--) block_put(p, s->blocks[k]);
    if (s->n_blocks > keep) s->n_blocks = keep;
}

void kv_seq_release_before(kv_pool *p, kv_seq *s, int pos) {
    int upto = pos > 0 ? pos / p->block_size : 0; // blocks [0, upto) end at or before pos
    if (upto > s->n_blocks) upto = s->n_blocks;
    for (int k = s->n_released; k < upto; k++) {
        block_put(p, s->blocks[k]);
        s->blocks[k] = -1;
    }
    if (upto > s->n_released) s->n_released = upto;
}

// First block a query at position pos still reads through a window of `window` positions.
static int window_first_block(int pos, int window, int bs) {
    int first = pos + 1 - window;
    return first > 0 ? first / bs : 0;
}

int kv_seq_match_window(kv_pool *p, kv_seq *s, const int32_t *tokens, int max_blocks, int window) {
    if (s->n_blocks != 0 || max_blocks < 1 || window < 1) return 0;
    if (max_blocks > s->cap) max_blocks = s->cap;
    int bs = p->block_size, best = 0, run = 0; // run: first block of the cached run ending at k
    uint64_t parent = root_hash(s->salt), best_hash = parent;
    // One pass: blocks[k] = the cached block or -1; m = k + 1 works if [first(m), m) are all cached.
    for (int k = 0; k < max_blocks; k++) {
        const int32_t *t = tokens + (size_t)k * bs;
        uint64_t h = block_hash(parent, t, bs);
        int32_t i = ht_find(p, h, parent, t);
        s->blocks[k] = i;
        if (i == KV_NONE) run = k + 1;
        else if (run <= window_first_block((k + 1) * bs, window, bs)) best = k + 1, best_hash = h;
        parent = h;
    }
    if (!best) return 0;
    int first = window_first_block(best * bs, window, bs);
    for (int k = 0; k < best; k++) {
        if (k < first) {
            s->blocks[k] = -1;
            continue;
        }
        int32_t i = s->blocks[k];
        if (p->b[i].ref++ == 0) fl_remove(p, i);
    }
    s->n_blocks = s->n_hashed = best;
    s->n_released = first;
    s->last_hash = best_hash;
    p->hits += (uint64_t)(best - first);
    return best;
}

// Walks the chain; writes matched block ids to ids (if non-NULL). Returns the number of blocks matched.
static int match_chain(const kv_pool *p, uint64_t salt, const int32_t *tokens, int n, int32_t *ids,
                       uint64_t *last) {
    int bs = p->block_size, max = n > 0 ? (n - 1) / bs : 0, k = 0;
    uint64_t parent = root_hash(salt);
    for (; k < max; k++) {
        const int32_t *t = tokens + (size_t)k * bs;
        uint64_t h = block_hash(parent, t, bs);
        int32_t i = ht_find(p, h, parent, t);
        if (i == KV_NONE) break;
        if (ids) ids[k] = i;
        parent = h;
    }
    if (last) *last = parent;
    return k;
}

int kv_lookup_prefix(const kv_pool *p, const int32_t *tokens, int n) {
    return match_chain(p, 0, tokens, n, NULL, NULL) * p->block_size;
}

int kv_seq_match_prefix(kv_pool *p, kv_seq *s, const int32_t *tokens, int n) {
    if (s->n_blocks != 0) return 0;
    if (n > s->cap * p->block_size) n = s->cap * p->block_size;
    uint64_t last;
    int k = match_chain(p, s->salt, tokens, n, s->blocks, &last);
    for (int j = 0; j < k; j++) {
        int32_t i = s->blocks[j];
        if (p->b[i].ref++ == 0) fl_remove(p, i);
    }
    s->n_blocks = s->n_hashed = k;
    s->last_hash = last;
    p->hits += (uint64_t)k;
    return k * p->block_size;
}

void kv_seq_commit(kv_pool *p, kv_seq *s, const int32_t *tokens, int n_computed) {
    int bs = p->block_size, full = n_computed / bs;
    if (full > s->n_blocks) full = s->n_blocks;
    for (int k = s->n_hashed; k < full; k++) {
        const int32_t *t = tokens + (size_t)k * bs;
        uint64_t h = block_hash(s->last_hash, t, bs);
        int32_t i = s->blocks[k];
        if (i >= 0 && !p->b[i].hashed && ht_find(p, h, s->last_hash, t) == KV_NONE) ht_insert(p, i, h, s->last_hash, t);
        s->last_hash = h;
        s->n_hashed = k + 1;
    }
}
