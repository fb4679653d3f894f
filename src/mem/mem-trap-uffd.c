/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * trap-uffd.c - the userfaultfd trap backend (VR_TRAP_UFFD, API S32)
 *
 * Each shared region (S27) registers its whole mapping once (attach) with
 * a userfaultfd of its own, opened with UFFD_USER_MODE_ONLY (no privilege
 * needed) and the UFFD_FEATURE_SIGBUS feature, in missing mode: a user
 * access to a page that is not in the memfd's page cache then raises
 * SIGBUS BUS_ADRERR at the exact address instead of allocating a zero
 * page.  So:
 *   arm      nothing: the hole that the kind punches (kind.c) is the trap
 *            (the file's guard-protocol mappers are asked to arm theirs);
 *   disarm   fallocate(0) on the memfd span: the pages are present again
 *            (zeros), under the file's lock, before the map says
 *            "unmarked";
 *   attach   register only: every page of a shared file was made present
 *            when it was created (shared.c), so its holes are purges of
 *            the file's one state, which must trap in every mapping; a
 *            never-written page is no hole (no trap, and no EFAULT for a
 *            system call: USER_MODE_ONLY leaves kernel accesses to a
 *            missing page with EFAULT, which is S14 for discarded pages
 *            only);
 *   detach   close the userfaultfd (the munmap unregisters).
 * No VMA is split and a purge makes no trap system call: it is the punch.
 *
 * Plain memfd regions are never registered, even under VRANGE_TRAP=uffd:
 * their state is per process (S17) while a hole is the file's, seen by
 * every mapping (mem-trap.c's rule).
 * Those, and anonymous and adopted regions, are trapped with guard
 * markers or mprotect (SIGSEGV) under this backend: see mem-trap.c.
 *
 * In a fork child an inherited region's userfaultfd still refers to the
 * parent's memory: the child only closes it (detach, inherited), and never
 * uses it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "vrange.h"
#include "coop.h"
#include "base/inject.h"
#include "base/sys.h"
#include "mem/mem.h"

#if HAVE_VALGRIND_H
#include <valgrind/valgrind.h>
#endif

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

/* a userfaultfd with the SIGBUS feature, or -errno */
static int uffd_open(void)
{
#if HAVE_VALGRIND_H
	/* valgrind does not implement userfaultfd: the call would fail with
	 * ENOSYS after valgrind printed a warning block into every run (the
	 * probe at the first vr_ctx_new()).  Answer ENOSYS without the call;
	 * RUNNING_ON_VALGRIND costs a few instructions outside valgrind. */
	if (RUNNING_ON_VALGRIND)
		return -ENOSYS;
#endif
#ifdef SYS_userfaultfd
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (fd < 0)
		return -errno;
	struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_SIGBUS };
	if (ioctl(fd, UFFDIO_API, &api) < 0 || !(api.features & UFFD_FEATURE_SIGBUS)) {
		int err = errno ? -errno : -EOPNOTSUPP;
		close(fd);
		return err;
	}
	return fd;
#else
	return -ENOSYS;
#endif
}

static int uffd_register(int uffd, void *addr, size_t len)
{
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)addr, .len = len },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	return ioctl(uffd, UFFDIO_REGISTER, &reg) < 0 ? -errno : 0;
}

/* userfaultfd allowed (no seccomp filter, no sysctl against it) and able
 * to register a shared memfd mapping in missing mode */
int vr_uffd_probe(void)
{
	size_t pg = vr_page_size();
	int ok = 0;
	int uffd = uffd_open();
	if (uffd < 0)
		return vr_probe_err(-uffd); /* 1, 0 or -errno: mem-trap.c, PROBES */
	int fd = memfd_create("vrange-probe", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)pg) < 0) {
		ok = vr_probe_err(errno);
	} else {
		void *m = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED) {
			ok = vr_probe_err(errno);
		} else {
			int err = uffd_register(uffd, m, pg);
			ok = err == 0 ? 1 : vr_probe_err(-err);
			munmap(m, pg);
		}
	}
	if (fd >= 0)
		close(fd);
	close(uffd);
	return ok;
}

int vr_uffd_attach(struct vr_region *r)
{
	r->trap_fd = -1;
	if (!r->shm)
		return -EINVAL; /* trap.c gives these ops to shared regions only */
	int uffd = uffd_open();
	if (uffd < 0)
		return uffd;
	int err = uffd_register(uffd, r->base, r->map_size);
	if (err < 0) {
		close(uffd);
		return err;
	}
	r->trap_fd = uffd;
	return 0;
}

void vr_uffd_detach(struct vr_region *r, bool inherited)
{
	(void)inherited; /* the munmap (kind release) unregisters */
	if (r->trap_fd >= 0)
		close(r->trap_fd);
	r->trap_fd = -1;
}

/* the punch is the trap; a shared file's mappers on the guard protocol
 * (a process behind a seccomp filter) must arm theirs first */
int vr_uffd_arm(struct vr_region *r, void *addr, size_t len)
{
	return vr_trap_coop_notify(r, VR_COOP_ARM, (uint64_t)((uint8_t *)addr - r->base), len);
}

int vr_uffd_disarm(struct vr_region *r, void *addr, size_t len)
{
	off_t off = (off_t)((uint8_t *)addr - r->base);
	if (vr_fallocate(r->fd, FALLOC_FL_KEEP_SIZE, off, (off_t)len) < 0)
		return -errno;
	vr_trap_coop_notify(r, VR_COOP_DISARM, (uint64_t)off, len);
	return 0;
}
