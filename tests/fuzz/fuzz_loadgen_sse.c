// libFuzzer target: the bench-serve SSE parser and the chunk JSON reader (lg_sse.h), which read whatever
// the benchmarked server sends. The input is a stream; it is fed whole, then in pieces whose sizes come from
// the input itself (bytes split anywhere, '\r' and '\n' of one CRLF in different pieces), and the events
// delivered must be the same both ways. Every event goes through lg_chunk_parse in both modes (chat and
// completions). A third pass with a tiny max_len exercises the overlong-line errors.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loadgen/lg_sse.h"

#define CHECK(c)                                                                                             \
    do {                                                                                                     \
        if (!(c)) __builtin_trap();                                                                          \
    } while (0)

typedef struct {
    char *log; // every event as (8-byte length, data), appended
    size_t len, cap;
    int n_events;
} events;

static int on_event(void *ud, const char *data, size_t len) {
    events *ev = ud;
    CHECK(data[len] == 0);
    size_t need = ev->len + sizeof len + len;
    if (need > ev->cap) {
        size_t cap = ev->cap ? ev->cap : 1024;
        while (cap < need) cap *= 2;
        char *p = realloc(ev->log, cap);
        if (!p) return -1;
        ev->log = p, ev->cap = cap;
    }
    memcpy(ev->log + ev->len, &len, sizeof len);
    memcpy(ev->log + ev->len + sizeof len, data, len);
    ev->len = need;
    ev->n_events++;
    for (int chat = 0; chat < 2; chat++) {
        lg_chunk c;
        tc_err err = {0};
        int rc = lg_chunk_parse(&c, data, len, chat, &err);
        if (rc) {
            CHECK(rc == TC_ERR_FORMAT && err.msg[0] && !c.json_);
            continue;
        }
        if (c.content) CHECK(c.content_len > 0 && c.content[c.content_len] == 0);
        else CHECK(c.content_len == 0);
        if (c.id) (void)strlen(c.id);
        CHECK(!c.done || !c.json_);
        lg_chunk_clear(&c);
    }
    return 0;
}

// Feeds the stream in pieces of the given sizes (cycled); returns feed/finish's status.
static int run(const uint8_t *d, size_t n, const uint8_t *sizes, size_t n_sizes, size_t max_len, events *ev) {
    lg_sse p;
    lg_sse_init(&p, on_event, ev);
    if (max_len) p.max_len = max_len;
    tc_err err = {0};
    int rc = 0;
    for (size_t i = 0, k = 0; i < n && !rc; k++) {
        size_t step = n_sizes ? 1 + sizes[k % n_sizes] % 13 : n;
        if (step > n - i) step = n - i;
        rc = lg_sse_feed(&p, (const char *)d + i, step, &err);
        i += step;
    }
    if (!rc) rc = lg_sse_finish(&p, &err);
    if (rc == TC_ERR_FORMAT || rc == TC_ERR_NOMEM) CHECK(err.msg[0]);
    lg_sse_free(&p);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    events whole = {0}, split = {0}, tiny = {0};
    int rc1 = run(data, size, NULL, 0, 0, &whole);
    int rc2 = run(data, size, data, size < 16 ? size : 16, 0, &split);
    CHECK(rc1 == rc2);
    CHECK(whole.n_events == split.n_events && whole.len == split.len);
    CHECK(!whole.len || !memcmp(whole.log, split.log, whole.len));
    (void)run(data, size, data, size < 16 ? size : 16, 8, &tiny);
    free(whole.log);
    free(split.log);
    free(tiny.log);
    return 0;
}
