// Tests for src/tensor: the traits table, tt_row_size, f16/bf16 conversions (exhaustive), and for every type
// the scalar reference quantize -> dequantize error and vec_dot against a float dot product. The bounds are
// stated once, in tt_cases below, and are what the SIMD kernels' own tests can rely on.
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/quant_ref.h"
#include "tensor/ttype.h"
#include "test_util.h"

// --- seeded random numbers (splitmix64)

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_u64(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_unit(void) {
    return (double)(rng_u64() >> 11) * 0x1p-53;
} // [0, 1)

static float rng_normal(void) {
    double u1 = rng_unit(), u2 = rng_unit();
    return (float)(sqrt(-2.0 * log(u1 + 1e-300)) * cos(6.283185307179586 * u2));
}

// --- the types and their stated bounds

typedef struct {
    tt_type type;
    size_t size;       // sizeof the block struct (or element)
    int has_vec_dot;   // 0 for activation-only formats
    double round_trip; // max |x - dequant(quant(x))| / amax(block), per block of block_size elements;
                       // for F16/BF16 (elementwise): max |x - y| / |x|
} tt_case;

// Bounds, derived then checked on normal, heavy-tailed and offset data:
//   Q4_0 1/8 (the side opposite the signed absmax clips at 7/8) + f16 rounding of d; Q5_0 1/16 + f16;
//   Q4_1 1/15 (half a step of range/15 <= 2 amax/15) + f16 rounding of d and m; Q5_1 1/31 + f16;
//   Q8_0 1/254 + f16 rounding of d (2^-11); Q8_1, Q8_K 1/254 (f32 scale);
//   Q4_K, Q5_K, Q6_K: measured worst case on 20 seeds x 2 distributions (0.083, 0.051, 0.016) + ~25%,
//   per 256-element super-block (a sub-block's own amax can be much smaller than its super-block's);
//   F16 2^-11 (+ 2^-25 absolute, subnormals) and BF16 2^-8 relative per element (round to nearest).
static const tt_case tt_cases[] = {
    {TT_F32, sizeof(float), 1, 0.0},
    {TT_F16, sizeof(tt_f16), 1, 0x1p-11},
    {TT_BF16, sizeof(tt_bf16), 1, 0x1p-8},
    {TT_Q4_0, sizeof(tt_block_q4_0), 1, 0.126},
    {TT_Q4_1, sizeof(tt_block_q4_1), 1, 0.069},
    {TT_Q5_0, sizeof(tt_block_q5_0), 1, 0.064},
    {TT_Q5_1, sizeof(tt_block_q5_1), 1, 0.035},
    {TT_Q8_0, sizeof(tt_block_q8_0), 1, 0.0045},
    {TT_Q8_1, sizeof(tt_block_q8_1), 0, 0.0040},
    {TT_Q4_K, sizeof(tt_block_q4_K), 1, 0.10},
    {TT_Q5_K, sizeof(tt_block_q5_K), 1, 0.065},
    {TT_Q6_K, sizeof(tt_block_q6_K), 1, 0.022},
    {TT_Q8_K, sizeof(tt_block_q8_K), 0, 0.0040},
    // MXFP4: amax in [4, 8) scale units with 6 the largest code, so up to 2 units (a quarter of amax) lost
    {TT_MXFP4, sizeof(tt_block_mxfp4), 1, 0.25},
};
#define N_CASES (int)(sizeof tt_cases / sizeof tt_cases[0])

// --- table consistency

static void test_table(void) {
    for (int c = 0; c < N_CASES; c++) {
        const tt_traits *t = tt_get(tt_cases[c].type);
        CHECK_MSG(t != NULL, "type %d has no row", tt_cases[c].type);
        if (!t) continue;
        CHECK_MSG(t->name && strcmp(t->name, tt_name(tt_cases[c].type)) == 0, "name of %d", tt_cases[c].type);
        CHECK_MSG(t->type_size == tt_cases[c].size, "%s: type_size %zu, struct %zu", t->name, t->type_size,
                  tt_cases[c].size);
        CHECK_MSG(t->block_size > 0 && QK_K % t->block_size == 0, "%s: block size %d", t->name,
                  t->block_size);
        CHECK_MSG(t->is_quantized == (t->block_size > 1), "%s: is_quantized %d", t->name, t->is_quantized);
        CHECK_MSG(t->to_float && t->from_float, "%s: missing to/from_float", t->name);
        CHECK_MSG((t->vec_dot != NULL) == tt_cases[c].has_vec_dot, "%s: vec_dot presence", t->name);
        const tt_traits *v = tt_get(t->vec_dot_type);
        CHECK_MSG(v && v->from_float && t->block_size % v->block_size == 0, "%s: vec_dot_type %s", t->name,
                  v ? v->name : "NULL");
    }
    // The documented vec_dot_type choices.
    CHECK_EQ_INT(tt_get(TT_Q4_0)->vec_dot_type, TT_Q8_0);
    CHECK_EQ_INT(tt_get(TT_Q5_0)->vec_dot_type, TT_Q8_0);
    CHECK_EQ_INT(tt_get(TT_Q8_0)->vec_dot_type, TT_Q8_0);
    CHECK_EQ_INT(tt_get(TT_Q4_1)->vec_dot_type, TT_Q8_1);
    CHECK_EQ_INT(tt_get(TT_Q5_1)->vec_dot_type, TT_Q8_1);
    CHECK_EQ_INT(tt_get(TT_Q4_K)->vec_dot_type, TT_Q8_K);
    CHECK_EQ_INT(tt_get(TT_Q5_K)->vec_dot_type, TT_Q8_K);
    CHECK_EQ_INT(tt_get(TT_Q6_K)->vec_dot_type, TT_Q8_K);
    CHECK_EQ_INT(tt_get(TT_F16)->vec_dot_type, TT_F32);
    CHECK_EQ_INT(tt_get(TT_BF16)->vec_dot_type, TT_F32);
    CHECK_EQ_INT(tt_get(TT_Q2_K)->vec_dot_type, TT_Q8_K);
    CHECK_EQ_INT(tt_get(TT_Q3_K)->vec_dot_type, TT_Q8_K);
    CHECK_EQ_INT(tt_get(TT_IQ4_XS)->vec_dot_type, TT_Q8_K);
    CHECK_EQ_INT(tt_get(TT_IQ4_NL)->vec_dot_type, TT_Q8_0);
    // Unknown / unsupported ids (16..19, 21, 22: the other IQ types).
    uint32_t bad[] = {4, 5, 16, 19, 21, 22, 29, TT_COUNT, 1000, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_MSG(tt_get(bad[i]) == NULL, "tt_get(%u) should be NULL", bad[i]);
        CHECK_MSG(strcmp(tt_name(bad[i]), "?") == 0, "tt_name(%u) = %s", bad[i], tt_name(bad[i]));
    }
}

static void test_row_size(void) {
    CHECK_EQ_INT(tt_row_size(TT_F32, 10), 40);
    CHECK_EQ_INT(tt_row_size(TT_F16, 3), 6);
    CHECK_EQ_INT(tt_row_size(TT_BF16, 576), 1152);
    CHECK_EQ_INT(tt_row_size(TT_Q4_0, 576), 18 * 18);
    CHECK_EQ_INT(tt_row_size(TT_Q4_1, 576), 18 * 20);
    CHECK_EQ_INT(tt_row_size(TT_Q5_0, 64), 2 * 22);
    CHECK_EQ_INT(tt_row_size(TT_Q5_1, 64), 2 * 24);
    CHECK_EQ_INT(tt_row_size(TT_Q8_0, 4096), 128 * 34);
    CHECK_EQ_INT(tt_row_size(TT_Q8_1, 4096), 128 * 40);
    CHECK_EQ_INT(tt_row_size(TT_Q4_K, 4096), 16 * 144);
    CHECK_EQ_INT(tt_row_size(TT_Q5_K, 4096), 16 * 176);
    CHECK_EQ_INT(tt_row_size(TT_Q6_K, 4096), 16 * 210);
    CHECK_EQ_INT(tt_row_size(TT_Q8_K, 4096), 16 * 292);
    CHECK_EQ_INT(tt_row_size(TT_Q8_0, 0), 0);
    CHECK_EQ_INT(tt_row_size(TT_Q4_0, 33), 0);                                     // not a whole block
    CHECK_EQ_INT(tt_row_size(TT_Q4_K, 128), 0);                                    // not a whole super-block
    CHECK_EQ_INT(tt_row_size(TT_F32, -4), 0);                                      // negative
    CHECK_EQ_INT(tt_row_size(TT_Q2_K, 512), 2 * 84);
    CHECK_EQ_INT(tt_row_size(TT_Q3_K, 512), 2 * 110);
    CHECK_EQ_INT(tt_row_size(TT_IQ4_NL, 64), 2 * 18);
    CHECK_EQ_INT(tt_row_size(TT_IQ4_XS, 512), 2 * 136);
    CHECK_EQ_INT(tt_row_size(16, 256), 0);                                         // unsupported (IQ2_XXS)
    CHECK_EQ_INT(tt_row_size(77, 32), 0);                                          // unknown
    CHECK_EQ_INT(tt_row_size(TT_F32, INT64_MAX), 0);                               // overflows size_t
    CHECK_EQ_INT(tt_row_size(TT_F16, INT64_MAX / 4), (size_t)(INT64_MAX / 4) * 2); // fits
}

// --- f16 / bf16

// Independent decoding of an f16 bit pattern (finite only), in double.
static double f16_value(uint16_t h) {
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

static void test_f16(void) {
    int bad_decode = 0, bad_trip = 0, bad_round = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tt_f16_to_f32((tt_f16)h);
        int e = (h >> 10) & 0x1f, m = h & 0x3ff;
        if (e == 31) { // inf / nan: same sign, payload kept in the top mantissa bits
            uint32_t want = (h & 0x8000u) << 16 | 0x7f800000u | (uint32_t)m << 13;
            if (tt_f32_bits(f) != want && bad_decode++ < 5)
                fprintf(stderr, "f16 %04x -> %08x\n", h, tt_f32_bits(f));
            tt_f16 back = tt_f32_to_f16(f);
            tt_f16 want16 = m ? (tt_f16)(h | 0x200) : (tt_f16)h; // NaN comes back quiet
            if (back != want16 && bad_trip++ < 5) fprintf(stderr, "f16 %04x round-trips to %04x\n", h, back);
            continue;
        }
        if ((double)f != f16_value((uint16_t)h) || (tt_f32_bits(f) >> 31) != (h >> 15)) {
            if (bad_decode++ < 5)
                fprintf(stderr, "f16 %04x -> %.9g, want %.9g\n", h, f, f16_value((uint16_t)h));
        }
        tt_f16 back = tt_f32_to_f16(f);
        if (back != h && bad_trip++ < 5) fprintf(stderr, "f16 %04x round-trips to %04x\n", h, back);
        // Rounding at the midpoint to the next value up (in magnitude), and one f32 ulp either side of it.
        if ((h & 0x7fff) <= 0x7bff) {
            double a = fabs(f16_value((uint16_t)h));
            double b = (h & 0x7fff) == 0x7bff ? 65536.0 : fabs(f16_value((uint16_t)(h + 1)));
            float mid = (float)((a + b) / 2); // exact: 12 significant bits
            if ((double)mid != (a + b) / 2) bad_round++;
            uint16_t sign = (uint16_t)(h & 0x8000);
            float s = sign ? -1.0f : 1.0f;
            tt_f16 lo = (tt_f16)h, hi = (tt_f16)(h + 1); // h + 1 of 0x7bff is 0x7c00 = inf: correct
            tt_f16 even = (h & 1) ? hi : lo;
            tt_f16 got_mid = tt_f32_to_f16(s * mid);
            tt_f16 got_below = tt_f32_to_f16(s * nextafterf(mid, 0.0f));
            tt_f16 got_above = tt_f32_to_f16(s * nextafterf(mid, INFINITY));
            if ((got_mid != even || got_below != lo || got_above != hi) && bad_round++ < 5)
                fprintf(stderr, "f16 midpoint after %04x: got %04x %04x %04x want %04x %04x %04x\n", h,
                        got_below, got_mid, got_above, lo, even, hi);
        }
    }
    CHECK_MSG(bad_decode == 0, "%d f16 values decoded wrongly", bad_decode);
    CHECK_MSG(bad_trip == 0, "%d f16 values did not round-trip", bad_trip);
    CHECK_MSG(bad_round == 0, "%d f16 midpoints rounded wrongly", bad_round);

    // Spot checks.
    CHECK_EQ_INT(tt_f32_to_f16(1.0f), 0x3c00);
    CHECK_EQ_INT(tt_f32_to_f16(-2.0f), 0xc000);
    CHECK_EQ_INT(tt_f32_to_f16(0.1f), 0x2e66);
    CHECK_EQ_INT(tt_f32_to_f16(65504.0f), 0x7bff);
    CHECK_EQ_INT(tt_f32_to_f16(65519.99f), 0x7bff);
    CHECK_EQ_INT(tt_f32_to_f16(65520.0f), 0x7c00);
    CHECK_EQ_INT(tt_f32_to_f16(1e10f), 0x7c00);
    CHECK_EQ_INT(tt_f32_to_f16(-INFINITY), 0xfc00);
    CHECK_EQ_INT(tt_f32_to_f16(0x1p-24f), 0x0001);
    CHECK_EQ_INT(tt_f32_to_f16(0x1p-25f), 0x0000);     // tie -> even (zero)
    CHECK_EQ_INT(tt_f32_to_f16(0x1.8p-24f), 0x0002);   // tie -> even
    CHECK_EQ_INT(tt_f32_to_f16(0x1.0p-14f), 0x0400);   // smallest normal
    CHECK_EQ_INT(tt_f32_to_f16(0x1.ffcp-15f), 0x0400); // subnormal rounding up into the normals
    CHECK_EQ_INT(tt_f32_to_f16(-0.0f), 0x8000);
    CHECK_EQ_INT(tt_f32_to_f16(1e-30f), 0x0000);
    CHECK_EQ_INT(tt_f32_to_f16(NAN) & 0x7e00, 0x7e00); // quiet NaN
    CHECK_NEAR(tt_f16_to_f32(0x3555), 0.333251953125, 0);

#ifdef __FLT16_MAX__
    // Against the compiler's own conversion (libgcc's correctly rounded __truncsfhf2) on random f32 patterns.
    int bad_cc = 0;
    for (int i = 0; i < 1 << 20; i++) {
        uint32_t u = (uint32_t)rng_u64();
        if (i & 1) u = (u & 0x87ffffffu) | 0x30000000u; // bias half the samples towards the f16 range
        float f = tt_f32_from_bits(u);
        if (isnan(f)) continue;
        _Float16 h = (_Float16)f;
        uint16_t hb;
        memcpy(&hb, &h, sizeof hb);
        if (tt_f32_to_f16(f) != hb && bad_cc++ < 5)
            fprintf(stderr, "f32 %08x -> %04x, compiler %04x\n", u, tt_f32_to_f16(f), hb);
    }
    CHECK_MSG(bad_cc == 0, "%d f32->f16 differ from _Float16", bad_cc);
#endif
}

static void test_bf16(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tt_bf16_to_f32((tt_bf16)h);
        if (tt_f32_bits(f) != h << 16 && bad++ < 5) fprintf(stderr, "bf16 %04x -> %08x\n", h, tt_f32_bits(f));
        int is_nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        tt_bf16 back = tt_f32_to_bf16(f);
        tt_bf16 want = is_nan ? (tt_bf16)(h | 0x40) : (tt_bf16)h;
        if (back != want && bad++ < 5) fprintf(stderr, "bf16 %04x round-trips to %04x\n", h, back);
        if (is_nan || (h & 0x7fff) >= 0x7f80) continue;
        // Midpoint to the next bf16 up in magnitude (a carry into the exponent, and 0x7f7f -> inf, included).
        uint32_t mid = h << 16 | 0x8000;
        tt_bf16 even = (h & 1) ? (tt_bf16)(h + 1) : (tt_bf16)h;
        if ((tt_f32_to_bf16(tt_f32_from_bits(mid)) != even || tt_f32_to_bf16(tt_f32_from_bits(mid - 1)) != h ||
             tt_f32_to_bf16(tt_f32_from_bits(mid + 1)) != (tt_bf16)(h + 1)) &&
            bad++ < 5)
            fprintf(stderr, "bf16 midpoint after %04x rounds wrongly\n", h);
    }
    CHECK_MSG(bad == 0, "%d bf16 failures", bad);
    CHECK_EQ_INT(tt_f32_to_bf16(1.0f), 0x3f80);
    CHECK_EQ_INT(tt_f32_to_bf16(3.14159265f), 0x4049);
    CHECK_EQ_INT(tt_f32_to_bf16(-INFINITY), 0xff80);
    CHECK_EQ_INT(tt_f32_to_bf16(3.4e38f), 0x7f80);               // rounds up to inf
    CHECK_EQ_INT(tt_f32_to_bf16(tt_f32_from_bits(0x7f800001u)), 0x7fc0); // signalling NaN -> quiet
}

