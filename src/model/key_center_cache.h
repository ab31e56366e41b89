// The key-centering calibration (key_center.h) kept on disk between processes, opt-in: with
// TACHYON_KV_CENTER_CACHE=DIR, the first process that calibrates a model writes its result to DIR and later
// ones read it back instead of running the model over the calibration text again (about a minute of CPU per
// start at the scalar level on a 2-core machine, which test suites pay once per quantized-KV start).
// The file name is a hash of everything the result depends on: the model's metadata and tensors (names,
// types, shapes, bytes), the calibration token ids, the ISA level, the thread count, the balance exponent
// and the environment switches the forward pass reads (TACHYON_PRECISE, TACHYON_REPACK, TACHYON_KV_QUANT),
// so a hit returns exactly the floats the calibration would compute. A missing, short or corrupted file is a
// miss (the calibration runs and rewrites it); a failed write is ignored (the cache is an optimisation).
#ifndef TACHYON_MODEL_KEY_CENTER_CACHE_H
#define TACHYON_MODEL_KEY_CENTER_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

// The cache file's path for this calibration in *out (cap bytes), or 0 when TACHYON_KV_CENTER_CACHE is unset
// or empty or the path does not fit; 1 when a path was written.
int kcc_path(const gguf_ctx *g, const int32_t *ids, int n_ids, int n_threads, double alpha, char *out,
             size_t cap);

// Reads n floats from path into buf: 0 on a valid file of exactly n floats, -1 otherwise (buf then
// undefined).
int kcc_load(const char *path, float *buf, size_t n);

// Writes n floats to path (a temporary file renamed into place, so readers never see a partial file).
// 0 on success, -1 on any failure (nothing is left behind).
int kcc_store(const char *path, const float *buf, size_t n);

#endif
