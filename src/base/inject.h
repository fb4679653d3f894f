/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * inject.h - fault injection for the library's system calls and allocations
 *
 * Every memfd_create, ftruncate, mmap, madvise, mprotect, fallocate and
 * malloc/calloc of the library goes through these wrappers.  In normal
 * builds they are the plain calls.  Built with -Dfault-injection=true, the
 * test seam VRANGE_FAULT_INJECT="SITE:N[:ERRNO[:COUNT]]" makes the N-th
 * call (1 based, counted from the first vr_ctx_new) of SITE, and the
 * COUNT-1 calls after it (default 1: that call only), fail with ERRNO
 * (0 or absent: ENOMEM, or EPERM for fallocate).  SITE is one of memfd,
 * ftruncate, mmap, madvise, mprotect, fallocate, malloc, or "any" (the
 * N-th instrumented call of any site).  When it fires, one line
 * "vrange: fault injection fired: SITE call N errno E" goes to stderr.
 */
#ifndef VR_INJECT_H
#define VR_INJECT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"

enum vr_fi_site {
	VR_FI_MEMFD,
	VR_FI_FTRUNCATE,
	VR_FI_MMAP,
	VR_FI_MADVISE,
	VR_FI_MPROTECT,
	VR_FI_FALLOCATE,
	VR_FI_MALLOC,
	VR_FI_NSITES,
};

#if VR_FAULT_INJECTION
void vr_fi_init(void);
int vr_fi_check(enum vr_fi_site site); /* errno to inject, or 0 */
#else
static inline void vr_fi_init(void)
{
}
static inline int vr_fi_check(enum vr_fi_site site)
{
	(void)site;
	return 0;
}
#endif

#define VR_FI_FAIL(site, failval)                                                                  \
	do {                                                                                       \
		int vr_fi_e_ = vr_fi_check(site);                                                  \
		if (vr_fi_e_) {                                                                    \
			errno = vr_fi_e_;                                                          \
			return failval;                                                            \
		}                                                                                  \
	} while (0)

static inline void *vr_malloc(size_t n)
{
	VR_FI_FAIL(VR_FI_MALLOC, NULL);
	return malloc(n);
}
/* zeroed and cache-line aligned: objects two threads use side by side must
 * not share a line */
static inline void *vr_calloc_aligned(size_t size)
{
	void *p = NULL;
	VR_FI_FAIL(VR_FI_MALLOC, NULL);
	if (posix_memalign(&p, 64, size) != 0)
		return NULL;
	return memset(p, 0, size);
}
static inline int vr_memfd_create(const char *name, unsigned flags)
{
	VR_FI_FAIL(VR_FI_MEMFD, -1);
	return memfd_create(name, flags);
}
static inline int vr_ftruncate(int fd, off_t len)
{
	VR_FI_FAIL(VR_FI_FTRUNCATE, -1);
	return ftruncate(fd, len);
}
static inline void *vr_mmap(void *a, size_t len, int prot, int flags, int fd, off_t off)
{
	VR_FI_FAIL(VR_FI_MMAP, MAP_FAILED);
	return mmap(a, len, prot, flags, fd, off);
}
static inline int vr_madvise(void *a, size_t len, int advice)
{
	VR_FI_FAIL(VR_FI_MADVISE, -1);
	return madvise(a, len, advice);
}
static inline int vr_mprotect(void *a, size_t len, int prot)
{
	VR_FI_FAIL(VR_FI_MPROTECT, -1);
	return mprotect(a, len, prot);
}
static inline int vr_fallocate(int fd, int mode, off_t off, off_t len)
{
	VR_FI_FAIL(VR_FI_FALLOCATE, -1);
	return fallocate(fd, mode, off, len);
}

#endif
