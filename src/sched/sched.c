// Continuous-batching scheduler (see sched.h for the order of work in a step).
#include "sched/sched.h"

#include "sched/sched_fair.h"

#include <stdlib.h>
#include <string.h>

typedef struct sched_list {
    sched_req *head, *tail;
    int n;
} sched_list;

struct sched {
    sched_opts o;
    kv_pool *pool;
    sched_list waiting, running; // running in admission order (tail = most recently admitted)
    sched_item *items;           // (max_seqs) plan storage
    sched_plan plan;
    int budget;                  // tokens left in the step being built
    step_cost cost;              // learned step time vs tokens (ITL guard, speculation policy)
    sched_draft_fn draft_fn;     // (optional) speculation
    void *draft_ctx;
    uint64_t steps, preemptions, prefix_query_tokens, prefix_hit_tokens;
};

// --- intrusive lists
static void list_unlink(sched_list *l, sched_req *r) {
    if (r->prev) r->prev->next = r->next;
    else l->head = r->next;
    if (r->next) r->next->prev = r->prev;
    else l->tail = r->prev;
    r->prev = r->next = NULL;
    l->n--;
}

static void list_push_tail(sched_list *l, sched_req *r) {
    r->next = NULL;
    r->prev = l->tail;
    if (l->tail) l->tail->next = r;
    else l->head = r;
    l->tail = r;
    l->n++;
}

static void list_push_head(sched_list *l, sched_req *r) {
    r->prev = NULL;
    r->next = l->head;
    if (l->head) l->head->prev = r;
    else l->tail = r;
    l->head = r;
    l->n++;
}

static sched_list *list_of(sched *s, sched_req *r) {
    return r->state == SCHED_RUNNING ? &s->running : &s->waiting;
}

// --- lifetime
int sched_new(const sched_opts *o, kv_pool *pool, sched **out, tc_err *err) {
    *out = NULL;
    if (o->max_batch_tokens < 1 || o->max_seqs < 1)
        return tc_err_set(err, TC_ERR_INVALID, "sched: max_batch_tokens %d and max_seqs %d must be >= 1",
                          o->max_batch_tokens, o->max_seqs);
    sched *s = calloc(1, sizeof *s);
    if (!s) return tc_err_set(err, TC_ERR_NOMEM, "sched: out of memory");
    s->items = calloc((size_t)o->max_seqs, sizeof *s->items);
    if (!s->items) {
        free(s);
        return tc_err_set(err, TC_ERR_NOMEM, "sched: out of memory");
    }
    s->o = *o;
    s->pool = pool;
    s->plan.items = s->items;
    *out = s;
    return 0;
}

void sched_free(sched *s) {
    if (!s) return;
    free(s->items);
    free(s);
}

void sched_add(sched *s, sched_req *r) {
    r->state = SCHED_WAITING;
    r->num_computed = 0;
    r->plan_idx = -1;
    list_push_tail(&s->waiting, r);
}

// --- plan items
static void plan_add(sched *s, sched_req *r, int n, int n_draft) {
    sched_plan *p = &s->plan;
    sched_item *it = &p->items[p->n_items];
    it->r = r;
    it->start = r->num_computed;
    it->n = n;
    it->n_draft = n_draft;
    it->sample = r->num_computed + n - n_draft == r->n_tokens;
    r->plan_idx = p->n_items++;
    p->n_tokens += n;
    p->n_sample += it->sample;
    s->budget -= n;
}

static void plan_remove(sched *s, sched_req *r) {
    sched_plan *p = &s->plan;
    int k = r->plan_idx;
    p->n_tokens -= p->items[k].n;
    p->n_sample -= p->items[k].sample;
    s->budget += p->items[k].n;
    memmove(&p->items[k], &p->items[k + 1], (size_t)(p->n_items - k - 1) * sizeof *p->items);
    p->n_items--;
    for (int i = k; i < p->n_items; i++) p->items[i].r->plan_idx = i;
    r->plan_idx = -1;
}

// Frees the KV of running request v and puts it back at the head of the waiting queue.
static void preempt(sched *s, sched_req *v) {
    if (v->plan_idx >= 0) plan_remove(s, v);
    list_unlink(&s->running, v);
    kv_seq_free(s->pool, &v->kv);
    v->num_computed = 0;
    v->state = SCHED_WAITING;
    v->n_preempted++;
    list_push_head(&s->waiting, v);
    s->preemptions++;
}

