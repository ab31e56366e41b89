// Chat templates through the Jinja interpreter: the variables, and provenance into tok_encode_guarded.
#include "tokenizer/chat_tmpl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/jinja.h"

struct chat_tmpl {
    jinja_template *jt; // owned
    char *src;          // owned copy of the source
    char bos[64], eos[64];
};

static void piece_text(const tok_vocab *v, int32_t id, char *buf, int cap) {
    buf[0] = 0;
    if (!v || id < 0) return;
    int n = tok_piece(v, id, 0, buf, cap - 1);
    buf[n > 0 && n < cap ? n : 0] = 0;
}

int chat_tmpl_new(const char *src, size_t n, const tok_vocab *v, chat_tmpl **out, tc_err *err) {
    *out = NULL;
    chat_tmpl *t = calloc(1, sizeof *t);
    if (!t || !(t->src = malloc(n + 1))) {
        free(t);
        return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    }
    memcpy(t->src, src, n);
    t->src[n] = 0;
    int rc = jinja_parse(t->src, n, NULL, &t->jt, err);
    if (rc) {
        chat_tmpl_free(t);
        return rc;
    }
    piece_text(v, v ? tok_bos(v) : -1, t->bos, sizeof t->bos);
    piece_text(v, v ? tok_eos(v) : -1, t->eos, sizeof t->eos);
    *out = t;
    return 0;
}

int chat_tmpl_load_file(const char *path, const tok_vocab *v, chat_tmpl **out, tc_err *err) {
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return tc_err_set(err, TC_ERR_IO, "chat template file %s: %s", path, strerror(errno));
    size_t cap = 4096, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, fp)) > 0) {
        n += got;
        if (n == cap) {
            char *q = cap < ((size_t)64 << 20) ? realloc(buf, cap * 2) : NULL;
            if (!q) free(buf);
            buf = q, cap *= 2;
        }
    }
    int bad = ferror(fp);
    fclose(fp);
    if (!buf || bad) {
        free(buf);
        return tc_err_set(err, bad ? TC_ERR_IO : TC_ERR_NOMEM, "chat template file %s: %s", path,
                          bad ? "read error" : "out of memory or too large");
    }
    int rc = chat_tmpl_new(buf, n, v, out, err);
    free(buf);
    if (rc) tc_err_wrap(err, "chat template file %s", path);
    return rc;
}

void chat_tmpl_free(chat_tmpl *t) {
    if (!t) return;
    jinja_free(t->jt);
    free(t->src);
    free(t);
}

const char *chat_tmpl_src(const chat_tmpl *t) { return t->src; }

int chat_tmpl_reads(const chat_tmpl *t, const char *name) { return strstr(t->src, name) != NULL; }

int chat_tmpl_render(const chat_tmpl *t, const json_t *messages, const json_t *tools, const json_t *kwargs,
                     int add_generation_prompt, char **out, size_t *out_n, tok_range **plain, int *n_plain,
                     tc_err *err) {
    *out = NULL, *plain = NULL, *n_plain = 0;
    // trusted: the special tokens and the switch; untrusted: everything the request supplies
    json_t *vars = json_pack("{s:b, s:s, s:s}", "add_generation_prompt", add_generation_prompt, "bos_token",
                             t->bos, "eos_token", t->eos);
    json_t *user = json_object();
    if (!vars || !user) {
        json_decref(vars);
        json_decref(user);
        return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    }
    if (kwargs && json_is_object(kwargs)) json_object_update(user, (json_t *)kwargs);
    json_object_set(user, "messages", (json_t *)messages);
    json_object_set(user, "tools", tools ? (json_t *)tools : json_null());
    if (!json_object_get(user, "documents")) json_object_set_new(user, "documents", json_null());
    jinja_span *sp = NULL;
    int nsp = 0;
    int rc = jinja_render_user(t->jt, vars, user, NULL, -1, out, out_n, &sp, &nsp, err);
    json_decref(vars);
    json_decref(user);
    if (rc) return rc;
    if (nsp) {
        *plain = malloc((size_t)nsp * sizeof **plain);
        if (!*plain) {
            free(sp);
            free(*out);
            *out = NULL;
            return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        }
        for (int i = 0; i < nsp; i++) (*plain)[i] = (tok_range){sp[i].start, sp[i].end - sp[i].start};
        *n_plain = nsp;
    }
    free(sp);
    return 0;
}

int chat_tmpl_encode(const chat_tmpl *t, const tok_vocab *v, const json_t *messages, const json_t *tools,
                     const json_t *kwargs, int add_generation_prompt, int32_t **ids, int *n_ids, tc_err *err) {
    *ids = NULL, *n_ids = 0;
    char *text = NULL;
    size_t n = 0;
    tok_range *plain = NULL;
    int n_plain = 0;
    int rc = chat_tmpl_render(t, messages, tools, kwargs, add_generation_prompt, &text, &n, &plain, &n_plain, err);
    if (rc) return rc;
    rc = tok_encode_guarded(v, text, n, TOK_ENC_PARSE_SPECIAL, plain, n_plain, ids, n_ids, err);
    free(plain);
    free(text);
    return rc;
}

json_t *chat_msgs_json(const chat_msg *msgs, int n_msgs) {
    json_t *a = json_array();
    for (int i = 0; a && i < n_msgs; i++)
        if (json_array_append_new(a, json_pack("{s:s, s:s}", "role", msgs[i].role, "content", msgs[i].content))) {
            json_decref(a);
            return NULL;
        }
    return a;
}
