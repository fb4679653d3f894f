/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-shm.c - the invariants of a shared state (src/mem/mem-shared.h) across
 * processes killed at random instants (S30), checked from the inside
 *
 * A child joins the parent's shared region and marks, unmarks and purges
 * random ranges of its first half as fast as it can; the parent kills it
 * with SIGKILL after a random delay, again and again, and after every
 * kill takes the file's lock (repairing it if the child died holding it)
 * and checks, with the lock held:
 *   - the map is well formed (vr_map_check: tree, LRU, flags);
 *   - every hole of the data (SEEK_HOLE) lies in whole pages of a purged
 *     range, and every whole page of a purged range is a hole: nobody can
 *     read zeros where the state says "not purged";
 *   - the file's gauges equal a recount of the map;
 * and at the end, that the second half, never marked, kept its bytes, and
 * that some kills did land inside the lock (VR_STAT_REPAIRS > 0).
 * VT_SHM_KILLS sets the number of kills (default 150).
 */
#include "tests.h"

#include <signal.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <setjmp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>

#include "region/region.h"
#include "ctx.h"
#include "mem/mem-shared.h"

#define PAGES 256

static void child_loop(int fd, size_t size, uint64_t seed)
{
	struct vr_ctx *c;
	struct vr_region *r;
	if (vr_ctx_new(VR_CTX_NO_MONITOR, &c) != 0 || vr_region_from_fd(c, fd, 0, &r) != 0)
		_exit(3);
	size_t P = vt_pg(), half = size / 2;
	uint64_t x = seed;
	long lim = getenv("VT_SHM_OPS") ? atol(getenv("VT_SHM_OPS")) : -1;
	for (;;) {
		if (lim >= 0 && lim-- == 0)
			_exit(0);
		x = vt_mix(x);
		size_t off = (size_t)(x % half), len = 1 + (size_t)((x >> 20) % (8 * P));
		if (off + len > half)
			len = half - off;
		switch ((x >> 40) % 4) {
		case 0:
		case 1:
			vr_mark(r, off, len);
			break;
		case 2:
			vr_unmark(r, off, len);
			break;
		default:
			vr_ctx_purge(c, (size_t)((x >> 48) % 4 + 1) * P);
			break;
		}
	}
}

/* Which data pages are holes: a child maps the file with a userfaultfd
 * of its own (missing mode, SIGBUS feature, as the library's trap) and
 * reads every page; a hole raises SIGBUS, anything else reads (a page
 * that fallocate() made present but nobody wrote reads 0: mincore and
 * SEEK_HOLE would call it a hole, the trap does not). */
static sigjmp_buf probe_env;
static void probe_bus(int sig)
{
	(void)sig;
	siglongjmp(probe_env, 1);
}

