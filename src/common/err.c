#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int tc_err_set(tc_err *err, int code, const char *fmt, ...) {
    if (!err) return code;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

int tc_err_wrap(tc_err *err, const char *fmt, ...) {
    if (!err) return TC_ERR;
    char prefix[256], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old);
    return err->code ? err->code : TC_ERR;
}
