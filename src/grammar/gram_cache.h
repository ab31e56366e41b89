// A bounded cache of compiled grammars keyed by their source text (hashed, then compared in full), shared
// by threads: a request's grammar is compiled once and every choice of it, and every later request with the
// same text, gets a reference to the same immutable compiled grammar. Refusals (TC_ERR_INVALID) are cached
// too, so a hostile grammar sent again costs a lookup. Least recently used entries are evicted past
// max_entries or past max_elements in all (an entry counts its compiled elements plus its source bytes / 8,
// both about its memory in 8-byte units).
#ifndef TACHYON_GRAMMAR_CACHE_H
#define TACHYON_GRAMMAR_CACHE_H

#include <stddef.h>

#include "grammar/gram.h"

typedef struct gram_cache gram_cache; // owned, free with gram_cache_free (after every thread using it)

int gram_cache_new(int max_entries, long max_elements, gram_cache **out, tc_err *err);
void gram_cache_free(gram_cache *c);
// The compiled grammar of src (len bytes, root rule "root"): from the cache or compiled by gram_parse now
// (outside the lock: a long compile does not hold up other lookups). *out is a new reference: gram_free.
// Errors as gram_parse. Thread-safe.
int gram_cache_get(gram_cache *c, const char *src, size_t len, gram **out, tc_err *err);
// Lookups answered from the cache, and compilations done (refusals included).
void gram_cache_stats(gram_cache *c, long *hits, long *compiles);

#endif
