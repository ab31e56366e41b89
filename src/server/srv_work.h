// One worker thread for work too slow for the event loop (parsing and tokenizing large prompts), owned by
// the front end.
#ifndef TACHYON_SERVER_SRV_WORK_H
#define TACHYON_SERVER_SRV_WORK_H

#include "common/err.h"
#include "server/srv_front.h"

typedef void (*srv_work_fn)(void *arg);
int srv_work_init(server *s, tc_err *err);
// run(arg) on the worker thread, then done(arg) on the loop thread. 0, or -1 if it cannot be queued.
int srv_work_submit(server *s, srv_work_fn run, srv_work_fn done, void *arg);
// Stops and joins the thread; queued and finished jobs are dropped without their done().
void srv_work_free(server *s);

#endif
