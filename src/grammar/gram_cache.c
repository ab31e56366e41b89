// Compiled-grammar cache (see gram_cache.h): a small array scanned under a mutex (max_entries is tens),
// each entry the source's hash and bytes, the compiled grammar (one reference held by the cache) or the
// refusal's message, and a use stamp for LRU eviction.
#include "grammar/gram_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

typedef struct gc_entry {
    uint64_t hash;
    char *src; // (len) owned; NULL = free slot
    size_t len;
    gram *g;          // one reference, or NULL for a refusal
    long cost;        // counted against max_elements: compiled elements + source bytes / 8
    char *refusal;    // owned message when g is NULL
    unsigned long used; // stamp of the last lookup
} gc_entry;

struct gram_cache {
    pthread_mutex_t mu;
    gc_entry *e; // (max_entries)
    int max_entries;
    long max_elements, n_elements;
    unsigned long clock;
    long hits, compiles;
};

int gram_cache_new(int max_entries, long max_elements, gram_cache **out, tc_err *err) {
    *out = NULL;
    gram_cache *c = calloc(1, sizeof *c);
    if (c) c->e = calloc((size_t)(max_entries > 0 ? max_entries : 1), sizeof *c->e);
    if (!c || !c->e) {
        free(c);
        return tc_err_set(err, TC_ERR_NOMEM, "grammar cache: out of memory");
    }
    pthread_mutex_init(&c->mu, NULL);
    c->max_entries = max_entries > 0 ? max_entries : 1;
    c->max_elements = max_elements;
    *out = c;
    return 0;
}

static void entry_clear(gram_cache *c, gc_entry *x) {
    c->n_elements -= x->cost;
    gram_free(x->g);
    free(x->src);
    free(x->refusal);
    memset(x, 0, sizeof *x);
}

void gram_cache_free(gram_cache *c) {
    if (!c) return;
    for (int i = 0; i < c->max_entries; i++) entry_clear(c, &c->e[i]);
    pthread_mutex_destroy(&c->mu);
    free(c->e);
    free(c);
}

// The entry for src, or NULL. Under the lock.
static gc_entry *find(gram_cache *c, uint64_t h, const char *src, size_t len) {
    for (int i = 0; i < c->max_entries; i++) {
        gc_entry *x = &c->e[i];
        if (x->src && x->hash == h && x->len == len && !memcmp(x->src, src, len)) return x;
    }
    return NULL;
}

// Answers from entry x: a new reference, or its refusal. Under the lock.
static int answer(gram_cache *c, gc_entry *x, gram **out, tc_err *err) {
    x->used = ++c->clock;
    if (!x->g) return tc_err_set(err, TC_ERR_INVALID, "%s", x->refusal);
    *out = gram_ref(x->g);
    return 0;
}

// Stores a result, evicting least recently used entries to stay within the bounds. Under the lock.
static void store(gram_cache *c, uint64_t h, const char *src, size_t len, gram *g, const char *refusal) {
    long add = (g ? gram_n_elements(g) : 0) + (long)(len / 8) + 1;
    if (add > c->max_elements) return;
    for (;;) {
        gc_entry *victim = NULL, *free_slot = NULL;
        for (int i = 0; i < c->max_entries; i++) {
            gc_entry *x = &c->e[i];
            if (!x->src) free_slot = free_slot ? free_slot : x;
            else if (!victim || x->used < victim->used) victim = x;
        }
        if (free_slot && c->n_elements + add <= c->max_elements) {
            char *s = malloc(len ? len : 1), *r = refusal ? strdup(refusal) : NULL;
            if (!s || (refusal && !r)) {
                free(s);
                free(r);
                return; // not cached: still answered
            }
            memcpy(s, src, len);
            *free_slot = (gc_entry){h, s, len, g ? gram_ref(g) : NULL, add, r, ++c->clock};
            c->n_elements += add;
            return;
        }
        if (!victim) return;
        entry_clear(c, victim);
    }
}

int gram_cache_get(gram_cache *c, const char *src, size_t len, gram **out, tc_err *err) {
    *out = NULL;
    uint64_t h = XXH3_64bits(src, len);
    pthread_mutex_lock(&c->mu);
    gc_entry *x = find(c, h, src, len);
    int rc = 0;
    if (x) {
        c->hits++;
        rc = answer(c, x, out, err);
    }
    pthread_mutex_unlock(&c->mu);
    if (x) return rc;
    gram *g = NULL;
    tc_err e = {0};
    rc = gram_parse(src, len, NULL, &g, &e);
    pthread_mutex_lock(&c->mu);
    c->compiles++;
    if (rc == 0 || rc == TC_ERR_INVALID) {
        x = find(c, h, src, len); // compiled twice at once: keep the first
        if (!x) store(c, h, src, len, g, rc ? e.msg : NULL);
    }
    pthread_mutex_unlock(&c->mu);
    if (rc) return tc_err_set(err, rc, "%s", e.msg);
    *out = g;
    return 0;
}

void gram_cache_stats(gram_cache *c, long *hits, long *compiles) {
    pthread_mutex_lock(&c->mu);
    *hits = c->hits;
    *compiles = c->compiles;
    pthread_mutex_unlock(&c->mu);
}
