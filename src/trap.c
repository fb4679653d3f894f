/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * trap.c - how discarded pages are made to fault
 *
 * Two backends behind arm/disarm of a page-aligned span:
 *   guard     madvise(MADV_GUARD_INSTALL / MADV_GUARD_REMOVE): page-table
 *             markers, no VMA split, SIGSEGV with SEGV_MAPERR on touch.
 *             Needs a kernel that supports them on shared memfd mappings.
 *   mprotect  PROT_NONE / PROT_READ|PROT_WRITE: works everywhere, splits
 *             VMAs (vm.max_map_count), SIGSEGV with SEGV_ACCERR.
 * The backend is chosen once per process by a probe on a scratch memfd
 * (or forced by VRANGE_TRAP) and never changes afterwards.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "inject.h"
#include "private.h"

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif
#ifndef MADV_GUARD_REMOVE
#define MADV_GUARD_REMOVE 103
#endif

static _Atomic int backend = VR_TRAP_NONE;

int vr_trap_current(void)
{
	return atomic_load_explicit(&backend, memory_order_acquire);
}

_export_ int vr_trap_backend(void)
{
	return vr_trap_current();
}

/* Guard markers must survive a hole punch and make the kernel's own
 * accesses fail with EFAULT: check both on a scratch memfd. */
static bool probe_guard(void)
{
	size_t pg = (size_t)1 << vr_page_shift();
	bool ok = false;
	int p[2] = { -1, -1 };
	int fd = memfd_create("vrange-probe", MFD_CLOEXEC);
	if (fd < 0)
		return false;
	if (ftruncate(fd, (off_t)(2 * pg)) < 0 || pipe2(p, O_CLOEXEC) < 0)
		goto out;
	char *m = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		goto out;
	memset(m, 1, 2 * pg);
	if (madvise(m, pg, MADV_GUARD_INSTALL) == 0 &&
	    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)pg) == 0 &&
	    write(p[1], m, 1) < 0 && errno == EFAULT && write(p[1], m + pg, 1) == 1 &&
	    madvise(m, pg, MADV_GUARD_REMOVE) == 0 && write(p[1], m, 1) == 1)
		ok = true;
	munmap(m, 2 * pg);
out:
	if (p[0] >= 0) {
		close(p[0]);
		close(p[1]);
	}
	close(fd);
	return ok;
}

int vr_trap_init(void)
{
	if (vr_trap_current() != VR_TRAP_NONE)
		return 0;
	int b = VR_TRAP_MPROTECT;
	const char *env = secure_getenv("VRANGE_TRAP");
	if (env && strcmp(env, "mprotect") == 0)
		b = VR_TRAP_MPROTECT;
	else if (env && strcmp(env, "guard") == 0)
		b = probe_guard() ? VR_TRAP_GUARD : -1;
	else
		b = probe_guard() ? VR_TRAP_GUARD : VR_TRAP_MPROTECT;
	if (b < 0) {
		vr_dbg("VRANGE_TRAP=guard but guard markers do not work here");
		return -EOPNOTSUPP;
	}
	atomic_store_explicit(&backend, b, memory_order_release);
	vr_dbg("trap backend: %s", b == VR_TRAP_GUARD ? "guard" : "mprotect");
	return 0;
}

int vr_trap_arm(void *addr, size_t len)
{
	int rc = vr_trap_current() == VR_TRAP_GUARD ? vr_madvise(addr, len, MADV_GUARD_INSTALL)
						    : vr_mprotect(addr, len, PROT_NONE);
	return rc < 0 ? -errno : 0;
}

int vr_trap_disarm(void *addr, size_t len)
{
	int rc = vr_trap_current() == VR_TRAP_GUARD
			 ? vr_madvise(addr, len, MADV_GUARD_REMOVE)
			 : vr_mprotect(addr, len, PROT_READ | PROT_WRITE);
	return rc < 0 ? -errno : 0;
}

int vr_trap_arm_prot(void *addr, size_t len)
{
	return vr_mprotect(addr, len, PROT_NONE) < 0 ? -errno : 0;
}

int vr_trap_disarm_prot(void *addr, size_t len)
{
	return vr_mprotect(addr, len, PROT_READ | PROT_WRITE) < 0 ? -errno : 0;
}
