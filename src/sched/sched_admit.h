// SLO-aware admission: predicts a request's time to first token from the work queued ahead of it and the
// online step-cost model, so that --sched slo can refuse at once (503 + Retry-After) a request whose target
// cannot be met, and drop a waiting one that has become hopeless, instead of serving either late.
//
// The prediction (seconds from now): with d running streams decoding, each step carries d decode rows and
// P = max(1, T - d) prefill tokens, T = the step's token budget under the ITL guard. The prefill ahead of
// the request, A = (prefill still owed to running requests) + (remaining prefill of the waiting requests
// that rank before it: all of them under fifo, sched_key_before otherwise) + its own prompt, takes
// S = ceil(A / P) steps, and the fitted step cost t(n) = a + b·n gives TTFT = S·a + b·(S·d + A). The drain
// time (Retry-After) is the same formula over ALL queued prefill. Lanes (priority / slo policies): for a
// short request (when a slot is free), the long prompts of its class are not ahead of it: A drains in the
// short lane, P − ceil(P · SCHED_LONG_SHARE) per step, while the long ones fill the rest of each of those
// steps (up to their tokens); for a long request, the short ones of its class are all ahead. A request of a
// better priority than every decoding stream gets uncapped steps (the ITL guard's exemption, sched.h). Not modelled: prefix-cache hits (so the
// prediction errs on the slow side for repeated prefixes) and waits for a free running slot (max_seqs).
#ifndef TACHYON_SCHED_ADMIT_H
#define TACHYON_SCHED_ADMIT_H

#include "sched/sched_order.h"

// A snapshot of the load (filled by sched_load_fill, sched.h, on the engine thread; read anywhere). This
// file reads only the snapshot, never the scheduler, so the scheduler may call it and not the reverse.
typedef struct sched_load {
    int policy;
    double aging_s;
    int ready;             // 0: the step-cost model has no fit yet; predictions are 0 (never refuse)
    double a, b;           // step cost: seconds = a + b·tokens
    int n_decoding;        // running requests decoding (one row each per step)
    int step_tokens;       // the step's token budget with n_decoding streams (ITL guard applied)
    int full_tokens;       // the uncapped budget (max_batch_tokens)
    int guard_fair;        // ranked policy with itl_guard_fair: a better class than every stream is uncapped
    int best_dec_prio;     // the best (lowest) priority among decoding streams
    int prio_floor;        // the best priority present: the aging floor of every key (sched_order.h)
    long long catching;    // prefill tokens still owed to running requests
    long long catching_long; // of which, owed to long prompts (more than long_tok left)
    int long_tok;          // a prompt with more prefill left than this is long (lanes: sched_order.h)
    int slots_full;        // every running slot (max_seqs) is taken
    long long wait_tokens; // prefill tokens of every waiting request
    sched_key *wait;       // (n_wait) keys of waiting requests; storage (cap_wait) is the caller's
    int n_wait, cap_wait;  // beyond cap_wait, waiting requests count in wait_tokens only
} sched_load;

// Predicted seconds until the first token of request k (if k->id matches a waiting key, that entry is k
// itself and is not counted twice). extra: prefill tokens known to be ahead but not in l (submitted, not
// yet in the scheduler). *drain_s (may be NULL): seconds until all queued prefill, k's included, is done.
double sched_predict_ttft(const sched_load *l, const sched_key *k, double now, long long extra,
                          double *drain_s);

#endif