// --- quantize -> dequantize

enum { N = 4096 }; // elements per test vector: 128 legacy blocks, 16 super-blocks

static void fill(float *x, int n, int dist) {
    for (int i = 0; i < n; i++) {
        float u = rng_normal();
        if (dist == 0)
            x[i] = u; // N(0, 1)
        else if (dist == 1)
            x[i] = u * powf((float)rng_unit() * 3.0f, 3.0f); // heavy-tailed
        else
            x[i] = 1.0f + 0.5f * (float)rng_unit(); // all positive, offset
    }
}

static void test_round_trip(void) {
    static float x[N], y[N];
    static uint8_t q[N * 4 + 64];
    for (int c = 0; c < N_CASES; c++) {
        const tt_traits *t = tt_get(tt_cases[c].type);
        double worst = 0;
        for (int dist = 0; dist < 3; dist++) {
            fill(x, N, dist);
            // Super-blocks spread over 4 decades (0.1 .. 1000) for the quantized types, so the absolute
            // scale does not matter (below ~0.01 the f16 scales of Q8_0 etc. become subnormal and lose
            // precision: a property of the formats, not tested here).
            if (t->is_quantized)
                for (int i = 0; i < N; i++)
                    x[i] *= powf(10.0f, (float)((i / QK_K) % 5) - 1.0f);
            t->from_float(x, q, N);
            t->to_float(q, y, N);
            if (!t->is_quantized) {
                // Relative error, after allowing half an f16 subnormal step (2^-25) for tiny values.
                double floor_abs = tt_cases[c].type == TT_F16 ? 0x1p-25 : 0.0;
                for (int i = 0; i < N; i++) {
                    double err = fmax(0.0, fabs((double)x[i] - y[i]) - floor_abs);
                    double rel = x[i] ? err / fabs(x[i]) : err;
                    if (rel > worst) worst = rel;
                }
                continue;
            }
            int bs = t->block_size;
            for (int b = 0; b < N / bs; b++) {
                double amax = 0, err = 0;
                for (int j = 0; j < bs; j++) {
                    amax = fmax(amax, fabs(x[b * bs + j]));
                    err = fmax(err, fabs((double)x[b * bs + j] - y[b * bs + j]));
                }
                if (err / amax > worst) worst = err / amax;
            }
        }
        CHECK_MSG(worst <= tt_cases[c].round_trip, "%s: max error / amax %.5f > bound %.5f", t->name, worst,
                  tt_cases[c].round_trip);
        // All-zero input is reproduced exactly (and no division by zero).
        memset(x, 0, sizeof x);
        t->from_float(x, q, N);
        t->to_float(q, y, N);
        int nonzero = 0;
        for (int i = 0; i < N; i++)
            nonzero += y[i] != 0.0f;
        CHECK_MSG(nonzero == 0, "%s: zero input gave %d non-zero outputs", t->name, nonzero);
    }
}

