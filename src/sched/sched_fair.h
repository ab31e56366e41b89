// Fair share of running slots between tenants (issue 14). An admission rule only: nothing running is ever
// preempted for fairness. Each waiting request carries a tenant (sched_req.tenant, 0 = untagged, which is
// one group of its own) and its tenant's weight (sched_req.share). When the scheduler admits, it takes the
// first waiting request of the tenant with the lowest running/share among the tenants that wait, so no
// tenant gets more than its weighted share of the running slots while another tenant waits, and a tenant
// alone may use them all (work-conserving). With one waiting tenant the order is the queue's own.
#ifndef TACHYON_SCHED_FAIR_H
#define TACHYON_SCHED_FAIR_H

#include "sched/request.h"

// Distinct waiting tenants weighed per admission; tenants past this many in the waiting queue are
// considered once earlier ones have been served (the hot path does not allocate).
#define SCHED_FAIR_MAX_TENANTS 32

// running / waiting: the heads of the scheduler's running and waiting lists (linked by ->next). Returns the
// waiting request to admit next: waiting itself unless another tenant is further below its share.
sched_req *sched_fair_pick(const sched_req *running, sched_req *waiting);

#endif
