// kv block pool: allocation, ref counts, exhaustion status, prefix hash hits/misses, LRU eviction order,
// only full blocks shared. Pure bookkeeping with made-up token ids.
#include <string.h>

#include "kv/kv.h"
#include "test_util.h"

#define BS 4

static void fill(int32_t *t, int n, int base) {
    for (int i = 0; i < n; i++) t[i] = base + i;
}

static void test_alloc_free(void) {
    kv_pool *p;
    tc_err err;
    CHECK_EQ_INT(kv_pool_new(8, BS, &p, &err), 0);
    kv_seq a, b;
    CHECK_EQ_INT(kv_seq_init(&a, 64, BS, &err), 0);
    CHECK_EQ_INT(kv_seq_init(&b, 64, BS, &err), 0);
    CHECK_EQ_INT(kv_seq_alloc_to(p, &a, 1), 0);
    CHECK_EQ_INT(a.n_blocks, 1);
    CHECK_EQ_INT(kv_seq_alloc_to(p, &a, 4), 0); // still one block
    CHECK_EQ_INT(a.n_blocks, 1);
    CHECK_EQ_INT(kv_seq_alloc_to(p, &a, 5), 0);
    CHECK_EQ_INT(a.n_blocks, 2);
    CHECK_EQ_INT(kv_seq_alloc_to(p, &a, 20), 0);
    CHECK_EQ_INT(a.n_blocks, 5);
    CHECK_EQ_INT(kv_pool_n_free(p), 3);
    // distinct block ids
    int seen[8] = {0};
    for (int i = 0; i < a.n_blocks; i++) {
        CHECK(a.blocks[i] >= 0 && a.blocks[i] < 8);
        seen[a.blocks[i]]++;
    }
    for (int i = 0; i < 8; i++) CHECK_MSG(seen[i] <= 1, "block %d handed out %d times", i, seen[i]);
    // exhaustion: all or nothing
    CHECK_EQ_INT(kv_seq_alloc_to(p, &b, 16), TC_ERR_FULL);
    CHECK_EQ_INT(b.n_blocks, 0);
    CHECK_EQ_INT(kv_pool_n_free(p), 3);
    CHECK_EQ_INT(kv_seq_alloc_to(p, &b, 12), 0);
    CHECK_EQ_INT(kv_pool_n_free(p), 0);
    CHECK_EQ_INT(kv_seq_alloc_to(p, &b, 13), TC_ERR_FULL);
    // beyond the table's capacity
    kv_seq c;
    CHECK_EQ_INT(kv_seq_init(&c, 4, BS, &err), 0);
    CHECK_EQ_INT(kv_seq_alloc_to(p, &c, 5), TC_ERR_INVALID);
    kv_stats st;
    kv_pool_stats(p, &st);
    CHECK_EQ_INT(st.n_used, 8);
    kv_seq_free(p, &a);
    CHECK_EQ_INT(a.n_blocks, 0);
    CHECK_EQ_INT(kv_pool_n_free(p), 5);
    kv_seq_free(p, &b);
    kv_pool_stats(p, &st);
    CHECK_EQ_INT(st.n_used, 0);
    CHECK_EQ_INT(st.n_free, 8);
    CHECK_EQ_INT(st.n_cached, 0);
    kv_seq_destroy(&a);
    kv_seq_destroy(&b);
    kv_seq_destroy(&c);
    kv_pool_free(p);
}

