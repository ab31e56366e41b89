// Seeded pseudo-random numbers for repeatable benchmark workloads (xoshiro256**, seeded by splitmix64), and the
// inter-arrival distributions (exponential, gamma).
#ifndef TACHYON_BENCH_RNG_H
#define TACHYON_BENCH_RNG_H

#include <stdint.h>

typedef struct bench_rng {
    uint64_t s[4];
} bench_rng;

// Two streams seeded with the same (seed, stream) produce the same numbers.
void bench_rng_seed(bench_rng *r, uint64_t seed, uint64_t stream);
uint64_t bench_rng_u64(bench_rng *r);
double bench_rng_uniform(bench_rng *r);                  // [0, 1)
int64_t bench_rng_range(bench_rng *r, int64_t lo, int64_t hi); // uniform integer in [lo, hi]
double bench_rng_normal(bench_rng *r);                   // mean 0, std 1
// Gamma(shape k > 0, scale theta): mean k*theta. Marsaglia–Tsang; shape < 1 via the k+1 boost.
double bench_rng_gamma(bench_rng *r, double shape, double scale);

// Seconds until the next arrival for a process at `rate` requests/s whose inter-arrival times are
// gamma-distributed with shape `burstiness` (1 = Poisson; < 1 burstier; > 1 more regular), mean 1/rate.
// rate = INFINITY gives 0.
double bench_rng_interarrival(bench_rng *r, double rate, double burstiness);

#endif
