// Which wire_ops serves which API (see wire.h).
#include <stdio.h>
#include <string.h>

#include "server/wire.h"

const wire_ops *wire_get(wire_kind k) {
    switch (k) {
    case WIRE_RESPONSES: return &wire_responses_ops;
    case WIRE_ANTHROPIC: return &wire_anthropic_ops;
    default: return NULL;
    }
}

// 1 if path is prefix or prefix followed by '/' or '?'.
static int under(const char *path, const char *prefix) {
    size_t n = strlen(prefix);
    return !strncmp(path, prefix, n) && (path[n] == 0 || path[n] == '/' || path[n] == '?');
}

wire_kind wire_of_path(const char *path) {
    if (!path) return WIRE_OPENAI;
    if (under(path, "/v1/responses")) return WIRE_RESPONSES;
    if (under(path, "/v1/messages")) return WIRE_ANTHROPIC;
    return WIRE_OPENAI;
}

void wire_drop_unaccepted(const wire_ops *w, json_t *in, char *dropped, size_t cap) {
    const char *key;
    json_t *v;
    void *tmp;
    if (!w || !w->field_ok || !json_is_object(in)) return;
    json_object_foreach_safe(in, tmp, key, v) {
        if (w->field_ok(key, v)) continue;
        size_t used = strnlen(dropped, cap);
        if (used + 1 < cap) snprintf(dropped + used, cap - used, "%s%s", used ? ", " : "", key);
        json_object_del(in, key);
    }
}
