#include "sched/step_cost.h"

#define STEP_COST_DECAY 0.97 // ~30 steps of memory: adapts when load or context length changes

// The fitted line; 0 when it comes from the current spread, 1 when the remembered slope had to be used,
// -1 when there is neither.
static int fit(const step_cost *c, double *a, double *b) {
    double var = c->wxx * c->w - c->wx * c->wx;
    int own = c->w > 0 && var >= c->w * c->w; // the spread of n (variance >= 1) determines a slope
    *b = own ? (c->wxy * c->w - c->wx * c->wy) / var : 0.0;
    int how = 0;
    if (!own || *b <= 0) {
        if (c->b_seen <= 0) {
            *a = c->w > 0 ? c->wy / c->w : 0.0, *b = 0.0;
            return -1;
        }
        *b = c->b_seen, how = 1;
    }
    *a = c->w > 0 ? (c->wy - *b * c->wx) / c->w : 0.0;
    if (*a < 0) *a = 0;
    return how;
}

void step_cost_observe(step_cost *c, int n_tokens, double seconds) {
    if (n_tokens <= 0 || !(seconds >= 0)) return;
    double x = n_tokens;
    c->w = c->w * STEP_COST_DECAY + 1;
    c->wx = c->wx * STEP_COST_DECAY + x;
    c->wxx = c->wxx * STEP_COST_DECAY + x * x;
    c->wy = c->wy * STEP_COST_DECAY + seconds;
    c->wxy = c->wxy * STEP_COST_DECAY + x * seconds;
    c->n_obs++;
    double a, b;
    if (c->n_obs >= 2 && fit(c, &a, &b) == 0) c->b_seen = b;
}

int step_cost_ready(const step_cost *c) {
    double a, b;
    return c->n_obs >= 2 && fit(c, &a, &b) >= 0;
}

int step_cost_line(const step_cost *c, double *a, double *b) {
    if (!step_cost_ready(c)) return 0;
    fit(c, a, b);
    return 1;
}

double step_cost_predict(const step_cost *c, int n_tokens) {
    double a, b;
    fit(c, &a, &b);
    return a + b * n_tokens;
}

int step_cost_max_tokens(const step_cost *c, double seconds) {
    double a, b;
    fit(c, &a, &b);
    if (b <= 0) return 1 << 30;
    double n = (seconds - a) / b;
    return n < 1 ? 1 : n > (1 << 30) ? 1 << 30 : (int)n;
}
