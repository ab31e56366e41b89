// Subcommands of the `tachyon` binary: each is `int cli_<name>(int argc, char **argv)` in its own file
// src/cli/cmd_<name>.c, returning the process exit status. argv[0] is the subcommand name.
#ifndef TACHYON_CLI_H
#define TACHYON_CLI_H

// (subcommand declarations go here, one line each)
int cli_run(int argc, char **argv);
int cli_info(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_chat_template(int argc, char **argv);
int cli_logits(int argc, char **argv);
int cli_serve(int argc, char **argv);
int cli_synth(int argc, char **argv);
// Prints "chat template of WHAT is not recognized; use --chat-template NAME (names…)" to stderr.
void cli_chat_unknown_error(const char *what);
int cli_tokenize(int argc, char **argv);
int cli_detokenize(int argc, char **argv);
int cli_bench_serve(int argc, char **argv);

#endif
