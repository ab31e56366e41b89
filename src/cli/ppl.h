// Scoring rows of logits for `tachyon perplexity`: the log-probability of the next token, a compact summary
// of each row's distribution (its top-k log-probabilities and the mass of the rest) that can be saved and
// compared later, and the KL divergence / top-1 agreement of a row against such a saved base row.
//
// Saved-logits file (--save-logits), little-endian:
//   header  "TCPPL001" (8 bytes), then uint32 n_vocab, n_ctx, k, n_rows, n_chunks, reserved (0)
//   rows    n_rows records, in scoring order, each:
//             int32 target token id, float32 log p(target),
//             float32 log of the probability mass outside the top k (log(1 - sum of top-k p), >= -1e30),
//             k x (int32 token id, float32 log p), most probable first
// A full-vocabulary row would be 1 MB per row for Gemma 3's 262k vocabulary; the top-k summary (k = 64:
// 524 bytes a row) keeps a 50k-token run at a few MB. KL against it is computed over the base's top k plus
// one "rest" bucket, which is a lower bound of the full KL (merging outcomes never increases KL) and equal
// to it up to the mass the base puts outside its top k — negligible for k = 64 on natural text.
#ifndef TACHYON_CLI_PPL_H
#define TACHYON_CLI_PPL_H

#include <stdint.h>
#include <stdio.h>

#include "common/err.h"

#define PPL_TOPK 64
#define PPL_MAGIC "TCPPL001"

typedef struct ppl_row {
    int32_t target;       // token this row predicts
    float logp_target;    // log p(target)
    float log_rest;       // log of the probability mass outside the top k
    int32_t top_id[PPL_TOPK];
    float top_logp[PPL_TOPK]; // descending
} ppl_row;

typedef struct ppl_header {
    uint32_t n_vocab, n_ctx, k, n_rows, n_chunks;
} ppl_header;

// Turns logits (n_vocab) into log-probabilities in place (float64 accumulation) and fills r's summary with
// the top k = PPL_TOPK entries for target.
void ppl_score_row(float *logits, int n_vocab, int32_t target, ppl_row *r);

// KL(base || cur) over base's top k plus the rest bucket; cur_logp is the full row of log-probabilities
// (n_vocab) from ppl_score_row. *top1_same: 1 when cur's argmax is base's argmax.
double ppl_row_kl(const ppl_row *base, const float *cur_logp, int n_vocab, int32_t cur_argmax, int *top1_same);

// File I/O. ppl_write_header writes the header with n_rows/n_chunks as given (rewrite at the end with the
// final counts); ppl_read_header validates the magic and sizes against the file's length.
int ppl_write_header(FILE *f, const ppl_header *h, tc_err *err);
int ppl_write_row(FILE *f, const ppl_row *r, tc_err *err);
int ppl_read_header(FILE *f, const char *path, ppl_header *h, tc_err *err);
// Reads one row written with k = h->k (k <= PPL_TOPK).
int ppl_read_row(FILE *f, const ppl_header *h, ppl_row *r, tc_err *err);

#endif
