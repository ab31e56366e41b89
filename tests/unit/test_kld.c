// llama-perplexity's KL-divergence base file (src/cli/kld.c): row encoding, the comparison statistics, and the
// reader's refusals of damaged files.
#include "cli/kld.h"
#include "test_util.h"

#include <unistd.h>

#define NV 37 // odd: the row is padded to an even count

static void logits_of(float *l, int n, float shift) {
    for (int i = 0; i < n; i++) l[i] = 3.0f * sinf(0.7f * (float)i + shift) + (i == 5 ? 4.0f : 0.0f);
}

// KL(p || q) of two logit rows, in double
static double exact_kl(const float *lp, const float *lq, int n) {
    double mp = -1e30, mq = -1e30, sp = 0, sq = 0, kl = 0;
    for (int i = 0; i < n; i++) mp = fmax(mp, lp[i]), mq = fmax(mq, lq[i]);
    for (int i = 0; i < n; i++) sp += exp(lp[i] - mp), sq += exp(lq[i] - mq);
    for (int i = 0; i < n; i++) {
        double a = lp[i] - mp - log(sp), b = lq[i] - mq - log(sq);
        kl += exp(a) * (a - b);
    }
    return kl;
}

static void test_rows(void) {
    float base[NV], cur[NV];
    uint16_t row[64];
    CHECK_EQ_INT(kld_row_len(NV), 2 * 19 + 4);
    CHECK_EQ_INT(kld_row_len(38), 38 + 4);
    logits_of(base, NV, 0);
    double nll = kld_encode_row(base, NV, 5, row);
    CHECK_EQ_INT(row[4 + NV], 0); // padding
    kld_acc a;
    CHECK(kld_acc_init(&a, 200, NULL) == 0);
    // the same logits: KL only from the 16-bit rounding, same top token, NLL equal
    kld_row_compare(base, NV, row, 5, &a);
    CHECK_MSG(fabsf(a.kld_values[0]) < 3e-4f, "self KL %g", a.kld_values[0]);
    CHECK_EQ_INT(a.n_same_top, 1);
    CHECK_NEAR(a.sum_nll, nll, 1e-6);
    CHECK_NEAR(a.sum_nll_base, nll, 1e-3);
    // other logits: KL as the exact formula, within the rounding of the stored log-probabilities
    logits_of(cur, NV, 0.3f);
    kld_row_compare(cur, NV, row, 5, &a);
    double want = exact_kl(base, cur, NV);
    CHECK_MSG(want > 0.05, "test rows too close: %g", want);
    CHECK_NEAR(a.kld_values[1], want, 1e-3 * want + 3e-4);
    // a flat row: scale 0, every value the floor
    float flat[NV];
    for (int i = 0; i < NV; i++) flat[i] = 1.0f;
    kld_encode_row(flat, NV, 0, row);
    float scale;
    memcpy(&scale, row, 4);
    CHECK(scale == 0.0f);
    kld_row_compare(flat, NV, row, 0, &a);
    CHECK_NEAR(a.kld_values[2], 0.0, 1e-6);
    CHECK_EQ_INT(a.count, 3);
    CHECK(kld_print_summary(stdout, &a) == -1); // under 100 rows: no statistics
    kld_acc_free(&a);
}

// Writes a file of n_chunk chunks of n_ctx tokens (rows of zeros) with extra bytes appended or cut.
static void write_file(const char *path, int n_ctx, int n_vocab, int n_chunk, long adjust, int32_t bad_token) {
    FILE *f = fopen(path, "wb");
    int32_t *t = calloc((size_t)n_ctx * n_chunk, sizeof *t);
    t[1] = bad_token;
    kld_header h = {n_ctx, n_vocab, n_chunk};
    CHECK(kld_write_header(f, &h, t, NULL) == 0);
    long n = (long)(KLD_ROWS(n_ctx) * n_chunk * kld_row_len(n_vocab) * 2) + adjust;
    for (long i = 0; i < n; i++) fputc(0, f);
    fclose(f);
    free(t);
}

static int read_file(const char *path, int n_vocab, tc_err *err) {
    FILE *f = fopen(path, "rb");
    kld_header h;
    int32_t *t = NULL;
    int rc = kld_read_header(f, path, n_vocab, 1024, &h, &t, err);
    if (!rc) CHECK(t != NULL && h.n_ctx == 16 && h.n_chunk == 3);
    free(t);
    fclose(f);
    return rc;
}

static void test_reader(void) {
    char path[] = "/tmp/test_kld_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    tc_err err = {0};
    write_file(path, 16, NV, 3, 0, 7);
    CHECK(read_file(path, NV, &err) == 0);
    CHECK(read_file(path, NV + 1, &err) == TC_ERR_INVALID && strstr(err.msg, "vocabulary"));
    write_file(path, 16, NV, 3, -1, 7);
    CHECK(read_file(path, NV, &err) == TC_ERR_FORMAT && strstr(err.msg, "truncated"));
    write_file(path, 16, NV, 3, 2, 7);
    CHECK(read_file(path, NV, &err) == TC_ERR_FORMAT);
    write_file(path, 16, NV, 3, 0, NV);
    CHECK(read_file(path, NV, &err) == TC_ERR_FORMAT && strstr(err.msg, "outside the vocabulary"));
    write_file(path, 16, NV, 3, 0, -1);
    CHECK(read_file(path, NV, &err) == TC_ERR_FORMAT);
    // a header that promises more than 2^31 chunks' worth of bytes is refused before any allocation
    FILE *f = fopen(path, "wb");
    int32_t big[3] = {16, NV, 0x7fffffff};
    fwrite("_logits_", 1, 8, f), fwrite(big, 4, 3, f), fwrite(big, 4, 3, f);
    fclose(f);
    CHECK(read_file(path, NV, &err) == TC_ERR_FORMAT && strstr(err.msg, "truncated"));
    write_file(path, 2, NV, 3, 0, 7); // a context without a scored row
    CHECK(read_file(path, NV, &err) == TC_ERR_INVALID);
    f = fopen(path, "wb");
    fputs("TCPPL001", f);
    fclose(f);
    CHECK(read_file(path, NV, &err) == TC_ERR_FORMAT && strstr(err.msg, "_logits_"));
    remove(path);
}

int main(void) {
    test_rows();
    test_reader();
    TEST_MAIN_END();
}
