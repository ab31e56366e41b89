// Scalar reference for the k-quants Q4_K, Q5_K, Q6_K (weights) and Q8_K (their activations), 256-element
// super-blocks. Quantizers follow ggml's quantize_row_q{4,5,6,8}_K_ref (no importance matrix) with the same
// scale/min searches (make_qkx2_quants for Q4_K/Q5_K, make_qx_quants rmse_type 1 for Q6_K) and the same float
// expression order, so they produce the same bytes as ggml's reference path.
//
// Element e of a super-block (0..255), as the bit layouts place it:
//   Q4_K/Q5_K: sub-block s = e / 32 (scale/min s), low bits in qs[32 * (s / 2) + e % 32], nibble s % 2;
//              Q5_K's 5th bit is bit s of qh[e % 32].
//   Q6_K:      16-element sub-blocks (scale e / 16); within each 128-half h, quarter k = (e % 128) / 32 and
//              l = e % 32: low 4 bits in ql[64 h + l + 32 (k & 1)], nibble k >> 1; high 2 bits are bits
//              2k..2k+1 of qh[32 h + l]; value q - 32.
#include <math.h>

#include "tensor/quant_ref.h"

#define GROUP_MAX_EPS 1e-15f

static inline float f16(tt_f16 h) {
    return tt_f16_to_f32(h);
}
static inline int imin(int a, int b) {
    return a < b ? a : b;
}
static inline int imax(int a, int b) {
    return a > b ? a : b;
}

void tt_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0x0f) | (q[j - 4] >> 6) << 4);
        *m = (uint8_t)((q[j + 4] >> 4) | (q[j] >> 6) << 4);
    }
}

// Inverse of tt_k4_scale_min for all 8 pairs (ls, lm <= 63).
static void k4_pack_scales(uint8_t out[K_SCALE_SIZE], const uint8_t ls[8], const uint8_t lm[8]) {
    for (int j = 0; j < 4; j++) {
        out[j] = (uint8_t)(ls[j] | (ls[j + 4] >> 4) << 6);
        out[j + 4] = (uint8_t)(lm[j] | (lm[j + 4] >> 4) << 6);
        out[j + 8] = (uint8_t)((ls[j + 4] & 0x0f) | (lm[j + 4] & 0x0f) << 4);
    }
}

// --- bit (un)packing, one element index mapping per format (see the header comment)

static void q4k_unpack(const tt_block_q4_K *b, uint8_t q[QK_K]) {
    for (int e = 0; e < QK_K; e++)
        q[e] = (b->qs[32 * (e / 64) + e % 32] >> (4 * ((e / 32) % 2))) & 0x0f;
}

static void q4k_pack(tt_block_q4_K *b, const uint8_t q[QK_K]) {
    for (int c = 0; c < QK_K / 64; c++)
        for (int l = 0; l < 32; l++)
            b->qs[32 * c + l] = (uint8_t)(q[64 * c + l] | q[64 * c + 32 + l] << 4);
}

static void q5k_unpack(const tt_block_q5_K *b, uint8_t q[QK_K]) {
    for (int e = 0; e < QK_K; e++) {
        int lo = (b->qs[32 * (e / 64) + e % 32] >> (4 * ((e / 32) % 2))) & 0x0f;
        int hi = (b->qh[e % 32] >> (e / 32)) & 1;
        q[e] = (uint8_t)(lo | hi << 4);
    }
}

static void q5k_pack(tt_block_q5_K *b, const uint8_t q[QK_K]) {
    memset(b->qh, 0, sizeof b->qh);
    for (int c = 0; c < QK_K / 64; c++) {
        for (int l = 0; l < 32; l++) {
            int q0 = q[64 * c + l], q1 = q[64 * c + 32 + l];
            b->qs[32 * c + l] = (uint8_t)((q0 & 0x0f) | (q1 & 0x0f) << 4);
            b->qh[l] |= (uint8_t)((q0 >> 4) << (2 * c) | (q1 >> 4) << (2 * c + 1));
        }
    }
}

