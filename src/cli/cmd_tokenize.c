// `tachyon tokenize -m MODEL [--no-bos] [--special] TEXT` prints the token ids as a JSON array;
// `--file PATH` (or - for stdin) instead reads one JSON string per line and prints one array per line.
// `tachyon detokenize -m MODEL [--skip-special] IDS…` prints the text (ids as separate arguments or as a
// JSON array).
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

static int load_vocab(const char *path, tok_vocab **v) {
    tc_err err = {0};
    gguf_ctx *g = NULL;
    int rc = gguf_open(path, &g, &err);
    if (!rc) rc = tok_load(g, v, &err);
    gguf_close(g);
    if (rc) fprintf(stderr, "tachyon: %s: %s\n", path, err.msg);
    return rc;
}

static int print_ids(const tok_vocab *v, const char *text, size_t len, int flags) {
    int32_t *ids;
    int n;
    tc_err err = {0};
    if (tok_encode(v, text, len, flags, &ids, &n, &err)) {
        fprintf(stderr, "tachyon: tokenize: %s\n", err.msg);
        return 1;
    }
    putchar('[');
    for (int i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
    puts("]");
    free(ids);
    return 0;
}

static int tokenize_file(const tok_vocab *v, const char *path, int flags) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        perror(path);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = 0, lineno = 0;
    while (!rc && (n = getline(&line, &cap, f)) > 0) {
        lineno++;
        json_error_t je;
        json_t *j = json_loadb(line, (size_t)n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!j || !json_is_string(j)) {
            fprintf(stderr, "tachyon: %s:%d: expected a JSON string per line\n", path, lineno);
            rc = 1;
        } else {
            rc = print_ids(v, json_string_value(j), json_string_length(j), flags);
        }
        json_decref(j);
    }
    free(line);
    if (f != stdin) fclose(f);
    return rc;
}

int cli_tokenize(int argc, char **argv) {
    static const struct option lo[] = {{"model", required_argument, 0, 'm'}, {"no-bos", no_argument, 0, 'B'},
                                       {"special", no_argument, 0, 'S'},     {"file", required_argument, 0, 'f'},
                                       {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    const char *model = NULL, *file = NULL;
    int no_bos = 0, special = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:f:h", lo, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'B': no_bos = 1; break;
        case 'S': special = 1; break;
        case 'f': file = optarg; break;
        default:
            fprintf(stderr, "usage: tachyon tokenize -m MODEL [--no-bos] [--special] (TEXT | --file PATH)\n");
            return c == 'h' ? 0 : 2;
        }
    }
    if (!model || (!file && optind >= argc)) {
        fprintf(stderr, "usage: tachyon tokenize -m MODEL [--no-bos] [--special] (TEXT | --file PATH)\n");
        return 2;
    }
    tok_vocab *v = NULL;
    if (load_vocab(model, &v)) return 1;
    int flags = (special ? TOK_ENC_PARSE_SPECIAL : 0) | (!no_bos && tok_add_bos(v) ? TOK_ENC_ADD_BOS : 0);
    int rc;
    if (file) {
        rc = tokenize_file(v, file, flags);
    } else {
        // several words are joined by single spaces, so an unquoted sentence works too
        size_t len = 0;
        for (int i = optind; i < argc; i++) len += strlen(argv[i]) + 1;
        char *text = malloc(len + 1);
        if (!text) return tok_free(v), 1;
        size_t w = 0;
        for (int i = optind; i < argc; i++) {
            if (i > optind) text[w++] = ' ';
            size_t l = strlen(argv[i]);
            memcpy(text + w, argv[i], l), w += l;
        }
        rc = print_ids(v, text, w, flags);
        free(text);
    }
    tok_free(v);
    return rc;
}

int cli_detokenize(int argc, char **argv) {
    static const struct option lo[] = {{"model", required_argument, 0, 'm'},
                                       {"skip-special", no_argument, 0, 'K'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    const char *model = NULL;
    int skip = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:h", lo, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'K': skip = 1; break;
        default: fprintf(stderr, "usage: tachyon detokenize -m MODEL [--skip-special] IDS...\n"); return c == 'h' ? 0 : 2;
        }
    }
    if (!model) {
        fprintf(stderr, "usage: tachyon detokenize -m MODEL [--skip-special] IDS...\n");
        return 2;
    }
    int32_t *ids = malloc(sizeof *ids * (size_t)(argc + 1));
    int n = 0;
    if (!ids) return 1;
    for (int i = optind; i < argc; i++) { // accepts "1 2 3", "[1, 2, 3]", "1,2,3"
        for (char *p = argv[i]; *p;) {
            if (*p == '[' || *p == ']' || *p == ',' || *p == ' ') {
                p++;
                continue;
            }
            char *e;
            long x = strtol(p, &e, 10);
            if (e == p || x < INT32_MIN || x > INT32_MAX) {
                fprintf(stderr, "tachyon: detokenize: bad token id '%s'\n", argv[i]);
                free(ids);
                return 2;
            }
            if (n % (argc + 1) == 0 && n) {
                int32_t *q = realloc(ids, sizeof *ids * (size_t)(n + argc + 1));
                if (!q) return free(ids), 1;
                ids = q;
            }
            ids[n++] = (int32_t)x;
            p = e;
        }
    }
    tok_vocab *v = NULL;
    if (load_vocab(model, &v)) return free(ids), 1;
    char *text;
    size_t len;
    tc_err err = {0};
    int rc = tok_decode(v, ids, n, skip ? TOK_DEC_SKIP_SPECIAL : 0, &text, &len, &err);
    if (rc) {
        fprintf(stderr, "tachyon: detokenize: %s\n", err.msg);
    } else {
        fwrite(text, 1, len, stdout);
        putchar('\n');
        free(text);
    }
    tok_free(v);
    free(ids);
    return rc ? 1 : 0;
}
