// Random quantized blocks written directly (no float values, no quantizer) for the full-size speed shapes of
// `tachyon synth`: random codes with small positive fp16 (or E8M0) scales, so every value is finite and of the
// order of 0.01-0.1, and tens of GB are written in about the time the disk takes.
#ifndef TACHYON_CLI_SYNTH_BLOCKS_H
#define TACHYON_CLI_SYNTH_BLOCKS_H

#include <stdint.h>

// Whether synth_random_blocks can write tensors of ttype type.
int synth_blocks_supported(uint32_t type);

// Fills n_rows rows of ne0 elements of ttype type at dst (n_rows * tt_row_size(type, ne0) bytes, borrowed) with
// random blocks from the stream seeded by seed. Returns 0, or TC_ERR_INVALID for a type it cannot write.
int synth_random_blocks(uint32_t type, void *dst, int64_t ne0, int64_t n_rows, uint64_t seed);

#endif