static void q6k_unpack(const tt_block_q6_K *b, int8_t q[QK_K]) { // values -32..31
    for (int e = 0; e < QK_K; e++) {
        int h = e / 128, k = (e % 128) / 32, l = e % 32;
        int lo = (b->ql[64 * h + l + 32 * (k & 1)] >> (4 * (k >> 1))) & 0x0f;
        int hi = (b->qh[32 * h + l] >> (2 * k)) & 3;
        q[e] = (int8_t)((lo | hi << 4) - 32);
    }
}

static void q6k_pack(tt_block_q6_K *b, const uint8_t L[QK_K]) { // L = q + 32, 0..63
    for (int h = 0; h < QK_K / 128; h++) {
        const uint8_t *s = L + 128 * h;
        for (int l = 0; l < 32; l++) {
            b->ql[64 * h + l] = (uint8_t)((s[l] & 0x0f) | (s[l + 64] & 0x0f) << 4);
            b->ql[64 * h + l + 32] = (uint8_t)((s[l + 32] & 0x0f) | (s[l + 96] & 0x0f) << 4);
            b->qh[32 * h + l] =
                (uint8_t)(s[l] >> 4 | (s[l + 32] >> 4) << 2 | (s[l + 64] >> 4) << 4 | (s[l + 96] >> 4) << 6);
        }
    }
}

// --- scale searches (ggml's make_qkx2_quants and make_qx_quants with rmse_type 1, no importance weights)

// Fits x ~ scale * L + min with L in 0..nmax and min <= 0, minimising sum w * err^2; first the plain
// min/max grid, then nstep+1 grids with iscale = (rmin + rdelta * is + nmax) / (max - min), each refined by
// weighted least squares. Returns scale, sets *neg_min = -min and L.
static float make_qkx2_quants(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min,
                              uint8_t *Laux, float rmin, float rdelta, int nstep) {
    float min = x[0], max = x[0];
    float sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *neg_min = -min;
        return 0.0f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_err = 0;
    for (int i = 0; i < n; i++) {
        int l = imax(0, imin(nmax, tt_nearest_int(iscale * (x[i] - min))));
        L[i] = (uint8_t)l;
        float diff = scale * L[i] + min - x[i];
        best_err += w[i] * (diff * diff);
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = imax(0, imin(nmax, tt_nearest_int(iscale * (x[i] - min))));
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float err = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                err += w[i] * (diff * diff);
            }
            if (err < best_err) {
                memcpy(L, Laux, (size_t)n);
                best_err = err;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *neg_min = -min;
    return scale;
}

// Symmetric fit x ~ scale * (L - nmax), L - nmax in -nmax..nmax-1, weights x^2: tries iscale = -(nmax +
// 0.1 is) / max for is in -9..9 and keeps the least-squares best. Returns scale (may be negative).
static float make_qx_quants(int n, int nmax, const float *x, uint8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = imax(-nmax, imin(nmax - 1, tt_nearest_int(iscale * x[i])));
        L[i] = (uint8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = imax(-nmax, imin(nmax - 1, tt_nearest_int(iscale * x[i])));
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (uint8_t)(nmax + imax(-nmax, imin(nmax - 1, tt_nearest_int(iscale * x[i]))));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// --- Q4_K / Q5_K: x = d * sc_s * q - dmin * m_s, 8 sub-blocks of 32, 6-bit sc/m, q 4 or 5 bits

// Shared quantizer body: finds per-sub-block (scale, min), the 6-bit codes and the super-block d/dmin,
// then requantizes every element against the rounded scales. nmax 15 (Q4_K) or 31 (Q5_K).
static void qk_asym_quantize(const float *x, int nmax, tt_f16 *d_out, tt_f16 *dmin_out,
                             uint8_t scales[K_SCALE_SIZE], uint8_t L[QK_K]) {
    float sc[QK_K / 32], mins[QK_K / 32], w[32];
    uint8_t Laux[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++)
            sum_x2 += xs[l] * xs[l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++)
            w[l] = av_x + fabsf(xs[l]);
        if (nmax == 15)
            sc[j] = make_qkx2_quants(32, 15, xs, w, L + 32 * j, &mins[j], Laux, -1.0f, 0.1f, 20);
        else
            sc[j] = make_qkx2_quants(32, 31, xs, w, L + 32 * j, &mins[j], Laux, -0.5f, 0.1f, 15);
        if (sc[j] > max_scale) max_scale = sc[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t a = (uint8_t)tt_nearest_int(inv_scale * sc[j]); // wraps like ggml's uint8_t assignment
        uint8_t b = (uint8_t)tt_nearest_int(inv_min * mins[j]);
        ls[j] = a < 63 ? a : 63;
        lm[j] = b < 63 ? b : 63;
    }
    k4_pack_scales(scales, ls, lm);
    *d_out = tt_f32_to_f16(max_scale / 63.0f);
    *dmin_out = tt_f32_to_f16(max_min / 63.0f);
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t s, m;
        tt_k4_scale_min(j, scales, &s, &m);
        float d = f16(*d_out) * s;
        if (!d) continue; // keep the search's L
        float dm = f16(*dmin_out) * m;
        for (int l = 0; l < 32; l++) {
            int q = tt_nearest_int((x[32 * j + l] + dm) / d);
            L[32 * j + l] = (uint8_t)imax(0, imin(nmax, q));
        }
    }
}

// x = d·sc_j·q − dmin·m_j for each 32-quant sub-block j of one Q4_K/Q5_K super-block (q already unpacked).
static void qk_asym_dequant(tt_f16 hd, tt_f16 hdmin, const uint8_t *scales, const uint8_t *q, float *dst) {
    float d = f16(hd), dmin = f16(hdmin);
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, m;
        tt_k4_scale_min(j, scales, &sc, &m);
        float d1 = d * sc, m1 = dmin * m;
        for (int l = 0; l < 32; l++) dst[32 * j + l] = d1 * q[32 * j + l] - m1;
    }
}

void tt_q4_K_to_float(const void *src, float *dst, int64_t n) {
    const tt_block_q4_K *b = src;
    uint8_t q[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        q4k_unpack(&b[i], q);
        qk_asym_dequant(b[i].d, b[i].dmin, b[i].scales, q, dst);
    }
}

void tt_q4_K_from_float(const float *x, void *dst, int64_t n) {
    tt_block_q4_K *b = dst;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        qk_asym_quantize(x, 15, &b[i].d, &b[i].dmin, b[i].scales, L);
        q4k_pack(&b[i], L);
    }
}

