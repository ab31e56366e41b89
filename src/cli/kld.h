// llama-perplexity's KL-divergence base file (`--kl-divergence-base FILE`), read and written by `tachyon
// perplexity` so that the two engines can be compared on any model and text, and its statistics (the
// "Mean KLD:", "Same top p:", … summary lines, computed as llama-perplexity computes them).
//
// File, little-endian (the layout llama-perplexity writes; tools/perplexity/perplexity.cpp of llama.cpp):
//   "_logits_" (8 bytes), uint32 n_ctx, int32 n_vocab, int32 n_chunk
//   int32 tokens[n_chunk * n_ctx]   the text's tokens (BOS first when the model adds one); chunk c is
//                                   tokens[c*n_ctx .. (c+1)*n_ctx), evaluated from position 0 with its first
//                                   token replaced by BOS when the model adds one
//   for each chunk, KLD_ROWS(n_ctx) rows (positions n_ctx/2 .. n_ctx-2, each predicting the next token),
//   each kld_row_len(n_vocab) uint16:
//     float32 scale, float32 min_log_prob (the first 4 uint16), then n_vocab uint16 q (padded to an even
//     count): log p(i) = scale*q[i] + min_log_prob, log-probabilities below max - 16 clamped to it
// A row is 2 bytes a vocabulary entry: the whole distribution, not a top-k summary.
#ifndef TACHYON_CLI_KLD_H
#define TACHYON_CLI_KLD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"

#define KLD_MAGIC "_logits_"
#define KLD_HEADER_BYTES 20
#define KLD_ROWS(n_ctx) ((n_ctx) - 1 - (n_ctx) / 2) // scored rows per chunk

typedef struct kld_header {
    int32_t n_ctx, n_vocab, n_chunk;
} kld_header;

// uint16 values in one row: 2*((n_vocab+1)/2) + 4.
size_t kld_row_len(int n_vocab);

// Reads and checks the header and the tokens of the base file f (named path, for messages): the magic, the
// vocabulary against n_vocab_model, n_ctx against 3 .. max_ctx, every token id inside the vocabulary, and the
// file's length against what the header promises (so nothing is allocated for a size the file does not
// have). *tokens: owned, (n_chunk * n_ctx,), free with free(). f is left at the first row.
int kld_read_header(FILE *f, const char *path, int n_vocab_model, int max_ctx, kld_header *h, int32_t **tokens,
                    tc_err *err);
int kld_write_header(FILE *f, const kld_header *h, const int32_t *tokens, tc_err *err);

// Encodes one row of logits (n_vocab,) as the file stores it into row (kld_row_len(n_vocab),); returns the
// negative log-likelihood of tok.
double kld_encode_row(const float *logits, int n_vocab, int32_t tok, uint16_t *row);

// The running statistics of a comparison: sums as llama-perplexity keeps them, and every row's KL and Δp
// (owned arrays of cap values, for the percentiles).
typedef struct kld_acc {
    double sum_nll, sum_nll2, sum_nll_base, sum_nll_base2, sum_nll_nll_base;
    double sum_kld, sum_kld2, sum_p_diff, sum_p_diff2, sum_p_diff4;
    float max_p_diff;
    size_t n_same_top, count, cap;
    float *kld_values, *p_diff_values; // (cap,) in row order until kld_print_summary sorts them
} kld_acc;

int kld_acc_init(kld_acc *a, size_t n_rows, tc_err *err);
void kld_acc_free(kld_acc *a);

// Compares one row of this run's logits (n_vocab,) with the base row (kld_row_len(n_vocab),) for target tok:
// KL(base || this), whether the argmaxes agree, the NLL of both, Δp = p(tok) - p_base(tok). No-op past cap.
void kld_row_compare(const float *logits, int n_vocab, const uint16_t *row, int32_t tok, kld_acc *a);

// llama-perplexity's table: the header line, and one line per chunk with the running statistics.
void kld_print_chunk_header(FILE *out);
void kld_print_chunk(FILE *out, const kld_acc *a, int chunk);
// The summary (perplexity, KL divergence and token probability statistics), printed when at least 100 rows
// were compared, as llama-perplexity does; sorts the value arrays. 0 printed, -1 too few rows.
int kld_print_summary(FILE *out, kld_acc *a);

#endif
