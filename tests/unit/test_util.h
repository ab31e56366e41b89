// Minimal test harness: CHECK* macros print what differed and count failures; TEST_MAIN reports
// "N passed, N failed" and the exit status. Header-only so each test is one self-contained file.
#ifndef TACHYON_TEST_UTIL_H
#define TACHYON_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int tu_pass, tu_fail;

#define CHECK(cond)                                                                                          \
    do {                                                                                                     \
        if (cond) tu_pass++;                                                                                 \
        else {                                                                                               \
            tu_fail++;                                                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                         \
        }                                                                                                    \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                                 \
    do {                                                                                                     \
        if (cond) tu_pass++;                                                                                 \
        else {                                                                                               \
            tu_fail++;                                                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);                         \
            fprintf(stderr, __VA_ARGS__);                                                                    \
            fputc('\n', stderr);                                                                             \
        }                                                                                                    \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                                   \
    CHECK_MSG((long long)(a) == (long long)(b), "%lld != %lld", (long long)(a), (long long)(b))

#define CHECK_NEAR(a, b, tol)                                                                                \
    CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol), "%.9g vs %.9g (tol %.3g)", (double)(a), (double)(b), \
              (double)(tol))

#define TEST_MAIN_END()                                                                                      \
    do {                                                                                                     \
        printf("%d passed, %d failed\n", tu_pass, tu_fail);                                                  \
        return tu_fail ? 1 : 0;                                                                              \
    } while (0)

#endif