static void test_prefix_share(void) {
    kv_pool *p;
    tc_err err;
    CHECK_EQ_INT(kv_pool_new(16, BS, &p, &err), 0);
    int32_t t[32];
    fill(t, 32, 100);
    kv_seq a, b, c;
    kv_seq_init(&a, 64, BS, &err);
    kv_seq_init(&b, 64, BS, &err);
    kv_seq_init(&c, 64, BS, &err);
    // a computes 10 tokens: blocks 0,1 full, block 2 partial
    CHECK_EQ_INT(kv_seq_alloc_to(p, &a, 10), 0);
    CHECK_EQ_INT(kv_lookup_prefix(p, t, 10), 0); // nothing committed yet
    kv_seq_commit(p, &a, t, 10);
    CHECK_EQ_INT(a.n_hashed, 2); // only full blocks
    // hit: 2 full blocks for a longer prompt with the same prefix
    CHECK_EQ_INT(kv_lookup_prefix(p, t, 20), 8);
    // whole prompt cached: at least the last token must be recomputed
    CHECK_EQ_INT(kv_lookup_prefix(p, t, 8), 4);
    CHECK_EQ_INT(kv_lookup_prefix(p, t, 9), 8);
    // the partial block is never shared
    CHECK_EQ_INT(kv_lookup_prefix(p, t, 11), 8);
    // miss: different first token changes every chained hash
    int32_t u[20];
    memcpy(u, t, sizeof u);
    u[0] = 7;
    CHECK_EQ_INT(kv_lookup_prefix(p, u, 20), 0);
    // a change in the second block: only the first matches
    memcpy(u, t, sizeof u);
    u[5] = 7;
    CHECK_EQ_INT(kv_lookup_prefix(p, u, 20), 4);
    // same second block content after a different first block: no match (chain)
    int32_t v[20];
    fill(v, 20, 100);
    v[1] = 3;
    CHECK_EQ_INT(kv_lookup_prefix(p, v, 20), 0);

    // b shares a's two full blocks
    CHECK_EQ_INT(kv_seq_match_prefix(p, &b, t, 20), 8);
    CHECK_EQ_INT(b.n_blocks, 2);
    CHECK_EQ_INT(b.blocks[0], a.blocks[0]);
    CHECK_EQ_INT(b.blocks[1], a.blocks[1]);
    CHECK_EQ_INT(kv_seq_alloc_to(p, &b, 20), 0); // its own blocks from here on
    for (int i = 2; i < b.n_blocks; i++)
        for (int j = 0; j < a.n_blocks; j++) CHECK(b.blocks[i] != a.blocks[j]);
    kv_stats st;
    kv_pool_stats(p, &st);
    CHECK_EQ_INT(st.n_used, 3 + 3);
    // freeing a leaves the shared blocks in use by b
    kv_seq_free(p, &a);
    kv_pool_stats(p, &st);
    CHECK_EQ_INT(st.n_used, 5);
    CHECK_EQ_INT(st.n_cached, 0);
    kv_seq_commit(p, &b, t, 20);
    CHECK_EQ_INT(b.n_hashed, 5);
    kv_seq_free(p, &b);
    kv_pool_stats(p, &st);
    CHECK_EQ_INT(st.n_used, 0);
    CHECK_EQ_INT(st.n_cached, 5);
    // still findable after all owners left
    CHECK_EQ_INT(kv_lookup_prefix(p, t, 32), 20);
    CHECK_EQ_INT(kv_seq_match_prefix(p, &c, t, 32), 20);
    kv_pool_stats(p, &st);
    CHECK_EQ_INT(st.n_used, 5);
    CHECK_EQ_INT(st.n_cached, 0);
    CHECK(st.hits >= 2 + 5);
    kv_seq_free(p, &c);
    kv_seq_destroy(&a);
    kv_seq_destroy(&b);
    kv_seq_destroy(&c);
    kv_pool_free(p);
}

