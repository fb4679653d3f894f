/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * mem-trap.c - how discarded pages are made to fault: the trap backends
 *
 * A backend is a struct vr_trap_ops (mem/mem.h): arm/disarm of a
 * page-aligned span, whether arming also frees private anonymous pages,
 * and optional per-region hooks.  Three backends, and the guard protocol
 * (mem-trap-coop.c) for shared regions where userfaultfd is refused:
 *   guard     madvise(MADV_GUARD_INSTALL / MADV_GUARD_REMOVE): page-table
 *             markers, no VMA split, SIGSEGV with SEGV_MAPERR on touch.
 *             Installing a marker on private anonymous memory also frees
 *             the page (one call discards and traps).  Needs a kernel that
 *             supports markers on shared memfd mappings.
 *   mprotect  PROT_NONE / the region's protection (read/write, or rwx for
 *             an adopted span that had it): works everywhere, splits
 *             VMAs (vm.max_map_count), SIGSEGV with SEGV_ACCERR.
 *   uffd      userfaultfd in missing mode with the SIGBUS feature
 *             (mem-trap-uffd.c): the hole punch itself traps, no VMA
 *             change, SIGBUS with BUS_ADRERR on touch (fault.c's SIGBUS
 *             entry).  The process's backend only with VRANGE_TRAP=uffd;
 *             shared regions get it wherever it works (S32,
 *             vr_trap_shared_ops), whatever the process's backend.
 * Regions go through vr_trap_arm/disarm/attach/detach on the ops
 * vr_trap_region_ops() gave them, and mem-pages.c through
 * vr_trap_arm_prot/disarm_prot for large ranges; object chunks
 * (obj-alloc.c) and the guard protocol (mem-trap-coop.c) call madvise
 * and mprotect themselves.
 *
 * Rule: a trap that is a hole in the file traps every mapping of the
 * file, so it may only stand for a state that every mapping shares.  A
 * shared region's state is the file's (S27): userfaultfd fits.  A plain
 * memfd region's state is its process's own (S17): its file may be mapped
 * by other processes (vr_region_fd hands it out) whose holes are theirs,
 * which this mapping must read as zeros without a trap, and which it must
 * never fill (that would take their trap away); and their reads of its
 * holes fill them, which must not take its trap away.  So plain memfd
 * regions (and anonymous and adopted ones) are trapped in the process's
 * own page tables under VRANGE_TRAP=uffd too: guard markers where they
 * work, else mprotect.
 *
 * The backend is chosen once per process (under vr_global_lock, at the
 * first vr_ctx_new) by a probe, or forced by VRANGE_TRAP, and never
 * changes afterwards; readers load the pointer with acquire.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vrange.h"
#include "base/inject.h"
#include "base/sys.h"
#include "base/log.h"
#include "mem/mem.h"

/* ---- guard markers ---- */

/* PROBES answer 1 (works), 0 (this system says no) or -errno when the
 * process lacked a resource to find out (no free fd, no memory).  The
 * backend is chosen once for the life of the process, so a shortage must
 * fail that vr_ctx_new with its errno and leave the choice to the next
 * call, not settle for mprotect for good (or, with VRANGE_TRAP forced, say
 * -EOPNOTSUPP for a backend that works). */
int vr_probe_err(int err)
{
	return err == EMFILE || err == ENFILE || err == ENOMEM || err == EAGAIN ? -err : 0;
}

/* Guard markers must survive a hole punch and make the kernel's own
 * accesses fail with EFAULT: check both on a scratch memfd. */
static int guard_probe(void)
{
	size_t pg = vr_page_size();
	int ok = 0;
	int p[2] = { -1, -1 };
	int fd = memfd_create("vrange-probe", MFD_CLOEXEC);
	if (fd < 0)
		return vr_probe_err(errno);
	if (ftruncate(fd, (off_t)(2 * pg)) < 0 || pipe2(p, O_CLOEXEC) < 0) {
		ok = vr_probe_err(errno);
		goto out;
	}
	char *m = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		ok = vr_probe_err(errno);
		goto out;
	}
	memset(m, 1, 2 * pg);
	if (madvise(m, pg, MADV_GUARD_INSTALL) < 0)
		ok = vr_probe_err(errno); /* EINVAL: no guard markers here */
	else if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)pg) == 0 &&
		 write(p[1], m, 1) < 0 && errno == EFAULT && write(p[1], m + pg, 1) == 1 &&
		 madvise(m, pg, MADV_GUARD_REMOVE) == 0 && write(p[1], m, 1) == 1)
		ok = 1;
	munmap(m, 2 * pg);
