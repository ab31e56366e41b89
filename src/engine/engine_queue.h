// The engine's two queues. Inbox: new requests and cancels from any thread, mutex-protected, with a
// condition variable that wakes the engine thread when it sleeps for lack of work. Outbox: events for the
// consumer, a ring (grown only when the consumer falls behind) signalled on an eventfd once per step.
// Internal to src/engine/.
#ifndef TACHYON_ENGINE_QUEUE_H
#define TACHYON_ENGINE_QUEUE_H

#include <pthread.h>
#include <stdint.h>

#include "engine/engine.h"
#include "sched/request.h"

typedef struct eng_cancel {
    uint64_t id;
    engine_finish reason;
    struct eng_cancel *next;
} eng_cancel;

typedef struct eng_inbox {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sched_req *new_head, *new_tail; // submitted, not yet taken by the engine thread (linked by ->next)
    eng_cancel *cancels;            // owned nodes, LIFO (order among cancels does not matter)
    int stop;                       // engine_stop was called: refuse submits
    double grace_until;             // monotonic seconds: cut everything still in flight after this
    int n_queued;                   // submitted and not yet scheduled (or ended) — bounded by max_queue
    long long n_queued_tokens;      // their prompt tokens — bounded by max_queued_tokens
    int n_active;                   // submitted and not yet finished (running, preempted or not yet scheduled)
    uint64_t next_id;
} eng_inbox;

int eng_inbox_init(eng_inbox *q, tc_err *err);
void eng_inbox_destroy(eng_inbox *q); // frees pending cancel nodes (not requests)

typedef struct eng_outbox {
    pthread_mutex_t mu;
    engine_event *ring; // (cap)
    int cap, head, n;
    int efd;            // eventfd, non-blocking
    int dropped;        // events lost to a failed ring growth (out of memory)
} eng_outbox;

int eng_outbox_init(eng_outbox *q, int cap, tc_err *err);
void eng_outbox_destroy(eng_outbox *q);
// Engine thread: appends events (n) under one lock; does not signal.
void eng_outbox_push(eng_outbox *q, const engine_event *evs, int n);
// Engine thread: makes the fd readable (once per step with events).
void eng_outbox_signal(eng_outbox *q);
int eng_outbox_pop(eng_outbox *q, engine_event *evs, int cap);

#endif
