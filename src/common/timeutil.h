// Monotonic and wall clocks. All times in seconds as double unless the name says otherwise.
#ifndef TACHYON_COMMON_TIMEUTIL_H
#define TACHYON_COMMON_TIMEUTIL_H

#include <time.h>

static inline double tc_now(void) { // monotonic, seconds
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline double tc_wall(void) { // unix time, seconds
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
