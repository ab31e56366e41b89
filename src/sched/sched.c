// Continuous-batching scheduler (see sched.h for the order of work in a step).
#include "sched/sched.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "sched/sched_admit.h"
#include "sched/sched_fair.h"
#include "sched/sched_impl.h"
#include "sched/sched_yield.h"

// --- intrusive lists
static void list_unlink(sched_list *l, sched_req *r) {
    if (r->prev)
        r->prev->next = r->next;
    else
        l->head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        l->tail = r->prev;
    r->prev = r->next = NULL;
    l->n--;
}

static void list_push_tail(sched_list *l, sched_req *r) {
    r->next = NULL;
    r->prev = l->tail;
    if (l->tail)
        l->tail->next = r;
    else
        l->head = r;
    l->tail = r;
    l->n++;
}

static void list_push_head(sched_list *l, sched_req *r) {
    r->prev = NULL;
    r->next = l->head;
    if (l->head)
        l->head->prev = r;
    else
        l->tail = r;
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

void sched_set_swa(sched *s, kv_pool *pool_swa, int window) {
    s->pool_swa = window > 0 ? pool_swa : NULL;
    s->swa_window = window;
}

// --- a request's block tables: the global one, and with a sliding-window pool the local one
static void seq_free(sched *s, sched_req *r) {
    kv_seq_free(s->pool, &r->kv);
    if (s->pool_swa) kv_seq_free(s->pool_swa, &r->kv_swa);
}

// Covers positions [0, n_tokens) in both tables (0 or TC_ERR_FULL); the local blocks that no query from
// r->num_computed on can see are released first. A failure may leave the global table grown: harmless,
// the blocks are r's and are freed with it.
static int seq_alloc(sched *s, sched_req *r, int n_tokens) {
    int rc = kv_seq_alloc_to(s->pool, &r->kv, n_tokens);
    if (rc || !s->pool_swa) return rc;
    kv_seq_release_before(s->pool_swa, &r->kv_swa, r->num_computed + 1 - s->swa_window);
    return kv_seq_alloc_to(s->pool_swa, &r->kv_swa, n_tokens);
}

// Prefix hit for an empty request: the longest cached prefix whose window is cached in the local pool too.
// Returns the cached tokens (a multiple of the block size).
static int seq_match(sched *s, sched_req *r) {
    int cached = kv_seq_match_prefix(s->pool, &r->kv, r->tokens, r->n_tokens);
    if (!s->pool_swa || !cached) return cached;
    int bs = kv_pool_block_size(s->pool);
    int m = kv_seq_match_window(s->pool_swa, &r->kv_swa, r->tokens, cached / bs, s->swa_window);
    if (m * bs == cached) return cached;
    kv_seq_free(s->pool, &r->kv); // shrink the global hit to m blocks: match again up to them
    return m ? kv_seq_match_prefix(s->pool, &r->kv, r->tokens, m * bs + 1) : 0;
}

void sched_free(sched *s) {
    if (!s) return;
    free(s->keys);
    free(s->items);
    free(s);
}

void sched_add(sched *s, sched_req *r) {
    r->state = SCHED_WAITING;
    r->num_computed = 0;
    r->plan_idx = -1;
    list_push_tail(&s->waiting, r);
    sched_yield_seen(s, r);
    // scratch for the expiry check, grown here (not in the step) to cover every live request (preempted ones
    // return to the waiting queue without passing here); on OOM it covers fewer
    if (s->o.policy == SCHED_POL_SLO && s->waiting.n + s->running.n > s->cap_keys) {
        int cap = s->cap_keys ? 2 * s->cap_keys : 64;
        sched_key *k = realloc(s->keys, (size_t)cap * sizeof *k);
        if (k) s->keys = k, s->cap_keys = cap;
    }
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
    if (sched_yield_leads(it)) sched_yield_note(s, r);
}

static void plan_remove(sched *s, sched_req *r) {
    sched_plan *p = &s->plan;
    int k = r->plan_idx;
    p->n_tokens -= p->items[k].n;
    p->n_sample -= p->items[k].sample;
    s->budget += p->items[k].n;
    memmove(&p->items[k], &p->items[k + 1], (size_t)(p->n_items - k - 1) * sizeof *p->items);
    p->n_items--;
    for (int i = k; i < p->n_items; i++)
        p->items[i].r->plan_idx = i;
    r->plan_idx = -1;
    sched_yield_rebuild(s);
}

// The running request preempted first when blocks run out: under fifo the most recently admitted; otherwise
// the one with the worst base priority (the most recently admitted among equals).
static sched_req *pool_victim(sched *s) {
    sched_req *v = s->running.tail;
    if (s->o.policy == SCHED_POL_FIFO) return v;
    for (sched_req *r = s->running.tail; r; r = r->prev)
        if (r->priority > v->priority) v = r;
    return v;
}

// Frees the KV of running request v and puts it back in the waiting queue (at the head: under fifo it is
// the next admitted; the other policies rank it by its key).
static void preempt(sched *s, sched_req *v) {
    if (v->plan_idx >= 0) plan_remove(s, v);
    list_unlink(&s->running, v);
    seq_free(s, v);
    v->num_computed = 0;
    v->state = SCHED_WAITING;
    v->n_preempted++;
    list_push_head(&s->waiting, v);
    s->preemptions++;
}

// Schedules n tokens of running request r, preempting until its blocks fit. Returns 0, or -1 when r itself
// was preempted.
static int schedule_running(sched *s, sched_req *r, int n) {
    // Speculative rows only where blocks are free: drafts never preempt anybody.
    if (r->n_draft > 0 && seq_alloc(s, r, r->num_computed + n + r->n_draft) == 0) {
        plan_add(s, r, n + r->n_draft, r->n_draft);
        return 0;
    }
    r->n_draft = 0;
    while (seq_alloc(s, r, r->num_computed + n) != 0) {
        sched_req *v = pool_victim(s);
        preempt(s, v);
        s->plan.n_preempted++;
        if (v == r) return -1;
    }
    plan_add(s, r, n, 0);
    return 0;
}

// A request's rank key with the scheduler's aging floor (the best priority present, sched_order.h rule 1).
static sched_key key_of(const sched *s, const sched_req *r) {
    return sched_key_floored(sched_key_of(r), s->prio_floor);
}

// Lanes (priority / slo policies, see sched_order.h): a request is long when its remaining prefill exceeds
// one step's budget (max_batch_tokens). lane_of filters candidates: LANE_ANY takes all; LANE_SHORT and
// LANE_LONG take the short / long ones of effective priority top (the best class among candidates).
enum { LANE_ANY = 0, LANE_SHORT, LANE_LONG, LANE_FAV };

typedef struct lane_sel {
    int lane;
    int top; // best effective priority among candidates (LANE_SHORT / LANE_LONG only)
} lane_sel;

// A request the ITL guard does not hold back this step (s->fav_prio / s->fav_ten, set in sched_step).
static int favored(const sched *s, const sched_req *r, const sched_key *k, double now) {
    if (s->fav_prio != INT_MIN && sched_eff_priority(k, s->o.aging_s, now) < s->fav_prio) return 1;
    for (int i = 0; i < s->n_fav_ten; i++)
        if (s->fav_ten[i] == r->tenant) return 1;
    return 0;
}

static int in_lane(const sched *s, const sched_req *r, const sched_key *k, lane_sel ls, double now) {
    if (s->low_left <= 0 && sched_yields(s, r, k)) return 0; // its share is spent: not a candidate this step
    if (ls.lane == LANE_ANY) return 1;
    if (ls.lane == LANE_FAV) return favored(s, r, k, now);
    if (sched_eff_priority(k, s->o.aging_s, now) != ls.top) return 0;
    return (k->remaining > s->o.max_batch_tokens) == (ls.lane == LANE_LONG);
}

// The waiting request admitted next. Tenants' fair share decides whose turn it is (sched_fair.c: with one
// tenant waiting, anybody's); within that tenant, the first in queue order under fifo, else the best by
// sched_key_before among those in lane ls.
static sched_req *pick_waiting(const sched *s, double now, lane_sel ls) {
    sched_req *f = sched_fair_pick(s->running.head, s->waiting.head);
    if (s->o.policy == SCHED_POL_FIFO || !f) {
        sched_key kf;
        if (f && ls.lane != LANE_ANY && (kf = key_of(s, f), !in_lane(s, f, &kf, ls, now))) return NULL;
        return f;
    }
    sched_req *best = NULL;
    sched_key kb = {0};
    for (sched_req *r = s->waiting.head; r; r = r->next) {
        if (r->tenant != f->tenant) continue; // (one tenant waiting: all of them)
        sched_key k = key_of(s, r);
        if (!in_lane(s, r, &k, ls, now)) continue;
        if (!best || sched_key_before(&k, &kb, s->o.aging_s, now)) best = r, kb = k;
    }
    return best;
}

// Fair share (sched_fair.c): when every slot is taken, a waiting tenant below its share takes one from the
// tenant furthest above it (the victim recomputes later, mostly from the prefix cache); this does not count
// as a KV preemption, so admission goes on in this step.
static void fair_make_room(sched *s) {
    if (s->plan.n_preempted || s->running.n < s->o.max_seqs) return;
    sched_req *fv = sched_fair_victim(s->running.head, s->waiting.head);
    if (fv) preempt(s, fv);
}

// Admits waiting request r if its first chunk fits. Returns 0 if admitted, -1 if not.
static int admit(sched *s, sched_req *r, double now) {
    int cached = 0;
    if (s->o.prefix_cache && !r->no_prefix) cached = seq_match(s, r);
    r->num_computed = cached;
    int n = r->n_tokens - cached, room = sched_yield_room(s, r);
    if (n > room) n = room;
    if (seq_alloc(s, r, cached + n) != 0) {
        seq_free(s, r); // give back the matched blocks: they stay cached
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
        sched_stats_queue(&s->stats, r->priority, now - r->t_arrival);
    }
    list_unlink(&s->waiting, r);
    r->state = SCHED_RUNNING;
    list_push_tail(&s->running, r);
    plan_add(s, r, n, 0);
    sched_yield_charge(s, r, n);
    return 0;
}

// A running request of r's tenant that r may displace (priority and slo policies): effective priority (aging
// included, so an aged request is not thrown out by the class it has caught up with) strictly worse than r's,
// not yet displaced SCHED_PRIO_PREEMPT_MAX times; the worst such (most recently admitted on ties).
static sched_req *prio_victim(const sched *s, const sched_req *r, double now) {
    sched_req *v = NULL;
    sched_key kr = key_of(s, r);
    int pr = sched_eff_priority(&kr, s->o.aging_s, now), pv = 0;
    for (sched_req *q = s->running.tail; q; q = q->prev) {
        if (q->tenant != r->tenant) continue; // across tenants, fair share (sched_fair.c) decides
        sched_key kq = key_of(s, q);
        int pq = sched_eff_priority(&kq, s->o.aging_s, now);
        if (pq > pr && q->n_prio_preempted < SCHED_PRIO_PREEMPT_MAX && (!v || pq > pv)) v = q, pv = pq;
    }
    return v;
}

// The running request still catching up (prefill left > 1) that gets the next chunk, among those not yet
// planned: the first in admission order under fifo, else the best by sched_key_before in lane ls.
static sched_req *pick_catching(const sched *s, double now, lane_sel ls) {
    sched_req *best = NULL;
    sched_key kb = {0};
    for (sched_req *r = s->running.head; r; r = r->next) {
        if (r->plan_idx >= 0 || r->n_tokens - r->num_computed <= 1) continue;
        sched_key k = key_of(s, r);
        if (!in_lane(s, r, &k, ls, now)) continue;
        if (s->o.policy == SCHED_POL_FIFO) return r;
        if (!best || sched_key_before(&k, &kb, s->o.aging_s, now)) best = r, kb = k;
    }
    return best;
}

// Admits waiting request r, displacing a lower-priority running request if that makes room (not under
// fifo). Returns 0 if admitted, -1 if admission stops for this step.
static int admit_one(sched *s, sched_req *r, double now) {
    if (s->running.n < s->o.max_seqs && admit(s, r, now) == 0) return 0;
    if (s->o.policy == SCHED_POL_FIFO) return -1;
    sched_req *v = prio_victim(s, r, now);
    if (!v) return -1;
    preempt(s, v);
    v->n_prio_preempted++;
    s->prio_preemptions++;
    if (s->running.n < s->o.max_seqs && admit(s, r, now) == 0) return 0;
    return -1; // displaced one and still no room: try again next step rather than displace more
}

// Fifo steps 3 and 4: catching-up chunks in admission order, then admission in arrival order until the
// head does not fit (none in a step that preempted for lack of blocks).
static void prefill_fifo(sched *s, double now) {
    for (sched_req *r = s->running.head; r && s->budget > 0;) {
        int left = r->n_tokens - r->num_computed;
        if (left > 1 && r->plan_idx < 0) {
            r->n_draft = 0;
            if (schedule_running(s, r, left < s->budget ? left : s->budget) < 0) break;
        }
        r = r->next;
    }
    fair_make_room(s);
    lane_sel any = {LANE_ANY, 0};
    while (s->plan.n_preempted == 0 && s->waiting.head && s->budget > 0)
        if (admit_one(s, pick_waiting(s, now, any), now) < 0) break;
}

// One pass of priority / slo steps 3 and 4 over lane ls: catching-up chunks and admissions compete for the
// budget by sched_key_before, so a short prompt (or a better priority) waiting is not held up by a long
// prompt that is already running. Admission stops for the step (*admitting = 0) once the best waiting
// request does not fit, or after a preemption for lack of blocks; chunks go on.
// hold (may be NULL): a waiting request that w must not take the last free slot from if hold ranks first
// (lanes share the budget, not the slots: an aged long prompt still gets the next slot).
static void ranked_pass(sched *s, double now, lane_sel ls, const sched_req *hold, int *admitting) {
    while (s->budget > 0) {
        sched_req *c = pick_catching(s, now, ls), *w = *admitting ? pick_waiting(s, now, ls) : NULL;
        if (w && hold && s->running.n + 1 >= s->o.max_seqs) {
            sched_key kh = key_of(s, hold), kw = key_of(s, w);
            if (sched_key_before(&kh, &kw, s->o.aging_s, now)) w = NULL;
        }
        if (c && w) {
            sched_key kc = key_of(s, c), kw = key_of(s, w);
            if (sched_key_before(&kc, &kw, s->o.aging_s, now)) w = NULL;
        }
        if (w) {
            if (admit_one(s, w, now) < 0) *admitting = 0;
            continue;
        }
        if (!c) break;
        int left = c->n_tokens - c->num_computed, room = sched_yield_room(s, c);
        c->n_draft = 0;
        if (schedule_running(s, c, left < room ? left : room) < 0) break;
        sched_yield_charge(s, c, left < room ? left : room);
        if (s->plan.n_preempted) *admitting = 0;
    }
}

// The best effective priority among prefill candidates (catching up, or waiting when admitting), and
// whether that class has short (bit 0) and long (bit 1) ones.
static int lanes_present(const sched *s, double now, int admitting, int *top) {
    int have = 0, best = 0, any = 0;
    for (int pass = 0; pass < 2; pass++)
        for (sched_req *r = pass ? s->waiting.head : s->running.head; r; r = r->next) {
            if (pass ? !admitting : (r->plan_idx >= 0 || r->n_tokens - r->num_computed <= 1)) continue;
            sched_key k = key_of(s, r);
            int p = sched_eff_priority(&k, s->o.aging_s, now),
                bit = k.remaining > s->o.max_batch_tokens ? 2 : 1;
            if (!any || p < best) best = p, have = 0, any = 1;
            if (p == best) have |= bit;
        }
    *top = best;
    return have;
}

// Priority / slo steps 3 and 4. When the best class has both short prompts (at most one step's budget
// left) and long ones, they get lanes: the short ones rank among themselves in (1 - SCHED_LONG_SHARE) of
// the step's budget, the long ones then take the rest (at least SCHED_LONG_SHARE of it, more when the short
// ones do not need theirs). So a long prompt that has aged past the short ones cannot hold up their first
// tokens for its whole prefill, and it never starves behind a stream of them either. Whatever budget is
// left after the lanes goes by plain rank (other classes, or requests a lane could not place).
static void prefill_ranked(sched *s, double now) {
    fair_make_room(s);
    int admitting = s->plan.n_preempted == 0, top = 0;
    if (lanes_present(s, now, admitting, &top) == 3 && s->budget > 1) {
        int reserve = (int)(s->budget * SCHED_LONG_SHARE + 0.999);
        if (reserve < 1) reserve = 1;
        lane_sel lng = {LANE_LONG, top};
        const sched_req *hold = admitting ? pick_waiting(s, now, lng) : NULL;
        s->budget -= reserve;
        ranked_pass(s, now, (lane_sel){LANE_SHORT, top}, hold, &admitting);
        s->budget += reserve;
        ranked_pass(s, now, lng, NULL, &admitting);
    }
    ranked_pass(s, now, (lane_sel){LANE_ANY, 0}, NULL, &admitting);
}

// --sched slo: a waiting request that has not started and whose TTFT target is now out of reach.
// s->load is the load at the start of the step (filled once per step in sched_step).
static int sched_hopeless(sched *s, sched_req *r, double now) {
    if (r->state != SCHED_WAITING || r->ttft_slo <= 0 || r->t_first_token > 0) return 0;
    sched_key k = key_of(s, r);
    return now + sched_predict_ttft(&s->load, &k, now, 0, &r->drain_s) > r->t_arrival + r->ttft_slo;
}

// Step 1: pending cancels and passed deadlines leave, from both queues.
static void reap(sched *s, sched_list *l, double now) {
    sched_req *r = l->head;
    while (r) {
        sched_req *next = r->next;
        sched_end end = r->cancel;
        if (end == SCHED_END_NONE && r->deadline > 0 && now >= r->deadline) end = SCHED_END_DEADLINE;
        if (end == SCHED_END_NONE && s->o.policy == SCHED_POL_SLO && sched_hopeless(s, r, now))
            end = SCHED_END_SLO;
        if (end != SCHED_END_NONE) {
            sched_finish(s, r, end);
            r->next = s->plan.ended;
            s->plan.ended = r;
        }
        r = next;
    }
}

// Which prompts the ITL guard does not hold back this step (sched_opts.itl_guard_fair): under the ranked
// policies, those of a strictly better effective priority than the priority of every decoding stream (a
// stream's own class: its aging counts while it waits, not here); with tenants, those of a tenant below
// its fair share (sched_fair_behind). Sets s->fav_prio / s->fav_ten; returns 1 if any request has prefill
// to do and is favored.
static int set_favored(sched *s, double now) {
    s->fav_prio = INT_MIN;
    s->n_fav_ten = sched_fair_behind(s->running.head, s->waiting.head, s->fav_ten, SCHED_FAIR_MAX_TENANTS);
    int dec = 0, best_dec = 0, any = s->n_fav_ten > 0;
    if (s->o.policy != SCHED_POL_FIFO) {
        for (const sched_req *r = s->running.head; r; r = r->next)
            if (r->n_tokens - r->num_computed == 1 && (!dec++ || r->priority < best_dec))
                best_dec = r->priority;
        if (dec) s->fav_prio = best_dec;
    }
    for (int pass = 0; pass < 2 && !any && dec; pass++)
        for (const sched_req *r = pass ? s->waiting.head : s->running.head; r && !any; r = r->next) {
            if (!pass && r->n_tokens - r->num_computed <= 1) continue;
            sched_key k = key_of(s, r);
            any = favored(s, r, &k, now);
        }
    return any;
}

const sched_plan *sched_step(sched *s, double now) {
    sched_plan *p = &s->plan;
    p->n_items = p->n_tokens = p->n_sample = p->n_preempted = 0;
    p->ended = NULL;
    sched_yield_begin(s, now);
    if (s->o.policy == SCHED_POL_SLO) {
        s->load.wait = s->keys;
        s->load.cap_wait = s->cap_keys;
        sched_load_fill(s, &s->load);
    }
    s->prio_floor = s->o.policy == SCHED_POL_SLO ? s->load.prio_floor : sched_prio_floor(s); // (just walked)
    reap(s, &s->running, now);
    reap(s, &s->waiting, now);
    int n_decoding = 0;
    for (sched_req *r = s->running.head; r; r = r->next)
        n_decoding += r->n_tokens - r->num_computed == 1;
    int guard = sched_yield_guard(s, now, sched_guard_budget(s, n_decoding));
    s->budget = guard;
    s->fav_prio = INT_MIN, s->n_fav_ten = 0;
    int fav = guard < s->o.max_batch_tokens && s->o.itl_guard_fair && set_favored(s, now);

    // Step 2 (decode, in admission order). next is read after scheduling r: a preemption may have removed
    // requests, and if r itself went, stop (blocks are that short).
    int dec_left = n_decoding; // decoding requests not yet planned: drafts leave each of them a row
    for (sched_req *r = s->running.head; r && s->budget > 0;) {
        if (r->n_tokens - r->num_computed == 1 && r->plan_idx < 0) {
            r->n_draft = 0;
            dec_left--;
            int max = s->budget - 1 - dec_left, room = r->cap - r->n_tokens - 1; // keep 1 for the bonus
            if (room < max) max = room;
            if (max > 0 && s->draft_fn) {
                sched_draft_info info = {max, n_decoding, s->waiting.n, s->running.n - n_decoding};
                int d = s->draft_fn(s->draft_ctx, r, &info);
                r->n_draft = d < 0 ? 0 : d > max ? max : d;
            }
            if (schedule_running(s, r, 1) < 0) break;
        }
        r = r->next;
    }
    // Step 2b: the ITL guard protects streams from their peers only (sched.h itl_guard_fair): favored
    // prompts (a better class than every stream, a tenant below its share) take the uncapped budget first;
    // everything else then fits in what the guard allows.
    if (fav) {
        s->budget += s->o.max_batch_tokens - guard;
        fair_make_room(s);
        int admitting = s->plan.n_preempted == 0;
        ranked_pass(s, now, (lane_sel){LANE_FAV, 0}, NULL, &admitting);
        int rest = guard - p->n_tokens;
        if (rest < s->budget) s->budget = rest > 0 ? rest : 0;
    }
    // Steps 3 and 4: prefill chunks of running requests, then admission.
    if (s->o.policy == SCHED_POL_FIFO)
        prefill_fifo(s, now);
    else
        prefill_ranked(s, now);
    if (p->n_items > 0) s->steps++;
    return p;
}

void sched_observe(sched *s, int n_tokens, double seconds) {
    step_cost_observe(&s->cost, n_tokens, seconds);
}

// The load snapshot for TTFT predictions (sched_admit.h): what sched_predict_ttft reads of the queues.
void sched_load_fill(const sched *s, sched_load *l) {
    l->policy = s->o.policy;
    l->aging_s = s->o.aging_s;
    l->ready = sched_step_cost_fit(s, &l->a, &l->b);
    l->long_tok = s->o.max_batch_tokens;
    l->slots_full = s->running.n >= s->o.max_seqs;
    l->n_decoding = 0;
    l->catching = l->catching_long = 0;
    for (const sched_req *r = s->running.head; r; r = r->next) {
        int left = r->n_tokens - r->num_computed;
        if (left == 1)
            l->n_decoding++;
        else if (left > 1)
            l->catching += left;
        if (left > l->long_tok) l->catching_long += left;
    }
    l->step_tokens = sched_guard_budget(s, l->n_decoding);
    l->full_tokens = s->o.max_batch_tokens;
    l->guard_fair = s->o.itl_guard_fair && l->policy != SCHED_POL_FIFO;
    l->best_dec_prio = 0;
    int dec = 0; // (none decoding: step_tokens is uncapped anyway)
    for (const sched_req *r = s->running.head; r; r = r->next)
        if (r->n_tokens - r->num_computed == 1) {
            if (!dec++ || r->priority < l->best_dec_prio) l->best_dec_prio = r->priority;
        }
    l->wait_tokens = 0;
    l->n_wait = 0;
    l->prio_floor = sched_prio_floor(s);
    for (const sched_req *r = s->waiting.head; r; r = r->next) {
        sched_key k = sched_key_floored(sched_key_of(r), l->prio_floor);
        l->wait_tokens += k.remaining;
        if (l->n_wait < l->cap_wait) l->wait[l->n_wait++] = k;
    }
}

void sched_set_draft_fn(sched *s, sched_draft_fn fn, void *ctx) {
    s->draft_fn = fn;
    s->draft_ctx = ctx;
}

int sched_step_cost_fit(const sched *s, double *a, double *b) {
    return step_cost_line(&s->cost, a, b);
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
        if (s->o.prefix_cache) {
            kv_seq_commit(s->pool, &r->kv, r->tokens, verified);
            if (s->pool_swa) kv_seq_commit(s->pool_swa, &r->kv_swa, r->tokens, verified);
        }
    }
}

