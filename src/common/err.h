// Error reporting shared by every module: functions that can fail return int (0 ok, negative error code)
// and, when given a non-NULL tc_err, leave a human-readable message in it. Nothing aborts on bad input.
#ifndef TACHYON_COMMON_ERR_H
#define TACHYON_COMMON_ERR_H

#include <stddef.h>

enum {
    TC_OK = 0,
    TC_ERR = -1,         // generic failure, see message
    TC_ERR_IO = -2,      // file or socket error
    TC_ERR_FORMAT = -3,  // malformed input (file, JSON, UTF-8 …)
    TC_ERR_NOMEM = -4,   // allocation failed
    TC_ERR_INVALID = -5, // invalid argument from a caller or user
    TC_ERR_UNSUPPORTED = -6,
    TC_ERR_FULL = -7, // a bounded resource (queue, KV blocks) is exhausted; retry later
};

typedef struct tc_err {
    int code;
    char msg[512];
} tc_err;

// Sets err (if non-NULL) to code and a printf-formatted message; returns code so callers can
// `return tc_err_set(err, TC_ERR_FORMAT, "bad magic %x", m);`.
int tc_err_set(tc_err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// Prepends "prefix: " to an existing message (for context while unwinding).
int tc_err_wrap(tc_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