static void probe_pages(int fd, size_t map_size, unsigned char *present)
{
	size_t P = vt_pg(), np = map_size / P;
	int pfd[2];
	assert_int_equal(pipe(pfd), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | 1 /* UFFD_USER_MODE_ONLY */);
		struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_SIGBUS };
		volatile uint8_t *p = mmap(NULL, map_size, PROT_READ, MAP_SHARED, fd, 0);
		struct uffdio_register reg = { .range = { (uintptr_t)p, map_size },
					       .mode = UFFDIO_REGISTER_MODE_MISSING };
		if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api) < 0 || p == MAP_FAILED ||
		    ioctl(uffd, UFFDIO_REGISTER, &reg) < 0)
			_exit(2);
		signal(SIGBUS, probe_bus);
		for (size_t i = 0; i < np; i++) {
			present[i] = 0;
			if (sigsetjmp(probe_env, 1) == 0) {
				(void)p[i * P];
				present[i] = 1;
			}
		}
		_exit(write(pfd[1], present, np) == (ssize_t)np ? 0 : 3);
	}
	close(pfd[1]);
	assert_int_equal(read(pfd[0], present, np), (ssize_t)np);
	close(pfd[0]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static size_t kept_data; /* purged pages found unpunched (guard protocol) */

/* with the lock held: holes exactly at the whole pages of purged ranges,
 * and the file's gauges equal to a recount of the map */
static void check_holes(struct vr_region *r, int fd)
{
	struct vr_map *m = r->map;
	size_t P = vt_pg(), np = r->map_size / P;
	unsigned char present[PAGES];
	assert_true(np <= PAGES);
	probe_pages(fd, r->map_size, present);
	for (size_t i = 0; i < np; i++) {
		uint64_t p = (uint64_t)i * P, p0, p1;
		struct vr_range *x = vr_map_first_end_after(m, p);
		bool in_purged = x && x->start <= p && vr_range_purged(x) &&
				 vr_whole_pages(x->start, x->end, m->page_shift, &p0, &p1) &&
				 p >= p0 && p < p1;
		if (!present[i] && !in_purged)
			fail_msg("page %zu is a hole outside a purged range", i);
		/* under the guard protocol a purge or repair whose ARM a mapper
		 * did not acknowledge in time leaves the pages unpunched, the
		 * range purged (mem-shared.h, TRAPPED HOLES: data is never a
		 * hole unarmed); userfaultfd mappings need no ARM */
		if (present[i] && in_purged && vr_trap_backend() == VR_TRAP_UFFD)
			fail_msg("page %zu of a purged range holds data", i);
		kept_data += present[i] && in_purged;
	}
	uint64_t n = 0, vol = 0, pur = 0;
	for (struct vr_range *x = vr_map_first_end_after(m, 0); x; x = vr_map_next(m, x)) {
		n++;
		if (vr_range_purged(x))
			pur += x->end - x->start;
		else
			vol += x->end - x->start;
	}
	assert_int_equal(n, atomic_load(&r->shm->nranges));
	assert_int_equal(vol, atomic_load(&r->shm->volatile_bytes));
	assert_int_equal(pur, atomic_load(&r->shm->purged_bytes));
}

static void test_shm_kill_invariants(void **state)
{
	(void)state;
	size_t P = vt_pg(), size = PAGES * P;
	const char *e = getenv("VT_SHM_KILLS");
	int kills = e ? atoi(e) : 150;
	struct vr_ctx *c;
	struct vr_region *r;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	int rc = vr_region_new(c, "vt-shm", size, VR_REGION_SHARED, &r);
	if (rc == -EOPNOTSUPP) {
		vr_ctx_destroy(c);
		skip(); /* no userfaultfd here: test-shared covers the refusal */
	}
	assert_int_equal(rc, 0);
	uint8_t *b = vr_region_base(r);
	vt_fill(b, 0, size, 42);
	int fd = vr_region_fd(r);
	uint64_t seed = vt_get_seed("test-shm");
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int k = 0; k < kills; k++) {
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			alarm(20);
			child_loop(fd, size, seed + (uint64_t)k);
		}
		struct timespec d = { 0, (long)(vt_mix(seed ^ (uint64_t)k) % 3000000) };
		nanosleep(&d, NULL);
		int st;
		if (!getenv("VT_SHM_OPS")) {
			kill(pid, SIGKILL);
			assert_int_equal(waitpid(pid, &st, 0), pid);
			assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
		} else
			assert_int_equal(waitpid(pid, &st, 0), pid);
		alarm(20); /* a lock left held for ever would hang here */
		vr_region_lock(r);
		assert_int_equal(vr_map_check(r->map), 0);
		check_holes(r, fd);
		vr_region_unlock(r);
		alarm(0);
	}
	/* the half nobody marked kept every byte */
	assert_true(vt_check(b + size / 2, size / 2, size / 2, 42) == SIZE_MAX);
	uint64_t repairs = vr_ctx_stat(c, VR_STAT_REPAIRS);
	print_message("%d kills, %llu repairs by the parent, %zu purged pages seen unpunched\n",
		      kills, (unsigned long long)repairs, kept_data);
	assert_true(repairs > 0);
	/* the gauges of this ctx count what the dead children left */
	assert_int_equal(vr_ctx_stat(c, VR_STAT_RANGES), atomic_load(&r->shm->nranges));
	vr_ctx_destroy(c);
}

/* S33, S29 in one process: a second region (and a second ctx) on a
 * shared file share its state; a ctx counts the file once, also after
 * the region that counted it goes */
