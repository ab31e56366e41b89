// The --api-key-file parser and the constant-time key lookup (see tenant_keys.h for the format).
#include "tenant/tenant_keys.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tenant_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
}

void tn_free(tn_table *t) {
    if (!t) return;
    free(t->tenants);
    free(t->keys);
    free(t);
}

int tn_find_tenant(const tn_table *t, const char *name) {
    for (int i = 0; t && i < t->n_tenants; i++)
        if (!strcmp(t->tenants[i].name, name)) return i;
    return -1;
}

static int get_tenant(tn_table *t, const char *name, tc_err *err) {
    int i = tn_find_tenant(t, name);
    if (i >= 0) return i;
    if (t->n_tenants == 0 || (t->n_tenants >= 4 && !(t->n_tenants & (t->n_tenants - 1)))) { // full: 4, 8, 16 …
        tn_tenant *nt = realloc(t->tenants, (size_t)(t->n_tenants ? 2 * t->n_tenants : 4) * sizeof *nt);
        if (!nt) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        t->tenants = nt;
    }
    tn_tenant *x = &t->tenants[t->n_tenants];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    x->share = 1.0;
    return t->n_tenants++;
}

static int push_key(tn_table *t, const char *key, size_t len, int tenant, tc_err *err) {
    if (t->n_keys >= TN_MAX_KEYS) return tc_err_set(err, TC_ERR_INVALID, "more than %d keys", TN_MAX_KEYS);
    if (t->n_keys == 0 || (t->n_keys >= 4 && !(t->n_keys & (t->n_keys - 1)))) {
        tn_key *nk = realloc(t->keys, (size_t)(t->n_keys ? 2 * t->n_keys : 4) * sizeof *nk);
        if (!nk) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        t->keys = nk;
    }
    tn_key *k = &t->keys[t->n_keys++];
    memset(k, 0, sizeof *k);
    memcpy(k->key, key, len);
    k->len = (int)len;
    k->tenant = tenant;
    return 0;
}

int tn_add_key(tn_table **tp, const char *key, const char *name, tc_err *err) {
    size_t len = strlen(key);
    if (len == 0 || len > TN_KEY_MAX) return tc_err_set(err, TC_ERR_INVALID, "API key must be 1..%d bytes", TN_KEY_MAX);
    if (!*tp && !(*tp = calloc(1, sizeof **tp))) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    if (tn_lookup(*tp, key, len) >= 0) return 0; // already there (same key in the file)
    int ti = get_tenant(*tp, name, err);
    if (ti < 0) return ti;
    return push_key(*tp, key, len, ti, err);
}

// One "name=value" option of a line into tenant x; `given` tracks which options earlier lines set.
static int parse_opt(tn_tenant *x, int *given, const char *w, int line, tc_err *err) {
    const char *eq = strchr(w, '=');
    if (!eq) return tc_err_set(err, TC_ERR_INVALID, "line %d: '%.40s' is not an option (rpm=N, tpm=N or share=W)", line, w);
    size_t n = (size_t)(eq - w);
    const char *v = eq + 1;
    char *end;
    errno = 0;
    if ((n == 3 && !strncmp(w, "rpm", 3)) || (n == 3 && !strncmp(w, "tpm", 3))) {
        int bit = w[0] == 'r' ? 1 : 2;
        long long x_ = strtoll(v, &end, 10);
        if (!*v || *end || errno || x_ < 1 || x_ > 1000000000LL)
            return tc_err_set(err, TC_ERR_INVALID, "line %d: %.3s must be an integer from 1 to 1000000000, got '%.40s'",
                              line, w, v);
        long *dst = bit == 1 ? &x->rpm : &x->tpm;
        if ((*given & bit) && *dst != (long)x_)
            return tc_err_set(err, TC_ERR_INVALID, "line %d: tenant %s already has %.3s=%ld on an earlier line", line,
                              x->name, w, *dst);
        *dst = (long)x_;
        *given |= bit;
        return 0;
    }
    if (n == 5 && !strncmp(w, "share", 5)) {
        double d = strtod(v, &end);
        if (!*v || *end || errno || !(d > 0) || d > 1000)
            return tc_err_set(err, TC_ERR_INVALID, "line %d: share must be a number in (0, 1000], got '%.40s'", line, v);
        if ((*given & 4) && x->share != d)
            return tc_err_set(err, TC_ERR_INVALID, "line %d: tenant %s already has share=%g on an earlier line", line,
                              x->name, x->share);
        x->share = d;
        *given |= 4;
        return 0;
    }
    return tc_err_set(err, TC_ERR_INVALID, "line %d: unknown option '%.*s' (rpm, tpm, share)", line, (int)(n > 40 ? 40 : n), w);
}

// Splits a line into whitespace-separated words (in place); stops at a '#' that starts a word.
static int split_words(char *s, char **w, int max) {
    int n = 0;
    while (*s) {
        while (*s == ' ' || *s == '\t' || *s == '\r') *s++ = 0;
        if (!*s || *s == '#') break;
        if (n == max) return max + 1;
        w[n++] = s;
        while (*s && *s != ' ' && *s != '\t' && *s != '\r') s++;
    }
    return n;
}