// Preempts the most recently admitted running request (out of KV blocks). Returns the victim.
static sched_req *preempt_tail(sched *s) {
    sched_req *v = s->running.tail;
    preempt(s, v);
    s->plan.n_preempted++;
    return v;
}

// Schedules n tokens of running request r, preempting from the tail until its blocks fit. Returns 0, or -1
// when r itself was preempted.
static int schedule_running(sched *s, sched_req *r, int n) {
    // Speculative rows only where blocks are free: drafts never preempt anybody.
    if (r->n_draft > 0 && kv_seq_alloc_to(s->pool, &r->kv, r->num_computed + n + r->n_draft) == 0) {
        plan_add(s, r, n + r->n_draft, r->n_draft);
        return 0;
    }
    r->n_draft = 0;
    while (kv_seq_alloc_to(s->pool, &r->kv, r->num_computed + n) != 0) {
        if (preempt_tail(s) == r) return -1;
    }
    plan_add(s, r, n, 0);
    return 0;
}

// Admits the waiting head if its first chunk fits. Returns 0 if admitted, -1 if admission stops here.
static int admit_head(sched *s, double now) {
    sched_req *r = s->waiting.head;
    int cached = 0;
    if (s->o.prefix_cache && !r->no_prefix) cached = kv_seq_match_prefix(s->pool, &r->kv, r->tokens, r->n_tokens);
    r->num_computed = cached;
    int n = r->n_tokens - cached;
    if (n > s->budget) n = s->budget;
    if (kv_seq_alloc_to(s->pool, &r->kv, cached + n) != 0) {
        kv_seq_free(s->pool, &r->kv); // give back the matched blocks: they stay cached
        r->num_computed = 0;
        return -1;
    }
    if (s->o.prefix_cache) {
        s->prefix_query_tokens += (uint64_t)r->n_tokens;
        s->prefix_hit_tokens += (uint64_t)cached;
    }
    if (r->t_first_sched == 0) {
        r->t_first_sched = now;
        r->n_cached = cached < r->n_prompt ? cached : r->n_prompt;
    }
    list_unlink(&s->waiting, r);
    r->state = SCHED_RUNNING;
    list_push_tail(&s->running, r);
    plan_add(s, r, n, 0);
    return 0;
}

// Step 1: pending cancels and passed deadlines leave, from both queues.
static void reap(sched *s, sched_list *l, double now) {
    sched_req *r = l->head;
    while (r) {
        sched_req *next = r->next;
        sched_end end = r->cancel;
        if (end == SCHED_END_NONE && r->deadline > 0 && now >= r->deadline) end = SCHED_END_DEADLINE;
        if (end != SCHED_END_NONE) {
            sched_finish(s, r, end);
            r->next = s->plan.ended;
            s->plan.ended = r;
        }
        r = next;
    }
}

const sched_plan *sched_step(sched *s, double now) {
    sched_plan *p = &s->plan;
    p->n_items = p->n_tokens = p->n_sample = p->n_preempted = 0;
    p->ended = NULL;
    reap(s, &s->running, now);
    reap(s, &s->waiting, now);
    int n_decoding = 0;
    for (sched_req *r = s->running.head; r; r = r->next) n_decoding += r->n_tokens - r->num_computed == 1;
    s->budget = sched_guard_budget(s, n_decoding);

    // Step 2 (decode) then step 3 (chunks of running requests still catching up). next is read after
    // scheduling r: a preemption may have moved the tail, and if r itself went, it was the tail.
    int dec_left = n_decoding; // decoding requests not yet planned: drafts leave each of them a row
    for (int pass = 0; pass < 2; pass++) {
        for (sched_req *r = s->running.head; r && s->budget > 0;) {
            int left = r->n_tokens - r->num_computed;
            int want = pass == 0 ? left == 1 : left > 1;
            if (want && r->plan_idx < 0) {
                int n = left < s->budget ? left : s->budget;
                r->n_draft = 0;
                if (pass == 0) {
                    dec_left--;
                    int max = s->budget - 1 - dec_left, room = r->cap - r->n_tokens - 1; // keep 1 for the bonus
                    if (room < max) max = room;
                    if (max > 0 && s->draft_fn) {
                        sched_draft_info info = {max, n_decoding, s->waiting.n, s->running.n - n_decoding};
                        int d = s->draft_fn(s->draft_ctx, r, &info);
                        r->n_draft = d < 0 ? 0 : d > max ? max : d;
                    }
                }
                if (schedule_running(s, r, n) < 0) break;
            }
            r = r->next;
        }
    }
    // Step 4: admission. Fair share first (sched_fair.c): when every slot is taken, a waiting tenant below
    // its share takes one from the tenant furthest above it (the victim recomputes later, mostly from the
    // prefix cache); this does not count as a KV preemption, so admission goes on in this step.
    sched_req *fv = p->n_preempted == 0 && s->running.n >= s->o.max_seqs
                        ? sched_fair_victim(s->running.head, s->waiting.head) : NULL;
    if (fv) preempt(s, fv);
    while (p->n_preempted == 0 && s->waiting.head && s->running.n < s->o.max_seqs && s->budget > 0) {
        sched_req *f = sched_fair_pick(s->running.head, s->waiting.head); // tenants' fair share (sched_fair.c)
        if (f != s->waiting.head) {
            list_unlink(&s->waiting, f);
            list_push_head(&s->waiting, f);
        }
        if (admit_head(s, now) < 0) break;
    }
    if (p->n_items > 0) s->steps++;
    return p;
}

