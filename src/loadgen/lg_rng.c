#include "loadgen/lg_rng.h"

#include <math.h>

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void lg_rng_seed(lg_rng *r, uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull);
    for (int i = 0; i < 4; i++) r->s[i] = splitmix(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t lg_rng_u64(lg_rng *r) {
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double lg_rng_uniform(lg_rng *r) { return (double)(lg_rng_u64(r) >> 11) * 0x1.0p-53; }

int64_t lg_rng_range(lg_rng *r, int64_t lo, int64_t hi) {
    if (hi <= lo) return lo;
    uint64_t span = (uint64_t)(hi - lo) + 1;
    return lo + (int64_t)(lg_rng_u64(r) % span);
}

double lg_rng_normal(lg_rng *r) {
    double u1 = lg_rng_uniform(r), u2 = lg_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

double lg_rng_gamma(lg_rng *r, double shape, double scale) {
    if (shape < 1.0) { // Gamma(k) = Gamma(k+1) * U^(1/k)
        double u = lg_rng_uniform(r);
        if (u < 1e-300) u = 1e-300;
        return lg_rng_gamma(r, shape + 1.0, scale) * pow(u, 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = lg_rng_normal(r);
            v = 1.0 + c * x;
        } while (v <= 0);
        v = v * v * v;
        double u = lg_rng_uniform(r);
        if (u < 1.0 - 0.0331 * x * x * x * x) return d * v * scale;
        if (log(u) < 0.5 * x * x + d * (1.0 - v + log(v))) return d * v * scale;
    }
}

double lg_rng_interarrival(lg_rng *r, double rate, double burstiness) {
    if (!(rate < INFINITY) || rate <= 0) return 0;
    if (burstiness == 1.0) {
        double u = lg_rng_uniform(r);
        return -log(1.0 - u) / rate;
    }
    return lg_rng_gamma(r, burstiness, 1.0 / (rate * burstiness));
}