static void test_shm_in_process(void **state)
{
	(void)state;
	size_t P = vt_pg();
	struct vr_ctx *c, *c2;
	struct vr_region *r1, *r2, *r3;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c2), 0);
	int rc = vr_region_new(c, "vt-shm2", 16 * P, VR_REGION_SHARED, &r1);
	if (rc == -EOPNOTSUPP) {
		vr_ctx_destroy(c);
		vr_ctx_destroy(c2);
		skip();
	}
	assert_int_equal(rc, 0);
	int fd = vr_region_fd(r1);
	assert_int_equal(vr_region_from_fd(c, fd, 0, &r2), 0);
	assert_int_equal(vr_region_from_fd(c2, fd, VR_REGION_SHARED, &r3), 0);
	assert_ptr_equal(r1->shm, r2->shm); /* one mapping of the state */
	assert_ptr_not_equal(vr_region_base(r1), vr_region_base(r2));
	assert_ptr_equal(vr_region_of(vr_region_base(r2)), r2);
	assert_int_equal(vr_region_size(r2), 16 * P);
	assert_int_equal(vr_mark(r1, 0, 4 * P), VR_INTACT);
	assert_int_equal(vr_status(r2, 0, 4 * P), VR_STATE_VOLATILE);
	assert_int_equal(vr_status(r3, P, 1), VR_STATE_VOLATILE);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_RANGES), 1);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES), 4 * P);
	assert_int_equal(vr_ctx_stat(c2, VR_STAT_RANGES), 1);
	/* a purge through the second ctx: the first one's gauges see it */
	assert_int_equal(vr_ctx_purge(c2, P), 4 * P);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_PURGED_BYTES), 4 * P);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES), 0);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_PURGES), 0); /* what c did */
	assert_int_equal(vr_ctx_stat(c2, VR_STAT_PURGES), 1);
	/* the region that counted the file goes; the other one counts it */
	int fd2 = vr_region_fd(r2);
	vr_region_destroy(r1);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_RANGES), 1);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_PURGED_BYTES), 4 * P);
	assert_int_equal(vr_unmark(r2, 0, 4 * P), VR_PURGED);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_RANGES), 0);
	assert_int_equal(vr_ctx_stat(c2, VR_STAT_RANGES), 0);
	assert_true(vt_all_zero(vr_region_base(r2), 4 * P));
	/* fork: the child only destroys its inherited regions (S18) and
	 * joins anew (S33), which sees the parent's state */
	assert_int_equal(vr_mark(r2, 8 * P, P), VR_INTACT);
	int keep = dup(fd2); /* destroying the inherited region closes fd2 */
	assert_true(keep >= 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct vr_ctx *cc;
		struct vr_region *rc2;
		if (vr_mark(r2, 0, P) != -EINVAL)
			_exit(2);
		vr_region_destroy(r2);
		vr_ctx_destroy(c2);
		if (vr_ctx_new(VR_CTX_NO_MONITOR, &cc) != 0 ||
		    vr_region_from_fd(cc, keep, 0, &rc2) != 0)
			_exit(3);
		if (vr_status(rc2, 8 * P, P) != VR_STATE_VOLATILE ||
		    vr_unmark(rc2, 8 * P, P) != VR_INTACT)
			_exit(4);
		vr_ctx_destroy(cc);
		_exit(0);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_int_equal(vr_status(r2, 8 * P, P), 0); /* the child's unmark */
	close(keep);
	/* last call wins: marked twice, one unmark makes it non-volatile */
	assert_int_equal(vr_mark(r2, 0, P), VR_INTACT);
	assert_int_equal(vr_mark(r3, 0, P), VR_INTACT);
	assert_int_equal(vr_unmark(r3, 0, P), VR_INTACT);
	assert_int_equal(vr_status(r2, 0, P), 0);
	vr_ctx_destroy(c);
	vr_ctx_destroy(c2);
}

/* The library's fills of holes (fallocate(0), FALLOC_FL_KEEP_SIZE) go
 * through here; with die_after_fill set the process is SIGKILLed as soon
 * as one has returned, before the unmark trims its records. */
