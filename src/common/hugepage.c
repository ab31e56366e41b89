// Transparent huge pages for the big buffers (hugepage.h).
#include "common/hugepage.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int tc_huge_pages_on(void) {
    const char *e = getenv("TACHYON_HUGE_PAGES");
    return !(e && !strcmp(e, "0"));
}

void tc_huge_advise(void *p, size_t n) {
    if (!p || !tc_huge_pages_on()) return;
    const uintptr_t lo = ((uintptr_t)p + TC_HUGE_PAGE - 1) & ~(uintptr_t)(TC_HUGE_PAGE - 1);
    const uintptr_t hi = ((uintptr_t)p + n) & ~(uintptr_t)(TC_HUGE_PAGE - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE); // failure (a kernel without THP) only costs speed
}

void *tc_huge_alloc(size_t n) {
    if (n < TC_HUGE_PAGE || !tc_huge_pages_on()) return aligned_alloc(64, (n + 63) & ~(size_t)63);
    const size_t sz = (n + TC_HUGE_PAGE - 1) & ~(TC_HUGE_PAGE - 1);
    void *p = aligned_alloc(TC_HUGE_PAGE, sz);
    tc_huge_advise(p, sz);
    return p;
}
