// Context-overflow truncation, the pure part (src/server/trunc.c): turn structure, what is kept, the
// bisection (with a fake "fits" probe that counts its calls) and middle-out.
#include "server/trunc.h"
#include "test_util.h"

#define M(r) {r, "x"}

static void test_turns(void) {
    // sys, u1 a1, u2 a(tool call) tool tool a2, sys2, u3 a3, u4 (last turn)
    chat_msg m[] = {M("system"), M("user"), M("assistant"), M("user"), M("assistant"), M("tool"), M("tool"),
                    M("assistant"), M("system"), M("user"), M("assistant"), M("user")};
    int n = (int)(sizeof m / sizeof m[0]), turn[12], keep[12];
    int nt = trunc_turns(m, n, turn);
    CHECK_EQ_INT(nt, 3);
    int want[] = {-1, 0, 0, 1, 1, 1, 1, 1, -1, 2, 2, -1};
    for (int i = 0; i < n; i++) CHECK_MSG(turn[i] == want[i], "message %d: turn %d, want %d", i, turn[i], want[i]);
    CHECK_EQ_INT(trunc_keep(turn, n, 0, keep), n);
    // dropping 2 turns: the tool call goes together with its results, both system messages stay
    int m2 = trunc_keep(turn, n, 2, keep);
    int want2[] = {0, 8, 9, 10, 11};
    CHECK_EQ_INT(m2, 5);
    for (int i = 0; i < m2 && i < 5; i++) CHECK_EQ_INT(keep[i], want2[i]);
    int m3 = trunc_keep(turn, n, 3, keep); // everything droppable gone: system messages + last user turn
    CHECK_EQ_INT(m3, 3);
    CHECK_EQ_INT(keep[0], 0);
    CHECK_EQ_INT(keep[1], 8);
    CHECK_EQ_INT(keep[2], 11);

    // the last user turn includes what answers it (an agent loop: call + result, generation continues)
    chat_msg a[] = {M("user"), M("assistant"), M("user"), M("assistant"), M("tool")};
    int ta[5];
    CHECK_EQ_INT(trunc_turns(a, 5, ta), 1);
    CHECK(ta[0] == 0 && ta[1] == 0 && ta[2] == -1 && ta[3] == -1 && ta[4] == -1);

    // an assistant greeting before the first user message is a turn of its own
    chat_msg g[] = {M("system"), M("assistant"), M("user"), M("assistant"), M("user")};
    int tg[5];
    CHECK_EQ_INT(trunc_turns(g, 5, tg), 2);
    CHECK(tg[0] == -1 && tg[1] == 0 && tg[2] == 1 && tg[3] == 1 && tg[4] == -1);

    // nothing droppable: one user message, or none at all
    chat_msg one[] = {M("system"), M("user")};
    int t1[2];
    CHECK_EQ_INT(trunc_turns(one, 2, t1), 0);
    CHECK(t1[0] == -1 && t1[1] == -1);
    chat_msg none[] = {M("system"), M("assistant")};
    CHECK_EQ_INT(trunc_turns(none, 2, t1), 0);
    CHECK(t1[0] == -1 && t1[1] == -1);
}

// fake prompt: each turn costs 100 tokens, the pinned part 50; fits under budget
typedef struct fake {
    int n_turns, budget, calls;
} fake;

static int fake_fits(void *ctx, int k) {
    fake *f = ctx;
    f->calls++;
    if (f->budget < 0) return -7; // error passthrough
    return 50 + 100 * (f->n_turns - k) <= f->budget;
}

static void test_search(void) {
    for (int nt = 0; nt <= 40; nt++)
        for (int budget = 0; budget <= 50 + 100 * nt + 10; budget += 10) {
            fake f = {nt, budget, 0};
            int k = trunc_search(nt, fake_fits, &f);
            int want = budget < 50 ? TRUNC_NOFIT : nt - (budget - 50) / 100 > 0 ? nt - (budget - 50) / 100 : 0;
            CHECK_MSG(k == want, "turns %d budget %d: k %d, want %d", nt, budget, k, want);
            int lg = 0;
            while ((1 << lg) < nt) lg++;
            CHECK_MSG(f.calls <= 2 + lg, "turns %d: %d probes, want <= %d", nt, f.calls, 2 + lg);
        }
    fake f = {5, -1, 0};
    CHECK_EQ_INT(trunc_search(5, fake_fits, &f), -7);
}

static void test_middle_out(void) {
    int32_t ids[10];
    for (int i = 0; i < 10; i++) ids[i] = i;
    CHECK_EQ_INT(trunc_middle_out(ids, 10, 10), 10);
    CHECK_EQ_INT(trunc_middle_out(ids, 10, 5), 5); // head 2, tail 3
    int32_t want[] = {0, 1, 7, 8, 9};
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(ids[i], want[i]);
    for (int i = 0; i < 10; i++) ids[i] = i;
    CHECK_EQ_INT(trunc_middle_out(ids, 10, 1), 1); // tail only
    CHECK_EQ_INT(ids[0], 9);
}

int main(void) {
    test_turns();
    test_search();
    test_middle_out();
    TEST_MAIN_END();
}