// Non-finite input must not be undefined behaviour (checked under UBSan) and must not leak into the
// neighbouring blocks: blocks after the first are quantized exactly as without it.
static void test_nonfinite_isolated(void) {
    static float x[N];
    static uint8_t q1[N * 4 + 64], q2[N * 4 + 64];
    for (int c = 0; c < N_CASES; c++) {
        const tt_traits *t = tt_get(tt_cases[c].type);
        if (!t->is_quantized) continue;
        fill(x, N, 0);
        x[0] = NAN;
        x[1] = INFINITY;
        x[2] = -INFINITY;
        x[3] = 3e38f;
        t->from_float(x, q1, N);
        t->from_float(x + t->block_size, q2, N - t->block_size);
        size_t rest = tt_row_size(tt_cases[c].type, N - t->block_size);
        CHECK_MSG(memcmp(q1 + t->type_size, q2, rest) == 0, "%s: a non-finite block changed its neighbours",
                  t->name);
    }
}

// Exact expectations that pin down the rounding rules (the SIMD quantizers must match them):
// Q8_0 / Q8_1 round half away from zero (roundf), Q8_K rounds half to even (nearest_int), Q4_0 truncates
// x/d + 8.5, and the nibble order puts element j + 16 in the high half of byte j.
static void test_rounding_rules(void) {
    float x[QK_K];
    memset(x, 0, sizeof x);
    x[0] = 127.0f; // amax 127 -> d = 1 exactly
    x[1] = 2.5f;
    x[2] = -2.5f;
    x[3] = 3.5f;
    x[4] = 0.49999997f;
    tt_block_q8_0 b8;
    tt_q8_0_from_float(x, &b8, QK8_0);
    CHECK_EQ_INT(b8.d, 0x3c00);
    CHECK_EQ_INT(b8.qs[0], 127);
    CHECK_EQ_INT(b8.qs[1], 3);
    CHECK_EQ_INT(b8.qs[2], -3);
    CHECK_EQ_INT(b8.qs[3], 4);
    CHECK_EQ_INT(b8.qs[4], 0);
    tt_block_q8_1 b81;
    tt_q8_1_from_float(x, &b81, QK8_1);
    CHECK_EQ_INT(b81.qs[1], 3);
    CHECK_NEAR(b81.d, 1.0, 0);
    CHECK_NEAR(b81.s, 127 + 3 - 3 + 4, 0); // s = d * sum(qs)
    tt_block_q8_K bk;
    tt_q8_K_from_float(x, &bk, QK_K); // max 127 -> iscale -1, d = -1
    CHECK_NEAR(bk.d, -1.0, 0);
    CHECK_EQ_INT(bk.qs[0], -127);
    CHECK_EQ_INT(bk.qs[1], -2); // -2.5 -> -2 (even)
    CHECK_EQ_INT(bk.qs[2], 2);
    CHECK_EQ_INT(bk.qs[3], -4); // -3.5 -> -4 (even)
    CHECK_EQ_INT(bk.bsums[0], -127 - 2 + 2 - 4);
    CHECK_EQ_INT(bk.bsums[1], 0);

    // Q4_0: signed absmax -4 -> d = 0.5, id = 2
    float v[QK4_0] = {0};
    v[0] = -4.0f;  // q = trunc(-8 + 8.5) = 0
    v[1] = 1.0f;   // trunc(2 + 8.5) = 10
    v[2] = 0.25f;  // trunc(0.5 + 8.5) = 9
    v[3] = -0.25f; // trunc(-0.5 + 8.5) = 8
    v[16] = 3.9f;  // trunc(7.8 + 8.5) = 16 -> clamped to 15
    tt_block_q4_0 b4;
    tt_q4_0_from_float(v, &b4, QK4_0);
    CHECK_EQ_INT(b4.d, 0x3800); // 0.5
    CHECK_EQ_INT(b4.qs[0], 0 | 15 << 4);
    CHECK_EQ_INT(b4.qs[1], 10 | 8 << 4);
    CHECK_EQ_INT(b4.qs[2], 9 | 8 << 4);
    CHECK_EQ_INT(b4.qs[3], 8 | 8 << 4);
    float back[QK4_0];
    tt_q4_0_to_float(&b4, back, QK4_0);
    CHECK_NEAR(back[0], -4.0, 0);
    CHECK_NEAR(back[16], 3.5, 0);
    CHECK_NEAR(back[2], 0.5, 0);

    // Q8_K bsums are the sums of each 16 quants, for random data too.
    float r[QK_K];
    fill(r, QK_K, 1);
    tt_q8_K_from_float(r, &bk, QK_K);
    int bad = 0;
    for (int j = 0; j < QK_K / 16; j++) {
        int s = 0;
        for (int l = 0; l < 16; l++)
            s += bk.qs[16 * j + l];
        bad += s != bk.bsums[j];
    }
    CHECK_MSG(bad == 0, "%d Q8_K bsums wrong", bad);
    // Q8_1 s = d * sum(qs) for random data.
    tt_block_q8_1 b1[QK_K / QK8_1];
    tt_q8_1_from_float(r, b1, QK_K);
    bad = 0;
    for (int b = 0; b < QK_K / QK8_1; b++) {
        int s = 0;
        for (int j = 0; j < QK8_1; j++)
            s += b1[b].qs[j];
        bad += b1[b].s != (float)s * b1[b].d;
    }
    CHECK_MSG(bad == 0, "%d Q8_1 s fields wrong", bad);
}

