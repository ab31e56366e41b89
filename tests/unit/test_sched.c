// Scheduler: chunked prefill within the token budget with decode first, max_seqs, FIFO admission,
// preemption on KV exhaustion then completion, prefix-cache hits, cancellation and deadlines within one
// step. No model: a fake forward writes token ids into a fake paged KV store through each request's block
// table, and the fake "next token" is a hash of what it reads back through the table. So any bookkeeping
// error (a shared block overwritten, a wrong table, a lost position) changes the output, and the output of
// every request must equal the output of the same request run alone.
#include <string.h>

#include "sched/sched.h"
#include "test_sched_util.h"
#include "test_util.h"

#define MAXR 16
#define SPEC_TEST_MAX_K 8

typedef struct harness {
    kv_pool *pool;
    sched *s;
    sched_opts o;
    int bs, n_blocks;
    int32_t *store;          // (n_blocks, bs) fake KV: the token id written at each slot
    int32_t out[MAXR][64];   // generated ids per request id
    int n_out[MAXR];
    sched_end end[MAXR];
    int done[MAXR];
    int n_cached[MAXR];
    int readback_errors;
    int steps;
    int max_items_seen, max_tokens_seen;
    int n_drafted, n_accepted; // speculation (draft_fn installed)
    int draft_calls;
} harness;

static uint32_t fake_next(const int32_t *t, int n) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) h = (h ^ (uint32_t)t[i]) * 1099511628211ull;
    return (uint32_t)(h % 500);
}

static void h_init(harness *h, int n_blocks, int bs, int max_batch_tokens, int max_seqs, int prefix_cache) {
    memset(h, 0, sizeof *h);
    tc_err err;
    h->bs = bs;
    h->n_blocks = n_blocks;
    h->o = (sched_opts){.max_batch_tokens = max_batch_tokens, .max_seqs = max_seqs, .prefix_cache = prefix_cache};
    CHECK_EQ_INT(kv_pool_new(n_blocks, bs, &h->pool, &err), 0);
    CHECK_EQ_INT(sched_new(&h->o, h->pool, &h->s, &err), 0);
    h->store = calloc((size_t)n_blocks * bs, sizeof(int32_t));
}

static void h_free(harness *h) {
    tu_sched_teardown(h->s, h->pool);
    free(h->store);
}

static sched_req *h_add(harness *h, uint64_t id, const int32_t *prompt, int n, int max_tokens) {
    sched_req *r;
    tc_err err;
    CHECK_EQ_INT(sched_req_new(prompt, n, max_tokens, h->bs, &r, &err), 0);
    r->id = id;
    sched_add(h->s, r);
    return r;
}

static void h_record_end(harness *h, sched_req *r) {
    int id = (int)r->id;
    h->done[id] = 1;
    h->end[id] = r->end;
    h->n_cached[id] = r->n_cached;
    h->n_out[id] = sched_req_n_generated(r);
    memcpy(h->out[id], r->tokens + r->n_prompt, (size_t)h->n_out[id] * sizeof(int32_t));
    sched_req_free(r);
}

// The fake forward pass: writes each planned token's id into its KV slot.
static void h_forward(harness *h, const sched_plan *p) {
    for (int i = 0; i < p->n_items; i++) {
        const sched_item *it = &p->items[i];
        for (int pos = it->start; pos < it->start + it->n; pos++)
            h->store[it->r->kv.blocks[pos / h->bs] * h->bs + pos % h->bs] = it->r->tokens[pos];
    }
}