// Integer dot of one asymmetric k-quant super-block (q 0..31, 6-bit sc/m) with a Q8_K block:
// d_x d_y sum_s sc_s (q . y)_s - dmin_x d_y sum_s m_s sum(y)_s, sum(y) from Q8_K's 16-element bsums.
static float qk_asym_dot(float d, float dmin, const uint8_t scales[K_SCALE_SIZE], const uint8_t q[QK_K],
                         const tt_block_q8_K *y) {
    int32_t sumi = 0, summ = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, m;
        tt_k4_scale_min(j, scales, &sc, &m);
        int32_t isum = 0;
        for (int l = 0; l < 32; l++)
            isum += q[32 * j + l] * y->qs[32 * j + l];
        sumi += sc * isum;
        summ += m * (y->bsums[2 * j] + y->bsums[2 * j + 1]);
    }
    return d * y->d * (float)sumi - dmin * y->d * (float)summ;
}

float tt_q4_K_vec_dot(int n, const void *vx, const void *vy) {
    const tt_block_q4_K *x = vx;
    const tt_block_q8_K *y = vy;
    uint8_t q[QK_K];
    float sum = 0.0f;
    for (int i = 0; i < n / QK_K; i++) {
        q4k_unpack(&x[i], q);
        sum += qk_asym_dot(f16(x[i].d), f16(x[i].dmin), x[i].scales, q, &y[i]);
    }
    return sum;
}

void tt_q5_K_to_float(const void *src, float *dst, int64_t n) {
    const tt_block_q5_K *b = src;
    uint8_t q[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        q5k_unpack(&b[i], q);
        qk_asym_dequant(b[i].d, b[i].dmin, b[i].scales, q, dst);
    }
}

void tt_q5_K_from_float(const float *x, void *dst, int64_t n) {
    tt_block_q5_K *b = dst;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        qk_asym_quantize(x, 31, &b[i].d, &b[i].dmin, b[i].scales, L);
        q5k_pack(&b[i], L);
    }
}

