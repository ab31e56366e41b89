// libFuzzer target: arbitrary bytes as a llama-perplexity KL-divergence base file (src/cli/kld.c), read as
// `tachyon perplexity --kl-divergence` reads it: the header and tokens (against the vocabulary the header
// claims, so that the size checks are what stops a bad file), then every row compared with a fixed row of logits.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/kld.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FILE *f = tmpfile();
    if (!f) return 0;
    if (size && fwrite(data, 1, size, f) != size) {
        fclose(f);
        return 0;
    }
    rewind(f);
    int32_t n_vocab = 1;
    if (size >= 16) memcpy(&n_vocab, data + 12, 4);
    if (n_vocab < 1) n_vocab = 1;
    kld_header h;
    int32_t *tokens = NULL;
    tc_err e = {0};
    int rc = kld_read_header(f, "fuzz", n_vocab, 1 << 16, &h, &tokens, &e);
    if (rc) {
        if (!e.msg[0] || tokens) __builtin_trap(); // contract: an error with a message, nothing allocated
        fclose(f);
        return 0;
    }
    size_t len = kld_row_len(h.n_vocab), rows = (size_t)h.n_chunk * KLD_ROWS(h.n_ctx);
    uint16_t *row = malloc(len * sizeof *row);
    float *logits = malloc((size_t)h.n_vocab * sizeof *logits);
    kld_acc a;
    if (row && logits && kld_acc_init(&a, rows, NULL) == 0) {
        for (int32_t i = 0; i < h.n_vocab; i++) logits[i] = (float)(i % 7);
        for (size_t r = 0; r < rows; r++) {
            if (fread(row, sizeof *row, len, f) != len) __builtin_trap(); // the size check promised the rows
            kld_row_compare(logits, h.n_vocab, row, tokens[(r % (size_t)h.n_chunk) * (size_t)h.n_ctx], &a);
        }
        FILE *null = fopen("/dev/null", "w");
        if (null) kld_print_summary(null, &a), fclose(null);
        kld_acc_free(&a);
    }
    free(row), free(logits), free(tokens);
    fclose(f);
    return 0;
}
