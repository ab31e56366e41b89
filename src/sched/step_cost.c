#include "sched/step_cost.h"

#define STEP_COST_DECAY 0.97 // ~30 steps of memory: adapts when load or context length changes

static void fit(const step_cost *c, double *a, double *b) {
    double var = c->wxx * c->w - c->wx * c->wx;
    *b = var > 1e-9 ? (c->wxy * c->w - c->wx * c->wy) / var : 0.0;
    *a = c->w > 0 ? (c->wy - *b * c->wx) / c->w : 0.0;
    if (*a < 0) *a = 0;
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
}

int step_cost_ready(const step_cost *c) {
    if (c->n_obs < 2 || c->w <= 0) return 0;
    double mean = c->wx / c->w, var = c->wxx / c->w - mean * mean;
    double a, b;
    fit(c, &a, &b);
    return var >= 1.0 && b > 0;
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
