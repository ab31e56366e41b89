// One worker thread for work too slow for the event loop: parsing, chat rendering and tokenizing a
// multi-megabyte prompt takes from tens of milliseconds to seconds, and every stream would stall meanwhile.
// Jobs run in FIFO order; each job's done() runs on the loop thread afterwards (woken through an event that
// libevent makes safe to activate from another thread: evthread_use_pthreads).
#include <pthread.h>
#include <stdlib.h>

#include "server/srv_work.h"

typedef struct srv_job {
    srv_work_fn run, done;
    void *arg;
    struct srv_job *next;
} srv_job;

struct srv_work {
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    srv_job *todo, *todo_tail; // guarded by mu
    srv_job *done;             // guarded by mu (LIFO; reversed when taken)
    struct event *ev_done;
};

static void *work_main(void *arg) {
    struct srv_work *w = ((server *)arg)->work;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->todo && !w->stop) pthread_cond_wait(&w->cv, &w->mu);
        if (w->stop) break;
        srv_job *j = w->todo;
        w->todo = j->next;
        if (!w->todo) w->todo_tail = NULL;
        pthread_mutex_unlock(&w->mu);
        j->run(j->arg);
        pthread_mutex_lock(&w->mu);
        j->next = w->done;
        w->done = j;
        event_active(w->ev_done, EV_READ, 0);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static void work_done_cb(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct srv_work *w = ((server *)arg)->work;
    pthread_mutex_lock(&w->mu);
    srv_job *j = w->done, *fifo = NULL;
    w->done = NULL;
    pthread_mutex_unlock(&w->mu);
    while (j) { // oldest first
        srv_job *next = j->next;
        j->next = fifo;
        fifo = j;
        j = next;
    }
    while (fifo) {
        srv_job *next = fifo->next;
        fifo->done(fifo->arg);
        free(fifo);
        fifo = next;
    }
}

int srv_work_init(server *s, tc_err *err) {
    struct srv_work *w = calloc(1, sizeof *w);
    if (!w) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    s->work = w;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->ev_done = event_new(s->base, -1, 0, work_done_cb, s);
    if (!w->ev_done) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    if (pthread_create(&w->thread, NULL, work_main, s)) return tc_err_set(err, TC_ERR, "cannot start the worker thread");
    w->started = 1;
    return 0;
}

int srv_work_submit(server *s, srv_work_fn run, srv_work_fn done, void *arg) {
    struct srv_work *w = s->work;
    srv_job *j = w && w->started ? malloc(sizeof *j) : NULL;
    if (!j) return -1;
    *j = (srv_job){run, done, arg, NULL};
    pthread_mutex_lock(&w->mu);
    if (w->todo_tail) w->todo_tail->next = j;
    else w->todo = j;
    w->todo_tail = j;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static void free_list(srv_job *j) {
    while (j) {
        srv_job *next = j->next;
        free(j);
        j = next;
    }
}

void srv_work_free(server *s) {
    struct srv_work *w = s->work;
    if (!w) return;
    if (w->started) {
        pthread_mutex_lock(&w->mu);
        w->stop = 1;
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
    }
    free_list(w->todo);
    free_list(w->done);
    if (w->ev_done) event_free(w->ev_done);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
    s->work = NULL;
}
