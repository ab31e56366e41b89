// Tests for src/cuda/tcu_stage.h, the host-side staging of a ragged batch for the CUDA backend (flattened block
// tables, attention query tiles), compiled here by the host C compiler: it runs on every build, GPU or not.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/tcu_stage.h"
#include "test_util.h"

// A mixed step: seq 2 decodes at 40, seq 0 prefills 0..18 (a chunk longer than two tiles), seq 1 verifies
// three speculative positions 7..9, then seq 0 again at 30 (not adjacent to its run: a new tile and run).
static void test_mixed_batch(void) {
    int32_t t0[] = {10, 11, 12}, t1[] = {20, 21}, t2[] = {30, 31, 32, 33}; // block ids per sequence
    const int32_t *tables[3] = {t0, t1, t2};
    int32_t pos[32], seq[32];
    int n = 0;
    pos[n] = 40, seq[n++] = 2;
    for (int p = 0; p <= 18; p++) pos[n] = p, seq[n++] = 0;
    for (int p = 7; p <= 9; p++) pos[n] = p, seq[n++] = 1;
    pos[n] = 30, seq[n++] = 0;
    const int bs = 16;
    int stride = tcu_tables_stride(pos, n, bs);
    CHECK_EQ_INT(stride, 40 / 16 + 1);
    int32_t tab[3 * 3];
    tcu_stage_tables(tab, stride, tables, 3, pos, seq, n, bs);
    // seq 0 reads blocks 0..1 (position 30), seq 1 block 0, seq 2 blocks 0..2
    const int32_t want[9] = {10, 11, -1, 20, -1, -1, 30, 31, 32};
    for (int i = 0; i < 9; i++) CHECK_MSG(tab[i] == want[i], "entry %d: %d, want %d", i, tab[i], want[i]);
    int32_t tiles[32];
    int nt = tcu_attn_tiles(tiles, pos, seq, n);
    // [40] [0..7] [8..15] [16..18] [7..9] [30]
    const int first[] = {0, 1, 9, 17, 20, 23}, rows[] = {1, 8, 8, 3, 3, 1};
    CHECK_EQ_INT(nt, 6);
    int covered = 0;
    for (int i = 0; i < nt && i < 6; i++) {
        CHECK_EQ_INT(tiles[i] & ((1 << TCU_TILE_SHIFT) - 1), first[i]);
        CHECK_EQ_INT(tiles[i] >> TCU_TILE_SHIFT, rows[i]);
        covered += tiles[i] >> TCU_TILE_SHIFT;
    }
    CHECK_EQ_INT(covered, n);
}

// Random batches: every row in exactly one tile, a tile's rows one sequence at consecutive positions; every
// table entry a token's attention reads staged, equal to its sequence's.
static void test_random_batches(void) {
    uint64_t r = 12345;
    int bad = 0;
    for (int rep = 0; rep < 500; rep++) {
        enum { NS = 5, NB = 64, MAXN = 96 };
        int32_t blocks[NS][NB], pos[MAXN], seq[MAXN], tiles[MAXN], tab[NS * NB];
        const int32_t *tables[NS];
        for (int s = 0; s < NS; s++) {
            for (int k = 0; k < NB; k++) blocks[s][k] = s * 1000 + k;
            tables[s] = blocks[s];
        }
        int n = 0;
        while (n < MAXN - 20) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            int s = (int)(r >> 33) % NS, len = 1 + (int)(r >> 40) % 20, p0 = (int)(r >> 20) % 400;
            for (int i = 0; i < len; i++) pos[n] = p0 + i, seq[n++] = s;
            if ((r >> 60) == 0) break;
        }
        const int bs = 16;
        int stride = tcu_tables_stride(pos, n, bs), nt = tcu_attn_tiles(tiles, pos, seq, n), next = 0;
        tcu_stage_tables(tab, stride, tables, NS, pos, seq, n, bs);
        for (int i = 0; i < nt; i++) {
            int f = tiles[i] & ((1 << TCU_TILE_SHIFT) - 1), k = tiles[i] >> TCU_TILE_SHIFT;
            bad += f != next || k < 1 || k > TCU_ATT_TQ;
            for (int j = 1; j < k; j++) bad += seq[f + j] != seq[f] || pos[f + j] != pos[f + j - 1] + 1;
            next = f + k;
        }
        bad += next != n;
        for (int t = 0; t < n; t++)
            for (int k = 0; k <= pos[t] / bs; k++) bad += tab[seq[t] * stride + k] != blocks[seq[t]][k];
    }
    CHECK_MSG(bad == 0, "%d staging errors", bad);
}

int main(void) {
    test_mixed_batch();
    test_random_batches();
    TEST_MAIN_END();
}
