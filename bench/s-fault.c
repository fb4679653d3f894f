/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * s-fault.c - scenario 4: the fault round trip, one trap backend per child.
 *
 * Timed: one read of a discarded page until it returns.
 *
 * raw-pure    the floor: a present page is trapped (mprotect
 *             PROT_NONE or MADV_GUARD_INSTALL, as the backend); the read
 *             raises SIGSEGV; the handler disarms the page; the read re-runs.
 * raw-refill  the like-for-like floor: the page is also punched out of the
 *             memfd, and the handler refills it (memset of one page, which
 *             allocates a fresh page) before returning.
 * vr          libvrange: a one-page range is marked and purged (untimed);
 *             the read traps into libvrange's handler, which calls the
 *             region's vr_fault_fn; that calls vr_unmark (must return
 *             VR_PURGED), refills the page and returns VR_FAULT_RETRY.
 *
 * Style "anon" (scenario fault-anon): the same on private anonymous
 * memory.  raw-pure: trapped (MADV_GUARD_INSTALL, which also frees the
 * page, or mprotect PROT_NONE), the handler disarms, the read re-runs;
 * raw-refill: the page is also freed (MADV_DONTNEED after mprotect) and
 * the handler refills it; vr: a VR_REGION_ANON region.
 *
 * Backend uffd (memfd only): the trap is the hole itself.  raw-pure: the
 * page is punched out of a memfd mapping registered with userfaultfd
 * (missing mode, SIGBUS feature); the read raises SIGBUS; the handler makes
 * the page present again (fallocate, zeros); the read re-runs.
 * raw-refill: the same, and the handler also refills the page.
 *
 * The raw floors run first, with this program's own SIGSEGV handler,
 * which is removed (SIG_DFL back) before the first vr_ctx_new, so that
 * libvrange installs its handler over the default action as usual.
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vrange.h>

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif
#ifndef MADV_GUARD_REMOVE
#define MADV_GUARD_REMOVE 103
#endif

#define SCEN (anon ? "fault-anon" : "fault")
#define FILL 0x5a

static bool guard, anon, uffd;
static int raw_fd = -1; /* the raw memfd (uffd: disarm is a fallocate on it) */
static char *raw_base;
static volatile sig_atomic_t raw_refill, raw_hits;

static int arm(void *p, size_t len)
{
	if (uffd)
		return fallocate(raw_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				 (off_t)((char *)p - raw_base), (off_t)len);
	return guard ? madvise(p, len, MADV_GUARD_INSTALL) : mprotect(p, len, PROT_NONE);
}

static int disarm(void *p, size_t len)
{
	if (uffd)
		return fallocate(raw_fd, FALLOC_FL_KEEP_SIZE, (off_t)((char *)p - raw_base),
				 (off_t)len);
	return guard ? madvise(p, len, MADV_GUARD_REMOVE)
		     : mprotect(p, len, PROT_READ | PROT_WRITE);
}

static void raw_handler(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	char *page = (char *)((uintptr_t)si->si_addr & ~(uintptr_t)(page_size - 1));
	if (disarm(page, page_size) < 0)
		_exit(2);
	if (raw_refill)
		memset(page, FILL, page_size);
	raw_hits++;
}

static void bench_raw(size_t nsamp)
{
	int fd = -1;
	char *base;
	if (anon) {
		base = map_anon(4 * page_size);
	} else {
		fd = memfd_create("vrbench-fault-raw", MFD_CLOEXEC);
		CHECK(fd >= 0 && ftruncate(fd, (off_t)(4 * page_size)) == 0);
		base = mmap(NULL, 4 * page_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		CHECK(base != MAP_FAILED);
		CHECK(fallocate(fd, 0, 0, (off_t)(4 * page_size)) == 0);
	}
	raw_fd = fd;
	raw_base = base;
	int ufd = uffd ? uffd_register(base, 4 * page_size) : -1;
	if (uffd && ufd < 0)
		die("userfaultfd refused for the raw floor");
	char *p = base + page_size;

	struct sigaction sa, old;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = raw_handler;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(uffd ? SIGBUS : SIGSEGV, &sa, &old) == 0);

	for (int refill = 0; refill <= 1; refill++) {
		struct samples s = { 0 };
		raw_refill = refill;
		for (size_t i = 0; i <= nsamp; i++) {
			memset(p, 1, page_size); /* present, with data */
			if (arm(p, page_size) < 0)
				die("raw arm: %s", strerror(errno));
			if (refill && !anon && !uffd &&
			    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				      (off_t)page_size, (off_t)page_size) < 0)
				die("raw punch: %s", strerror(errno));
			if (refill && anon && !guard && madvise(p, page_size, MADV_DONTNEED) < 0)
				die("raw MADV_DONTNEED: %s", strerror(errno));
			sig_atomic_t before = raw_hits;
			uint64_t t0 = now_ns();
			char v = *(volatile char *)(p + 100);
			uint64_t dt = now_ns() - t0;
			/* (a guard marker on anonymous memory freed the page) */
			char want = refill ? FILL : ((anon && guard) || uffd) ? 0 : 1;
			if (raw_hits != before + 1 || v != want)
				die("raw round trip: hits %d value %d", (int)(raw_hits - before),
				    v);
			if (i) /* the first one warms up */
				samples_add(&s, (double)dt / 1000.0);
		}
		emit_samples(SCEN, refill ? "raw-refill" : "raw-pure", &s, "us");
		samples_free(&s);
	}
	CHECK(sigaction(uffd ? SIGBUS : SIGSEGV, &old, NULL) == 0);
	munmap(base, 4 * page_size);
	if (ufd >= 0)
		close(ufd);
	if (fd >= 0)
		close(fd);
}

