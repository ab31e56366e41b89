// Host-side staging of a ragged batch for the device, written once for both compilers: tcu_forward.cu stages
// every batch with it, and tests/unit/test_cuda_stage.c (host C compiler) checks it on machines without a GPU.
// The device reads the block tables flattened to (n_seqs, stride) and the attention's query tiles.
#ifndef TACHYON_CUDA_TCU_STAGE_H
#define TACHYON_CUDA_TCU_STAGE_H

#include <stdint.h>
#include <string.h>

#define TCU_ATT_TQ 8          // query rows per attention tile (warps per thread block)
#define TCU_TILE_SHIFT 17     // a tile is (first row | rows << TCU_TILE_SHIFT); rows < 2^16 < 2^17

// Entries per flattened table row: enough for the highest position any token of the batch reads.
static inline int tcu_tables_stride(const int32_t *pos, int n, int block_size) {
    int stride = 1;
    for (int t = 0; t < n; t++)
        if (pos[t] / block_size + 1 > stride) stride = pos[t] / block_size + 1;
    return stride;
}

// tab (n_seqs, stride): row s holds entries 0 .. (highest position of s's tokens) / block_size of tables[s];
// the rest -1 (never read). A sequence's tokens are usually adjacent: each run copies only what it adds.
static inline void tcu_stage_tables(int32_t *tab, int stride, const int32_t *const *tables, int n_seqs,
                                    const int32_t *pos, const int32_t *seq, int n, int block_size) {
    for (int s = 0; s < n_seqs; s++) memset(tab + (size_t)s * stride, 0xff, (size_t)stride * sizeof(int32_t));
    int last = -1, copied = 0;
    for (int t = 0; t < n; t++) {
        int s = seq[t], need = pos[t] / block_size + 1;
        if (s != last) last = s, copied = 0;
        if (need > copied) {
            memcpy(tab + (size_t)s * stride + copied, tables[s] + copied, (size_t)(need - copied) * sizeof(int32_t));
            copied = need;
        }
    }
}

// Cuts rows 0..n into attention tiles: runs of up to TCU_ATT_TQ consecutive positions of one sequence. Returns
// how many (<= n).
static inline int tcu_attn_tiles(int32_t *tiles, const int32_t *pos, const int32_t *seq, int n) {
    int n_tiles = 0;
    for (int t = 0; t < n;) {
        int nt = 1;
        while (nt < TCU_ATT_TQ && t + nt < n && seq[t + nt] == seq[t] && pos[t + nt] == pos[t + nt - 1] + 1) nt++;
        tiles[n_tiles++] = t | nt << TCU_TILE_SHIFT;
        t += nt;
    }
    return n_tiles;
}

#endif
