// Option-parsing helpers shared by the subcommands: numeric flags checked against a range, with errors that
// name the flag as the user typed it.
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "model/model.h"
#include "tokenizer/chat.h"
#include "tokenizer/chat_tmpl.h"
#include "tokenizer/tokenizer.h"

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
    if (kv_type_parse(s, &t, &err)) {
        fprintf(stderr, "tachyon %s: %s expects f16, q8_0 or q4_0, got '%s'\n", cmd, flag, s);
        return -1;
    }
    if (k) *k = t;
    if (v) *v = t;
    return 0;
}

// An auto|off switch whose "off" sets the A/B environment variable env to "0" (read by what is made later).
static int auto_off(const char *cmd, const char *flag, const char *env, const char *s) {
    if (!strcmp(s, "auto")) return 0;
    if (!strcmp(s, "off")) return setenv(env, "0", 1) ? -1 : 0;
    fprintf(stderr, "tachyon %s: %s expects auto or off, got '%s'\n", cmd, flag, s);
    return -1;
}

int cli_kv_rotate(const char *cmd, const char *s) { return auto_off(cmd, "--kv-rotate", "TACHYON_KV_ROTATE", s); }

int cli_kv_center(const char *cmd, const char *s) { return auto_off(cmd, "--kv-center", "TACHYON_KV_CENTER", s); }

const char *cli_opt_name(const struct option *lo, int val) {
    for (; lo->name; lo++)
        if (lo->val == val) return lo->name;
    return "?";
}

// (tachyon run --chat, tachyon bench --chat; contract in cli.h)
// The messages through a Jinja template (the model's own, or the file's), with the generation prompt.
static int encode_jinja(const tok_vocab *v, const char *src, const char *file, const chat_msg *msg, int n_msgs,
                        int32_t **ids, int *n_ids, tc_err *err) {
    chat_tmpl *t = NULL;
    int rc = file ? chat_tmpl_load_file(file, v, &t, err) : chat_tmpl_new(src, strlen(src), v, &t, err);
    if (rc) return file ? rc : tc_err_wrap(err, "the model's chat template (tokenizer.chat_template)");
    json_t *msgs = chat_msgs_json(msg, n_msgs);
    rc = msgs ? chat_tmpl_encode(t, v, msgs, NULL, NULL, 1, ids, n_ids, err)
              : tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    if (rc && rc != TC_ERR_NOMEM) tc_err_wrap(err, "chat template");
    json_decref(msgs);
    chat_tmpl_free(t);
    return rc;
}

int cli_encode_chat(const model *m, const tok_vocab *v, const char *template_name, const char *prompt, int32_t **ids,
                    int *n_ids, tc_err *err) {
    return cli_encode_chat_ex(m, v, template_name, NULL, prompt, ids, n_ids, err);
}

int cli_encode_chat_ex(const model *m, const tok_vocab *v, const char *template_name, const char *template_file,
                       const char *prompt, int32_t **ids, int *n_ids, tc_err *err) {
    chat_msg msg = {"user", prompt};
    return cli_encode_chat_msgs(m, v, template_name, template_file, &msg, 1, ids, n_ids, err);
}

int cli_encode_chat_msgs(const model *m, const tok_vocab *v, const char *template_name, const char *template_file,
                         const chat_msg *msgs, int n_msgs, int32_t **ids, int *n_ids, tc_err *err) {
    if (template_name && template_file)
        return tc_err_set(err, TC_ERR_INVALID, "--chat-template and --chat-template-file exclude each other");
    if (template_file) return encode_jinja(v, NULL, template_file, msgs, n_msgs, ids, n_ids, err);
    gguf_str ts = {0};
    char *tmpl = NULL;
    if (gguf_get_str(model_gguf(m), "tokenizer.chat_template", &ts) == 0) {
        tmpl = strndup(ts.ptr, ts.len);
        if (!tmpl) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        if (!template_name) {
            int rc = encode_jinja(v, tmpl, NULL, msgs, n_msgs, ids, n_ids, err);
            free(tmpl);
            return rc;
        }
    }
    chat_family f = template_name ? chat_family_from_name(template_name)
                    : tmpl ? chat_detect(tmpl) : chat_family_for_arch(model_get_hparams(m)->arch);
    if (f == CHAT_UNKNOWN) {
        free(tmpl);
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "%s; pass --chat-template NAME (chatml, llama2, llama3, mistral, "
                          "gemma, phi3, zephyr, deepseek, qwen3)", template_name ? "unknown chat template name"
                          : tmpl ? "unrecognized chat template in the model" : "the model has no chat template");
    }
    char bos[64] = "";
    int32_t b = tok_bos(v);
    if (b >= 0) {
        int n = tok_piece(v, b, 0, bos, sizeof bos - 1);
        bos[n > 0 && n < (int)sizeof bos ? n : 0] = '\0';
    }
    int rc = chat_encode(v, f, tmpl, msgs, n_msgs, 1, bos, ids, n_ids, err);
    free(tmpl);
    return rc;
}

int cli_device(const char *cmd, const char *s, backend_device *out) {
    if (backend_device_parse(s, out, NULL) == 0) return 0;
    fprintf(stderr, "tachyon %s: --device expects cpu or cuda, got '%s'\n", cmd, s);
    return -1;
}