void sched_observe(sched *s, int n_tokens, double seconds) { step_cost_observe(&s->cost, n_tokens, seconds); }

int sched_guard_budget(const sched *s, int n_decoding) {
    int budget = s->o.max_batch_tokens;
    if (s->o.itl_guard <= 0 || n_decoding == 0 || !step_cost_ready(&s->cost)) return budget;
    double limit = s->o.itl_guard * step_cost_predict(&s->cost, n_decoding);
    int cap = step_cost_max_tokens(&s->cost, limit);
    if (cap < n_decoding + 1) cap = n_decoding + 1; // a prompt being prefilled still moves every step
    return cap < budget ? cap : budget;
}

void sched_set_draft_fn(sched *s, sched_draft_fn fn, void *ctx) {
    s->draft_fn = fn;
    s->draft_ctx = ctx;
}

int sched_step_cost_fit(const sched *s, double *a, double *b) {
    if (!step_cost_ready(&s->cost)) return 0;
    double t1 = step_cost_predict(&s->cost, 1), t2 = step_cost_predict(&s->cost, 2);
    *b = t2 - t1;
    *a = t1 - *b;
    return 1;
}

void sched_commit(sched *s) {
    sched_plan *p = &s->plan;
    for (int i = 0; i < p->n_items; i++) {
        sched_item *it = &p->items[i];
        sched_req *r = it->r;
        r->num_computed = it->start + it->n;
        r->plan_idx = -1;
        r->n_draft = 0;
        // drafted positions are not verified yet: they are never registered (sched_rollback drops the
        // rejected ones; accepted ones are registered by a later commit, once they are below n_tokens)
        int verified = r->num_computed < r->n_tokens ? r->num_computed : r->n_tokens;
        if (s->o.prefix_cache) kv_seq_commit(s->pool, &r->kv, r->tokens, verified);
    }
}

void sched_rollback(sched *s, sched_req *r) {
    if (r->state != SCHED_RUNNING) return;
    int valid = r->n_tokens - 1;
    if (r->num_computed <= valid) return;
    r->num_computed = valid;
    kv_seq_truncate(s->pool, &r->kv, valid);
}

void sched_finish(sched *s, sched_req *r, sched_end end) {
    if (r->state == SCHED_DONE) return;
    if (r->plan_idx >= 0) plan_remove(s, r);
    list_unlink(list_of(s, r), r);
    kv_seq_free(s->pool, &r->kv);
    r->state = SCHED_DONE;
    r->end = end;
}

sched_req *sched_take_all(sched *s, sched_end end) {
    sched_req *out = NULL;
    sched_list *lists[2] = {&s->running, &s->waiting};
    for (int k = 0; k < 2; k++) {
        while (lists[k]->head) {
            sched_req *r = lists[k]->head;
            sched_finish(s, r, end);
            r->next = out;
            out = r;
        }
    }
    return out;
}

sched_req *sched_find(sched *s, uint64_t id) {
    sched_list *lists[2] = {&s->running, &s->waiting};
    for (int k = 0; k < 2; k++)
        for (sched_req *r = lists[k]->head; r; r = r->next)
            if (r->id == id) return r;
    return NULL;
}

int sched_has_work(const sched *s) { return s->running.n + s->waiting.n > 0; }

void sched_get_counters(const sched *s, sched_counters *c) {
    c->n_running = s->running.n;
    c->n_waiting = s->waiting.n;
    c->steps = s->steps;
    c->preemptions = s->preemptions;
    c->prefix_query_tokens = s->prefix_query_tokens;
    c->prefix_hit_tokens = s->prefix_hit_tokens;
}
