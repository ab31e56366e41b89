// Mixture-of-experts routing (model/moe.h: moe_route): softmax over every expert, the top k most probable
// first with ties to the lower index, their weights renormalised or not.
#include <math.h>
#include <stdint.h>

#include "model/moe.h"
#include "test_util.h"

static void test_route(void) {
    const float logits[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 0.0f};
    int32_t ids[3];
    float w[3];
    double sum = 0;
    for (int e = 0; e < 6; e++) sum += exp(logits[e]);
    moe_route(logits, 6, 3, 0, ids, w);
    CHECK_EQ_INT(ids[0], 1); // ties (experts 1 and 3) go to the lower index first
    CHECK_EQ_INT(ids[1], 3);
    CHECK_EQ_INT(ids[2], 4);
    CHECK_MSG(fabs(w[0] - exp(2.0) / sum) < 1e-6 && fabs(w[2] - exp(1.0) / sum) < 1e-6, "w %g %g", w[0], w[2]);
    moe_route(logits, 6, 3, 1, ids, w); // renormalised: the three weights sum to 1, in the same ratios
    CHECK_MSG(fabs(w[0] + w[1] + w[2] - 1.0) < 1e-6, "sum %g", w[0] + w[1] + w[2]);
    CHECK_MSG(fabs(w[2] / w[0] - exp(-1.0)) < 1e-6, "ratio %g", w[2] / w[0]);
    // the most probable expert last in index order, and k = n_expert
    const float last[4] = {-3.0f, -2.0f, -1.0f, 5.0f};
    int32_t all[4];
    float wa[4];
    moe_route(last, 4, 4, 1, all, wa);
    CHECK(all[0] == 3 && all[1] == 2 && all[2] == 1 && all[3] == 0);
    moe_route(last, 4, 1, 1, all, wa); // top-1 renormalised: weight 1
    CHECK(all[0] == 3 && wa[0] == 1.0f);
}

int main(void) {
    test_route();
    TEST_MAIN_END();
}
