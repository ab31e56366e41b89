// OpenAI error bodies (see oai_err.h).
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/oai_err.h"
#include "server/oai_text.h"

int oai_err_set(oai_err *e, int status, const char *type, const char *code, const char *param, const char *fmt,
                ...) {
    e->status = status;
    e->type = type ? type : "invalid_request_error";
    e->code = code;
    e->retry_after = 0;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return -1;
}

char *oai_err_json(const oai_err *e) {
    json_t *o = json_pack("{s:{s:o,s:s,s:o,s:o}}", "error", "message", oai_json_text(e->msg, strlen(e->msg)),
                          "type", e->type ? e->type : "invalid_request_error", "param",
                          e->param[0] ? oai_json_text(e->param, strlen(e->param)) : json_null(), "code",
                          e->code ? json_string(e->code) : json_null());
    if (!o) return NULL;
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}
