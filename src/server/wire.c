// Which wire_ops serves which API (see wire.h).
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
