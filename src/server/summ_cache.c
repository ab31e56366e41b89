// Bounded LRU of summaries. 256 entries at most, so a linear scan over an array ordered by last use costs
// less than keeping a hash table and a list in step; a hit moves the entry to the front.
#include "server/summ_cache.h"

#include <stdlib.h>
#include <string.h>

typedef struct summ_entry {
    uint64_t key;
    char *text; // (len + 1) owned, NUL-terminated
    size_t len;
} summ_entry;

struct summ_cache {
    summ_entry *e; // (n) most recently used first
    int n, cap;
};

summ_cache *summ_cache_new(int cap) {
    summ_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->cap = cap < 1 ? 1 : cap;
    c->e = calloc((size_t)c->cap, sizeof *c->e);
    if (!c->e) {
        free(c);
        return NULL;
    }
    return c;
}

void summ_cache_free(summ_cache *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) free(c->e[i].text);
    free(c->e);
    free(c);
}

// Moves entry i to the front (most recent).
static void to_front(summ_cache *c, int i) {
    summ_entry t = c->e[i];
    memmove(&c->e[1], &c->e[0], (size_t)i * sizeof *c->e);
    c->e[0] = t;
}

const char *summ_cache_get(summ_cache *c, uint64_t key, size_t *len) {
    for (int i = 0; i < c->n; i++)
        if (c->e[i].key == key) {
            to_front(c, i);
            if (len) *len = c->e[0].len;
            return c->e[0].text;
        }
    return NULL;
}

int summ_cache_put(summ_cache *c, uint64_t key, const char *text, size_t len) {
    char *t = malloc(len + 1);
    if (!t) return -1;
    memcpy(t, text, len);
    t[len] = 0;
    int i = 0;
    while (i < c->n && c->e[i].key != key) i++;
    if (i == c->n) { // new: take a free slot, or the least recently used one
        if (c->n < c->cap) c->n++;
        else i = c->n - 1;
    }
    free(c->e[i].text); // the replaced or evicted summary (NULL in a fresh slot)
    c->e[i] = (summ_entry){key, t, len};
    to_front(c, i);
    return 0;
}

int summ_cache_size(const summ_cache *c) { return c->n; }
