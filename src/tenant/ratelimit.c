// Token buckets (see ratelimit.h).
#include "tenant/ratelimit.h"

static void refill(rl_bucket *b, double now) {
    if (now > b->t) {
        b->level += (now - b->t) * b->rate;
        if (b->level > b->cap) b->level = b->cap;
        b->t = now;
    }
}

void rl_init(rl_bucket *b, double per_minute, double now) {
    b->cap = per_minute > 0 ? per_minute : 0;
    b->rate = b->cap / 60.0;
    b->level = b->cap;
    b->t = now;
}

void rl_set_limit(rl_bucket *b, double per_minute, double now) {
    if (b->cap <= 0) {
        rl_init(b, per_minute, now);
        return;
    }
    refill(b, now);
    b->cap = per_minute > 0 ? per_minute : 0;
    b->rate = b->cap / 60.0;
    if (b->level > b->cap) b->level = b->cap;
}

double rl_wait(rl_bucket *b, double n, double now) {
    if (b->cap <= 0) return 0;
    if (n > b->cap) return -1;
    refill(b, now);
    return b->level >= n ? 0 : (n - b->level) / b->rate;
}

void rl_take(rl_bucket *b, double n, double now) {
    if (b->cap <= 0) return;
    refill(b, now);
    b->level -= n;
    if (b->level < 0) b->level = 0;
}

void rl_refund(rl_bucket *b, double n, double now) {
    if (b->cap <= 0 || n <= 0) return;
    refill(b, now);
    b->level += n;
    if (b->level > b->cap) b->level = b->cap;
}

double rl_remaining(rl_bucket *b, double now) {
    if (b->cap <= 0) return 0;
    refill(b, now);
    return b->level;
}

double rl_reset(rl_bucket *b, double now) {
    if (b->cap <= 0) return 0;
    refill(b, now);
    return (b->cap - b->level) / b->rate;
}