// One step: plan, fake forward, commit, fake sample. Returns the number of items.
static int h_step(harness *h, double now) {
    const sched_plan *p = sched_step(h->s, now);
    for (sched_req *r = p->ended, *next; r; r = next) {
        next = r->next;
        h_record_end(h, r);
    }
    CHECK_MSG(p->n_tokens <= h->o.max_batch_tokens, "step %d: %d tokens > budget %d", h->steps, p->n_tokens,
              h->o.max_batch_tokens);
    CHECK(p->n_items <= h->o.max_seqs);
    if (p->n_items > h->max_items_seen) h->max_items_seen = p->n_items;
    if (p->n_tokens > h->max_tokens_seen) h->max_tokens_seen = p->n_tokens;
    int sum = 0;
    for (int i = 0; i < p->n_items; i++) {
        const sched_item *it = &p->items[i];
        sched_req *r = it->r;
        CHECK_EQ_INT(it->start, r->num_computed);
        CHECK(it->n >= 1);
        CHECK_EQ_INT(it->sample, it->start + it->n - it->n_draft == r->n_tokens);
        CHECK(it->n_draft == 0 || (it->sample && it->n_draft < it->n));
        CHECK(r->kv.n_blocks * h->bs >= it->start + it->n);
        h->n_drafted += it->n_draft;
        sum += it->n;
    }
    h_forward(h, p);
    CHECK_EQ_INT(sum, p->n_tokens);
    int n_items = p->n_items;
    sched_item items[64];
    memcpy(items, p->items, (size_t)n_items * sizeof *items);
    sched_commit(h->s);
    for (int i = 0; i < n_items; i++) {
        sched_req *r = items[i].r;
        if (!items[i].sample) continue;
        // Verify like the engine: row k reads back positions [0, n_tokens + k) (drafted ones included) and
        // its "next token" must equal draft k for the draft to survive.
        int nd = items[i].n_draft, base = r->n_tokens, ended = 0;
        int32_t draft[SPEC_TEST_MAX_K], back[256];
        memcpy(draft, r->tokens + base, (size_t)nd * sizeof *draft);
        for (int k = 0; k <= nd && !ended; k++) {
            int n = base + k;
            for (int pos = 0; pos < n; pos++) {
                back[pos] = h->store[r->kv.blocks[pos / h->bs] * h->bs + pos % h->bs];
                if (back[pos] != (pos < base ? r->tokens[pos] : draft[pos - base])) h->readback_errors++;
            }
            int32_t next = (int32_t)fake_next(back, n);
            r->tokens[r->n_tokens++] = next;
            if (sched_req_n_generated(r) >= r->max_tokens) {
                sched_finish(h->s, r, SCHED_END_LENGTH);
                h_record_end(h, r);
                ended = 1;
            } else if (k == nd || next != draft[k]) break;
            else h->n_accepted++;
        }
        if (!ended) sched_rollback(h->s, r);
    }
    h->steps++;
    return n_items;
}

static void h_run(harness *h, int max_steps) {
    for (int i = 0; i < max_steps && sched_has_work(h->s); i++) h_step(h, 1.0);
    CHECK_MSG(!sched_has_work(h->s), "still busy after %d steps", max_steps);
    CHECK_EQ_INT(h->readback_errors, 0);
}

static void make_prompt(int32_t *t, int n, int seed) {
    for (int i = 0; i < n; i++) t[i] = 1 + (seed * 37 + i * 11) % 400;
}

// Reference: each request alone in a roomy pool, no prefix cache, unlimited budget.
static void run_alone(const int32_t *prompt, int n, int max_tokens, int32_t *out) {
    harness h;
    h_init(&h, 64, 4, 256, 1, 0);
    h_add(&h, 0, prompt, n, max_tokens);
    h_run(&h, 1000);
    CHECK_EQ_INT(h.n_out[0], max_tokens);
    memcpy(out, h.out[0], (size_t)max_tokens * sizeof(int32_t));
    h_free(&h);
}

static void check_same_as_alone(harness *h, int id, const int32_t *prompt, int n, int max_tokens) {
    int32_t ref[64];
    run_alone(prompt, n, max_tokens, ref);
    CHECK_MSG(h->done[id] && h->end[id] == SCHED_END_LENGTH, "request %d did not complete (end %d)", id, h->end[id]);
    CHECK_EQ_INT(h->n_out[id], max_tokens);
    for (int i = 0; i < max_tokens && i < h->n_out[id]; i++)
        CHECK_MSG(h->out[id][i] == ref[i], "request %d token %d: %d, alone %d", id, i, h->out[id][i], ref[i]);
}