static volatile sig_atomic_t die_after_fill;

/* (the build's 64-bit off_t makes this the fallocate64 the library calls) */
int fallocate(int fd, int mode, off_t off, off_t len)
{
	long rc = syscall(SYS_fallocate, fd, mode, off, len);
	if (die_after_fill && mode == FALLOC_FL_KEEP_SIZE)
		kill(getpid(), SIGKILL);
	return (int)rc;
}

/* S28, S30: an unmarker killed once it filled the holes of a purged range
 * and before it trimmed the records.  The filled pages read 0 in every
 * mapping without a trap from then on (under userfaultfd the hole was
 * the trap), so the bytes must not be left purged: a lazy reader would
 * have taken those zeros for data with no fault.  The repair completes
 * the unmark; a mapping that still traps (the guard protocol's marker,
 * never told to disarm) may see either outcome. */
static void test_shm_unmark_killed_after_fill(void **state)
{
	(void)state;
	size_t P = vt_pg(), n = 4 * P;
	struct vr_ctx *c;
	struct vr_region *r;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	int rc = vr_region_new(c, "vt-shm-fill", n, VR_REGION_SHARED, &r);
	if (rc == -EOPNOTSUPP) {
		vr_ctx_destroy(c);
		skip();
	}
	assert_int_equal(rc, 0);
	uint8_t *b = vr_region_base(r);
	memset(b, 0x5a, n);
	assert_int_equal(vr_mark(r, 0, n), VR_INTACT);
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), (ssize_t)n);
	int fd = vr_region_fd(r);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct vr_ctx *cc;
		struct vr_region *rr;
		if (vr_ctx_new(VR_CTX_NO_MONITOR, &cc) != 0 ||
		    vr_region_from_fd(cc, fd, 0, &rr) != 0)
			_exit(3);
		die_after_fill = 1;
		vr_unmark(rr, 0, n);
		_exit(4); /* not killed: no fill? */
	}
	int ws;
	assert_int_equal(waitpid(pid, &ws, 0), pid);
	assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
	/* what this mapping reads now, without taking the lock (a system
	 * call: EFAULT on a trapped page, never a fault in this process) */
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	bool read_zeros = true;
	for (size_t off = 0; off < n; off += P) {
		uint8_t v = 0xff;
		if (write(p[1], b + off, 1) != 1 || read(p[0], &v, 1) != 1 || v != 0)
			read_zeros = false;
	}
	close(p[0]);
	close(p[1]);
	int st = vr_status(r, 0, n); /* takes the lock: repairs */
	assert_int_equal(vr_ctx_stat(c, VR_STAT_REPAIRS), 1);
	if (read_zeros)
		assert_int_equal(st, 0);
	if (st == 0)
		assert_true(vt_all_zero(b, n));
	else
		assert_int_equal(vr_unmark(r, 0, n), VR_PURGED);
	vr_ctx_destroy(c);
}