struct vr_fault_state {
	unsigned calls;
	int unmark_rc;
};

static int refill_handler(struct vr_region *r, size_t off, size_t len, void *fault_addr, void *arg)
{
	struct vr_fault_state *st = arg;
	(void)fault_addr;
	st->unmark_rc = vr_unmark(r, off, len);
	if (st->unmark_rc < 0)
		return VR_FAULT_SIGBUS;
	memset((char *)vr_region_base(r) + off, FILL, len);
	st->calls++;
	return VR_FAULT_RETRY;
}

static void bench_vr(struct vr_ctx *ctx, size_t nsamp)
{
	struct vr_region *r;
	struct vr_fault_state st = { 0 };
	VRCHECK(vr_region_new(ctx, "vrbench-fault", 4 * page_size, anon ? VR_REGION_ANON : 0, &r));
	VRCHECK(vr_region_set_fault_handler(r, refill_handler, &st));
	char *p = (char *)vr_region_base(r) + page_size;
	struct samples s = { 0 };
	for (size_t i = 0; i <= nsamp; i++) {
		memset(p, 1, page_size);
		if (VRCHECK(vr_mark(r, page_size, page_size)) != VR_INTACT)
			die("fresh mark purged");
		if (VRCHECK(vr_ctx_purge(ctx, page_size)) != (ssize_t)page_size)
			die("purge did not reclaim the page");
		unsigned before = st.calls;
		uint64_t t0 = now_ns();
		char v = *(volatile char *)(p + 100);
		uint64_t dt = now_ns() - t0;
		if (st.calls != before + 1 || st.unmark_rc != VR_PURGED || v != FILL)
			die("vr round trip: calls %u unmark %d value %d", st.calls - before,
			    st.unmark_rc, v);
		if (i)
			samples_add(&s, (double)dt / 1000.0);
	}
	CHECK(vr_ctx_stat(ctx, VR_STAT_FAULTS) >= nsamp);
	emit_samples(SCEN, "vr-fault", &s, "us");
	samples_free(&s);
	vr_region_destroy(r);
}

int run_fault(const char *style)
{
	anon = style && strcmp(style, "anon") == 0;
	size_t nsamp = BY_MODE(200, 2000, 20000);
	const char *want = bopt.backend;
	if (!want)
		want = "guard";
	guard = strcmp(want, "guard") == 0;
	uffd = strcmp(want, "uffd") == 0;
	if (uffd) {
		emit_note("userfaultfd traps shared regions only: private ones use guard "
			  "markers under VRANGE_TRAP=uffd too (scenario shared measures it)");
		return 77;
	}
	if (uffd) {
		char *q = map_anon(page_size);
		int f = uffd_register(q, page_size);
		munmap(q, page_size);
		if (f < 0) {
			emit_note("userfaultfd not available here: fault scenario skipped");
			return 77;
		}
		close(f);
	}

	/* the floors first, before any vr_ctx_new */
	if (guard) {
		char *q = map_anon(page_size);
		if (madvise(q, page_size, MADV_GUARD_INSTALL) < 0) {
			emit_note("guard markers not supported here: fault scenario skipped");
			return 77;
		}
		munmap(q, page_size);
	}
	bench_raw(nsamp);

	struct vr_ctx *ctx;
	int rc = vr_ctx_new(VR_CTX_NO_MONITOR, &ctx);
	if (rc == -EOPNOTSUPP && bopt.backend) {
		emit_note("trap backend %s not supported by libvrange here", bopt.backend);
		return 77;
	}
	VRCHECK(rc);
	int id = uffd ? VR_TRAP_UFFD : guard ? VR_TRAP_GUARD : VR_TRAP_MPROTECT;
	if (vr_trap_backend() != id)
		die("asked for backend %s, libvrange uses another one (%d)", want,
		    vr_trap_backend());
	bench_vr(ctx, nsamp);
	vr_ctx_destroy(ctx);
	return 0;
}
