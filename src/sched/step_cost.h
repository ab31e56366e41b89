// Online cost model of one engine step: seconds ≈ a + b·n_tokens, fitted by exponentially weighted least
// squares over recent forward passes (a = reading the weights once, b = compute per token). The scheduler
// uses it to keep mixed prefill+decode steps from stretching running streams' inter-token latency.
#ifndef TACHYON_SCHED_STEP_COST_H
#define TACHYON_SCHED_STEP_COST_H

typedef struct step_cost {
    double w, wx, wxx, wy, wxy; // decayed sums of 1, n, n², t, n·t
    int n_obs;
    double b_seen; // the last slope fitted from a good spread of step sizes (0: none yet)
} step_cost;

void step_cost_observe(step_cost *c, int n_tokens, double seconds);
// 1 once the observations have spanned enough different step sizes to give a positive slope. When the recent
// steps all have about the same size (a steady load: the decayed spread of n falls under 1), the slope is
// the last one seen, re-anchored at the recent mean step: the model keeps following the load instead of
// switching itself off (switched off, the ITL guard would let a full max_batch_tokens step through).
int step_cost_ready(const step_cost *c);
double step_cost_predict(const step_cost *c, int n_tokens); // seconds
// The fitted line t(n) = a + b·n; 0 (and nothing written) until step_cost_ready.
int step_cost_line(const step_cost *c, double *a, double *b);
// Largest n >= 1 whose predicted step time is <= seconds (1 if even one token does not fit).
int step_cost_max_tokens(const step_cost *c, double seconds);

#endif
