// Fair share of running slots between tenants. Each request carries a tenant (sched_req.tenant,
// 0 = untagged, which is one group of its own) and its tenant's weight (sched_req.share); a tenant's usage
// is running/share. Two rules:
//  - admission: the scheduler takes the first waiting request of the waiting tenant with the lowest usage;
//  - when every slot is taken: if the waiting tenant with the lowest usage would, after taking one slot from
//    the running tenant with the highest usage, still be at or below it, that tenant's most recently
//    admitted request is preempted (sched_fair_victim). Moving one slot never reverses the order of the two,
//    so slots do not ping-pong; the result is every waiting tenant at its weighted share.
// A tenant alone may use every slot (work-conserving); with one tenant (or none tagged) nothing changes.
#ifndef TACHYON_SCHED_FAIR_H
#define TACHYON_SCHED_FAIR_H

#include "sched/request.h"

// Distinct waiting tenants weighed per admission; tenants past this many in the waiting queue are
// considered once earlier ones have been served (the hot path does not allocate).
#define SCHED_FAIR_MAX_TENANTS 32

// running / waiting: the heads of the scheduler's running and waiting lists (linked by ->next). Returns the
// waiting request to admit next: waiting itself unless another tenant is further below its share.
sched_req *sched_fair_pick(const sched_req *running, sched_req *waiting);
// The running request to preempt so that a waiting tenant gets its share, or NULL (call when no slot is free).
sched_req *sched_fair_victim(sched_req *running, const sched_req *waiting);

// The tenants with prefill to do (waiting, or running and catching up) whose usage is below another tenant's
// (at most max, into tenants); returns how many. The ITL guard (sched.c) does not cap those tenants' prompts:
// it protects the inter-token latency of a tenant's streams, but not at the cost of a tenant below its share
// waiting for its first token (with sched_opts.itl_guard_fair; one tenant or none: always 0).
int sched_fair_behind(const sched_req *running, const sched_req *waiting, int *tenants, int max);

#endif
