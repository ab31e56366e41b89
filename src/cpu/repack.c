// Load-time repacking of Q4_K and Q6_K weights into 8-row and Q8_0 weights into 16-row interleaved tiles
// (cpu_repack_*), and the scalar inverse.
//
// Why: a row-at-a-time Q4_K dot spends as much work on the super-block's scales (unpack the 12 packed
// bytes, broadcast one scale per sub-block with a shuffle, reduce the row's lanes) as on the quants, per
// row. With 8 rows interleaved, one 256-bit register holds 4 quant bytes of each of 8 rows: one activation
// broadcast serves all 8 rows, the int32 lanes are the 8 rows' sums (no horizontal reduction), and the
// scales are unpacked here, once, into per-sub-block bytes of the 8 rows.
//
// Layout (cpu_q4k_r8, 1184 bytes), one per (group of 8 rows, super-block), groups in row order, super-blocks
// in column order inside a group: d[r], dmin[r] (fp16 as in the file), sc[s][r] (the 6-bit scale of
// sub-block s of row r), mn[s / 2][r][s % 2] (its min: a row's two mins side by side, as one vpmaddwd lane
// takes them with the activation's pair of sub-block sums), then qs: for jj = 0..3 (sub-blocks 2jj and
// 2jj+1) and l = 0..7, 8 rows x 4 bytes = bytes qs[32jj + 4l .. 32jj + 4l + 3] of each row's block as they
// lie (low nibbles: elements 64jj + 4l.., sub-block 2jj; high nibbles: elements 64jj + 32 + 4l.., sub-block
// 2jj + 1).
//
// Q8_0 (cpu_q8_0_r16): the 16 rows' fp16 scales of a block side by side, then for each 4-byte step c the
// bytes qs[4c .. 4c + 3] of the 16 rows. Why: the row-at-a-time kernel gathers the scales of blocks 34
// bytes apart (vpgatherdd: ~40% of a Gemma 3 decode's output-head time there) and sum 8 lanes per row; here
// one 512-bit load is 4 quants of 16 rows, one broadcast of 4 activation bytes serves all of them, the
// int32 lanes are the 16 rows' block sums, and one vcvtph2ps gives their scales.
// Q5_0 uses the same layout with its 5-bit quants expanded to bytes (q - 16): 34 instead of 22 bytes per block
// (more to read per decoded token), but the same fast kernel instead of unpacking nibbles and high bits per
// row for every activation tile; prefill (compute-bound) spent 41% of its time in the row-wise Q5_0 kernel.
// Q4_0 and Q4_1 (cpu_q4_0_r16, cpu_q4_1_r16): the same idea without expanding: the 16 rows' scales (and Q4_1
// mins) side by side, then for each 4-byte step c the nibble bytes qs[4c .. 4c + 3] of the 16 rows; one load
// gives elements 4c.. (low nibbles) and 16 + 4c.. (high nibbles) of 16 rows. The row-wise kernels spent ~4 vector
// ops of scale work (convert, scale product, fma, offset) per 64 multiply-adds; here it is ~4 per 512.
// MXFP4 (cpu_mxfp4_r16, gpt-oss's experts): Q4_0's layout with the E8M0 scale bytes in place of the fp16 scales.
// The row-wise kernel loaded each 17-byte block unaligned, with two scale broadcasts and the activations' halves
// swapped per block pair and row: about twice the time per byte of a Q8_0 GEMV at batch 1.
#include "cpu/repack.h"

#include "tensor/ttype.h"

#include <stdint.h>
#include <string.h>

// The 6-bit scale and min of sub-block s of a Q4_K block (the scalar unpacking of tensor/).
static void rp_scale_min(int s, const uint8_t *q, uint8_t *sc, uint8_t *mn) {
    if (s < 4) {
        *sc = q[s] & 63;
        *mn = q[s + 4] & 63;
    } else {
        *sc = (uint8_t)((q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4));
        *mn = (uint8_t)((q[s + 4] >> 4) | ((q[s] >> 6) << 4));
    }
}

