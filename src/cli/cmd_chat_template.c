// `tachyon chat-template`: renders a JSON message list with a chat template family and prints the prompt
// exactly (no trailing newline). Used by tests/ref/test_chat_ref.py to compare against Jinja.
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "gguf/gguf.h"
#include "tokenizer/chat.h"

static void chat_template_usage(void) {
    fprintf(stderr,
            "usage: tachyon chat-template [--family NAME | --template-file F | -m MODEL] [--bos TEXT]\n"
            "                             [--no-gen-prompt] [--no-thinking] [--detect] MESSAGES_JSON\n"
            "  --no-thinking  enable_thinking=false (templates with a thinking switch: qwen3)\n"
            "  MESSAGES_JSON  [{\"role\": \"user\", \"content\": \"hi\"}, ...] ('-' reads stdin)\n"
            "  --detect       print the detected family name instead of rendering\n"
            "  families:");
    for (int f = 1; f < CHAT_COUNT; f++) fprintf(stderr, " %s", chat_family_name((chat_family)f));
    fputc('\n', stderr);
}

// Prints the error for an undetectable template, naming the way out.
void cli_chat_unknown_error(const char *what) {
    fprintf(stderr, "tachyon: the chat template of %s is not recognized; choose one with --chat-template NAME "
                    "where NAME is one of:", what);
    for (int f = 1; f < CHAT_COUNT; f++) fprintf(stderr, " %s", chat_family_name((chat_family)f));
    fputc('\n', stderr);
}

static char *read_file_all(FILE *fp) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, fp)) > 0) {
        n += got;
        if (n + 1 == cap) {
            char *q = realloc(buf, cap * 2);
            if (!q) {
                free(buf);
                return NULL;
            }
            buf = q, cap *= 2;
        }
    }
    buf[n] = 0;
    return buf;
}

static char *dup_gstr(gguf_str s) {
    char *p = malloc(s.len + 1);
    if (p) {
        memcpy(p, s.ptr, s.len);
        p[s.len] = 0;
    }
    return p;
}

// Reads tokenizer.chat_template and the BOS token text from a GGUF. Missing ones stay NULL.
static int read_model(const char *path, char **tmpl, char **bos, tc_err *err) {
    gguf_ctx *g = NULL;
    int rc = gguf_open(path, &g, err);
    if (rc) return rc;
    gguf_str s;
    if (gguf_get_str(g, "tokenizer.chat_template", &s) == 0) *tmpl = dup_gstr(s);
    uint32_t bos_id;
    int64_t ki = gguf_find_key(g, "tokenizer.ggml.tokens");
    if (gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &bos_id) == 0 && ki >= 0 &&
        gguf_kv_type(g, ki) == GGUF_TYPE_ARRAY && gguf_arr_type(g, ki) == GGUF_TYPE_STRING &&
        bos_id < gguf_arr_n(g, ki))
        *bos = dup_gstr(gguf_arr_str(g, ki, bos_id));
    gguf_close(g);
    return 0;
}

int cli_chat_template(int argc, char **argv) {
    const char *family = NULL, *tfile = NULL, *model = NULL, *bos_arg = NULL, *json_arg = NULL;
    int gen = 1, detect_only = 0, status = 1;
    chat_opts opts = {.enable_thinking = 1}; // chat_template_kwargs {"enable_thinking": false} with --no-thinking
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "--family") && has_val) family = argv[++i];
        else if (!strcmp(a, "--template-file") && has_val) tfile = argv[++i];
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has_val) model = argv[++i];
        else if (!strcmp(a, "--bos") && has_val) bos_arg = argv[++i];
        else if (!strcmp(a, "--no-gen-prompt")) gen = 0;
        else if (!strcmp(a, "--no-thinking")) opts.enable_thinking = 0;
        else if (!strcmp(a, "--detect")) detect_only = 1;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            chat_template_usage();
            return 0;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "tachyon chat-template: unknown or incomplete option '%s'\n", a);
            chat_template_usage();
            return 2;
        } else json_arg = a;
    }
    if (!json_arg && !detect_only) {
        chat_template_usage();
        return 2;
    }

    char *tmpl = NULL, *bos = NULL, *json_text = NULL, *out = NULL;
    json_t *root = NULL;
    chat_msg *msgs = NULL;
    tc_err err = {0};
    if (tfile) {
        FILE *fp = fopen(tfile, "rb");
        if (!fp) {
            fprintf(stderr, "tachyon: cannot open %s: %s\n", tfile, strerror(errno));
            goto done;
        }
        tmpl = read_file_all(fp);
        fclose(fp);
    } else if (model) {
        if (read_model(model, &tmpl, &bos, &err)) {
            fprintf(stderr, "tachyon: %s: %s\n", model, err.msg);
            goto done;
        }
    }
    if (bos_arg) {
        free(bos);
        bos = strdup(bos_arg);
    }

    chat_family f;
    if (family) {
        f = chat_family_from_name(family);
        if (f == CHAT_UNKNOWN) {
            fprintf(stderr, "tachyon: unknown chat template family '%s'\n", family);
            chat_template_usage();
            goto done;
        }
    } else {
        f = chat_detect(tmpl);
        if (detect_only) {
            printf("%s\n", chat_family_name(f));
            status = 0;
            goto done;
        }
        if (f == CHAT_UNKNOWN) {
            cli_chat_unknown_error(model ? model : tfile ? tfile : "(no template given)");
            goto done;
        }
    }
    if (detect_only) {
        printf("%s\n", chat_family_name(f));
        status = 0;
        goto done;
    }

    if (!strcmp(json_arg, "-")) json_text = read_file_all(stdin);
    json_error_t jerr;
    root = json_loads(json_text ? json_text : json_arg, 0, &jerr);
    if (!root || !json_is_array(root)) {
        fprintf(stderr, "tachyon: MESSAGES_JSON must be a JSON array of {role, content}: %s\n",
                root ? "not an array" : jerr.text);
        goto done;
    }
    size_t n = json_array_size(root);
    msgs = calloc(n ? n : 1, sizeof *msgs);
    if (!msgs) goto done;
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(root, i);
        msgs[i].role = json_string_value(json_object_get(m, "role"));
        msgs[i].content = json_string_value(json_object_get(m, "content"));
        if (!msgs[i].role || !msgs[i].content) {
            fprintf(stderr, "tachyon: message %zu needs string 'role' and 'content'\n", i);
            goto done;
        }
    }
    if (chat_render_opts(f, tmpl, msgs, (int)n, gen, bos, &opts, &out, NULL, NULL, &err)) {
        fprintf(stderr, "tachyon: %s\n", err.msg);
        goto done;
    }
    fputs(out, stdout);
    status = 0;
done:
    free(out);
    free(msgs);
    if (root) json_decref(root);
    free(json_text);
    free(bos);
    free(tmpl);
    return status;
}
