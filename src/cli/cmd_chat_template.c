// `tachyon chat-template`: renders a JSON message list and prints the prompt exactly (no trailing newline):
// with --template-file, through the Jinja interpreter as transformers' apply_chat_template would; with
// --family NAME (or -m MODEL, or --family auto and a template file) through a built-in family renderer.
// Used by tests/ref/test_chat_ref.py and tests/ref/test_jinja_ref.py to compare against jinja2.
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "gguf/gguf.h"
#include "jinja/jinja.h"
#include "tokenizer/chat.h"

static void chat_template_usage(void) {
    fprintf(stderr,
            "usage: tachyon chat-template [--family NAME|auto | --template-file F | -m MODEL] [--bos TEXT]\n"
            "                             [--eos TEXT] [--tools TOOLS_JSON_FILE] [--kwargs JSON] [--no-gen-prompt]\n"
            "                             [--no-thinking] [--detect] MESSAGES_JSON\n"
            "  --template-file F  render the Jinja template in F (with --family: that family's renderer, and\n"
            "                 --family auto detects the family from F)\n"
            "  --tools F      the request's tools (a JSON array) for the template's `tools`\n"
            "  --kwargs JSON  more template variables (chat_template_kwargs), e.g. '{\"enable_thinking\": false}'\n"
            "  --no-thinking  enable_thinking=false (templates with a thinking switch: qwen3)\n"
            "  MESSAGES_JSON  [{\"role\": \"user\", \"content\": \"hi\"}, ...] ('-' reads stdin)\n"
            "  --detect       print the detected family name instead of rendering\n"
            "  TACHYON_JINJA_NOW  seconds since the epoch that strftime_now formats (tests)\n"
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

// --- the Jinja path

static int64_t jinja_now(void) {
    const char *e = getenv("TACHYON_JINJA_NOW");
    return e && *e ? strtoll(e, NULL, 10) : -1;
}

// The variables transformers passes to a chat template: messages, tools (None without), documents (None),
// add_generation_prompt, bos_token, eos_token, then chat_template_kwargs on top. Returns a new reference or NULL
// with the reason printed.
static json_t *jinja_vars(json_t *messages, const char *tools_file, const char *bos, const char *eos, int gen,
                          int no_thinking, const char *kwargs) {
    json_error_t jerr;
    json_t *tools = json_null();
    if (tools_file) {
        tools = json_load_file(tools_file, 0, &jerr);
        if (!tools) {
            fprintf(stderr, "tachyon: %s: %s\n", tools_file, jerr.text);
            return NULL;
        }
    }
    json_t *v = json_object();
    json_object_set(v, "messages", messages);
    json_object_set_new(v, "tools", tools);
    json_object_set_new(v, "documents", json_null());
    json_object_set_new(v, "add_generation_prompt", json_boolean(gen));
    json_object_set_new(v, "bos_token", json_string(bos ? bos : ""));
    json_object_set_new(v, "eos_token", json_string(eos ? eos : ""));
    if (no_thinking) json_object_set_new(v, "enable_thinking", json_false());
    if (kwargs) {
        json_t *kw = json_loads(kwargs, 0, &jerr);
        if (!kw || !json_is_object(kw)) {
            fprintf(stderr, "tachyon: --kwargs must be a JSON object%s%s\n", kw ? "" : ": ", kw ? "" : jerr.text);
            json_decref(kw);
            json_decref(v);
            return NULL;
        }
        json_object_update(v, kw);
        json_decref(kw);
    }
    return v;
}

// Renders tmpl with vars and prints the text exactly, or the template's error. Returns the exit status.
static int print_jinja(const char *tmpl, const json_t *vars) {
    jinja_template *t = NULL;
    tc_err err = {0};
    char *out = NULL;
    size_t n = 0;
    if (jinja_parse(tmpl, strlen(tmpl), NULL, &t, &err) || jinja_render(t, vars, NULL, jinja_now(), &out, &n, &err)) {
        fprintf(stderr, "tachyon: chat template error: %s\n", err.msg);
        jinja_free(t);
        return 1;
    }
    fwrite(out, 1, n, stdout);
    free(out);
    jinja_free(t);
    return 0;
}

// The Jinja path of the command: messages from json_arg ('-': stdin), printed rendering. Returns the exit status.
static int jinja_main(const char *tmpl, const char *json_arg, const char *tools_file, const char *bos,
                      const char *eos, int gen, int no_thinking, const char *kwargs) {
    char *text = strcmp(json_arg, "-") ? NULL : read_file_all(stdin);
    json_error_t jerr;
    json_t *msgs = json_loads(text ? text : json_arg, 0, &jerr), *vars = NULL;
    int status = 1;
    if (!msgs || !json_is_array(msgs))
        fprintf(stderr, "tachyon: MESSAGES_JSON must be a JSON array: %s\n", msgs ? "not an array" : jerr.text);
    else if ((vars = jinja_vars(msgs, tools_file, bos, eos, gen, no_thinking, kwargs)))
        status = print_jinja(tmpl, vars);
    json_decref(vars);
    json_decref(msgs);
    free(text);
    return status;
}

// --batch FILE (for tests: one process renders many cases): FILE holds {"templates": {NAME: TEXT, …},
// "cases": [{"template": NAME, "vars": {…}}, …]}; prints a JSON array with {"out": TEXT} or
// {"error": MESSAGE} per case. Each template is parsed once.
static int run_batch(const char *path) {
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        fprintf(stderr, "tachyon: %s: %s\n", path, jerr.text);
        return 1;
    }
    json_t *tmpls = json_object_get(root, "templates"), *cases = json_object_get(root, "cases");
    json_t *parsed = json_object(), *results = json_array();
    const char *name;
    json_t *text;
    json_object_foreach(tmpls, name, text) {
        jinja_template *t = NULL;
        tc_err err = {0};
        const char *s = json_string_value(text);
        int rc = s ? jinja_parse(s, json_string_length(text), NULL, &t, &err) : -1;
        json_object_set_new(parsed, name, rc ? json_string(s ? err.msg : "template is not a string")
                                             : json_integer((json_int_t)(intptr_t)t));
    }
    size_t i;
    json_t *cs;
    json_array_foreach(cases, i, cs) {
        json_t *p = json_object_get(parsed, json_string_value(json_object_get(cs, "template")));
        json_t *res = json_object();
        tc_err err = {0};
        char *out = NULL;
        size_t n = 0;
        if (!p) snprintf(err.msg, sizeof err.msg, "no such template");
        else if (json_is_string(p)) snprintf(err.msg, sizeof err.msg, "%s", json_string_value(p));
        else {
            jinja_template *t = (jinja_template *)(intptr_t)json_integer_value(p);
            if (jinja_render(t, json_object_get(cs, "vars"), NULL, jinja_now(), &out, &n, &err) == 0) {
                json_t *o = json_stringn(out, n);
                json_object_set_new(res, o ? "out" : "error", o ? o : json_string("output is not UTF-8"));
            }
        }
        if (!out) json_object_set_new(res, "error", json_string(err.msg));
        free(out);
        json_array_append_new(results, res);
    }
    json_object_foreach(parsed, name, text) if (json_is_integer(text)) jinja_free((jinja_template *)(intptr_t)json_integer_value(text));
    json_dumpf(results, stdout, JSON_COMPACT);
    json_decref(results);
    json_decref(parsed);
    json_decref(root);
    return 0;
}

int cli_chat_template(int argc, char **argv) {
    const char *family = NULL, *tfile = NULL, *model = NULL, *bos_arg = NULL, *json_arg = NULL;
    const char *eos_arg = NULL, *tools_file = NULL, *kwargs = NULL;
    int gen = 1, detect_only = 0, status = 1;
    chat_opts opts = {.enable_thinking = 1}; // chat_template_kwargs {"enable_thinking": false} with --no-thinking
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "--family") && has_val) family = argv[++i];
        else if (!strcmp(a, "--template-file") && has_val) tfile = argv[++i];
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has_val) model = argv[++i];
        else if (!strcmp(a, "--bos") && has_val) bos_arg = argv[++i];
        else if (!strcmp(a, "--eos") && has_val) eos_arg = argv[++i];
        else if (!strcmp(a, "--tools") && has_val) tools_file = argv[++i];
        else if (!strcmp(a, "--kwargs") && has_val) kwargs = argv[++i];
        else if (!strcmp(a, "--batch") && has_val) return run_batch(argv[++i]);
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

    if (tfile && !family && !detect_only) { // a template file alone: the Jinja interpreter
        if (tmpl) status = jinja_main(tmpl, json_arg, tools_file, bos, eos_arg, gen, !opts.enable_thinking, kwargs);
        goto done;
    }
    if (family && !strcmp(family, "auto")) family = NULL;

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
        if (f == CHAT_UNKNOWN && !detect_only) {
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
