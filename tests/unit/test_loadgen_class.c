// bench-serve request classes (src/loadgen/lg_class.c): the priority mix and the per-class summary.
#include "loadgen/lg_class.h"
#include "test_util.h"

static void test_mix(void) {
    lg_prio_mix m;
    tc_err err = {0};
    CHECK_EQ_INT(lg_prio_mix_parse(&m, "0:0.8,5:0.2", &err), 0);
    CHECK_EQ_INT(m.n, 2);
    CHECK_NEAR(m.cum[0], 0.8, 1e-12);
    CHECK_EQ_INT(lg_prio_mix_pick(&m, 0.0), 0);
    CHECK_EQ_INT(lg_prio_mix_pick(&m, 0.79), 0);
    CHECK_EQ_INT(lg_prio_mix_pick(&m, 0.81), 5);
    CHECK_EQ_INT(lg_prio_mix_pick(&m, 0.999999), 5);
    CHECK_EQ_INT(lg_prio_mix_parse(&m, "-3:1,2:3", &err), 0); // weights normalised
    CHECK_NEAR(m.cum[0], 0.25, 1e-12);
    CHECK_EQ_INT(lg_prio_mix_pick(&m, 0.2), -3);
    const char *bad[] = {"", "0", "0:", "0:0", "0:-1", "x:1", "0:1,0:2", "0:1;5:1", "0:1,1:1,2:1,3:1,4:1,5:1,6:1,7:1,8:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(lg_prio_mix_parse(&m, bad[i], &err) == TC_ERR_INVALID, "'%s' accepted", bad[i]);
}

static void test_classes(void) {
    // 6 requests: prio 5 short ok fast, prio 0 short ok slow, prio 0 long ok slow, prio 0 short failed,
    // prio 5 long ok fast, and a warmup (skipped)
    lg_record r[6] = {0};
    int prio[6] = {5, 0, 0, 0, 5, 0}, len[6] = {1, 1, 2, 1, 2, 1}, ok[6] = {1, 1, 1, 0, 1, 1};
    double ttft[6] = {0.1, 0.9, 2.0, 0, 0.2, 0.1};
    for (int i = 0; i < 6; i++)
        r[i] = (lg_record){.index = i == 5 ? -1 : i, .ok = ok[i], .ttft = ttft[i], .has_priority = 1,
                              .priority = prio[i], .len_class = len[i], .output_tokens = 1};
    lg_slo slo = {.ttft_ms = 500};
    lg_classes c;
    tc_err err = {0};
    CHECK_EQ_INT(lg_classes_compute(&c, r, 6, 2.0, &slo, &err), 0);
    CHECK_EQ_INT(c.n, 4);
    const char *names[] = {"priority=0", "priority=5", "short", "long"};
    size_t completed[] = {2, 2, 2, 2}, failed[] = {1, 0, 1, 0}, good[] = {0, 2, 1, 1};
    for (int k = 0; k < 4 && k < c.n; k++) {
        CHECK_MSG(!strcmp(c.c[k].name, names[k]), "class %d is %s", k, c.c[k].name);
        CHECK_EQ_INT(c.c[k].completed, completed[k]);
        CHECK_EQ_INT(c.c[k].failed, failed[k]);
        CHECK_EQ_INT(c.c[k].good, good[k]);
        CHECK_NEAR(c.c[k].goodput, good[k] / 2.0, 1e-12);
    }
    CHECK_NEAR(c.c[0].ttft.max, 2000, 1e-9); // ms
    CHECK_EQ_INT(lg_classes_compute(&c, r, 6, 2.0, NULL, &err), 0); // no SLO: nothing is "good"
    CHECK_EQ_INT(c.c[1].good, 0);
    for (int i = 0; i < 6; i++) r[i].has_priority = 0, r[i].len_class = LG_LEN_NONE;
    CHECK_EQ_INT(lg_classes_compute(&c, r, 6, 2.0, &slo, &err), 0);
    CHECK_EQ_INT(c.n, 0);
}

int main(void) {
    test_mix();
    test_classes();
    TEST_MAIN_END();
}
