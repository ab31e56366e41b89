// The summaries' LRU cache (src/server/summ_cache.c): hits, replacement, eviction of the least recently used.
#include <string.h>

#include "server/summ_cache.h"
#include "test_util.h"

int main(void) {
    summ_cache *c = summ_cache_new(2);
    CHECK(c != NULL);
    size_t len = 0;
    CHECK(summ_cache_get(c, 1, &len) == NULL);
    CHECK_EQ_INT(summ_cache_put(c, 1, "one", 3), 0);
    CHECK_EQ_INT(summ_cache_put(c, 2, "two", 3), 0);
    const char *t = summ_cache_get(c, 1, &len); // 1 becomes the most recent: 2 is evicted next
    CHECK(t && len == 3 && !strcmp(t, "one"));
    CHECK_EQ_INT(summ_cache_put(c, 3, "three", 5), 0);
    CHECK_EQ_INT(summ_cache_size(c), 2);
    CHECK(summ_cache_get(c, 2, &len) == NULL);
    CHECK(summ_cache_get(c, 3, &len) != NULL);
    CHECK_EQ_INT(summ_cache_put(c, 1, "uno", 3), 0); // replace in place, no eviction
    CHECK_EQ_INT(summ_cache_size(c), 2);
    t = summ_cache_get(c, 1, &len);
    CHECK(t && !strcmp(t, "uno"));
    CHECK(summ_cache_get(c, 3, &len) != NULL);
    summ_cache_free(c);
    TEST_MAIN_END();
}
