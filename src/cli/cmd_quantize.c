// tachyon quantize IN.gguf OUT.gguf TYPE [--keep-layers N] [--force] [--quiet]: re-quantizes a model (from
// any type tachyon reads) to one type or to the Q4_K_M mix, optionally keeping only its first N layers (a
// cheap draft model for speculative decoding).
#include <getopt.h>
#include <stdio.h>

#include "cli/cli.h"
#include "gguf/gguf_quantize.h"

static void usage(void) {
    fprintf(stderr, "usage: tachyon quantize IN.gguf OUT.gguf TYPE [--keep-layers N] [--force] [--quiet]\n"
                    "  TYPE: %s\n"
                    "  --keep-layers N: write only blocks 0..N-1 (block_count rewritten): a layer-truncated draft\n"
                    "  --force: replace OUT if it exists\n",
            gq_target_names());
}

int cli_quantize(int argc, char **argv) {
    static const struct option lo[] = {{"keep-layers", 1, 0, 'k'}, {"force", 0, 0, 'f'}, {"quiet", 0, 0, 'q'},
                                       {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    gq_params p = {.keep_layers = -1, .log = stderr};
    double v;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "k:fqh", lo, NULL)) != -1) {
        switch (c) {
        case 'k':
            if (cli_num("quantize", "--keep-layers", optarg, 1, 1000000, &v)) return 2;
            p.keep_layers = (int)v;
            break;
        case 'f': p.overwrite = 1; break;
        case 'q': p.log = NULL; break;
        default: usage(); return 2;
        }
    }
    if (argc - optind != 3) {
        usage();
        return 2;
    }
    const char *in = argv[optind], *out = argv[optind + 1], *type = argv[optind + 2];
    if (gq_target_parse(type, &p.target)) {
        fprintf(stderr, "tachyon quantize: unsupported type '%s' (supported: %s)\n", type, gq_target_names());
        return 2;
    }
    tc_err err = {0};
    if (gq_quantize_file(in, out, &p, &err)) {
        fprintf(stderr, "tachyon quantize: %s\n", err.msg);
        return 1;
    }
    return 0;
}