// --- vec_dot vs the float dot product of the dequantized vectors
//
// Bound: |vec_dot - sum_i x'_i y'_i| <= (n / block + 8) * FLT_EPSILON * S with x', y' dequantized and
// S = sum_i amax_blk(x')_i * |y'_i| (amax over the weight block containing i, counting dmin/min terms that
// can cancel). The integer parts are exact; what is left is one f32 rounding per block product plus the f32
// sum over blocks. Float types accumulate in double: (8 * FLT_EPSILON) * S.

static void test_vec_dot(void) {
    static float x[N], y[N], xd[N], yd[N];
    static uint8_t qx[N * 4 + 64], qy[N * 4 + 64];
    for (int c = 0; c < N_CASES; c++) {
        const tt_traits *t = tt_get(tt_cases[c].type);
        if (!t->vec_dot) continue;
        const tt_traits *vt = tt_get(t->vec_dot_type);
        for (int dist = 0; dist < 3; dist++) {
            for (int n = t->block_size == 1 ? 1 : t->block_size; n <= N; n *= 4) {
                fill(x, n, dist);
                fill(y, n, (dist + 1) % 3);
                t->from_float(x, qx, n);
                vt->from_float(y, qy, n);
                t->to_float(qx, xd, n);
                vt->to_float(qy, yd, n);
                double ref = 0, scale = 0;
                int bs = t->block_size;
                for (int b = 0; b < n / bs; b++) {
                    double amax = 0;
                    for (int j = 0; j < bs; j++)
                        amax = fmax(amax, fabs(xd[b * bs + j]));
                    for (int j = 0; j < bs; j++) {
                        ref += (double)xd[b * bs + j] * yd[b * bs + j];
                        scale += amax * fabs(yd[b * bs + j]);
                    }
                }
                double tol = (t->is_quantized ? n / bs + 8 : 8) * FLT_EPSILON * scale;
                float got = t->vec_dot(n, qx, qy);
                CHECK_MSG(fabs(got - ref) <= tol, "%s n=%d dist=%d: vec_dot %.9g vs %.9g (tol %.3g)", t->name,
                          n, dist, got, ref, tol);
            }
        }
    }
}

