// The CLI's client of the engine (src/engine/): tachyon run and tachyon bench generate through the same
// submit → step → poll path the server drives, one request at a time, from the calling thread (as an offline
// client of the engine thread). Nothing here computes: it only sets up engines and waits on their events.
#ifndef TACHYON_CLI_ENGINE_H
#define TACHYON_CLI_ENGINE_H

#include <signal.h>
#include <stdint.h>

#include "common/err.h"
#include "engine/engine.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

// eo with engine_opts_default's values, then set for one request at a time: one running sequence, no queue,
// no prefix cache (a benchmark repeats its prompt and must compute it each time), a token budget of
// max(batch, SPEC_MAX_K + 1) (prompt chunks, and a verify step's rows), a context of ctx tokens.
void cli_engine_opts(engine_opts *eo, int ctx, int batch, int n_threads);
// Starts an engine over m (borrowed: must outlive it) with options eo, its end-of-generation tokens taken from
// v (eo->eog_ids is not read). Free with engine_free. Returns 0 or a TC_ERR_* with err set.
int cli_engine_new(model *m, const tok_vocab *v, const engine_opts *eo, engine **out, tc_err *err);

// Called with each TOKEN event of the request, in order.
typedef void (*cli_token_fn)(void *ctx, const samp_result *tok);

// Submits q (on success q->prompt and q->prediction pass to the engine, as engine_submit) to an engine with
// no other request in flight, and waits for its FINISH, which is copied to *fin (its embedding, if any, owned
// by the caller). on_token (may be NULL) sees every TOKEN event. Returns 0, or a TC_ERR_* with err set when
// the submit is refused or the request ends with ENGINE_FINISH_ERROR (then *fin is filled too).
int cli_engine_generate(engine *e, engine_req *q, cli_token_fn on_token, void *ctx, engine_event *fin, tc_err *err);
// cli_engine_generate that cancels the request once *stop becomes non-zero (set by a signal handler: Ctrl-C in
// `tachyon chat`); it still waits for the FINISH (finish reason ENGINE_FINISH_CANCELLED).
int cli_engine_generate_until(engine *e, engine_req *q, cli_token_fn on_token, void *ctx,
                              const volatile sig_atomic_t *stop, engine_event *fin, tc_err *err);

#endif
