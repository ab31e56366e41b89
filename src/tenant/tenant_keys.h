// API keys and tenants: the key file (--api-key-file) and the key → tenant lookup.
//
// Format, one key per line (blank lines and lines starting with '#' are skipped; a '#' after whitespace
// starts a comment too):
//     KEY  TENANT  [rpm=N]  [tpm=N]  [share=W]
//   KEY     1..255 printable ASCII characters without spaces (what clients send as "Authorization: Bearer KEY")
//   TENANT  1..63 characters of [A-Za-z0-9_.-] (it becomes a metrics label)
//   rpm=N   requests per minute (integer >= 1); absent = unlimited
//   tpm=N   tokens per minute (integer >= 1): prompt tokens + max_tokens reserved at admission, the unused
//           part of max_tokens refunded when the request ends; absent = unlimited
//   share=W fair-share weight of running slots under load (0 < W <= 1000, default 1)
// Several keys may name the same tenant (key rotation); limits may be given on any of its lines, and lines
// that give the same limit must agree. A duplicate key, an unknown option or a malformed value is an error
// naming the line: a bad file is never half-applied.
#ifndef TACHYON_TENANT_KEYS_H
#define TACHYON_TENANT_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define TN_KEY_MAX 255
#define TN_NAME_MAX 63
#define TN_MAX_KEYS 100000

typedef struct tn_tenant {
    char name[TN_NAME_MAX + 1];
    long rpm, tpm;  // per minute; 0 = unlimited
    double share;   // > 0
} tn_tenant;

typedef struct tn_key {
    uint8_t key[TN_KEY_MAX + 1]; // zero-padded: every comparison reads all of it (constant time)
    int len;
    int tenant;                   // index into tenants
} tn_key;

typedef struct tn_table {
    tn_tenant *tenants; // (n_tenants) owned
    int n_tenants;
    tn_key *keys;       // (n_keys) owned
    int n_keys;
} tn_table;

// Parses the key file's text (len bytes). *out owned: tn_free. On error *out is NULL and err says which
// line and why.
int tn_parse(const char *text, size_t len, tn_table **out, tc_err *err);
// Reads and parses a file (at most 64 MiB).
int tn_load(const char *path, tn_table **out, tc_err *err);
// Adds one key for tenant `name` (created unlimited with share 1 if absent); *t may be NULL (a new table).
int tn_add_key(tn_table **t, const char *key, const char *name, tc_err *err);
void tn_free(tn_table *t);
// The tenant index of key (len bytes), or -1. Constant time in the key's contents: every stored key is
// compared in full (no early exit, no branch on a match), so neither where a key differs nor which key
// matched shows in the time taken.
int tn_lookup(const tn_table *t, const char *key, size_t len);
// Index of the tenant called name, or -1.
int tn_find_tenant(const tn_table *t, const char *name);

#endif