/* S31: the capacity, and -ENOSPC changing nothing */
static void test_shm_capacity(void **state)
{
	(void)state;
	size_t P = vt_pg();
	struct vr_ctx *c;
	struct vr_region *r;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	int rc = vr_region_new(c, "vt-cap", 4096 * P, VR_REGION_SHARED, &r);
	if (rc == -EOPNOTSUPP) {
		vr_ctx_destroy(c);
		skip();
	}
	assert_int_equal(rc, 0);
	assert_int_equal(vr_map_capacity(r->map), 512); /* max(512, 4096 / 16) */
	for (size_t i = 0; i < 512; i++)
		assert_int_equal(vr_mark(r, 2 * i * P, P), VR_INTACT);
	assert_int_equal(vr_mark(r, 1024 * P, P), -ENOSPC);
	assert_int_equal(vr_status(r, 1024 * P, P), 0);
	/* a mark that merges needs no more */
	assert_int_equal(vr_mark(r, P, P), VR_INTACT);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_RANGES), 511);
	assert_int_equal(vr_mark(r, 1024 * P, P), VR_INTACT);
	/* a splitting unmark at capacity: refused, nothing changed */
	assert_int_equal(vr_unmark(r, P / 2, P), -ENOSPC);
	assert_int_equal(vr_status(r, 0, 3 * P), VR_STATE_VOLATILE);
	assert_int_equal(vr_unmark(r, 0, 2 * P), VR_INTACT); /* a trim: fine */
	assert_int_equal(vr_ctx_stat(c, VR_STAT_RANGES), 512);
	/* vr_unmark_fill that must split at capacity: refused before it
	 * writes, so the purged page is still a trapped hole in every
	 * mapping (a write into it would have made it present: zeros
	 * around the data, readable without a trap, the range still purged) */
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)P); /* the oldest: [4P, 5P) */
	assert_int_equal(vr_status(r, 4 * P, P), VR_STATE_VOLATILE | VR_STATE_PURGED);
	uint8_t src[200];
	memset(src, 0x33, sizeof(src));
	assert_int_equal(vr_unmark_fill(r, 4 * P + 100, sizeof(src), src), -ENOSPC);
	assert_int_equal(vr_status(r, 4 * P, P), VR_STATE_VOLATILE | VR_STATE_PURGED);
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	errno = 0;
	assert_int_equal(write(p[1], (uint8_t *)vr_region_base(r) + 4 * P, 1), -1);
	assert_int_equal(errno, EFAULT);
	close(p[0]);
	close(p[1]);
	assert_int_equal(vr_map_check(r->map), 0);
	vr_region_destroy(r);
	/* a larger file holds data pages / 16 */
	assert_int_equal(vr_region_new(c, "vt-cap2", 16384 * P + 1, VR_REGION_SHARED, &r), 0);
	assert_int_equal(vr_map_capacity(r->map), 1024);
	vr_ctx_destroy(c);
}

/* S32's guard protocol (VRANGE_TRAP=guard, the shm-guard test): a
 * stopped mapper makes a purge skip the range, data kept, counted in
 * VR_STAT_SKIPPED_BUSY; once it runs again purges go through and it traps */
static void test_shm_stopped_mapper(void **state)
{
	(void)state;
	size_t P = vt_pg();
	struct vr_ctx *c;
	struct vr_region *r;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	int rc = vr_region_new(c, "vt-stop", 16 * P, VR_REGION_SHARED, &r);
	if (rc == 0 && r->trap != &vr_trap_coop) {
		vr_ctx_destroy(c);
		skip(); /* userfaultfd traps here: no protocol to stop */
	}
	assert_int_equal(rc, 0);
	uint8_t *b = vr_region_base(r);
	vt_fill(b, 0, 16 * P, 7);
	int go[2], ready[2], fd = vr_region_fd(r);
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(ready), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct vr_ctx *cc;
		struct vr_region *rr;
		char x = 0;
		alarm(20);
		if (vr_ctx_new(VR_CTX_NO_MONITOR, &cc) != 0 ||
		    vr_region_from_fd(cc, fd, 0, &rr) != 0)
			_exit(2);
		uint8_t *cb = vr_region_base(rr);
		if (write(ready[1], &x, 1) != 1 || read(go[0], &x, 1) != 1)
			_exit(3);
		/* the parent purged [0, 4P) while this process ran: it traps */
		if (vr_status(rr, 0, 4 * P) != (VR_STATE_VOLATILE | VR_STATE_PURGED))
			_exit(4);
		if (vr_region_set_fault_handler(rr, NULL, NULL) != 0)
			_exit(5);
		int p[2];
		if (pipe(p) != 0 || write(p[1], cb + P, 1) != -1 || errno != EFAULT)
			_exit(6); /* a system call on a discarded page: EFAULT (S14, S28) */
		if (vt_check(cb + 8 * P, 8 * P, 8 * P, 7) != SIZE_MAX)
			_exit(7);
		_exit(0);
	}
	char x;
	close(ready[1]);
	close(go[0]);
	assert_int_equal(read(ready[0], &x, 1), 1);
	kill(pid, SIGSTOP);
	int st;
	assert_int_equal(waitpid(pid, &st, WUNTRACED), pid);
	assert_true(WIFSTOPPED(st));
	assert_int_equal(vr_mark(r, 0, 4 * P), VR_INTACT);
	assert_int_equal(vr_ctx_purge(c, 4 * P), 0);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_SKIPPED_BUSY), 1);
	assert_int_equal(vr_status(r, 0, 4 * P), VR_STATE_VOLATILE);
	assert_true(vt_check(b, 0, 4 * P, 7) == SIZE_MAX); /* kept, readable */
	kill(pid, SIGCONT);
	assert_int_equal(vr_ctx_purge(c, 4 * P), 4 * P);
	assert_int_equal(write(go[1], &x, 1), 1);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_int_equal(vr_unmark(r, 0, 4 * P), VR_PURGED);
	close(ready[0]);
	close(go[1]);
	vr_ctx_destroy(c);
}

