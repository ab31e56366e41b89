// Option-parsing helpers shared by the subcommands: numeric flags checked against a range, with errors that
// name the flag as the user typed it.
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "model/model.h"

int cli_num(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "tachyon %s: %s expects a number in [%.15g, %.15g], got '%s'\n", cmd, flag, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_kv_type(const char *cmd, const char *flag, const char *s, tt_type *k, tt_type *v) {
    tt_type t;
    tc_err err = {0};
    if (model_kv_type_parse(s, &t, &err)) {
        fprintf(stderr, "tachyon %s: %s expects f16, q8_0 or q4_0, got '%s'\n", cmd, flag, s);
        return -1;
    }
    if (k) *k = t;
    if (v) *v = t;
    return 0;
}

int cli_kv_rotate(const char *cmd, const char *s) {
    if (!strcmp(s, "auto")) return 0;
    if (!strcmp(s, "off")) return setenv("TACHYON_KV_ROTATE", "0", 1) ? -1 : 0;
    fprintf(stderr, "tachyon %s: --kv-rotate expects auto or off, got '%s'\n", cmd, s);
    return -1;
}

const char *cli_opt_name(const struct option *lo, int val) {
    for (; lo->name; lo++)
        if (lo->val == val) return lo->name;
    return "?";
}
