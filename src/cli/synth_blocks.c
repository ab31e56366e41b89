// Random quantized blocks for the full-size synth shapes: random bytes for the codes, then every scale field set
// to a small positive constant (see synth_blocks.h).
#include "cli/synth_blocks.h"

#include <string.h>

#include "common/err.h"
#include "tensor/ttype.h"

// fp16 bits of powers of two: 2^e is (e + 15) << 10
#define F16_2M14 0x0400u // 2^-14: Q4_K/Q6_K super-block scale (times 6-bit or 8-bit sub-scales)
#define F16_2M10 0x1400u // 2^-10: Q4_0, Q5_0, Q8_0 block scale
#define E8M0_2M7 120u    // 2^(120-127): MXFP4 block scale (codes up to 6)

static uint64_t sb_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void sb_random_bytes(uint8_t *dst, size_t n, uint64_t seed) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t r = sb_next(&seed);
        memcpy(dst + i, &r, 8);
    }
    if (i < n) {
        uint64_t r = sb_next(&seed);
        memcpy(dst + i, &r, n - i);
    }
}

int synth_blocks_supported(uint32_t type) {
    switch (type) {
    case TT_Q4_0:
    case TT_Q5_0:
    case TT_Q8_0:
    case TT_Q4_K:
    case TT_Q6_K:
    case TT_MXFP4: return 1;
    default: return 0;
    }
}

// Sets the scale fields of n_blocks blocks of type at p.
static void sb_set_scales(uint32_t type, uint8_t *p, int64_t n_blocks) {
    const tt_f16 d10 = F16_2M10, d14 = F16_2M14;
    for (int64_t b = 0; b < n_blocks; b++) {
        switch (type) {
        case TT_Q4_0: ((tt_block_q4_0 *)p)[b].d = d10; break;
        case TT_Q5_0: ((tt_block_q5_0 *)p)[b].d = d10; break;
        case TT_Q8_0: ((tt_block_q8_0 *)p)[b].d = d10 - (2u << 10); break; // 2^-12: codes up to 127
        case TT_Q4_K: ((tt_block_q4_K *)p)[b].d = d14, ((tt_block_q4_K *)p)[b].dmin = d14; break;
        case TT_Q6_K: ((tt_block_q6_K *)p)[b].d = d14; break;
        case TT_MXFP4: ((tt_block_mxfp4 *)p)[b].e = E8M0_2M7; break;
        default: break;
        }
    }
}

int synth_random_blocks(uint32_t type, void *dst, int64_t ne0, int64_t n_rows, uint64_t seed) {
    if (!synth_blocks_supported(type)) return TC_ERR_INVALID;
    const tt_traits *tr = tt_get(type);
    size_t row_bytes = tt_row_size(type, ne0);
    int64_t blocks = ne0 / tr->block_size;
    uint8_t *p = dst;
    for (int64_t r = 0; r < n_rows; r++, p += row_bytes) {
        sb_random_bytes(p, row_bytes, seed ^ (uint64_t)(r + 1) * 0x2545f4914f6cdd1dull);
        sb_set_scales(type, p, blocks);
    }
    return 0;
}
