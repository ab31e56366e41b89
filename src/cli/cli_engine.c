// One request at a time through the engine (see cli_engine.h).
#include "cli/cli_engine.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "speculation/spec.h"

void cli_engine_opts(engine_opts *eo, int ctx, int batch, int n_threads) {
    engine_opts_default(eo);
    eo->max_seqs = 1;
    eo->max_queue = 0;
    eo->prefix_cache = 0;
    eo->max_batch_tokens = batch > SPEC_MAX_K + 1 ? batch : SPEC_MAX_K + 1;
    eo->ctx_size = ctx;
    eo->n_threads = n_threads;
}

int cli_engine_new(model *m, const tok_vocab *v, const engine_opts *eo, engine **out, tc_err *err) {
    int nv = tok_n_vocab(v), n = 0;
    int32_t *eog = malloc(((size_t)nv + 1) * sizeof *eog);
    if (!eog) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < nv; i++)
        if (tok_is_eog(v, i)) eog[n++] = i;
    engine_opts o = *eo;
    o.eog_ids = eog;
    o.n_eog = n;
    int rc = engine_new(m, &o, out, err); // copies the list
    free(eog);
    return rc;
}

// Blocks until the engine signals events (its eventfd), then clears the signal.
static void wait_events(engine *e, const volatile sig_atomic_t *stop) {
    struct pollfd p = {.fd = engine_event_fd(e), .events = POLLIN};
    while (poll(&p, 1, -1) < 0 && errno == EINTR)
        if (stop && *stop) return; // a signal set the stop flag: the caller cancels
    uint64_t v;
    if (read(p.fd, &v, sizeof v) < 0) {} // cleared, or already cleared by an earlier read
}

int cli_engine_generate(engine *e, engine_req *q, cli_token_fn on_token, void *ctx, engine_event *fin, tc_err *err) {
    return cli_engine_generate_until(e, q, on_token, ctx, NULL, fin, err);
}

int cli_engine_generate_until(engine *e, engine_req *q, cli_token_fn on_token, void *ctx,
                              const volatile sig_atomic_t *stop, engine_event *fin, tc_err *err) {
    uint64_t id = 0;
    int cancelled = 0;
    memset(fin, 0, sizeof *fin);
    int rc = engine_submit(e, q, &id, err);
    if (rc) return rc;
    engine_event evs[64];
    for (;;) {
        if (stop && *stop && !cancelled) {
            engine_cancel(e, id, ENGINE_FINISH_CANCELLED);
            cancelled = 1;
        }
        int n = engine_poll(e, evs, 64);
        if (n == 0) {
            wait_events(e, cancelled ? NULL : stop);
            continue;
        }
        for (int i = 0; i < n; i++) {
            if (evs[i].id != id) continue;
            if (evs[i].type == ENGINE_EV_TOKEN && on_token) on_token(ctx, &evs[i].tok);
            if (evs[i].type != ENGINE_EV_FINISH) continue;
            *fin = evs[i];
            if (fin->finish == ENGINE_FINISH_ERROR)
                return tc_err_set(err, TC_ERR, "%s", fin->msg[0] ? fin->msg : "generation failed");
            return 0;
        }
    }
}