int tn_parse(const char *text, size_t len, tn_table **out, tc_err *err) {
    *out = NULL;
    tn_table *t = calloc(1, sizeof *t);
    int *given = NULL; // per tenant: bit 1 rpm, 2 tpm, 4 share set by some line
    char buf[4096];
    int rc = 0, line = 0;
    if (!t) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    for (size_t p = 0; p < len;) {
        line++;
        const char *nl = memchr(text + p, '\n', len - p);
        size_t n = nl ? (size_t)(nl - (text + p)) : len - p;
        if (n >= sizeof buf) {
            rc = tc_err_set(err, TC_ERR_INVALID, "line %d: longer than %zu bytes", line, sizeof buf - 1);
            goto fail;
        }
        memcpy(buf, text + p, n);
        buf[n] = 0;
        p += n + 1;
        if (memchr(buf, 0, n)) {
            rc = tc_err_set(err, TC_ERR_INVALID, "line %d: contains a NUL byte", line);
            goto fail;
        }
        char *w[8];
        int nw = split_words(buf, w, 5);
        if (nw == 0) continue;
        if (nw == 1) {
            rc = tc_err_set(err, TC_ERR_INVALID, "line %d: a key needs a tenant name: KEY TENANT [rpm=N] [tpm=N] [share=W]", line);
            goto fail;
        }
        if (nw > 5) {
            rc = tc_err_set(err, TC_ERR_INVALID, "line %d: too many fields (KEY TENANT [rpm=N] [tpm=N] [share=W])", line);
            goto fail;
        }
        size_t kl = strlen(w[0]), tl = strlen(w[1]);
        int ok = kl <= TN_KEY_MAX;
        for (size_t i = 0; ok && i < kl; i++) ok = w[0][i] > 0x20 && w[0][i] < 0x7f;
        if (!ok) {
            rc = tc_err_set(err, TC_ERR_INVALID, "line %d: the key must be 1..%d printable ASCII characters", line, TN_KEY_MAX);
            goto fail;
        }
        ok = tl <= TN_NAME_MAX;
        for (size_t i = 0; ok && i < tl; i++) ok = tenant_char(w[1][i]);
        if (!ok) {
            rc = tc_err_set(err, TC_ERR_INVALID, "line %d: tenant name '%.70s' must be 1..%d of [A-Za-z0-9_.-]", line,
                            w[1], TN_NAME_MAX);
            goto fail;
        }
        if (tn_lookup(t, w[0], kl) >= 0) {
            rc = tc_err_set(err, TC_ERR_INVALID, "line %d: duplicate key (already given on an earlier line)", line);
            goto fail;
        }
        int n_before = t->n_tenants;
        int ti = get_tenant(t, w[1], err);
        if (ti < 0) {
            rc = ti;
            goto fail;
        }
        if (t->n_tenants > n_before) {
            int *g = realloc(given, (size_t)t->n_tenants * sizeof *g);
            if (!g) {
                rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
                goto fail;
            }
            given = g;
            given[ti] = 0;
        }
        for (int i = 2; i < nw; i++)
            if ((rc = parse_opt(&t->tenants[ti], &given[ti], w[i], line, err))) goto fail;
        if ((rc = push_key(t, w[0], kl, ti, err))) goto fail;
    }
    if (t->n_keys == 0) {
        rc = tc_err_set(err, TC_ERR_INVALID, "no keys (every request would be refused)");
        goto fail;
    }
    free(given);
    *out = t;
    return 0;
fail:
    free(given);
    tn_free(t);
    return rc;
}

int tn_load(const char *path, tn_table **out, tc_err *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return tc_err_set(err, TC_ERR_IO, "%s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    int rc = 0;
    while (b) {
        if (n == cap) {
            if (cap >= (64u << 20)) {
                rc = tc_err_set(err, TC_ERR_INVALID, "%s: larger than 64 MiB", path);
                break;
            }
            char *nb = realloc(b, cap * 2);
            if (!nb) break;
            b = nb;
            cap *= 2;
        }
        size_t r = fread(b + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    if (!rc && ferror(f)) rc = tc_err_set(err, TC_ERR_IO, "%s: read error", path);
    fclose(f);
    if (!b) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    if (!rc) {
        rc = tn_parse(b, n, out, err);
        if (rc) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            tc_err_set(err, rc, "%s: %s", path, msg);
        }
    }
    free(b);
    return rc;
}

int tn_lookup(const tn_table *t, const char *key, size_t len) {
    if (!t || len == 0 || len > TN_KEY_MAX) return -1; // the caller's own key length: nothing secret
    uint8_t k[TN_KEY_MAX + 1] = {0};
    memcpy(k, key, len);
    uint64_t found = 0, idx = 0;
    for (int i = 0; i < t->n_keys; i++) {
        const tn_key *x = &t->keys[i];
        uint32_t diff = (uint32_t)x->len ^ (uint32_t)len;
        for (int j = 0; j <= TN_KEY_MAX; j++) diff |= (uint32_t)(x->key[j] ^ k[j]);
        uint64_t eq = (uint64_t)(((uint64_t)diff - 1) >> 63); // 1 iff diff == 0, without a branch
        uint64_t mask = 0 - eq;
        idx |= mask & (uint64_t)x->tenant;
        found |= eq;
    }
    return found ? (int)idx : -1;
}