size_t cpu_repack_size(uint32_t w_type, int64_t d, int64_t k) {
    if (w_type == TT_Q8_0 || w_type == TT_Q5_0 || w_type == TT_Q4_0 || w_type == TT_Q4_1 || w_type == TT_MXFP4) {
        if (d <= 0 || k <= 0 || d % CPU_REPACK_Q8_ROWS || k % QK8_0 || k / QK8_0 > CPU_REPACK_Q8_MAXB) return 0;
        const size_t bs = w_type == TT_Q4_0 ? sizeof(cpu_q4_0_r16)
                          : w_type == TT_Q4_1 ? sizeof(cpu_q4_1_r16)
                          : w_type == TT_MXFP4 ? sizeof(cpu_mxfp4_r16) : sizeof(cpu_q8_0_r16);
        return (size_t)(d / CPU_REPACK_Q8_ROWS) * (size_t)(k / QK8_0) * bs;
    }
    if ((w_type != TT_Q4_K && w_type != TT_Q6_K) || d <= 0 || k <= 0 || d % CPU_REPACK_ROWS || k % QK_K) return 0;
    return (size_t)(d / CPU_REPACK_ROWS) * (size_t)(k / QK_K) *
           (w_type == TT_Q4_K ? sizeof(cpu_q4k_r8) : sizeof(cpu_q6k_r8));
}

typedef struct rp_copy {
    void *packed, *orig;
    size_t n;
} rp_copy;

// Q6_K: the bytes keep their meaning, only their order changes, so both directions are one copy loop.
static void rp_q6k(uint8_t *w, cpu_q6k_r8 *o, int64_t d, int64_t nb, int to_packed) {
    const size_t row = (size_t)nb * sizeof(tt_block_q6_K);
    for (int64_t g = 0; g < d / CPU_REPACK_ROWS; g++) {
        for (int64_t b = 0; b < nb; b++, o++) {
            for (int r = 0; r < CPU_REPACK_ROWS; r++) {
                tt_block_q6_K *x = (tt_block_q6_K *)(w + (size_t)(g * CPU_REPACK_ROWS + r) * row) + b;
                rp_copy cp[1 + 8 + 3 * 16];
                int nc = 0;
                cp[nc++] = (rp_copy){&o->d[r], &x->d, 2};
                for (int t = 0; t < 8; t++) cp[nc++] = (rp_copy){o->scp[t][r], &x->scales[2 * t], 2};
                for (int n = 0; n < 2; n++)
                    for (int c = 0; c < 8; c++) {
                        cp[nc++] = (rp_copy){o->qla[n][c][r], x->ql + 64 * n + 4 * c, 4};
                        cp[nc++] = (rp_copy){o->qlb[n][c][r], x->ql + 64 * n + 32 + 4 * c, 4};
                        cp[nc++] = (rp_copy){o->qh[n][c][r], x->qh + 32 * n + 4 * c, 4};
                    }
                for (int i = 0; i < nc; i++)
                    memcpy(to_packed ? cp[i].packed : cp[i].orig, to_packed ? cp[i].orig : cp[i].packed, cp[i].n);
            }
        }
    }
}

// Q8_0: a reorder as well.
static void rp_q8_0(uint8_t *w, cpu_q8_0_r16 *o, int64_t d, int64_t nb, int to_packed) {
    const size_t row = (size_t)nb * sizeof(tt_block_q8_0);
    for (int64_t g = 0; g < d / CPU_REPACK_Q8_ROWS; g++)
        for (int64_t b = 0; b < nb; b++, o++)
            for (int r = 0; r < CPU_REPACK_Q8_ROWS; r++) {
                tt_block_q8_0 *x = (tt_block_q8_0 *)(w + (size_t)(g * CPU_REPACK_Q8_ROWS + r) * row) + b;
                if (to_packed) o->d[r] = x->d;
                else x->d = o->d[r];
                for (int c = 0; c < 8; c++) {
                    if (to_packed) memcpy(o->qs[c][r], x->qs + 4 * c, 4);
                    else memcpy(x->qs + 4 * c, o->qs[c][r], 4);
                }
            }
}

