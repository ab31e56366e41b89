// Recent p99 of the streams' gaps as plain (draft-free) step sizes: the bound on multi-stream draft rows. See spec_itl.h.
#include "spec/spec_itl.h"

#include <math.h>

void spec_itl_init(spec_itl *w) {
    w->n = w->next = 0;
    w->ref_rows = 0;
}

#define SPEC_ITL_MAX_RANK (SPEC_ITL_WIN / 100 > 3 ? SPEC_ITL_WIN / 100 : 3)

void spec_itl_observe(spec_itl *w, int plain_rows, int n_gaps) {
    if (plain_rows < 0 || n_gaps <= 0) return;
    if (n_gaps > SPEC_ITL_WIN) n_gaps = SPEC_ITL_WIN;
    for (int i = 0; i < n_gaps; i++) {
        w->rows[w->next] = plain_rows;
        w->next = (w->next + 1) % SPEC_ITL_WIN;
        if (w->n < SPEC_ITL_WIN) w->n++;
    }
    int rank = w->n / 100 > 3 ? w->n / 100 : 3;
    if (w->n < rank) return;
    int top[SPEC_ITL_MAX_RANK] = {0}; // descending: the largest `rank` of the window
    for (int i = 0; i < w->n; i++) {
        int x = w->rows[i];
        if (x <= top[rank - 1]) continue;
        int j = rank - 1;
        for (; j > 0 && top[j - 1] < x; j--) top[j] = top[j - 1];
        top[j] = x;
    }
    w->ref_rows = top[rank - 1];
}

int spec_itl_room(const spec_itl *w, int plain_rows, double a, double b, double step_s, double row_s) {
    if (w->ref_rows <= plain_rows || !(row_s > 0) || !(a >= 0) || !(b >= 0)) return 0;
    double room = ((a + b * w->ref_rows) * (1.0 + SPEC_ITL_SLACK) - step_s) / row_s;
    return room < 1 ? 0 : room > (1 << 20) ? 1 << 20 : (int)floor(room);
}