// --- speculation: a draft callback whose guesses are right most of the time (it knows fake_next) and wrong
// every third call, so the verify path accepts some drafts, rejects others and rolls KV back.
static int oracle_draft(void *ctx, sched_req *r, const sched_draft_info *info) {
    harness *h = ctx;
    int k = info->max_draft < 5 ? info->max_draft : 5;
    int32_t t[256];
    memcpy(t, r->tokens, (size_t)r->n_tokens * sizeof *t);
    int n = r->n_tokens;
    for (int i = 0; i < k; i++, n++) {
        t[n] = (int32_t)fake_next(t, n);
        if (h->draft_calls % 3 == 2 && i == 2) t[n] = (t[n] + 1) % 500; // a wrong guess mid-draft
    }
    h->draft_calls++;
    memcpy(r->tokens + r->n_tokens, t + r->n_tokens, (size_t)k * sizeof *t);
    return k;
}

static void test_speculation(void) {
    harness h;
    h_init(&h, 64, 4, 16, 4, 1);
    sched_set_draft_fn(h.s, oracle_draft, &h);
    int32_t a[9], b[5], c[40];
    make_prompt(a, 9, 7);
    make_prompt(b, 5, 8);
    h_add(&h, 0, a, 9, 30);
    h_add(&h, 1, b, 5, 23);
    h_run(&h, 1000);
    check_same_as_alone(&h, 0, a, 9, 30);
    check_same_as_alone(&h, 1, b, 5, 23);
    CHECK_MSG(h.n_drafted > 20 && h.n_accepted > 10 && h.n_accepted < h.n_drafted, "drafted %d accepted %d",
              h.n_drafted, h.n_accepted);
    kv_stats ks;
    kv_pool_stats(h.pool, &ks);
    CHECK_EQ_INT(ks.n_used, 0); // every block (rolled back or not) came back
    // The prefix cache holds only verified tokens: a prompt of A's prompt + output hits it and reads back
    // exactly those tokens (a registered block holding a rejected draft would show as a readback error).
    memcpy(c, a, sizeof a);
    memcpy(c + 9, h.out[0], 30 * sizeof(int32_t));
    h_add(&h, 2, c, 39, 6);
    h_run(&h, 1000);
    CHECK_MSG(h.n_cached[2] >= 32, "cached %d of 39", h.n_cached[2]);
    check_same_as_alone(&h, 2, c, 39, 6);
    // with drafts, a budget of 16 still gives every decoding request its row: never more than the budget
    CHECK(h.max_tokens_seen <= 16);
    h_free(&h);

    // a tight pool: drafts only take free blocks (they never preempt), preemption and recompute still give
    // the same tokens, with and without the prefix cache
    for (int pc = 0; pc < 2; pc++) {
        h_init(&h, 7, 4, 32, 4, pc);
        sched_set_draft_fn(h.s, oracle_draft, &h);
        int32_t p[3][6];
        for (int i = 0; i < 3; i++) {
            make_prompt(p[i], 6, 40 + i);
            h_add(&h, (uint64_t)i, p[i], 6, 10);
        }
        h_run(&h, 500);
        sched_counters sc;
        sched_get_counters(h.s, &sc);
        CHECK_MSG(sc.preemptions > 0, "prefix cache %d: expected preemptions", pc);
        CHECK(h.n_drafted > 0);
        for (int i = 0; i < 3; i++) check_same_as_alone(&h, i, p[i], 6, 10);
        kv_pool_stats(h.pool, &ks);
        CHECK_EQ_INT(ks.n_used, 0);
        h_free(&h);
    }
}

