// tachyon: dispatch to a subcommand.
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} cli_cmd;

static int cli_version(int argc, char **argv) {
    (void)argc, (void)argv;
    printf("tachyon 0.1.0\n");
    return 0;
}

static const cli_cmd cmds[] = {
    {"version", cli_version, "print the version"},
    {"run", cli_run, "-m MODEL -p PROMPT [-n N] [--chat] [--temp T] ...: generate text"},
    {"chat", cli_chat, "-m MODEL [--system TEXT] [-n N] [--temp T] ...: interactive chat in the terminal"},
    {"info", cli_info, "-m MODEL: architecture, shapes, tensor types, vocabulary, size"},
    {"bench", cli_bench, "-m MODEL [-p 512] [-n 128] [-t T] [-r R] [--json]: prefill/decode tokens/s"},
    {"logits", cli_logits, "-m MODEL --ids 1,2,3 -o OUT.f32: raw logits of every position (for reference tests)"},
    {"chat-template", cli_chat_template, "render chat messages (JSON) with a chat template"},
    {"tokenize", cli_tokenize, "print the token ids of a text as JSON (-m MODEL [--no-bos] [--special] TEXT)"},
    {"detokenize", cli_detokenize, "print the text of token ids (-m MODEL [--skip-special] IDS...)"},
    {"serve", cli_serve, "OpenAI-compatible HTTP server with a dashboard"},
    {"bench-serve", cli_bench_serve, "benchmark an OpenAI-compatible server (TTFT, TPOT, ITL, goodput)"},
    {"quantize", cli_quantize, "IN.gguf OUT.gguf TYPE [--keep-layers N]: re-quantize a model (Q8_0, Q4_K_M, ...)"},
    {"perplexity", cli_perplexity, "-m MODEL -f TEXT [-c CTX] [--kv-type T] [--save-logits F] [--kl-base F]: quality"},
    {"synth", cli_synth, "write a synthetic Llama model (random weights) of a given shape and type"},
};

static void usage(void) {
    fprintf(stderr, "usage: tachyon COMMAND [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        fprintf(stderr, "  %-12s %s\n", cmds[i].name, cmds[i].help);
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage();
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(argv[1], cmds[i].name)) return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "tachyon: unknown command '%s'\n", argv[1]);
    usage();
    return 2;
}
