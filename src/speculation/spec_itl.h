// The inter-token latency speculation must not raise. With several streams decoding, a request's drafted rows
// lengthen the step every stream waits for: its peers see a longer gap between tokens and gain nothing. `auto`
// therefore lets drafts make a multi-stream step at most as long as the recent p99 of the gaps streams saw
// between tokens as they would have been WITHOUT drafts: every step that advanced n decoding streams gave n such
// gaps, each as long as the step's plain part (its decode rows and prefill chunks). So the streams' p99
// inter-token latency stays what `--spec off` gives. In steady decoding that leaves no room (drafting then
// waits for a single stream); when prompts are prefilled beside decoding streams often enough to set the p99,
// decode-only steps may draft up to that length. (Prefill steps nobody decoded in are no gap of anybody's.)
// The window keeps row counts, priced with the step-cost line of the moment: times predicted by an older fit
// drift with it (a few % under a changing load) and read as room that is not there.
#ifndef TACHYON_SPEC_ITL_H
#define TACHYON_SPEC_ITL_H

#define SPEC_ITL_WIN 1024   // gaps remembered (a few hundred steps)
#define SPEC_ITL_RANK (SPEC_ITL_WIN / 100) // the reference: the window's 10th largest gap, its p99
#define SPEC_ITL_SLACK 0.02 // a step may exceed the reference by this fraction (below what a benchmark resolves)

typedef struct spec_itl {
    int rows[SPEC_ITL_WIN]; // ring of the gaps' plain step sizes (rows)
    int n, next;
    int ref_rows;           // the window's SPEC_ITL_RANK-th largest gap, 0 until it holds that many
} spec_itl;

void spec_itl_init(spec_itl *w);
// After a step that advanced n_gaps decoding streams (a stream's first token is no gap): plain_rows = its rows
// minus its drafted rows, once per gap.
void spec_itl_observe(spec_itl *w, int plain_rows, int n_gaps);
// Drafted rows, each costing row_s seconds, that a step of plain_rows draft-free rows, predicted to take step_s
// seconds with the drafts planned so far, may still add, with the reference step priced by the line
// t(n) = a + b·n. 0 while the reference is unknown, and whenever the reference is no bigger than this step's
// plain part (steady decoding: the bound then depends on no price).
int spec_itl_room(const spec_itl *w, int plain_rows, double a, double b, double step_s, double row_s);

#endif
