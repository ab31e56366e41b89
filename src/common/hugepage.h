// Transparent huge pages for the large, long-lived buffers the kernels stream through: the weights
// (model/model_place.c), the KV cache (kv/kv_store.c) and the bandwidth probe (cpu/membw.c). Streaming gigabytes
// through 4 KiB pages costs a TLB miss and a page walk every 4 KiB, and the hardware prefetchers stop at each
// page's end; a 2 MiB page has neither. Linux's default THP mode, "madvise", grants them only to ranges marked
// MADV_HUGEPAGE (before they are first touched). Advisory throughout: where the kernel grants none, the memory is
// the same in small pages. TACHYON_HUGE_PAGES=0 turns the marking (and the weight copies that exist for it) off,
// to compare.
#ifndef TACHYON_COMMON_HUGEPAGE_H
#define TACHYON_COMMON_HUGEPAGE_H

#include <stddef.h>

#define TC_HUGE_PAGE ((size_t)2 << 20)

// 0 when TACHYON_HUGE_PAGES=0 is set, else 1.
int tc_huge_pages_on(void);
// Marks the whole huge pages inside [p, p + n) MADV_HUGEPAGE (nothing when off or when none fits).
void tc_huge_advise(void *p, size_t n);
// n bytes (n > 0) on a huge-page boundary, marked, rounded up to whole huge pages when n is at least one (else
// 64-byte aligned, unmarked); free() releases it. NULL when out of memory.
void *tc_huge_alloc(size_t n);

#endif
