// Load-time placement of the weights for the CPU kernels (model_repack_weights, model_internal.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/hugepage.h"
#include "cpu/cpu.h"
#include "cpu/repack.h"
#include "model/model_internal.h"
#include "tensor/ttype.h"

// Decode streams every weight once per token, and
// from the file mapping that is in 4 KiB pages; so the matrices are moved into one arena of huge pages
// (common/hugepage.h), each in its repacked form (cpu/repack.h: types with an interleaved layout and a kernel at
// the current level, not at the scalar level nor under TACHYON_PRECISE) or else copied unchanged (then data
// points at the copy). One arena, not one allocation per matrix: each would round up to a whole huge page.
// from_file: data lies in the read-only file mapping, whose pages are then handed back to the kernel
// (MADV_DONTNEED refaults them from the file if another path reads them), so the resident size does not
// double. Never for model_load_memory: there it would discard the caller's bytes, and only repacked forms are
// made (nothing is copied). The experts of a 3-D tensor are moved one after the other (each is a whole number
// of row groups), so model_weight_expert_packed finds expert e's at e times one expert's size; the file's pages
// are handed back tensor by tensor, so the resident size never holds both forms of more than one tensor. Costs
// one pass over the weights at load. TACHYON_REPACK=0 leaves the layout (the copies stay), TACHYON_HUGE_PAGES=0
// the mapping and small pages (no copies; the repacked forms stay): switches to compare.

typedef struct placer {
    model *m;
    int from_file, repack, huge; // huge: copies and huge pages
    const char *expert_mode;     // TACHYON_REPACK_EXPERTS
    uint64_t avail, total;       // /proc/meminfo at the start
    size_t used;                 // bytes of the arena given out so far (planning: needed)
    uint8_t *arena;              // NULL while planning
} placer;

// Matrices in w: its experts, or 1.
static int64_t n_mats(const model_weight *w) { return w->n_expert > 1 ? w->n_expert : 1; }

static size_t weight_size(const model_weight *w) {
    return tt_row_size(w->type, w->cols) * (size_t)(w->rows * n_mats(w));
}

// Bytes of w's repacked form (0: none at this level or with the switch off).
static size_t packed_size(const placer *pl, const model_weight *w) {
    if (!pl->repack || !cpu_repack_wanted(w->type)) return 0;
    return cpu_repack_size(w->type, w->rows, w->cols) * (size_t)n_mats(w);
}

// Hands the file mapping's pages of w's bytes back to the kernel once a moved form replaces them.
static void drop_file_pages(const model_weight *w) {
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), b = (uintptr_t)w->data;
    const uintptr_t lo = (b + pg - 1) & ~(pg - 1), hi = (b + weight_size(w)) & ~(pg - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED); // advisory: failure only costs memory
}

// MemAvailable and MemTotal of /proc/meminfo in bytes; 0 when unknown.
static void mem_info(uint64_t *avail, uint64_t *total) {
    *avail = *total = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return;
    char line[128];
    unsigned long long kb;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) *avail = (uint64_t)kb * 1024;
        if (sscanf(line, "MemTotal: %llu kB", &kb) == 1) *total = (uint64_t)kb * 1024;
    }
    fclose(f);
}

// Moves w (planning: counts its bytes). Expert tensors are most of a mixture-of-experts model's bytes, and
// their moved form is anonymous memory, which the kernel cannot drop under pressure as it drops the file's
// pages. TACHYON_REPACK_EXPERTS=1 moves all, =0 none; by default (auto) each one only while a quarter of
// physical memory stays available after it, so a model near the machine's RAM keeps its remaining experts in
// the mapping (the row-wise kernels read them) instead of inviting the OOM killer. The planning pass and the
// moving pass decide alike (the same order, the same figures).
static void place_one(placer *pl, model_weight *w, int from_file, int expert) {
    if (!w->data || w->packed || w->copy) return;
    const size_t packed = packed_size(pl, w), n = packed ? packed : from_file && pl->huge ? weight_size(w) : 0;
    if (!n) return;
    if (expert) {
        const char *mode = pl->expert_mode;
        if (mode && !strcmp(mode, "0")) return;
        if (!(mode && !strcmp(mode, "1")) && pl->total && pl->avail < pl->used + n + pl->total / 4) return;
    }
    uint8_t *p = pl->arena ? pl->arena + pl->used : NULL;
    pl->used += (n + 63) & ~(size_t)63;
    if (!p) return;
    if (packed) {
        cpu_repack(w->type, w->data, w->rows * n_mats(w), w->cols, p);
        w->packed = p;
        pl->m->placed_repacked += n;
    } else {
        memcpy(p, w->data, n);
        pl->m->placed_copied += n;
    }
    if (from_file) drop_file_pages(w);
    if (!packed) w->data = w->copy = p;
}

