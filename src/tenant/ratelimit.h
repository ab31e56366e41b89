// Token buckets for per-tenant rate limits: a bucket holds at most `cap` units and refills continuously at
// cap per minute (so a full minute's allowance can be spent at once, then it trickles back). Requests per
// minute take 1 unit per request; tokens per minute take prompt tokens + max_tokens at admission and get
// the unused part of max_tokens back when the request ends (rl_refund). Times are monotonic seconds.
#ifndef TACHYON_RATELIMIT_H
#define TACHYON_RATELIMIT_H

typedef struct rl_bucket {
    double cap;   // units; 0 = unlimited (every take succeeds)
    double rate;  // units per second (cap / 60)
    double level; // units available at time t
    double t;     // seconds (monotonic) of the last update
} rl_bucket;

// A full bucket of per_minute units (0 = unlimited).
void rl_init(rl_bucket *b, double per_minute, double now);
// New limit, same bucket (a reload): the level is kept, clipped to the new cap; unlimited → limited starts full.
void rl_set_limit(rl_bucket *b, double per_minute, double now);
// Seconds until n units are available: 0 = now; a negative value = never (n exceeds the cap).
double rl_wait(rl_bucket *b, double n, double now);
// Takes n units (the caller checked rl_wait == 0; the level may not go below 0).
void rl_take(rl_bucket *b, double n, double now);
// Gives back n units (at most up to cap).
void rl_refund(rl_bucket *b, double n, double now);
double rl_remaining(rl_bucket *b, double now); // units available now (cap when unlimited)
double rl_reset(rl_bucket *b, double now);     // seconds until the bucket is full again

#endif