void sched_rollback(sched *s, sched_req *r) {
    if (r->state != SCHED_RUNNING) return;
    int valid = r->n_tokens - 1;
    if (r->num_computed <= valid) return;
    r->num_computed = valid;
    kv_seq_truncate(s->pool, &r->kv, valid);
    if (s->pool_swa) kv_seq_truncate(s->pool_swa, &r->kv_swa, valid);
}

// Served within its TTFT target (or without one), served late, or expired; other ends are not counted.
static void record_outcome(sched *s, const sched_req *r, sched_end end) {
    int o = -1;
    if (end == SCHED_END_STOP || end == SCHED_END_LENGTH)
        o = r->ttft_slo > 0 && r->t_first_token - r->t_arrival > r->ttft_slo ? SCHED_OUT_LATE : SCHED_OUT_OK;
    else if (end == SCHED_END_DEADLINE || end == SCHED_END_SLO)
        o = SCHED_OUT_EXPIRED;
    if (o >= 0) sched_stats_outcome(&s->stats, r->priority, o);
}

void sched_finish(sched *s, sched_req *r, sched_end end) {
    if (r->state == SCHED_DONE) return;
    if (r->plan_idx >= 0) plan_remove(s, r);
    list_unlink(list_of(s, r), r);
    seq_free(s, r);
    r->state = SCHED_DONE;
    r->end = end;
    record_outcome(s, r, end);
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

int sched_has_work(const sched *s) {
    return s->running.n + s->waiting.n > 0;
}

void sched_get_counters(const sched *s, sched_counters *c) {
    c->n_running = s->running.n;
    c->n_waiting = s->waiting.n;
    c->steps = s->steps;
    c->preemptions = s->preemptions;
    c->prio_preemptions = s->prio_preemptions;
    c->prefix_query_tokens = s->prefix_query_tokens;
    c->prefix_hit_tokens = s->prefix_hit_tokens;
}

const sched_stats *sched_get_stats(const sched *s) {
    return &s->stats;
}
