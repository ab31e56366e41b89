// Lower classes yield (see sched_yield.h for the rules and why).
#include "sched/sched_yield.h"

static sched_key key_of(const sched *s, const sched_req *r) {
    return sched_key_floored(sched_key_of(r), s->prio_floor);
}

static double aging(const sched *s) {
    return s->o.aging_s > 0 ? s->o.aging_s : SCHED_AGING_S;
}

void sched_yield_begin(sched *s, double now) {
    s->now = now;
    s->n_lead = 0;
    s->low_left = (int)(s->o.max_batch_tokens * SCHED_YIELD_SHARE);
    if (s->low_left < 1) s->low_left = 1;
}

void sched_yield_seen(sched *s, const sched_req *r) {
    if (!s->seen || r->priority <= s->best_seen || r->t_arrival - s->t_seen >= aging(s))
        s->seen = 1, s->best_seen = r->priority, s->t_seen = r->t_arrival;
}

void sched_yield_note(sched *s, const sched_req *r) {
    if (s->o.policy == SCHED_POL_FIFO) return;
    sched_key k = key_of(s, r);
    int p = sched_eff_priority(&k, s->o.aging_s, s->now), i = 0;
    while (i < s->n_lead && s->lead_ten[i] != r->tenant)
        i++;
    if (i == s->n_lead && i < SCHED_FAIR_MAX_TENANTS)
        s->lead_ten[s->n_lead++] = r->tenant, s->lead_prio[i] = p;
    else if (i < s->n_lead && p < s->lead_prio[i])
        s->lead_prio[i] = p;
    // (tenants past SCHED_FAIR_MAX_TENANTS with prefill in one step lead nothing)
}

int sched_yield_leads(const sched_item *it) {
    return it->start < it->r->n_tokens - 1 || (it->sample && it->r->t_first_token == 0);
}

void sched_yield_rebuild(sched *s) {
    const sched_plan *p = &s->plan;
    s->n_lead = 0;
    for (int i = 0; i < p->n_items; i++)
        if (sched_yield_leads(&p->items[i])) sched_yield_note(s, p->items[i].r);
}

int sched_yields(const sched *s, const sched_req *r, const sched_key *k) {
    if (s->o.policy == SCHED_POL_FIFO) return 0;
    for (int i = 0; i < s->n_lead; i++)
        if (s->lead_ten[i] == r->tenant) return s->lead_prio[i] < sched_eff_priority(k, s->o.aging_s, s->now);
    return 0;
}

int sched_yield_room(const sched *s, const sched_req *r) {
    sched_key k = key_of(s, r);
    return sched_yields(s, r, &k) && s->low_left < s->budget ? s->low_left : s->budget;
}

void sched_yield_charge(sched *s, const sched_req *r, int n) {
    sched_key k = key_of(s, r);
    if (sched_yields(s, r, &k)) s->low_left -= n < s->low_left ? n : s->low_left;
}

int sched_yield_guard(const sched *s, double now, int guard) {
    if (s->o.policy == SCHED_POL_FIFO || !s->seen || now - s->t_seen >= aging(s)) return guard;
    for (const sched_req *r = s->running.head; r; r = r->next) {
        int left = r->n_tokens - r->num_computed;
        if (left == 1) return guard; // streams decode: the ITL guard itself bounds the step
        if (left > 1 && r->priority <= s->best_seen) return guard; // the class is here: yield rule
    }
    for (const sched_req *r = s->waiting.head; r; r = r->next)
        if (r->priority <= s->best_seen) return guard;
    int cap = sched_guard_budget(s, 1);
    return cap < guard ? cap : guard;
}