// Every matrix the CPU kernels read, in the order memory is given out.
static void place_all(placer *pl) {
    model *m = pl->m;
    static const arch_role mm[] = {ROLE_ATTN_Q, ROLE_ATTN_K, ROLE_ATTN_V, ROLE_ATTN_OUT, ROLE_FFN_GATE,
                                   ROLE_FFN_UP, ROLE_FFN_DOWN, ROLE_FFN_GATE_SHEXP, ROLE_FFN_UP_SHEXP,
                                   ROLE_FFN_DOWN_SHEXP, ROLE_SSM_QKV, ROLE_SSM_GATE, ROLE_SSM_OUT, ROLE_SSM_IN};
    // experts: gate and up of every layer first (Q4_K in a Q4_K_M file: the repacked GEMM gains most there),
    // then the down projections
    static const arch_role exps[][2] = {{ROLE_FFN_GATE_EXPS, ROLE_FFN_UP_EXPS}, {ROLE_FFN_DOWN_EXPS, ROLE_COUNT}};
    for (int l = 0; l < m->hp.n_layers; l++)
        for (size_t r = 0; r < sizeof mm / sizeof mm[0]; r++)
            place_one(pl, &m->layers[(size_t)l * ROLE_COUNT + mm[r]], pl->from_file, 0);
    for (int pass = 0; pass < 2; pass++)
        for (int l = 0; l < m->hp.n_layers; l++)
            for (int r = 0; r < 2 && exps[pass][r] != ROLE_COUNT; r++)
                place_one(pl, &m->layers[(size_t)l * ROLE_COUNT + exps[pass][r]], pl->from_file, 1);
    // tied embeddings: the output gets its own repacked form and no copy (tok_embd keeps the file's bytes:
    // lookups read its rows)
    place_one(pl, &m->output, m->hp.tied_embeddings ? 0 : pl->from_file, 0);
}

int model_repack_weights(model *m, int from_file, tc_err *err) {
    const char *e = getenv("TACHYON_REPACK");
    placer pl = {.m = m, .from_file = from_file, .repack = !(e && !strcmp(e, "0")), .huge = tc_huge_pages_on(),
                 .expert_mode = getenv("TACHYON_REPACK_EXPERTS")};
    mem_info(&pl.avail, &pl.total);
    place_all(&pl); // planning: the arena's size
    if (!pl.used) return 0;
    pl.arena = tc_huge_alloc(pl.used);
    if (!pl.arena) return tc_err_set(err, TC_ERR_NOMEM, "out of memory placing the weights (%zu MiB)", pl.used >> 20);
    m->arena = pl.arena;
    // Fault the whole arena in first, one write per huge page (place_all writes every byte after): while memory is
    // still free the kernel grants huge pages throughout. Faulted in as the file is read, with its page cache
    // filling memory, 3.5 of qwen3moe-30b-a3b's 17.3 GiB came in small pages on a 24 GiB machine.
    if (pl.huge)
        for (size_t o = 0; o < pl.used; o += TC_HUGE_PAGE) ((volatile uint8_t *)pl.arena)[o] = 0;
    pl.used = 0;
    place_all(&pl);
    return 0;
}

void model_placement(const model *m, uint64_t *repacked, uint64_t *copied) {
    *repacked = m->placed_repacked;
    *copied = m->placed_copied;
}
