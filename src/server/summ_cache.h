// Summaries of dropped conversation turns (--summarize-with), cached by the hash of the turns' rendered
// text: a bounded LRU map hash → summary text. Pure data structure, no locking (the event loop owns it).
#ifndef TACHYON_SERVER_SUMM_CACHE_H
#define TACHYON_SERVER_SUMM_CACHE_H

#include <stddef.h>
#include <stdint.h>

#define SUMM_CACHE_CAP 256 // entries; the least recently used is evicted beyond this

typedef struct summ_cache summ_cache;

summ_cache *summ_cache_new(int cap); // owned, free with summ_cache_free; NULL on OOM (cap < 1 → 1)
void summ_cache_free(summ_cache *c);
// The summary cached under key (borrowed, valid until the next put), or NULL; a hit becomes most recent.
const char *summ_cache_get(summ_cache *c, uint64_t key, size_t *len);
// Stores a copy of text[0..len) under key (replacing an older one), evicting the least recently used entry
// when full. 0, or -1 on OOM (the cache is unchanged).
int summ_cache_put(summ_cache *c, uint64_t key, const char *text, size_t len);
int summ_cache_size(const summ_cache *c);

#endif