// Decode-only types (no quantizer): random block bytes with finite, modest f16 scales, dotted with a Q8_K /
// Q8_0 activation row, against the double dot of the dequantized vectors. Same bound as test_vec_dot, with
// the block bound for Q2_K also counting d * 45 and dmin * 15 (its scale and min terms can cancel).
static void test_vec_dot_decode_only(void) {
    static const struct { uint32_t type; int off_d, off_dmin; } cases[] = {
        {TT_Q2_K, 80, 82}, {TT_Q3_K, 108, -1}, {TT_IQ4_NL, 0, -1}, {TT_IQ4_XS, 0, -1}};
    static float y[N], xd[N], yd[N];
    static uint8_t qx[N * 4 + 64], qy[N * 4 + 64];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const tt_traits *t = tt_get(cases[c].type), *vt = tt_get(t->vec_dot_type);
        CHECK(t && vt && t->to_float && t->vec_dot && !t->from_float);
        const int bs = t->block_size;
        for (int trial = 0; trial < 6; trial++) {
            for (int n = bs; n <= N; n *= 4) {
                for (size_t b = 0; b < tt_row_size(cases[c].type, n); b++) qx[b] = (uint8_t)rng_u64();
                for (int b = 0; b < n / bs; b++) {
                    uint8_t *blk = qx + (size_t)b * t->type_size;
                    tt_f16 d = tt_f32_to_f16(0.001f + 0.01f * (float)rng_unit());
                    tt_f16 dm = tt_f32_to_f16(0.01f * (float)rng_unit());
                    memcpy(blk + cases[c].off_d, &d, 2);
                    if (cases[c].off_dmin >= 0) memcpy(blk + cases[c].off_dmin, &dm, 2);
                }
                fill(y, n, trial % 3);
                vt->from_float(y, qy, n);
                t->to_float(qx, xd, n);
                vt->to_float(qy, yd, n);
                double ref = 0, scale = 0;
                for (int b = 0; b < n / bs; b++) {
                    const uint8_t *blk = qx + (size_t)b * t->type_size;
                    uint16_t h;
                    memcpy(&h, blk + cases[c].off_d, 2);
                    double amax = cases[c].type == TT_Q2_K ? 45 * fabs(tt_f16_to_f32(h)) : 0;
                    if (cases[c].off_dmin >= 0) memcpy(&h, blk + cases[c].off_dmin, 2), amax += 15 * fabs(tt_f16_to_f32(h));
                    for (int j = 0; j < bs; j++) amax = fmax(amax, fabs(xd[b * bs + j]));
                    for (int j = 0; j < bs; j++) {
                        ref += (double)xd[b * bs + j] * yd[b * bs + j];
                        scale += amax * fabs(yd[b * bs + j]);
                    }
                }
                double tol = (n / bs + 8) * FLT_EPSILON * scale;
                float got = t->vec_dot(n, qx, qy);
                CHECK_MSG(fabs(got - ref) <= tol, "%s n=%d trial=%d: vec_dot %.9g vs %.9g (tol %.3g)", t->name, n,
                          trial, got, ref, tol);
            }
        }
    }
}