// Q5_0 -> the Q8_0 layout with q - 16 in the bytes (exact: -16..15), so both share one kernel; or back.
static void rp_q5_0(uint8_t *w, cpu_q8_0_r16 *o, int64_t d, int64_t nb, int to_packed) {
    const size_t row = (size_t)nb * sizeof(tt_block_q5_0);
    for (int64_t g = 0; g < d / CPU_REPACK_Q8_ROWS; g++)
        for (int64_t b = 0; b < nb; b++, o++)
            for (int r = 0; r < CPU_REPACK_Q8_ROWS; r++) {
                tt_block_q5_0 *x = (tt_block_q5_0 *)(w + (size_t)(g * CPU_REPACK_Q8_ROWS + r) * row) + b;
                if (to_packed) {
                    uint32_t qh;
                    memcpy(&qh, x->qh, 4);
                    o->d[r] = x->d;
                    for (int e = 0; e < QK5_0; e++) {
                        const int lo = e < 16 ? x->qs[e] & 0xF : x->qs[e - 16] >> 4;
                        o->qs[(e & 31) / 4][r][e % 4] = (int8_t)((lo | ((qh >> e) & 1) << 4) - 16);
                    }
                } else {
                    uint32_t qh = 0;
                    x->d = o->d[r];
                    memset(x->qs, 0, sizeof x->qs);
                    for (int e = 0; e < QK5_0; e++) {
                        const int q = o->qs[e / 4][r][e % 4] + 16;
                        x->qs[e % 16] |= (uint8_t)((q & 0xF) << (e < 16 ? 0 : 4));
                        qh |= (uint32_t)(q >> 4) << e;
                    }
                    memcpy(x->qh, &qh, 4);
                }
            }
}

// Q4_0, Q4_1 and MXFP4: a reorder too (d, m or e and the 16 nibble bytes of each row's block keep their meaning).
static void rp_q4(uint8_t *w, uint8_t *o, int64_t d, int64_t nb, uint32_t t, int to_packed) {
    const size_t bsz = tt_get(t)->type_size;
    const size_t osz = t == TT_Q4_1 ? sizeof(cpu_q4_1_r16) : t == TT_MXFP4 ? sizeof(cpu_mxfp4_r16) : sizeof(cpu_q4_0_r16);
    const size_t row = (size_t)nb * bsz;
    for (int64_t g = 0; g < d / CPU_REPACK_Q8_ROWS; g++)
        for (int64_t b = 0; b < nb; b++, o += osz)
            for (int r = 0; r < CPU_REPACK_Q8_ROWS; r++) {
                uint8_t *x = w + (size_t)(g * CPU_REPACK_Q8_ROWS + r) * row + (size_t)b * bsz;
                rp_copy cp[2 + 4];
                int nc = 0;
                if (t == TT_Q4_1) {
                    cpu_q4_1_r16 *p = (cpu_q4_1_r16 *)(void *)o;
                    cp[nc++] = (rp_copy){&p->d[r], x, 2};
                    cp[nc++] = (rp_copy){&p->m[r], x + 2, 2};
                    for (int c = 0; c < 4; c++) cp[nc++] = (rp_copy){p->qs[c][r], x + 4 + 4 * c, 4};
                } else if (t == TT_MXFP4) {
                    cpu_mxfp4_r16 *p = (cpu_mxfp4_r16 *)(void *)o;
                    cp[nc++] = (rp_copy){&p->e[r], x, 1};
                    for (int c = 0; c < 4; c++) cp[nc++] = (rp_copy){p->qs[c][r], x + 1 + 4 * c, 4};
                } else {
                    cpu_q4_0_r16 *p = (cpu_q4_0_r16 *)(void *)o;
                    cp[nc++] = (rp_copy){&p->d[r], x, 2};
                    for (int c = 0; c < 4; c++) cp[nc++] = (rp_copy){p->qs[c][r], x + 2 + 4 * c, 4};
                }
                for (int i = 0; i < nc; i++)
                    memcpy(to_packed ? cp[i].packed : cp[i].orig, to_packed ? cp[i].orig : cp[i].packed, cp[i].n);
            }
}

