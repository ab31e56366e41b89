// What every tool-call parser shares (tool_parse_impl.h): searching and trimming text, the schema of a
// parameter, and appending a parsed call in the chat completions shape.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/tool_parse_impl.h"

const char *tp_find(const char *p, const char *end, const char *s) {
    size_t n = strlen(s);
    if (!n || p >= end) return NULL;
    return memmem(p, (size_t)(end - p), s, n);
}

int tp_is_ws(char ch) {
    return ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r';
}

const char *tp_skip_ws(const char *p, const char *end) {
    while (p < end && tp_is_ws(*p))
        p++;
    return p;
}

const char *tp_trim_marker(const char *s, char *buf, size_t cap) {
    while (*s && tp_is_ws(*s))
        s++;
    size_t n = strlen(s);
    while (n && tp_is_ws(s[n - 1]))
        n--;
    if (n >= cap) n = cap - 1;
    memcpy(buf, s, n);
    buf[n] = 0;
    return buf;
}

int tp_valid_name(const char *s, size_t n) {
    if (n == 0 || n > 64) return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
              ch == '-' || ch == '.'))
            return 0;
    }
    return 1;
}

int tp_add_call(tp_ctx *c, const char *name, size_t name_len, json_t *args) {
    if (!tp_valid_name(name, name_len) || (args && !json_is_object(args))) {
        json_decref(args);
        return -1;
    }
    char *a = args ? json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("{}");
    json_decref(args);
    char id[96];
    snprintf(id, sizeof id, "%s_%zu", c->o->id_base ? c->o->id_base : "call", json_array_size(c->calls));
    json_t *call = a ? json_pack("{s:s,s:s,s:{s:s%,s:s}}", "id", id, "type", "function", "function", "name",
                                 name, name_len, "arguments", a)
                     : NULL;
    free(a);
    if (!call || json_array_append_new(c->calls, call)) c->oom = 1;
    return 0;
}

const json_t *tp_param_schema(const tp_ctx *c, const char *name, const char *key) {
    size_t i;
    const json_t *t;
    json_array_foreach(c->o->tools, i, t) {
        const json_t *fn = json_object_get(t, "function");
        const char *n = json_string_value(json_object_get(fn, "name"));
        if (n && !strcmp(n, name))
            return json_object_get(json_object_get(json_object_get(fn, "parameters"), "properties"), key);
    }
    return NULL;
}