float tt_q5_K_vec_dot(int n, const void *vx, const void *vy) {
    const tt_block_q5_K *x = vx;
    const tt_block_q8_K *y = vy;
    uint8_t q[QK_K];
    float sum = 0.0f;
    for (int i = 0; i < n / QK_K; i++) {
        q5k_unpack(&x[i], q);
        sum += qk_asym_dot(f16(x[i].d), f16(x[i].dmin), x[i].scales, q, &y[i]);
    }
    return sum;
}

// --- Q6_K: x = d * sc_s * (q - 32), 16 sub-blocks of 16, int8 scales, q 6 bits

void tt_q6_K_to_float(const void *src, float *dst, int64_t n) {
    const tt_block_q6_K *b = src;
    int8_t q[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K) {
        float d = f16(b[i].d);
        q6k_unpack(&b[i], q);
        for (int e = 0; e < QK_K; e++)
            dst[e] = d * b[i].scales[e / 16] * q[e];
    }
}

void tt_q6_K_from_float(const float *x, void *dst, int64_t n) {
    tt_block_q6_K *b = dst;
    uint8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            scales[j] = make_qx_quants(16, 32, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        memset(&b[i], 0, sizeof b[i]);
        if (max_abs_scale < GROUP_MAX_EPS) continue; // all-zero block (d = 0)
        float iscale = -128.0f / max_scale;
        b[i].d = tt_f32_to_f16(1 / iscale);
        for (int j = 0; j < QK_K / 16; j++)
            b[i].scales[j] = (int8_t)imax(-128, imin(127, tt_nearest_int(iscale * scales[j])));
        for (int j = 0; j < QK_K / 16; j++) {
            float d = f16(b[i].d) * b[i].scales[j];
            if (!d) continue; // keep the search's L
            for (int l = 0; l < 16; l++) {
                int q = tt_nearest_int(x[16 * j + l] / d);
                L[16 * j + l] = (uint8_t)(imax(-32, imin(31, q)) + 32);
            }
        }
        q6k_pack(&b[i], L);
    }
}

float tt_q6_K_vec_dot(int n, const void *vx, const void *vy) {
    const tt_block_q6_K *x = vx;
    const tt_block_q8_K *y = vy;
    int8_t q[QK_K];
    float sum = 0.0f;
    for (int i = 0; i < n / QK_K; i++) {
        q6k_unpack(&x[i], q);
        int32_t sumi = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            int32_t isum = 0;
            for (int l = 0; l < 16; l++)
                isum += q[16 * j + l] * y[i].qs[16 * j + l];
            sumi += x[i].scales[j] * isum;
        }
        sum += f16(x[i].d) * y[i].d * (float)sumi;
    }
    return sum;
}

// --- Q8_K (activations for the k-quants): x = q * d, d = 1 / (-127 / max) with max the signed absmax,
// q = min(127, nearest_int(x * -127 / max)), bsums = sums of 16 consecutive q.

void tt_q8_K_to_float(const void *src, float *dst, int64_t n) {
    const tt_block_q8_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, dst += QK_K)
        for (int e = 0; e < QK_K; e++)
            dst[e] = b[i].d * b[i].qs[e];
}

void tt_q8_K_from_float(const float *x, void *dst, int64_t n) {
    tt_block_q8_K *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max = 0, amax = 0;
        for (int e = 0; e < QK_K; e++) {
            if (fabsf(x[e]) > amax) {
                amax = fabsf(x[e]);
                max = x[e];
            }
        }
        memset(&b[i], 0, sizeof b[i]); // ggml leaves bsums unset for an all-zero block; we zero them
        if (!amax) continue;
        float iscale = -127.0f / max;
        for (int e = 0; e < QK_K; e++)
            b[i].qs[e] = (int8_t)imax(-128, imin(127, tt_nearest_int(iscale * x[e])));
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int l = 0; l < 16; l++)
                sum += b[i].qs[16 * j + l];
            b[i].bsums[j] = (int16_t)sum;
        }
        b[i].d = 1 / iscale;
    }
}
