// Load-time weight repacking for the CPU matmul: Q4_K and Q6_K rows interleaved 8 at a time, Q8_0, Q5_0, Q4_0,
// Q4_1 and MXFP4 rows 16 at a time (see repack.c for the layouts and why). The repacked copy is an optional companion of the original weights: cpu_matmul uses it
// when cpu_matmul_args.w_packed is set and the ISA level has a kernel for it, and the original otherwise
// (scalar level, TACHYON_PRECISE, other backends).
#ifndef TACHYON_CPU_REPACK_H
#define TACHYON_CPU_REPACK_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/ttype.h"

#define CPU_REPACK_ROWS 8

// One super-block (256 columns) of 8 consecutive Q4_K rows.
typedef struct cpu_q4k_r8 {
    tt_f16 d[CPU_REPACK_ROWS], dmin[CPU_REPACK_ROWS];
    uint8_t sc[8][CPU_REPACK_ROWS];    // (sub-block, row), 6 bits
    uint8_t mn[4][CPU_REPACK_ROWS][2]; // (sub-block pair p, row, k): the min of sub-block 2p + k, 6 bits
    uint8_t qs[4][8][CPU_REPACK_ROWS][4];                    // (sub-block pair, 4-byte step, row, byte)
} cpu_q4k_r8;
_Static_assert(sizeof(cpu_q4k_r8) == 1184, "cpu_q4k_r8 size");

// One super-block of 8 consecutive Q6_K rows (same size as the 8 blocks: 1680 bytes).
typedef struct cpu_q6k_r8 {
    tt_f16 d[CPU_REPACK_ROWS];
    int8_t scp[8][CPU_REPACK_ROWS][2];          // (scale pair t, row): scales 2t, 2t + 1
    uint8_t qla[2][8][CPU_REPACK_ROWS][4];       // (half n, step c, row): ql[64n + 4c ..]
    uint8_t qlb[2][8][CPU_REPACK_ROWS][4];       // ql[64n + 32 + 4c ..]
    uint8_t qh[2][8][CPU_REPACK_ROWS][4];        // qh[32n + 4c ..]
} cpu_q6k_r8;
_Static_assert(sizeof(cpu_q6k_r8) == 1680, "cpu_q6k_r8 size");

// One 32-column block of 16 consecutive Q8_0 rows (the same bytes as the 16 blocks, reordered: 544 bytes); Q5_0
// rows are stored in it too, as q - 16.
#define CPU_REPACK_Q8_ROWS 16
#define CPU_REPACK_Q8_MAXB 1024 // at most this many blocks per row (k <= 32768): the kernels keep per-block
                                // activation sums on the stack
typedef struct cpu_q8_0_r16 {
    tt_f16 d[CPU_REPACK_Q8_ROWS];              // the 16 rows' scales, contiguous (one vcvtph2ps)
    int8_t qs[8][CPU_REPACK_Q8_ROWS][4];       // (4-byte step c, row): qs[4c .. 4c + 3] of the row's block
} cpu_q8_0_r16;
_Static_assert(sizeof(cpu_q8_0_r16) == 544, "cpu_q8_0_r16 size");

// One 32-column block of 16 consecutive Q4_0 or Q4_1 rows: the same bytes as the 16 blocks, reordered (288 / 320
// bytes). qs[c][r] are bytes qs[4c .. 4c + 3] of row r's block: low nibbles elements 4c.., high nibbles 16 + 4c..
typedef struct cpu_q4_0_r16 {
    tt_f16 d[CPU_REPACK_Q8_ROWS];
    uint8_t qs[4][CPU_REPACK_Q8_ROWS][4];
} cpu_q4_0_r16;
_Static_assert(sizeof(cpu_q4_0_r16) == 288, "cpu_q4_0_r16 size");
typedef struct cpu_q4_1_r16 {
    tt_f16 d[CPU_REPACK_Q8_ROWS], m[CPU_REPACK_Q8_ROWS];
    uint8_t qs[4][CPU_REPACK_Q8_ROWS][4];
} cpu_q4_1_r16;
_Static_assert(sizeof(cpu_q4_1_r16) == 320, "cpu_q4_1_r16 size");

// One 32-column block of 16 consecutive MXFP4 rows: the 16 E8M0 scale bytes, then the nibble bytes as Q4_0's
// (the same 272 bytes as the 16 blocks, reordered; qs[c][r] are bytes qs[4c .. 4c + 3] of row r's block).
typedef struct cpu_mxfp4_r16 {
    uint8_t e[CPU_REPACK_Q8_ROWS];
    uint8_t qs[4][CPU_REPACK_Q8_ROWS][4];
} cpu_mxfp4_r16;
_Static_assert(sizeof(cpu_mxfp4_r16) == 272, "cpu_mxfp4_r16 size");

// Bytes of the repacked form of a (d, k) weight of type w_type, or 0 when there is none (type without a
// repacked layout, d not a multiple of the group's rows, k not a multiple of the block, 32-blocks k > 32768).
size_t cpu_repack_size(uint32_t w_type, int64_t d, int64_t k);
// w (d, k) row-major -> out (cpu_repack_size bytes, 32-byte aligned for speed). 0, or -1 when unsupported.
int cpu_repack(uint32_t w_type, const void *w, int64_t d, int64_t k, void *out);
// The inverse, bit-exact (the layout's reference, for tests). 0, or -1 when unsupported.
int cpu_repack_unpack(uint32_t w_type, const void *packed, int64_t d, int64_t k, void *w);

#endif