// --- tests
static void test_chunked_prefill(void) {
    harness h;
    h_init(&h, 64, 4, 8, 4, 0);
    int32_t a[3], b[20];
    make_prompt(a, 3, 1);
    make_prompt(b, 20, 2);
    h_add(&h, 0, a, 3, 10);
    CHECK_EQ_INT(h_step(&h, 1.0), 1); // A's prompt
    h_add(&h, 1, b, 20, 4);
    // B's 20 prompt tokens are spread over steps of 7, 7, 6 while A gets a token every step, first
    int expect_b[3] = {7, 7, 6};
    for (int k = 0; k < 3; k++) {
        const sched_plan *p = sched_step(h.s, 1.0);
        CHECK_EQ_INT(p->n_items, 2);
        CHECK(p->items[0].r->id == 0 && p->items[0].n == 1 && p->items[0].sample);
        CHECK(p->items[1].r->id == 1);
        CHECK_EQ_INT(p->items[1].n, expect_b[k]);
        CHECK_EQ_INT(p->items[1].start, 7 * k);
        CHECK_EQ_INT(p->items[1].sample, k == 2);
        CHECK(p->n_tokens <= 8);
        h_forward(&h, p);
        sched_commit(h.s);
        for (int i = 0; i < p->n_items; i++) {
            sched_req *r = p->items[i].r;
            if (p->items[i].sample) r->tokens[r->n_tokens++] = 7;
        }
    }
    h_free(&h);

    // many requests, a small budget: every step stays within it; all finish with their alone output
    h_init(&h, 256, 4, 8, 4, 0);
    int32_t p[6][24];
    for (int i = 0; i < 6; i++) {
        make_prompt(p[i], 5 + 3 * i, 10 + i);
        h_add(&h, (uint64_t)i, p[i], 5 + 3 * i, 6);
    }
    h_run(&h, 500);
    CHECK(h.max_tokens_seen == 8);
    CHECK_EQ_INT(h.max_items_seen, 4);
    for (int i = 0; i < 6; i++) check_same_as_alone(&h, i, p[i], 5 + 3 * i, 6);
    h_free(&h);
}

// Running decoders get one token every step even while a long prompt is being prefilled.
static void test_decode_every_step(void) {
    harness h;
    h_init(&h, 256, 4, 6, 8, 0);
    int32_t a[2], c[2], b[40];
    make_prompt(a, 2, 3);
    make_prompt(c, 2, 4);
    make_prompt(b, 40, 5);
    h_add(&h, 0, a, 2, 30);
    h_add(&h, 1, c, 2, 30);
    h_step(&h, 1.0);
    h_add(&h, 2, b, 40, 4);
    for (int k = 0; k < 12; k++) {
        const sched_plan *p = sched_step(h.s, 1.0);
        int got_a = 0, got_c = 0, b_tokens = 0;
        for (int i = 0; i < p->n_items; i++) {
            if (p->items[i].r->id == 0) got_a = p->items[i].n;
            if (p->items[i].r->id == 1) got_c = p->items[i].n;
            if (p->items[i].r->id == 2) b_tokens = p->items[i].n;
        }
        CHECK_MSG(got_a == 1 && got_c == 1, "step %d: decoders got %d, %d tokens", k, got_a, got_c);
        CHECK_MSG(b_tokens == (k < 10 ? 4 : 1), "step %d: prefill chunk %d", k, b_tokens);
        h_forward(&h, p);
        sched_commit(h.s);
        for (int i = 0; i < p->n_items; i++)
            if (p->items[i].sample) p->items[i].r->tokens[p->items[i].r->n_tokens++] = 9;
    }
    h_free(&h);
}

