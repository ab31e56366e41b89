// Workloads that show when speculative decoding pays and when it must not (bench-serve --dataset):
//   code-edit       code in the prompt, the answer copies it with one identifier renamed (prompt lookup pays);
//   code-edit-pred  the same, with the expected answer sent as OpenAI `prediction` (Predicted Outputs);
//   quote           a generated document and a question whose answer quotes one of its paragraphs;
//   creative        free text from a short instruction: nothing to copy, speculation must not slow it down.
// All text is generated from the request's random stream: no downloads, reproducible from the seed.
#ifndef TACHYON_LOADGEN_SPEC_WL_H
#define TACHYON_LOADGEN_SPEC_WL_H

#include <stdint.h>

#include "loadgen/lg_rng.h"

typedef enum { LG_SPEC_CODE_EDIT, LG_SPEC_CODE_EDIT_PRED, LG_SPEC_QUOTE, LG_SPEC_CREATIVE } lg_spec_wl;

// The user prompt of about `tokens` tokens (owned, free()) and, for code-edit-pred, the predicted answer
// (owned; NULL otherwise). Returns 0, or -1 when out of memory (nothing to free).
int lg_spec_wl_build(lg_spec_wl kind, lg_rng *r, int64_t tokens, char **prompt, char **prediction);

#endif
