// TTFT prediction for admission and routing decisions made outside the engine thread (the server's model
// router): reads only what the engine publishes under its locks.
#include "engine/engine_impl.h"

double engine_predict_ttft(engine *e, int n_prompt_tokens) {
    pthread_mutex_lock(&e->stats_mu);
    double a = e->cost_a, b = e->cost_b;
    int ready = e->cost_ready, running = e->stats.running;
    pthread_mutex_unlock(&e->stats_mu);
    pthread_mutex_lock(&e->in.mu);
    long long queued = e->in.n_queued_tokens; // prompt tokens submitted and not yet scheduled
    pthread_mutex_unlock(&e->in.mu);
    if (!ready) return 0;
    long long tokens = queued + (n_prompt_tokens > 0 ? n_prompt_tokens : 0);
    // each step carries one token per running decode and fills the rest of the budget with prefill
    long long per_step = e->o.max_batch_tokens - running;
    if (per_step < 1) per_step = 1;
    long long steps = (tokens + per_step - 1) / per_step;
    if (steps < 1) steps = 1;
    return (double)steps * a + b * (double)(tokens + steps * running);
}
