// The scheduler's one ordering rule: which waiting request is admitted next, which catching-up prompt gets
// the next prefill chunk, and (reversed) which running request is preempted first. Everything that ranks
// requests goes through sched_key_before, so a new rule (e.g. per-tenant fair share) plugs in beside it.
//
// Under SCHED_POL_FIFO the waiting queue is served in order (head first) and this file is not consulted.
// Under SCHED_POL_PRIORITY and SCHED_POL_SLO a key ranks by, in order:
//   1. effective priority = priority - floor(waited / aging_s), but never better than the best priority
//      present (key.floor, set by the scheduler): lower first. Aging: a request gains one priority class per
//      aging_s seconds waited (default SCHED_AGING_S), so a priority-p request waits at most (p - q) *
//      aging_s behind a stream of priority-q arrivals before it ranks with them. The floor keeps aging from
//      reordering requests of the best class among themselves (an old request of the top class would
//      otherwise outrank every fresh one of its class whatever rule 2 says);
//   2. remaining prefill (shortest first), less SCHED_SRPF_AGING_TOK tokens per second waited: a long
//      prompt gains one short prompt's worth of rank every ~0.1 s, so it is not starved by short ones;
//   3. arrival time, then id (FIFO among equals).
// On top of the ranking, prefill budget is split into lanes (sched.c, prefill_ranked): within the best
// priority class, prompts longer than one step's budget (max_batch_tokens) get SCHED_LONG_SHARE of each
// step's budget while short ones wait or catch up, and the short ones the rest; a lane's unused budget goes
// to the other. The aging of rule 2 then only orders long prompts among themselves (and short ones among
// themselves): an aged long prompt does not take a whole step's budget from short ones.
// Lower classes yield (sched_yield.h): in a step that carries prefill of a tenant's request, that tenant's
// requests of a strictly worse effective priority get at most SCHED_YIELD_SHARE of max_batch_tokens of
// prefill in all, so the better request's step is not lengthened by theirs.
#ifndef TACHYON_SCHED_ORDER_H
#define TACHYON_SCHED_ORDER_H

#include <stdint.h>

#include "sched/request.h"

typedef enum { SCHED_POL_FIFO = 0, SCHED_POL_PRIORITY, SCHED_POL_SLO } sched_policy;

#define SCHED_AGING_S 5.0         // default seconds waited per priority class gained
#define SCHED_SRPF_AGING_TOK 1000 // prefill tokens of rank gained per second waited
#define SCHED_LONG_SHARE 0.25     // a step's budget kept for long prompts while short ones compete
#define SCHED_YIELD_SHARE 0.0625  // of max_batch_tokens: lower classes' prefill while a better class prefills
#define SCHED_PRIO_PREEMPT_MAX 1  // a request loses its slot to a higher priority at most this often

// What ranking needs to know of a request (a copy, so that the engine can publish keys to other threads).
typedef struct sched_key {
    int priority;
    int remaining;    // prompt (and recompute) tokens still without KV
    double t_arrival; // monotonic seconds
    uint64_t id;
    int floor, has_floor; // aging never lifts the effective priority above floor (the best priority present)
} sched_key;

sched_key sched_key_of(const sched_req *r);
// k with the scheduler's aging floor (rule 1: the best priority present) applied.
static inline sched_key sched_key_floored(sched_key k, int floor) {
    k.floor = floor;
    k.has_floor = 1;
    return k;
}
// "fifo" | "priority" | "slo" → policy, or -1.
int sched_policy_parse(const char *s);
const char *sched_policy_name(int policy);
// Effective priority at time now (seconds) with aging_s seconds per class (<= 0: SCHED_AGING_S), not below
// min(k->floor, k->priority) when k->has_floor.
int sched_eff_priority(const sched_key *k, double aging_s, double now);
// 1 if a ranks strictly before b at time now under the rules above.
int sched_key_before(const sched_key *a, const sched_key *b, double aging_s, double now);

#endif
