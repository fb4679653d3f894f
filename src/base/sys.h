/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sys.h - small system helpers every layer may use: the page size (read
 * once by lib.c's one-time init), CLOCK_MONOTONIC in ns and ms, the
 * guard-marker madvise constants (Linux 6.13) for older headers, a file's
 * allocated bytes, and starting a library thread.
 */
#ifndef VR_SYS_H
#define VR_SYS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/stat.h>

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
/* the bytes fd's file has allocated (st_blocks); 0 if fd < 0 or unknown */
static inline uint64_t vr_fd_bytes(int fd)
{
	struct stat st;
	return fd >= 0 && fstat(fd, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
}

/* ---- huge pages for metadata walked at random (sys.c) ----
 * Object handles and page descriptors (obj-alloc.c) and the range map's
 * nodes and records (map/map.c) are read at random at 10^6-10^7 objects
 * or ranges: on 4 KiB pages each such read adds a TLB miss whose page walk
 * (two-dimensional in a VM) misses the cache as well.  Their arenas ask
 * for transparent huge pages.  VRANGE_HUGEPAGES=0 turns that off (and
 * advises MADV_NOHUGEPAGE instead, for the benchmark's off rows); THP
 * "never" turns it off too.  A hint: the kernel may still give 4 KiB
 * pages.  VRANGE_DEBUG says once what was chosen and whether the first
 * advice was taken; vr_huge_advised() counts the bytes advised. */
#define VR_HUGE_SIZE ((size_t)2 << 20)
void vr_huge_init(void); /* lib.c's one-time init */
/* len (a multiple of VR_HUGE_SIZE) bytes of private anonymous memory,
 * VR_HUGE_SIZE-aligned, zero, advised as above; MAP_FAILED on failure */
void *vr_map_huge(size_t len);
/* advise the VR_HUGE_SIZE-aligned interior of [p, p + len) as above */
void vr_advise_huge(void *p, size_t len);
uint64_t vr_huge_advised(void); /* bytes MADV_HUGEPAGE took, since start */

/* pthread_create of a library thread (monitor, guard-protocol listener)
 * that takes no application signal (all blocked but SIGSEGV, SIGBUS,
 * SIGILL, SIGFPE), named name; 0 or an errno value */
int vr_thread_start(pthread_t *t, void *(*fn)(void *), void *arg, const char *name);

#endif
#ifndef MADV_GUARD_REMOVE
#define MADV_GUARD_REMOVE 103
#endif

extern unsigned vr_pg_shift; /* log2(page size), set by the first vr_ctx_new */
static inline unsigned vr_page_shift(void)
{
	return vr_pg_shift;
}
static inline size_t vr_page_size(void)
{
	return (size_t)1 << vr_pg_shift;
}
static inline size_t vr_page_mask(void) /* page size - 1 */
{
	return vr_page_size() - 1;
}

static inline uint64_t vr_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
static inline uint64_t vr_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

#endif
