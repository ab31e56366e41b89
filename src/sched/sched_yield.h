// Lower classes yield (priority and slo policies; docs/SCHEDULING.md "Lower classes yield"): how a step's
// prefill budget is split between priority classes. Two rules:
//  - yield: once the step being built carries a prefill chunk of a request (or the row that gives a request
//    its first token), the requests of its tenant of a strictly worse effective priority (aging included:
//    one that has aged into the better class does not yield) share SCHED_YIELD_SHARE of max_batch_tokens of
//    prefill in that step, then get none. The better request's step carries its own prefill, the streams'
//    decode rows and a small chunk of the lower classes, not a full budget of them for its first token to
//    wait for; the lower classes still move every step. The rank plans better classes first, so their
//    chunks are noted (sched_yield_note) before a lower one is considered. Across tenants fair share
//    decides: one tenant's priorities never slow another's;
//  - room for a better class: for aging_s seconds after a request of priority p arrived, a step in which no
//    request of priority p or better has prefill to do and nobody decodes is capped as if one stream were
//    decoding (sched_guard_budget(s, 1): the ITL guard's time bound), so a request of that class arriving
//    meanwhile waits for a short step, not a full max_batch_tokens step of lower-class prefill.
// Internal to src/sched/ (reads struct sched); engine thread only.
#ifndef TACHYON_SCHED_YIELD_H
#define TACHYON_SCHED_YIELD_H

#include "sched/sched_impl.h"

// Resets the step's lead table and the lower classes' share; now is the step's time (monotonic seconds).
void sched_yield_begin(sched *s, double now);
// A request was added: remembers the best priority that arrived in the last aging_s seconds.
void sched_yield_seen(sched *s, const sched_req *r);
// 1 if plan item it makes the lower classes yield: it carries prefill left over, or it computes the last
// prompt token that gives the request its first token (a prompt found whole in the prefix cache has only
// that one row to compute, and its first token must not wait for a full step of lower-class prefill).
int sched_yield_leads(const sched_item *it);
// r has a leading item in the plan being built (plan_add).
void sched_yield_note(sched *s, const sched_req *r);
// The plan lost an item (preemption): the lead table is rebuilt from the items left.
void sched_yield_rebuild(sched *s);
// 1 if r (k: its floored key) yields in the step being built.
int sched_yields(const sched *s, const sched_req *r, const sched_key *k);
// The most prefill tokens r may take now: s->budget, or for a yielding request what is left of the share.
int sched_yield_room(const sched *s, const sched_req *r);
// n prefill tokens of r were planned: charged to the lower classes' share when r yields.
void sched_yield_charge(sched *s, const sched_req *r, int n);
// The step's token cap, given the ITL guard's cap `guard`: lowered by the room-for-a-better-class rule.
int sched_yield_guard(const sched *s, double now, int guard);

#endif