// Cached blocks are evicted least recently freed first; within a sequence, its tail goes before its head.
static void test_lru_eviction(void) {
    kv_pool *p;
    tc_err err;
    CHECK_EQ_INT(kv_pool_new(6, BS, &p, &err), 0);
    int32_t x[8], y[8];
    fill(x, 8, 10);
    fill(y, 8, 50);
    kv_seq a, b, c;
    kv_seq_init(&a, 64, BS, &err);
    kv_seq_init(&b, 64, BS, &err);
    kv_seq_init(&c, 64, BS, &err);
    kv_seq_alloc_to(p, &a, 8);
    kv_seq_commit(p, &a, x, 8);
    kv_seq_alloc_to(p, &b, 8);
    kv_seq_commit(p, &b, y, 8);
    kv_seq_free(p, &a); // x freed first → older
    kv_seq_free(p, &b);
    kv_stats st;
    kv_pool_stats(p, &st);
    CHECK_EQ_INT(st.n_cached, 4);
    CHECK_EQ_INT(kv_lookup_prefix(p, x, 8), 4); // (n-1)/bs = 1 block for n=8
    // 2 never-hashed blocks go first: no eviction
    CHECK_EQ_INT(kv_seq_alloc_to(p, &c, 8), 0);
    kv_pool_stats(p, &st);
    CHECK_EQ_INT(st.evictions, 0);
    CHECK_EQ_INT(st.n_cached, 4);
    // next: x's tail block (block 1) is evicted first, then x's head
    CHECK_EQ_INT(kv_seq_alloc_to(p, &c, 12), 0);
    kv_pool_stats(p, &st);
    CHECK_EQ_INT(st.evictions, 1);
    int32_t x9[9];
    fill(x9, 9, 10);
    CHECK_EQ_INT(kv_lookup_prefix(p, x9, 9), 4); // head of x still there
    CHECK_EQ_INT(kv_lookup_prefix(p, y, 8) + 0, 4);
    int32_t y9[9];
    fill(y9, 9, 50);
    CHECK_EQ_INT(kv_lookup_prefix(p, y9, 9), 8); // y untouched
    CHECK_EQ_INT(kv_seq_alloc_to(p, &c, 16), 0);
    CHECK_EQ_INT(kv_lookup_prefix(p, x9, 9), 0);
    CHECK_EQ_INT(kv_lookup_prefix(p, y9, 9), 8);
    // then y, again its last block first
    CHECK_EQ_INT(kv_seq_alloc_to(p, &c, 20), 0);
    CHECK_EQ_INT(kv_lookup_prefix(p, y9, 9), 4);
    CHECK_EQ_INT(kv_seq_alloc_to(p, &c, 24), 0);
    CHECK_EQ_INT(kv_lookup_prefix(p, y9, 9), 0);
    CHECK_EQ_INT(kv_seq_alloc_to(p, &c, 25), TC_ERR_FULL);
    kv_pool_stats(p, &st);
    CHECK_EQ_INT(st.evictions, 4);
    kv_seq_free(p, &c);
    kv_seq_destroy(&a);
    kv_seq_destroy(&b);
    kv_seq_destroy(&c);
    kv_pool_free(p);
}

// A matched block that was free is taken out of the free list, so the allocator cannot evict it.
static void test_match_protects(void) {
    kv_pool *p;
    tc_err err;
    CHECK_EQ_INT(kv_pool_new(3, BS, &p, &err), 0);
    int32_t t[12];
    fill(t, 12, 1);
    kv_seq a, b;
    kv_seq_init(&a, 64, BS, &err);
    kv_seq_init(&b, 64, BS, &err);
    kv_seq_alloc_to(p, &a, 8);
    kv_seq_commit(p, &a, t, 8);
    kv_seq_free(p, &a);
    CHECK_EQ_INT(kv_seq_match_prefix(p, &b, t, 12), 8);
    CHECK_EQ_INT(kv_pool_n_free(p), 1);
    CHECK_EQ_INT(kv_seq_alloc_to(p, &b, 12), 0);
    CHECK_EQ_INT(kv_pool_n_free(p), 0);
    kv_stats st;
    kv_pool_stats(p, &st);
    CHECK_EQ_INT(st.evictions, 0);
    // duplicate content computed privately: first writer wins, the copy stays unhashed
    kv_seq_free(p, &b);
    CHECK_EQ_INT(kv_seq_alloc_to(p, &a, 4), 0);
    CHECK(a.blocks[0] != b.blocks[0]);
    kv_seq_commit(p, &a, t, 4);
    CHECK_EQ_INT(a.n_hashed, 1);
    kv_seq_free(p, &a);
    kv_pool_stats(p, &st);
    CHECK_EQ_INT(st.n_cached, 2);
    CHECK_EQ_INT(st.n_free, 3);
    CHECK_EQ_INT(kv_lookup_prefix(p, t, 12), 8);
    kv_seq_destroy(&a);
    kv_seq_destroy(&b);
    kv_pool_free(p);
}

