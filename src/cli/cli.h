// Subcommands of the `tachyon` binary: each is `int cli_<name>(int argc, char **argv)` in its own file
// src/cli/cmd_<name>.c, returning the process exit status. argv[0] is the subcommand name.
#ifndef TACHYON_CLI_H
#define TACHYON_CLI_H

#include <stdint.h>

#include "backend/backend.h"
#include "common/err.h"
#include "model/model.h"
#include "tensor/ttype.h"
#include "tokenizer/tokenizer.h"

// (subcommand declarations go here, one line each)
int cli_run(int argc, char **argv);
int cli_chat(int argc, char **argv);
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
int cli_quantize(int argc, char **argv);
int cli_perplexity(int argc, char **argv);

// cli_args.c. Parses s as a number in [lo, hi] into *out; otherwise prints "tachyon CMD: FLAG expects a
// number in [lo, hi], got 's'" to stderr and returns -1.
int cli_num(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out);
// KV cache type flags (--kv-type sets both, --kv-type-k / --kv-type-v one): parses s ("f16", "q8_0",
// "q4_0") into *k and/or *v (NULL: leave alone); otherwise prints the error for FLAG and returns -1.
int cli_kv_type(const char *cmd, const char *flag, const char *s, tt_type *k, tt_type *v);
// --kv-rotate auto|off: "off" sets TACHYON_KV_ROTATE=0, which model contexts made later in this process read
// (no Hadamard rotation of a quantized KV cache, for A/B); "auto" leaves the environment alone. -1 on a bad value.
int cli_kv_rotate(const char *cmd, const char *s);
// --kv-center auto|off: "off" sets TACHYON_KV_CENTER=0 (keys of a quantized K cache stored without subtracting
// the model's mean key, key_center.h, for A/B); "auto" leaves the environment alone. -1 on a bad value.
int cli_kv_center(const char *cmd, const char *s);
// --device cpu|cuda: parses s into *out; otherwise prints "tachyon CMD: --device expects cpu or cuda, got 's'"
// and returns -1. (Whether the device is usable is known only when the backend opens: backend_new.)
int cli_device(const char *cmd, const char *s, backend_device *out);
// The prompt as one user turn with the model's chat template (template_name: a built-in family such as
// "chatml", or NULL for the model's own Jinja template, or the family its architecture implies when it has
// none); the prompt's text stays plain text (see chat_encode). *ids malloc'd (free). Returns 0 or a TC_ERR_*
// with err set (an unknown template names --chat-template; a template that fails says why).
int cli_encode_chat(const model *m, const tok_vocab *v, const char *template_name, const char *prompt,
                    int32_t **ids, int *n_ids, tc_err *err);
// cli_encode_chat with template_file (may be NULL): a Jinja chat template file used instead of the model's.
int cli_encode_chat_ex(const model *m, const tok_vocab *v, const char *template_name, const char *template_file,
                       const char *prompt, int32_t **ids, int *n_ids, tc_err *err);
struct chat_msg;
// cli_encode_chat_ex over a whole conversation (n_msgs messages, in order), with the generation prompt.
int cli_encode_chat_msgs(const model *m, const tok_vocab *v, const char *template_name, const char *template_file,
                         const struct chat_msg *msgs, int n_msgs, int32_t **ids, int *n_ids, tc_err *err);
struct option;
// The long name ("http-timeout") of the getopt_long option whose val is val, "?" if none.
const char *cli_opt_name(const struct option *lo, int val);

#endif
