// Seeded pseudo-random numbers for repeatable benchmark workloads (xoshiro256**, seeded by splitmix64), and the
// inter-arrival distributions (exponential, gamma).
#ifndef TACHYON_LOADGEN_RNG_H
#define TACHYON_LOADGEN_RNG_H

#include <stdint.h>

typedef struct lg_rng {
    uint64_t s[4];
} lg_rng;

// Two streams seeded with the same (seed, stream) produce the same numbers.
void lg_rng_seed(lg_rng *r, uint64_t seed, uint64_t stream);
uint64_t lg_rng_u64(lg_rng *r);
double lg_rng_uniform(lg_rng *r);                  // [0, 1)
int64_t lg_rng_range(lg_rng *r, int64_t lo, int64_t hi); // uniform integer in [lo, hi]
double lg_rng_normal(lg_rng *r);                   // mean 0, std 1
// Gamma(shape k > 0, scale theta): mean k*theta. Marsaglia–Tsang; shape < 1 via the k+1 boost.
double lg_rng_gamma(lg_rng *r, double shape, double scale);

// Seconds until the next arrival for a process at `rate` requests/s whose inter-arrival times are
// gamma-distributed with shape `burstiness` (1 = Poisson; < 1 burstier; > 1 more regular), mean 1/rate.
// rate = INFINITY gives 0.
double lg_rng_interarrival(lg_rng *r, double rate, double burstiness);

#endif