// Speculative rollback: blocks past the kept length go back to the pool; registered (hashed) blocks never do.
static void test_truncate(void) {
    kv_pool *p;
    tc_err err;
    CHECK_EQ_INT(kv_pool_new(8, BS, &p, &err), 0);
    kv_seq a;
    CHECK_EQ_INT(kv_seq_init(&a, 64, BS, &err), 0);
    int32_t t[32];
    fill(t, 32, 100);
    CHECK_EQ_INT(kv_seq_alloc_to(p, &a, 9), 0); // 3 blocks
    kv_seq_commit(p, &a, t, 8);                  // 2 full blocks registered
    CHECK_EQ_INT(a.n_hashed, 2);
    CHECK_EQ_INT(kv_seq_alloc_to(p, &a, 20), 0); // a draft up to position 19: 5 blocks
    CHECK_EQ_INT(kv_pool_n_free(p), 3);
    kv_seq_truncate(p, &a, 10); // keep 3 blocks
    CHECK_EQ_INT(a.n_blocks, 3);
    CHECK_EQ_INT(kv_pool_n_free(p), 5);
    kv_seq_truncate(p, &a, 10); // idempotent
    CHECK_EQ_INT(a.n_blocks, 3);
    kv_seq_truncate(p, &a, 3); // below the registered blocks: they stay
    CHECK_EQ_INT(a.n_blocks, 2);
    CHECK_EQ_INT(a.n_hashed, 2);
    CHECK_EQ_INT(kv_pool_n_free(p), 6);
    kv_stats st;
    kv_pool_stats(p, &st);
    CHECK_EQ_INT(st.n_used, 2);
    // the prefix is still findable after the rollback and the free
    kv_seq_free(p, &a);
    CHECK_EQ_INT(kv_lookup_prefix(p, t, 9), 8);
    kv_seq_destroy(&a);
    kv_pool_free(p);
}

// Per-tenant salt: the same tokens committed under salt A are found by A (also after kv_seq_free resets the
// table), never by salt B or by an unsalted sequence, and unsalted blocks are never found under a salt.
static void test_salt(void) {
    kv_pool *p;
    tc_err err;
    CHECK_EQ_INT(kv_pool_new(16, BS, &p, &err), 0);
    int32_t t[12];
    fill(t, 12, 300);
    kv_seq a, a2, b, z;
    kv_seq_init(&a, 64, BS, &err);
    kv_seq_init(&a2, 64, BS, &err);
    kv_seq_init(&b, 64, BS, &err);
    kv_seq_init(&z, 64, BS, &err);
    kv_seq_set_salt(&a, 0x1111);
    kv_seq_set_salt(&a2, 0x1111);
    kv_seq_set_salt(&b, 0x2222);
    CHECK_EQ_INT(kv_seq_alloc_to(p, &a, 12), 0);
    kv_seq_commit(p, &a, t, 12);
    kv_seq_free(p, &a); // cached, findable by salt 0x1111 only
    CHECK_EQ_INT(kv_seq_match_prefix(p, &b, t, 12), 0);
    CHECK_EQ_INT(kv_seq_match_prefix(p, &z, t, 12), 0);
    CHECK_EQ_INT(kv_lookup_prefix(p, t, 12), 0); // the unsalted lookup does not see salted blocks
    CHECK_EQ_INT(kv_seq_match_prefix(p, &a2, t, 12), 8);
    kv_seq_free(p, &a2);
    // the salt survives kv_seq_free: a reused table still commits and matches in its own namespace
    CHECK_EQ_INT(kv_seq_match_prefix(p, &a, t, 12), 8);
    kv_seq_free(p, &a);
    // unsalted blocks stay out of reach of salted sequences
    int32_t u[12];
    fill(u, 12, 900);
    CHECK_EQ_INT(kv_seq_alloc_to(p, &z, 12), 0);
    kv_seq_commit(p, &z, u, 12);
    kv_seq_free(p, &z);
    CHECK_EQ_INT(kv_lookup_prefix(p, u, 12), 8);
    CHECK_EQ_INT(kv_seq_match_prefix(p, &b, u, 12), 0);
    kv_seq_destroy(&a);
    kv_seq_destroy(&a2);
    kv_seq_destroy(&b);
    kv_seq_destroy(&z);
    kv_pool_free(p);
}