int cpu_repack(uint32_t w_type, const void *w, int64_t d, int64_t k, void *out) {
    if (!cpu_repack_size(w_type, d, k) || !w || !out) return -1;
    if (w_type == TT_Q4_0 || w_type == TT_Q4_1 || w_type == TT_MXFP4) {
        rp_q4((uint8_t *)(uintptr_t)w, out, d, k / QK4_0, w_type, 1); // reads w only
        return 0;
    }
    if (w_type == TT_Q5_0) {
        rp_q5_0((uint8_t *)(uintptr_t)w, out, d, k / QK5_0, 1); // reads w only
        return 0;
    }
    if (w_type == TT_Q8_0) {
        rp_q8_0((uint8_t *)(uintptr_t)w, out, d, k / QK8_0, 1); // reads w only
        return 0;
    }
    if (w_type == TT_Q6_K) {
        rp_q6k((uint8_t *)(uintptr_t)w, out, d, k / QK_K, 1); // reads w only
        return 0;
    }
    const int64_t nb = k / QK_K;
    const size_t row = (size_t)nb * sizeof(tt_block_q4_K);
    cpu_q4k_r8 *o = out;
    for (int64_t g = 0; g < d / CPU_REPACK_ROWS; g++) {
        for (int64_t b = 0; b < nb; b++, o++) {
            for (int r = 0; r < CPU_REPACK_ROWS; r++) {
                const tt_block_q4_K *x =
                    (const tt_block_q4_K *)((const uint8_t *)w + (size_t)(g * CPU_REPACK_ROWS + r) * row) + b;
                o->d[r] = x->d;
                o->dmin[r] = x->dmin;
                for (int s = 0; s < 8; s++) rp_scale_min(s, x->scales, &o->sc[s][r], &o->mn[s / 2][r][s & 1]);
                for (int jj = 0; jj < 4; jj++)
                    for (int l = 0; l < 8; l++) memcpy(&o->qs[jj][l][r][0], x->qs + 32 * jj + 4 * l, 4);
            }
        }
    }
    return 0;
}

// The inverse: the original Q4_K rows, bit for bit (scales re-packed into the 12-byte form). It is the
// layout's scalar reference: a dot over the repacked tiles must equal the traits' vec_dot over these rows.
int cpu_repack_unpack(uint32_t w_type, const void *packed, int64_t d, int64_t k, void *w) {
    if (!cpu_repack_size(w_type, d, k) || !packed || !w) return -1;
    if (w_type == TT_Q4_0 || w_type == TT_Q4_1 || w_type == TT_MXFP4) {
        rp_q4(w, (uint8_t *)(uintptr_t)packed, d, k / QK4_0, w_type, 0); // reads packed only
        return 0;
    }
    if (w_type == TT_Q5_0) {
        rp_q5_0(w, (cpu_q8_0_r16 *)(uintptr_t)packed, d, k / QK5_0, 0); // reads packed only
        return 0;
    }
    if (w_type == TT_Q8_0) {
        rp_q8_0(w, (cpu_q8_0_r16 *)(uintptr_t)packed, d, k / QK8_0, 0); // reads packed only
        return 0;
    }
    if (w_type == TT_Q6_K) {
        rp_q6k(w, (cpu_q6k_r8 *)(uintptr_t)packed, d, k / QK_K, 0); // reads packed only
        return 0;
    }
    const int64_t nb = k / QK_K;
    const size_t row = (size_t)nb * sizeof(tt_block_q4_K);
    const cpu_q4k_r8 *p = packed;
    for (int64_t g = 0; g < d / CPU_REPACK_ROWS; g++) {
        for (int64_t b = 0; b < nb; b++, p++) {
            for (int r = 0; r < CPU_REPACK_ROWS; r++) {
                tt_block_q4_K *x = (tt_block_q4_K *)((uint8_t *)w + (size_t)(g * CPU_REPACK_ROWS + r) * row) + b;
                x->d = p->d[r];
                x->dmin = p->dmin[r];
                uint8_t *q = x->scales;
                for (int s = 0; s < 4; s++) {
                    const uint8_t sh = p->sc[s + 4][r], mh = p->mn[(s + 4) / 2][r][s & 1];
                    q[s] = (uint8_t)(p->sc[s][r] | (sh >> 4) << 6);
                    q[s + 4] = (uint8_t)(p->mn[s / 2][r][s & 1] | (mh >> 4) << 6);
                    q[s + 8] = (uint8_t)((sh & 0xF) | (mh & 0xF) << 4);
                }
                for (int jj = 0; jj < 4; jj++)
                    for (int l = 0; l < 8; l++) memcpy(x->qs + 32 * jj + 4 * l, &p->qs[jj][l][r][0], 4);
            }
        }
    }
    return 0;
}
