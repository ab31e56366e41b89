// The ITL guard's step budget (sched.h): while streams decode, a step may carry only as many tokens as the
// step-cost model says fit in itl_guard times a decode-only step (never under the floor), so prefill work
// added to a step cannot stretch the streams' inter-token gaps past that factor.
#include "sched/sched.h"
#include "sched/sched_impl.h"

int sched_guard_budget(const sched *s, int n_decoding) {
    int budget = s->o.max_batch_tokens;
    if (s->o.itl_guard <= 0 || n_decoding == 0 || !step_cost_ready(&s->cost)) return budget;
    double limit = s->o.itl_guard * step_cost_predict(&s->cost, n_decoding);
    if (limit < s->o.itl_guard_floor_s) limit = s->o.itl_guard_floor_s;
    int cap = step_cost_max_tokens(&s->cost, limit);
    if (cap < n_decoding + 1) cap = n_decoding + 1; // a prompt being prefilled still moves every step
    return cap < budget ? cap : budget;
}