// Sliding-window tables: blocks wholly before the first position any later query sees go back to the pool
// (front first, entries -1); free/truncate never touch released entries; a window hit takes only the blocks
// the next query needs and only when all of them are cached.
static void test_swa_release(void) {
    tc_err err;
    kv_pool *p;
    kv_seq a, b, c;
    CHECK_EQ_INT(kv_pool_new(16, BS, &p, &err), 0);
    kv_seq_init(&a, 64, BS, &err);
    kv_seq_init(&b, 64, BS, &err);
    kv_seq_init(&c, 64, BS, &err);
    int32_t t[40];
    fill(t, 40, 100);
    CHECK_EQ_INT(kv_seq_alloc_to(p, &a, 24), 0); // blocks 0..5
    kv_seq_commit(p, &a, t, 24);
    kv_seq_release_before(p, &a, 7); // positions 0..6 unseen from now on: block 0 (0..3) goes, block 1 (4..7) stays
    CHECK_EQ_INT(a.n_released, 1);
    CHECK_EQ_INT(a.blocks[0], -1);
    CHECK(a.blocks[1] >= 0);
    CHECK_EQ_INT(kv_pool_n_free(p), 11);
    kv_seq_release_before(p, &a, 8); // exactly at a block end: block 1 goes too
    CHECK_EQ_INT(a.n_released, 2);
    CHECK_EQ_INT(kv_pool_n_free(p), 12);
    kv_seq_release_before(p, &a, 3); // never backwards
    kv_seq_release_before(p, &a, -5);
    CHECK_EQ_INT(a.n_released, 2);
    kv_seq_release_before(p, &a, 1000); // never past the table
    CHECK_EQ_INT(a.n_released, 6);
    CHECK_EQ_INT(kv_pool_n_free(p), 16);
    // growing after a release appends; truncate and free skip released entries (no double put)
    CHECK_EQ_INT(kv_seq_alloc_to(p, &a, 32), 0);
    CHECK_EQ_INT(a.n_blocks, 8);
    CHECK_EQ_INT(kv_pool_n_free(p), 14);
    kv_seq_truncate(p, &a, 2);
    CHECK_EQ_INT(a.n_blocks, 6);
    CHECK_EQ_INT(kv_pool_n_free(p), 16);
    kv_seq_free(p, &a);
    CHECK_EQ_INT(a.n_released, 0);
    CHECK_EQ_INT(kv_pool_n_free(p), 16);
    // the released blocks stayed cached: a window of 12 positions before position 24 reads blocks 3..5
    CHECK_EQ_INT(kv_seq_match_window(p, &b, t, 6, 12), 6);
    CHECK_EQ_INT(b.n_blocks, 6);
    CHECK_EQ_INT(b.n_released, 3);
    CHECK_EQ_INT(b.blocks[2], -1);
    CHECK(b.blocks[3] >= 0 && b.blocks[5] >= 0);
    CHECK_EQ_INT(kv_pool_n_free(p), 13);
    // the hit continues the chain: committing block 6 makes a 7-block prefix findable
    CHECK_EQ_INT(kv_seq_alloc_to(p, &b, 28), 0);
    kv_seq_commit(p, &b, t, 28);
    kv_seq_free(p, &b);
    CHECK_EQ_INT(kv_seq_match_window(p, &c, t, 7, 8), 7); // window 8 before position 28: blocks 5, 6
    CHECK_EQ_INT(c.n_released, 5);
    kv_seq_free(p, &c);
    // a window reaching a block never cached (other tokens) shrinks the hit to where it is all cached
    int32_t u[40];
    memcpy(u, t, sizeof u);
    u[25] = 7; // block 6 differs
    CHECK_EQ_INT(kv_seq_match_window(p, &c, u, 7, 8), 6); // block 6 missing: 6 blocks, window blocks 4, 5
    CHECK_EQ_INT(c.n_released, 4);
    CHECK_EQ_INT(kv_pool_n_free(p), 14);
    kv_seq_free(p, &c);
    // block 4 evicted-like gap: with a window reaching back over it, only a shorter hit works
    int32_t v[40];
    memcpy(v, t, sizeof v);
    v[17] = 9; // block 4 differs, so blocks 5.. differ in hash too: at most 4 blocks, window blocks 2, 3
    CHECK_EQ_INT(kv_seq_match_window(p, &c, v, 7, 8), 4);
    kv_seq_free(p, &c);
    CHECK_EQ_INT(kv_seq_match_window(p, &c, v, 7, 1000), 4); // a window reaching block 0: all of 0..3 needed
    CHECK_EQ_INT(c.n_released, 0);
    kv_seq_free(p, &c);
    CHECK_EQ_INT(kv_pool_n_free(p), 16);
    kv_seq_destroy(&a);
    kv_seq_destroy(&b);
    kv_seq_destroy(&c);
    kv_pool_free(p);
}

int main(void) {
    test_swa_release();
    test_salt();
    test_alloc_free();
    test_prefix_share();
    test_lru_eviction();
    test_match_protects();
    test_truncate();
    TEST_MAIN_END();
}
