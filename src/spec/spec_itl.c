// Recent p99 of the plain (draft-free) steps' sizes: the bound on multi-stream draft rows. See spec_itl.h.
#include "spec/spec_itl.h"

#include <math.h>

void spec_itl_init(spec_itl *w) {
    w->n = w->next = 0;
    w->ref_rows = 0;
}

void spec_itl_observe(spec_itl *w, int plain_rows) {
    if (plain_rows < 0) return;
    w->rows[w->next] = plain_rows;
    w->next = (w->next + 1) % SPEC_ITL_WIN;
    if (w->n < SPEC_ITL_WIN) w->n++;
    if (w->n < SPEC_ITL_RANK) return;
    int top[SPEC_ITL_RANK] = {0}; // descending: the largest SPEC_ITL_RANK of the window
    for (int i = 0; i < w->n; i++) {
        int x = w->rows[i];
        if (x <= top[SPEC_ITL_RANK - 1]) continue;
        int j = SPEC_ITL_RANK - 1;
        for (; j > 0 && top[j - 1] < x; j--) top[j] = top[j - 1];
        top[j] = x;
    }
    w->ref_rows = top[SPEC_ITL_RANK - 1];
}

int spec_itl_room(const spec_itl *w, int plain_rows, double a, double b, double step_s, double row_s) {
    if (w->ref_rows <= plain_rows || !(row_s > 0) || !(a >= 0) || !(b >= 0)) return 0;
    double room = ((a + b * w->ref_rows) * (1.0 + SPEC_ITL_SLACK) - step_s) / row_s;
    return room < 1 ? 0 : room > (1 << 20) ? 1 << 20 : (int)floor(room);
}