static void test_max_seqs_fifo(void) {
    harness h;
    h_init(&h, 256, 4, 64, 2, 0);
    int32_t p[5][4];
    for (int i = 0; i < 5; i++) {
        make_prompt(p[i], 4, 20 + i);
        h_add(&h, (uint64_t)i, p[i], 4, 3);
    }
    const sched_plan *pl = sched_step(h.s, 1.0);
    CHECK_EQ_INT(pl->n_items, 2);
    CHECK(pl->items[0].r->id == 0 && pl->items[1].r->id == 1);
    sched_counters c;
    sched_get_counters(h.s, &c);
    CHECK_EQ_INT(c.n_running, 2);
    CHECK_EQ_INT(c.n_waiting, 3);
    h_forward(&h, pl);
    sched_commit(h.s);
    for (int i = 0; i < pl->n_items; i++) {
        sched_req *r = pl->items[i].r;
        r->tokens[r->n_tokens++] = (int32_t)fake_next(r->tokens, 4);
    }
    h_run(&h, 100);
    CHECK_EQ_INT(h.max_items_seen, 2);
    for (int i = 0; i < 5; i++) check_same_as_alone(&h, i, p[i], 4, 3);
    h_free(&h);

    // FIFO: a head that does not fit in KV blocks is not skipped by a small request behind it
    h_init(&h, 6, 4, 64, 4, 0);
    int32_t big[21], small[2];
    make_prompt(big, 21, 1);
    make_prompt(small, 2, 2);
    h_add(&h, 0, small, 2, 8); // 1 block now, 3 at the end
    h_step(&h, 1.0);
    h_add(&h, 1, big, 21, 2); // 6 blocks > 5 free: waits
    h_add(&h, 2, small, 2, 2); // would fit, but is behind the head
    pl = sched_step(h.s, 1.0);
    CHECK_EQ_INT(pl->n_items, 1);
    CHECK(pl->items[0].r->id == 0);
    sched_get_counters(h.s, &c);
    CHECK_EQ_INT(c.n_waiting, 2);
    h_forward(&h, pl);
    sched_commit(h.s);
    pl->items[0].r->tokens[pl->items[0].r->n_tokens++] = (int32_t)fake_next(pl->items[0].r->tokens, 3);
    h_run(&h, 100);
    check_same_as_alone(&h, 0, small, 2, 8);
    check_same_as_alone(&h, 1, big, 21, 2);
    check_same_as_alone(&h, 2, small, 2, 2);
    h_free(&h);
}

static void test_preemption(void) {
    // 6 blocks of 4 = 24 token slots; three requests needing 16 each at the end
    harness h;
    h_init(&h, 6, 4, 32, 4, 0);
    int32_t p[3][6];
    for (int i = 0; i < 3; i++) {
        make_prompt(p[i], 6, 40 + i);
        h_add(&h, (uint64_t)i, p[i], 6, 10);
    }
    h_run(&h, 500);
    sched_counters c;
    sched_get_counters(h.s, &c);
    CHECK_MSG(c.preemptions > 0, "expected preemptions, got %llu", (unsigned long long)c.preemptions);
    for (int i = 0; i < 3; i++) check_same_as_alone(&h, i, p[i], 6, 10);
    kv_stats ks;
    kv_pool_stats(h.pool, &ks);
    CHECK_EQ_INT(ks.n_used, 0);
    h_free(&h);

    // the same with prefix caching on: recomputation after preemption may reuse cached blocks
    h_init(&h, 6, 4, 5, 4, 1);
    for (int i = 0; i < 3; i++) h_add(&h, (uint64_t)i, p[i], 6, 10);
    h_run(&h, 500);
    sched_get_counters(h.s, &c);
    CHECK(c.preemptions > 0);
    for (int i = 0; i < 3; i++) check_same_as_alone(&h, i, p[i], 6, 10);
    h_free(&h);
}