// MXFP4's scale and ties, as ggml's reference: amax 8 gives e = 128 (values 2 * E2M1 = 0, 1, 2, 3, 4, 6, 8,
// 12), a tie keeps the first code of the table (the smaller magnitude, +0 over -0), element l + 16 is the high
// nibble of byte l.
static void test_mxfp4_rules(void) {
    float x[32] = {0};
    x[0] = 8.0f, x[1] = 5.0f, x[2] = -7.0f, x[3] = 0.5f, x[4] = -0.0f, x[5] = 2.9f, x[16] = -1.0f, x[17] = 16.5f;
    tt_block_mxfp4 b;
    tt_mxfp4_from_float(x, &b, 32);
    CHECK_EQ_INT(b.e, 129); // amax 16.5: floor(log2) = 4, + 125
    x[17] = 0.0f;
    tt_mxfp4_from_float(x, &b, 32);
    CHECK_EQ_INT(b.e, 128);
    const int want[6] = {6, 4, 13, 0, 0, 3}; // 8, 4 (tie 4/6), -6 (tie -6/-8), 0 (tie 0/1), +0, 3
    for (int l = 0; l < 6; l++) CHECK_EQ_INT(b.qs[l] & 0x0f, want[l]);
    CHECK_EQ_INT(b.qs[0] >> 4, 9); // element 16: -1
    float y[32];
    tt_mxfp4_to_float(&b, y, 32);
    CHECK(y[0] == 8.0f && y[1] == 4.0f && y[2] == -6.0f && y[5] == 3.0f && y[16] == -1.0f);
    CHECK(tt_e8m0_half(0) == 0x1p-128f && tt_e8m0_half(1) == 0x1p-127f && tt_e8m0_half(254) == 0x1p126f);
}

int main(void) {
    test_table();
    test_mxfp4_rules();
    test_row_size();
    test_f16();
    test_bf16();
    test_round_trip();
    test_nonfinite_isolated();
    test_rounding_rules();
    test_vec_dot();
    test_vec_dot_decode_only(); // last: it draws from the shared generator the tests above were tuned on
    TEST_MAIN_END();
}
