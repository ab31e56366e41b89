// Weighted fair admission between tenants (see sched_fair.h).
#include "sched/sched_fair.h"

typedef struct fair_group {
    int tenant;
    float share;     // > 0
    int running;     // running requests of this tenant
    sched_req *first; // its first waiting request (queue order)
} fair_group;

static float share_of(const sched_req *r) { return r->share > 0 ? r->share : 1.0f; }

// r's group in g[0, *n), added (running 0, first NULL) if new; -1 when it is new and g is full.
static int group_of(fair_group *g, int *n, const sched_req *r) {
    int k = 0;
    while (k < *n && g[k].tenant != r->tenant) k++;
    if (k == *n) {
        if (*n == SCHED_FAIR_MAX_TENANTS) return -1;
        g[(*n)++] = (fair_group){r->tenant, share_of(r), 0, NULL};
    }
    return k;
}

sched_req *sched_fair_pick(const sched_req *running, sched_req *waiting) {
    if (!waiting || !waiting->next) return waiting;
    fair_group g[SCHED_FAIR_MAX_TENANTS];
    int n = 0;
    for (sched_req *r = waiting; r && n < SCHED_FAIR_MAX_TENANTS; r = r->next) {
        int k = group_of(g, &n, r);
        if (!g[k].first) g[k].first = r;
    }
    if (n == 1) return waiting; // one tenant waits: plain queue order
    for (const sched_req *r = running; r; r = r->next)
        for (int k = 0; k < n; k++)
            if (g[k].tenant == r->tenant) {
                g[k].running++;
                break;
            }
    // lowest running/share wins (compared as cross products: no division); ties keep queue order
    int best = 0;
    for (int k = 1; k < n; k++)
        if ((double)g[k].running * g[best].share < (double)g[best].running * g[k].share) best = k;
    return g[best].first;
}

sched_req *sched_fair_victim(sched_req *running, const sched_req *waiting) {
    if (!waiting || !running) return NULL;
    fair_group g[SCHED_FAIR_MAX_TENANTS];
    int n = 0, n_wait;
    for (const sched_req *r = waiting; r && n < SCHED_FAIR_MAX_TENANTS; r = r->next)
        group_of(g, &n, r);
    n_wait = n; // g[0, n_wait) wait; the rest only run
    for (sched_req *r = running; r; r = r->next) {
        int k = group_of(g, &n, r);
        if (k < 0) continue;
        g[k].running++;
        g[k].first = r; // ends as its most recently admitted (running is in admission order)
    }
    int w = 0, v = -1; // the waiting tenant with the lowest usage, the running one with the highest
    for (int k = 1; k < n_wait; k++)
        if ((double)g[k].running * g[w].share < (double)g[w].running * g[k].share) w = k;
    for (int k = 0; k < n; k++)
        if (k != w && g[k].running > 0 && (v < 0 || (double)g[k].running * g[v].share > (double)g[v].running * g[k].share))
            v = k;
    if (v < 0) return NULL;
    // after the move: (running_v - 1) / share_v >= (running_w + 1) / share_w
    if ((double)(g[v].running - 1) * g[w].share >= (double)(g[w].running + 1) * g[v].share) return g[v].first;
    return NULL;
}

int sched_fair_behind(const sched_req *running, const sched_req *waiting, int *tenants, int max) {
    fair_group g[SCHED_FAIR_MAX_TENANTS];
    int n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (const sched_req *r = pass ? waiting : running; r; r = r->next) {
            int k = group_of(g, &n, r);
            if (k < 0) continue;
            if (!pass) g[k].running++;
            // a tenant with prefill to do: waiting, or running and still catching up
            if (pass || r->n_tokens - r->num_computed > 1) g[k].first = (sched_req *)r;
        }
    int m = 0;
    if (n < 2) return 0;
    for (int k = 0; k < n && m < max; k++) {
        if (!g[k].first) continue;
        for (int j = 0; j < n; j++) // someone else holds more of the slots than its share allows k
            if (j != k && (double)g[k].running * g[j].share < (double)g[j].running * g[k].share) {
                tenants[m++] = g[k].tenant;
                break;
            }
    }
    return m;
}
