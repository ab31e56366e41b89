// Subcommands of the `tachyon` binary: each is `int cli_<name>(int argc, char **argv)` in its own file
// src/cli/cmd_<name>.c, returning the process exit status. argv[0] is the subcommand name.
#ifndef TACHYON_CLI_H
#define TACHYON_CLI_H

// (subcommand declarations go here, one line each)
int cli_bench_serve(int argc, char **argv);

#endif