static void test_prefix_cache(void) {
    harness h;
    h_init(&h, 64, 4, 64, 4, 1);
    int32_t a[14], b[14];
    make_prompt(a, 14, 7);
    memcpy(b, a, sizeof b);
    b[13] = 499; // same first 13 tokens: 3 full blocks shared
    h_add(&h, 0, a, 14, 5);
    h_run(&h, 100);
    sched_req *r = h_add(&h, 1, b, 14, 5);
    const sched_plan *pl = sched_step(h.s, 1.0);
    CHECK_EQ_INT(pl->n_items, 1);
    CHECK_EQ_INT(pl->items[0].start, 12);
    CHECK_EQ_INT(pl->items[0].n, 2);
    CHECK_EQ_INT(r->n_cached, 12);
    h_forward(&h, pl);
    sched_commit(h.s);
    int32_t back[14];
    for (int pos = 0; pos < 14; pos++) back[pos] = h.store[r->kv.blocks[pos / 4] * 4 + pos % 4];
    CHECK(!memcmp(back, b, sizeof b)); // the shared blocks hold b's prefix
    r->tokens[r->n_tokens++] = (int32_t)fake_next(back, 14);
    h_run(&h, 100);
    CHECK_EQ_INT(h.n_cached[1], 12);
    check_same_as_alone(&h, 0, a, 14, 5);
    check_same_as_alone(&h, 1, b, 14, 5);
    // an identical prompt (fully cached): the last token is still computed
    h_add(&h, 2, a, 12, 3);
    pl = sched_step(h.s, 1.0);
    CHECK_EQ_INT(pl->items[0].start, 8);
    CHECK_EQ_INT(pl->items[0].n, 4);
    sched_counters c;
    sched_get_counters(h.s, &c);
    CHECK(c.prefix_hit_tokens == 12 + 8);
    CHECK(c.prefix_query_tokens == 14 + 14 + 12);
    h_free(&h);

    // concurrent identical prompts: both complete with the alone output
    h_init(&h, 64, 4, 8, 4, 1);
    for (int i = 0; i < 4; i++) h_add(&h, (uint64_t)i, a, 14, 6);
    h_run(&h, 200);
    for (int i = 0; i < 4; i++) check_same_as_alone(&h, i, a, 14, 6);
    h_free(&h);
}

static void test_cancel_deadline(void) {
    harness h;
    h_init(&h, 32, 4, 64, 4, 0);
    int32_t a[5];
    make_prompt(a, 5, 9);
    sched_req *ra = h_add(&h, 0, a, 5, 20);
    sched_req *rb = h_add(&h, 1, a, 5, 20);
    rb->deadline = 5.0;
    sched_req *rc = h_add(&h, 2, a, 5, 20);
    h_step(&h, 1.0);
    h_step(&h, 2.0);
    sched_req *rd = h_add(&h, 3, a, 5, 20); // still waiting when cancelled
    (void)rd;
    CHECK(sched_find(h.s, 3) == rd);
    kv_stats ks;
    kv_pool_stats(h.pool, &ks);
    CHECK_EQ_INT(ks.n_used, 3 * 2);
    ra->cancel = SCHED_END_CANCELLED;
    rd->cancel = SCHED_END_CANCELLED;
    const sched_plan *p = sched_step(h.s, 3.0);
    int n_ended = 0;
    for (sched_req *r = p->ended; r; r = r->next) {
        n_ended++;
        CHECK(r->id == 0 || r->id == 3);
        CHECK_EQ_INT(r->end, SCHED_END_CANCELLED);
    }
    CHECK_EQ_INT(n_ended, 2);
    for (int i = 0; i < p->n_items; i++) CHECK(p->items[i].r != ra);
    kv_pool_stats(h.pool, &ks);
    CHECK_EQ_INT(ks.n_used, 2 * 2); // ra's blocks are back at once
    sched_req *ended = p->ended;
    h_forward(&h, p);
    sched_commit(h.s);
    while (ended) {
        sched_req *n = ended->next;
        h_record_end(&h, ended);
        ended = n;
    }
    for (int i = 0; i < 2; i++) {
        sched_req *r = i ? rc : rb;
        r->tokens[r->n_tokens++] = 1;
    }
    h_step(&h, 4.99);
    CHECK(!h.done[1]);
    h_step(&h, 5.0);
    CHECK(h.done[1] && h.end[1] == SCHED_END_DEADLINE);
    CHECK(!h.done[2]);
    CHECK(sched_find(h.s, 1) == NULL);
    CHECK(sched_find(h.s, 2) == rc);
    h_free(&h);
}

int main(void) {
    test_chunked_prefill();
    test_decode_every_step();
    test_max_seqs_fifo();
    test_preemption();
    test_prefix_cache();
    test_cancel_deadline();
    test_speculation();
    TEST_MAIN_END();
}