out:
	if (p[0] >= 0) {
		close(p[0]);
		close(p[1]);
	}
	close(fd);
	return ok;
}

static int guard_arm(struct vr_region *r, void *addr, size_t len)
{
	(void)r;
	return vr_madvise(addr, len, MADV_GUARD_INSTALL) < 0 ? -errno : 0;
}

static int guard_disarm(struct vr_region *r, void *addr, size_t len)
{
	(void)r;
	return vr_madvise(addr, len, MADV_GUARD_REMOVE) < 0 ? -errno : 0;
}

/* ---- mprotect ---- */

static int mprotect_arm(struct vr_region *r, void *addr, size_t len)
{
	(void)r;
	return vr_mprotect(addr, len, PROT_NONE) < 0 ? -errno : 0;
}

/* back to what the region's memory had (an adopted span may be rwx) */
static int mprotect_disarm(struct vr_region *r, void *addr, size_t len)
{
	return vr_mprotect(addr, len, r->prot) < 0 ? -errno : 0;
}

/* ---- userfaultfd (trap-uffd.c) ----
 * The process's own regions under the uffd backend (the rule above):
 * trapped as under the guard backend (markers, when the probe found them
 * working) or else with mprotect; their faults come as SIGSEGV.
 * Anonymous memory could not use it anyway: its never-touched pages are
 * missing too, and committing them all up front would defeat
 * MAP_NORESERVE. */
static const struct vr_trap_ops *uffd_local; /* set once by vr_trap_init, before use */

/* in the order the automatic choice tries them */
static const struct vr_trap_ops backends[] = {
	{
		.id = VR_TRAP_GUARD,
		.name = "guard",
		.probe = guard_probe,
		.arm = guard_arm,
		.disarm = guard_disarm,
		.frees_private = true,
	},
	{
		.id = VR_TRAP_MPROTECT,
		.name = "mprotect",
		.arm = mprotect_arm,
		.disarm = mprotect_disarm,
	},
	{
		/* last: mprotect always works, so only VRANGE_TRAP=uffd makes it
		 * the process's backend (shared regions: vr_trap_shared_ops) */
		.id = VR_TRAP_UFFD,
		.name = "uffd",
		.probe = vr_uffd_probe,
		.arm = vr_uffd_arm,
		.disarm = vr_uffd_disarm,
		.attach = vr_uffd_attach,
		.detach = vr_uffd_detach,
	},
};

static _Atomic(const struct vr_trap_ops *) backend;
/* shared regions (S32): userfaultfd wherever it works, whatever the
 * process's backend; NULL: neither it nor a fallback works here */
static const struct vr_trap_ops *shared_backend;
static _Atomic bool uffd_used; /* a shared region used it (vr_trap_backend) */

const struct vr_trap_ops *vr_trap_ops(void)
{
	return atomic_load_explicit(&backend, memory_order_acquire);
}

int vr_trap_current(void)
{
	const struct vr_trap_ops *t = vr_trap_ops();
	return t ? t->id : VR_TRAP_NONE;
}

_export_ int vr_trap_backend(void)
{
	/* S32: a process whose shared regions use userfaultfd reports it */
	if (atomic_load_explicit(&uffd_used, memory_order_relaxed))
		return VR_TRAP_UFFD;
	return vr_trap_current();
}

const struct vr_trap_ops *vr_trap_shared_ops(void)
{
	return shared_backend;
}

const struct vr_trap_ops *vr_trap_region_ops(bool shared)
{
	if (shared)
		return shared_backend;
	const struct vr_trap_ops *t = vr_trap_ops();
	return t && t->id == VR_TRAP_UFFD ? uffd_local : t;
}

