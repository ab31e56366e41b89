// The global functions a chat template can call: jinja2's range, namespace and dict, and transformers'
// raise_exception and strftime_now.
#include <stdio.h>
#include <time.h>

#include "jinja/jinja_int.h"

enum { FN_RANGE, FN_NAMESPACE, FN_DICT, FN_RAISE, FN_STRFTIME, FN_COUNT };
static const char *const fn_names[FN_COUNT] = {"range", "namespace", "dict", "raise_exception", "strftime_now"};

int jinja_global_fn(const char *name, size_t n) {
    for (int i = 0; i < FN_COUNT; i++)
        if (jinja_eq(name, n, fn_names[i])) return i;
    return -1;
}

static jv fn_range(jinja_ctx *c, int npos, const jv *pos) {
    int64_t v[3] = {0, 0, 1};
    if (npos < 1 || npos > 3) jinja_err(c, "range expected 1 to 3 arguments, got %d", npos);
    for (int i = 0; i < npos; i++) {
        if (pos[i].t != JV_INT && pos[i].t != JV_BOOL) jinja_err(c, "range: '%s' object cannot be interpreted as an integer", jinja_type_name(pos[i]));
        v[npos == 1 ? 1 : i] = pos[i].u.i;
    }
    if (v[2] == 0) jinja_err(c, "range() arg 3 must not be zero");
    double count = ((double)v[1] - (double)v[0]) / (double)v[2];
    if (count > 100000) jinja_fail(&c->fault, TC_ERR_INVALID, "range too big (more than 100000 items)");
    jinja_list *l = jinja_list_new(c, 0);
    for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2]) jinja_list_push(c, l, jinja_int(i));
    return (jv){.t = JV_LIST, .u.l = l};
}

static jv fn_strftime(jinja_ctx *c, int npos, const jv *pos) {
    if (npos != 1 || pos[0].t != JV_STR) jinja_err(c, "strftime_now expects one format string");
    char fmt[256], out[512];
    if (pos[0].n >= sizeof fmt) jinja_err(c, "strftime_now: format too long");
    memcpy(fmt, pos[0].u.s, pos[0].n), fmt[pos[0].n] = 0;
    time_t t = (time_t)c->now;
    struct tm tm;
    if (!localtime_r(&t, &tm)) jinja_err(c, "strftime_now: bad time");
    size_t n = strftime(out, sizeof out, fmt, &tm);
    char *s = jinja_strndup(&c->ar, out, n);
    return jinja_str(s, n);
}

jv jinja_global_call(jinja_ctx *c, int fn, int npos, const jv *pos, int nkw, const jv *kwnames, const jv *kwvals) {
    switch (fn) {
    case FN_RANGE: return fn_range(c, npos, pos);
    case FN_NAMESPACE:
    case FN_DICT: {
        jinja_dict *d = jinja_dict_new(c, 0);
        for (int i = 0; i < npos; i++) { // namespace({…}) / dict({…}) start from a mapping
            if (pos[i].t != JV_DICT && pos[i].t != JV_NS) jinja_err(c, "%s() takes a mapping", fn_names[fn]);
            for (uint32_t k = 0; k < pos[i].u.d->n; k++) jinja_dict_set(c, d, pos[i].u.d->k[k], pos[i].u.d->v[k]);
        }
        for (int i = 0; i < nkw; i++) jinja_dict_set(c, d, kwnames[i], kwvals[i]);
        return (jv){.t = fn == FN_NAMESPACE ? JV_NS : JV_DICT, .u.d = d};
    }
    case FN_RAISE: {
        jv msg = npos > 0 ? jinja_to_str(c, pos[0]) : jinja_str("", 0);
        jinja_err(c, "%.*s", (int)(msg.n < 500 ? msg.n : 500), msg.u.s);
    }
    case FN_STRFTIME: return fn_strftime(c, npos, pos);
    default: jinja_err(c, "internal error: bad function");
    }
}
