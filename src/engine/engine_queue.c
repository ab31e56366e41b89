#include "engine/engine_queue.h"

#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

int eng_inbox_init(eng_inbox *q, tc_err *err) {
    memset(q, 0, sizeof *q);
    if (pthread_mutex_init(&q->mu, NULL)) return tc_err_set(err, TC_ERR, "engine: mutex init failed");
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&q->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc) {
        pthread_mutex_destroy(&q->mu);
        return tc_err_set(err, TC_ERR, "engine: condvar init failed");
    }
    return 0;
}

void eng_inbox_destroy(eng_inbox *q) {
    for (eng_cancel *c = q->cancels, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    q->cancels = NULL;
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
}

int eng_outbox_init(eng_outbox *q, int cap, tc_err *err) {
    memset(q, 0, sizeof *q);
    q->efd = -1;
    q->ring = malloc((size_t)cap * sizeof *q->ring);
    if (!q->ring) return tc_err_set(err, TC_ERR_NOMEM, "engine: out of memory for the event ring");
    q->cap = cap;
    if (pthread_mutex_init(&q->mu, NULL)) {
        free(q->ring);
        return tc_err_set(err, TC_ERR, "engine: mutex init failed");
    }
    q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (q->efd < 0) {
        pthread_mutex_destroy(&q->mu);
        free(q->ring);
        return tc_err_set(err, TC_ERR_IO, "engine: eventfd failed");
    }
    return 0;
}

void eng_outbox_destroy(eng_outbox *q) {
    if (q->efd >= 0) close(q->efd);
    pthread_mutex_destroy(&q->mu);
    free(q->ring);
    q->ring = NULL;
}

// Doubles the ring, unrolled so head = 0. Rare: only when the consumer falls behind a full ring.
static int ring_grow(eng_outbox *q) {
    engine_event *r = malloc((size_t)q->cap * 2 * sizeof *r);
    if (!r) return -1;
    for (int i = 0; i < q->n; i++) r[i] = q->ring[(q->head + i) % q->cap];
    free(q->ring);
    q->ring = r;
    q->head = 0;
    q->cap *= 2;
    return 0;
}

void eng_outbox_push(eng_outbox *q, const engine_event *evs, int n) {
    pthread_mutex_lock(&q->mu);
    for (int i = 0; i < n; i++) {
        if (q->n == q->cap && ring_grow(q) < 0) {
            q->dropped += n - i;
            break;
        }
        q->ring[(q->head + q->n) % q->cap] = evs[i];
        q->n++;
    }
    pthread_mutex_unlock(&q->mu);
}

void eng_outbox_signal(eng_outbox *q) {
    uint64_t one = 1;
    ssize_t w = write(q->efd, &one, sizeof one); // EAGAIN only at counter overflow: still readable
    (void)w;
}

int eng_outbox_pop(eng_outbox *q, engine_event *evs, int cap) {
    pthread_mutex_lock(&q->mu);
    int n = q->n < cap ? q->n : cap;
    for (int i = 0; i < n; i++) evs[i] = q->ring[(q->head + i) % q->cap];
    q->head = (q->head + n) % q->cap;
    q->n -= n;
    pthread_mutex_unlock(&q->mu);
    return n;
}