bool vr_trap_uffd_works(void)
{
	return shared_backend && shared_backend->id == VR_TRAP_UFFD;
}

/* 1, 0 or -errno: PROBES above */
static int works(const struct vr_trap_ops *t)
{
	return t->probe ? t->probe() : 1;
}

/* called with vr_global_lock held */
int vr_trap_init(void)
{
	if (vr_trap_ops())
		return 0;
	const struct vr_trap_ops *b = NULL;
	const char *env = secure_getenv("VRANGE_TRAP");
	bool known = false;
	for (size_t i = 0; env && i < VR_ARRAY_SIZE(backends); i++) {
		if (strcmp(env, backends[i].name) != 0)
			continue;
		/* A2: a forced backend that cannot work fails vr_ctx_new */
		int w = works(&backends[i]);
		if (w < 0)
			return w;
		if (!w) {
			vr_dbg("VRANGE_TRAP=%s but that backend does not work here", env);
			return -EOPNOTSUPP;
		}
		b = &backends[i];
		known = true;
	}
	/* A2: an unknown value is ignored, with one warning (this runs again
	 * only after a call that set nothing: a probe short of fds) */
	static bool warned;
	if (env && !known) {
		if (!warned)
			vr_warn("VRANGE_TRAP=%.32s is not guard, mprotect or uffd: ignored", env);
		warned = true;
		env = NULL;
	}
	for (size_t i = 0; !b && i < VR_ARRAY_SIZE(backends); i++) {
		int w = works(&backends[i]);
		if (w < 0)
			return w;
		if (w)
			b = &backends[i];
	}
	if (!b)
		return -EOPNOTSUPP;
	/* every answer first, then the choice: nothing is set on failure */
	int guard = b->id == VR_TRAP_GUARD ? 1 : guard_probe();
	if (guard < 0)
		return guard;
	/* shared regions: userfaultfd where it works (forced by
	 * VRANGE_TRAP=uffd), else the guard protocol (forced by
	 * VRANGE_TRAP=guard) where guard markers work, else none */
	const struct vr_trap_ops *u = &backends[VR_ARRAY_SIZE(backends) - 1];
	bool forced_guard = env && b->id == VR_TRAP_GUARD;
	int uw = b->id == VR_TRAP_UFFD ? 1 : forced_guard ? 0 : works(u);
	if (uw < 0)
		return uw;
	if (b->id == VR_TRAP_UFFD)
		uffd_local = guard ? &backends[0] : &backends[1];
	if (uw)
		shared_backend = u;
	else if (guard)
		shared_backend = &vr_trap_coop;
	else
		shared_backend = NULL;
	atomic_store_explicit(&backend, b, memory_order_release);
	vr_dbg("trap backend: %s", b->name);
	return 0;
}

int vr_trap_arm(struct vr_region *r, void *addr, size_t len)
{
	return r->trap->arm(r, addr, len);
}

int vr_trap_disarm(struct vr_region *r, void *addr, size_t len)
{
	return r->trap->disarm(r, addr, len);
}

int vr_trap_attach(struct vr_region *r)
{
	const struct vr_trap_ops *t = r->trap;
	int err = t->attach ? t->attach(r) : 0;
	if (!err && r->shm && t->id == VR_TRAP_UFFD)
		atomic_store_explicit(&uffd_used, true, memory_order_relaxed);
	return err;
}

void vr_trap_detach(struct vr_region *r, bool inherited)
{
	const struct vr_trap_ops *t = r->trap;
	if (t->detach)
		t->detach(r, inherited);
}

/* mprotect whatever the backend: mem-pages.c traps large ranges this way under
 * the guard backend (guard markers would allocate page tables) */
int vr_trap_arm_prot(struct vr_region *r, void *addr, size_t len)
{
	return mprotect_arm(r, addr, len);
}

int vr_trap_disarm_prot(struct vr_region *r, void *addr, size_t len)
{
	return mprotect_disarm(r, addr, len);
}
