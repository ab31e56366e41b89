// Tokenizer throughput: tokens/s for 1 MB of English-like prose and 100 KB of mixed text (multilingual,
// emoji, code, numbers) per tokenizer family. Not a test; run from the repository root:
//   build/bench_tokenizer [MODEL.gguf …]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static const char *const words[] = {
    "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not",
    "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they", "you", "were",
    "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will", "would",
    "who", "so", "no", "time", "people", "language", "model", "inference", "latency", "throughput", "server",
    "tokenization", "important", "government", "development", "however", "because", "particularly", "sky",
    "blue", "scattering", "Rayleigh", "sunlight", "atmosphere", "wavelength", "shorter", "molecules", "John",
    "London", "December", "it's", "don't", "they've", "we'll", "I'm", "2024", "42", "3.14", "100,000",
};
static const char *const mixed[] = {
    "中文文本测试：你好，世界！", "日本語のテキストです。", "한국어 텍스트입니다.", "Русский текст, ", "مرحبا بالعالم ",
    "नमस्ते दुनिया ", "🍕🎉👨\xe2\x80\x8d👩\xe2\x80\x8d👧 ", "def f(x):\n    return x ** 2\n", "if (a < b) { c[i] = 0; }\n",
    "1234567890 ", "3.14159 ", "   \t\n", "Déjà vu, naïve café. ", "The quick brown fox jumps over the lazy dog. ",
};

static char *gen_prose(size_t n) {
    char *b = malloc(n + 64);
    size_t w = 0;
    int cap = 1;
    while (w < n) {
        const char *x = words[rnd(sizeof words / sizeof words[0])];
        size_t l = strlen(x);
        if (cap && x[0] >= 'a' && x[0] <= 'z') b[w++] = (char)(x[0] - 32), x++, l--;
        memcpy(b + w, x, l), w += l;
        cap = 0;
        uint32_t r = rnd(100);
        if (r < 6) b[w++] = ',';
        else if (r < 11) b[w++] = '.', cap = 1;
        if (r == 11) b[w++] = '\n', cap = 1;
        else b[w++] = ' ';
    }
    b[n] = 0;
    return b;
}

static char *gen_mixed(size_t n) {
    char *b = malloc(n + 128);
    size_t w = 0;
    while (w < n) {
        const char *x = mixed[rnd(sizeof mixed / sizeof mixed[0])];
        size_t l = strlen(x);
        memcpy(b + w, x, l), w += l;
    }
    while (w > n && (b[n] & 0xC0) == 0x80) n--; // cut at a character boundary
    b[n] = 0;
    return b;
}

static void bench(const char *label, const tok_vocab *v, const char *text, size_t len, const char *what) {
    int32_t *ids;
    int n = 0, reps = 0;
    tc_err err = {0};
    double t0 = cpu_s(), dt;
    do {
        if (tok_encode(v, text, len, 0, &ids, &n, &err)) {
            fprintf(stderr, "%s: %s\n", label, err.msg);
            return;
        }
        free(ids);
        reps++;
        dt = cpu_s() - t0;
    } while (dt < 1.0);
    double enc = dt / reps;
    if (tok_encode(v, text, len, 0, &ids, &n, &err)) return;
    char *s;
    size_t sl;
    reps = 0;
    t0 = cpu_s();
    do {
        tok_decode(v, ids, n, 0, &s, &sl, &err);
        free(s);
        reps++;
        dt = cpu_s() - t0;
    } while (dt < 0.3);
    double dec = dt / reps;
    free(ids);
    printf("| %-34s | %-7s | %8zu | %8d | %8.1f | %10.0f | %8.2f | %9.1f |\n", label, what, len, n, enc * 1e3, n / enc,
           len / enc / 1e6, n / dec / 1e6);
}

static tok_vocab *load(const char *path) {
    gguf_ctx *g;
    tok_vocab *v = NULL;
    tc_err err = {0};
    if (gguf_open(path, &g, &err)) {
        fprintf(stderr, "skip %s: %s\n", path, err.msg);
        return NULL;
    }
    if (tok_load(g, &v, &err)) fprintf(stderr, "skip %s: %s\n", path, err.msg);
    gguf_close(g);
    return v;
}

int main(int argc, char **argv) {
    const char *defaults[] = {"../shared/testdata/vocab/ggml-vocab-gpt-2.gguf", "models/SmolLM2-135M-Instruct.Q4_1.gguf",
                              "../shared/testdata/vocab/ggml-vocab-deepseek-coder.gguf",
                              "../shared/testdata/vocab/ggml-vocab-llama-spm.gguf"};
    const char **paths = argc > 1 ? (const char **)argv + 1 : defaults;
    int n_paths = argc > 1 ? argc - 1 : (int)(sizeof defaults / sizeof defaults[0]);
    char *prose = gen_prose(1 << 20), *mix = gen_mixed(100 << 10);
    printf("CPU time per call (process CPU clock), 1 thread\n");
    printf("| %-34s | %-7s | %8s | %8s | %8s | %10s | %8s | %9s |\n", "vocab (pre-tokenizer)", "text", "bytes", "tokens",
           "enc ms", "enc tok/s", "enc MB/s", "dec Mtok/s");
    printf("|------------------------------------|---------|----------|----------|----------|------------|----------|-----------|\n");
    for (int i = 0; i < n_paths; i++) {
        tok_vocab *v = load(paths[i]);
        if (!v) continue;
        const char *base = strrchr(paths[i], '/') ? strrchr(paths[i], '/') + 1 : paths[i];
        char label[128];
        snprintf(label, sizeof label, "%.24s (%s)", base, v->kind == TOK_KIND_SPM ? "spm" : v->pre_name);
        bench(label, v, prose, strlen(prose), "prose");
        bench(label, v, mix, strlen(mix), "mixed");
        if (i == 0 && argc <= 1 && v->kind == TOK_KIND_BPE) {
            // no llama3 vocab in the test data: the gpt-2 vocab under the llama-bpe regex measures its cost
            tok_pretok *p;
            int im;
            tc_err err = {0};
            if (tok_pretok_new("llama-bpe", &p, &im, &err) == 0) {
                tok_pretok_free(v->pre);
                v->pre = p;
                snprintf(label, sizeof label, "%.24s (llama-bpe rx)", base);
                bench(label, v, prose, strlen(prose), "prose");
                bench(label, v, mix, strlen(mix), "mixed");
            }
        }
        tok_free(v);
    }
    free(prose);
    free(mix);
    return 0;
}