/* shared.h, LOST WAKEUPS: the state a woken waiter killed before it took
 * the lock leaves when another thread takes the free lock without
 * FUTEX_WAITERS and releases it: the lock free and a locker asleep on it
 * with no wakeup to come.  Made by hand: a raw holder clears the bit
 * while the library's locker sleeps, then unlocks (glibc wakes nobody).
 * The locker must still get the lock (before the fix it slept for good) */
struct lw_locker {
	struct vr_region *r;
	size_t len;
	_Atomic pid_t tid;
	_Atomic int rc, done;
};

static void *lw_lock_thread(void *arg)
{
	struct lw_locker *l = arg;
	atomic_store(&l->tid, (pid_t)syscall(SYS_gettid));
	atomic_store(&l->rc, vr_mark(l->r, 0, l->len));
	atomic_store(&l->done, 1);
	return NULL;
}

/* true once thread @tid sleeps in futex() on @word */
static bool lw_asleep_on(pid_t tid, const void *word)
{
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	unsigned long nr, a0;
	return sscanf(buf, "%lu %lx", &nr, &a0) == 2 && nr == SYS_futex &&
	       a0 == (unsigned long)word;
}

static void test_shm_lost_wakeup(void **state)
{
	(void)state;
	size_t P = vt_pg();
	struct vr_ctx *c;
	struct vr_region *r;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	int rc = vr_region_new(c, "vt-shm-lw", 4 * P, VR_REGION_SHARED, &r);
	if (rc == -EOPNOTSUPP) {
		vr_ctx_destroy(c);
		skip();
	}
	assert_int_equal(rc, 0);
	struct vr_shm *s = r->shm;
	unsigned *word = (unsigned *)&s->lock.__data.__lock;
	uint64_t rewaits = atomic_load(&s->rewaits);
	assert_int_equal(pthread_mutex_lock(&s->lock), 0); /* the raw holder */
	struct lw_locker l = { .r = r, .len = P };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, lw_lock_thread, &l), 0);
	int spins = 0;
	while (!atomic_load(&l.tid) || !lw_asleep_on(atomic_load(&l.tid), word)) {
		assert_true(++spins < 10000); /* 10 s */
		usleep(1000);
	}
	assert_true(__atomic_load_n(word, __ATOMIC_SEQ_CST) & FUTEX_WAITERS);
	__atomic_fetch_and(word, ~(unsigned)FUTEX_WAITERS, __ATOMIC_SEQ_CST);
	assert_int_equal(pthread_mutex_unlock(&s->lock), 0); /* wakes nobody */
	for (spins = 0; !atomic_load(&l.done); spins++) {
		assert_true(spins < 5000); /* asleep for good: the bug */
		usleep(1000);
	}
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(atomic_load(&l.rc), VR_INTACT);
	assert_int_equal(vr_status(r, 0, P), VR_STATE_VOLATILE);
	assert_true(atomic_load(&s->rewaits) > rewaits); /* it looked again */
	vr_ctx_destroy(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shm_kill_invariants),
		cmocka_unit_test(test_shm_in_process),
		cmocka_unit_test(test_shm_capacity),
		cmocka_unit_test(test_shm_unmark_killed_after_fill),
		cmocka_unit_test(test_shm_stopped_mapper),
		cmocka_unit_test(test_shm_lost_wakeup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
