// Context-overflow truncation, the pure part (see trunc.h).
#include "server/trunc.h"

#include <string.h>

int trunc_turns(const chat_msg *msgs, int n, int *turn) {
    int last_user = -1;
    for (int i = 0; i < n; i++)
        if (!strcmp(msgs[i].role, "user")) last_user = i;
    int t = -1, seen_user = 0;
    for (int i = 0; i < n; i++) {
        int is_user = !strcmp(msgs[i].role, "user");
        // a user message opens a turn; so does the first non-system message before any user message
        if (is_user || (!seen_user && t < 0 && strcmp(msgs[i].role, "system"))) t++;
        if (is_user) seen_user = 1;
        turn[i] = (last_user < 0 || i >= last_user || !strcmp(msgs[i].role, "system")) ? -1 : t;
    }
    return last_user < 0 ? 0 : t; // turns before the last user turn (whose index is t)
}

int trunc_keep(const int *turn, int n, int k, int *keep) {
    int m = 0;
    for (int i = 0; i < n; i++)
        if (turn[i] < 0 || turn[i] >= k) keep[m++] = i;
    return m;
}

int trunc_search(int n_turns, trunc_fits_fn fits, void *ctx) {
    int r = fits(ctx, 0);
    if (r) return r < 0 ? r : 0;
    if (n_turns <= 0) return TRUNC_NOFIT;
    r = fits(ctx, n_turns);
    if (r <= 0) return r < 0 ? r : TRUNC_NOFIT;
    int lo = 1, hi = n_turns; // fits(lo - 1) is false, fits(hi) is true
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        r = fits(ctx, mid);
        if (r < 0) return r;
        if (r) hi = mid;
        else lo = mid + 1;
    }
    return hi;
}

int trunc_middle_out(int32_t *ids, int n, int keep) {
    if (n <= keep) return n;
    int head = keep / 2, tail = keep - head;
    memmove(ids + head, ids + n - tail, (size_t)tail * sizeof *ids);
    return keep;
}
