// Recent p99 of the streams' gaps as plain (draft-free) step sizes: the bound on multi-stream draft rows. See spec_itl.h.
#include "speculation/spec_itl.h"

#include <math.h>

void spec_itl_init(spec_itl *w) {
    w->n = w->next = 0;
    w->ref_rows = 0;
}

void spec_itl_observe(spec_itl *w, int plain_rows, int n_gaps) {
    if (plain_rows < 0 || n_gaps <= 0) return;
    if (n_gaps > SPEC_ITL_WIN) n_gaps = SPEC_ITL_WIN;
    for (int i = 0; i < n_gaps; i++) {
        w->rows[w->next] = plain_rows;
        w->next = (w->next + 1) % SPEC_ITL_WIN;
        if (w->n < SPEC_ITL_WIN) w->n++;
    }
    // The rank is 1% of the whole window even while it fills (the missing gaps count as empty): one prefill
    // step beside a few streams is a few gaps at once, and the p99 of a few hundred gaps would be that step.
    const int rank = SPEC_ITL_RANK;
    int top[SPEC_ITL_RANK] = {0}; // descending: the largest `rank` of the window
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
