/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-lifecycle.c - creating and destroying regions and contexts leaks
 * nothing (API S15): no fd (/proc/self/fd), no mapping (/proc/self/maps
 * lines naming our memfds), no thread (/proc/self/task).  Heap leaks are
 * found by running this same program under valgrind
 * (`meson test --setup=valgrind lifecycle`) or ASan: sizes are small and
 * iteration counts bounded so that stays quick.
 *
 * Everything here runs in the cmocka process (so valgrind sees it) except
 * the mprotect-backend churn, which needs VRANGE_TRAP set before the first
 * vr_ctx_new and therefore runs as a re-exec'd scenario.
 */
#include "tests.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

/* ---- process resource counters ---- */

/* lines of /proc/self/maps of memfds named exactly @name */
static int count_maps(const char *name)
{
	char needle[128];
	snprintf(needle, sizeof(needle), "/memfd:%s (deleted)", name);
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return -1;
	char line[4096];
	int n = 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, needle))
			n++;
	fclose(f);
	return n;
}

struct snap {
	int fds, threads, maps;
};

#define NAME "vt-lc"

static struct snap take(void)
{
	return (struct snap){ vt_count_fds(), vt_count_threads(), count_maps(NAME) };
}

/* a joined thread may linger in /proc/self/task for a moment after
 * pthread_join returns (the tid is cleared before the task is reaped) */
static struct snap settle(struct snap want)
{
	struct snap s = take();
	for (int i = 0; i < 200 && s.threads != want.threads; i++) {
		usleep(5000);
		s = take();
	}
	return s;
}

#define assert_snap_equal(a, b)                                                                    \
	do {                                                                                       \
		struct snap a_ = (a), b_ = settle(b);                                              \
		if (a_.fds != b_.fds || a_.threads != b_.threads || a_.maps != b_.maps)            \
			fail_msg("leak: fds %d -> %d, threads %d -> %d, maps %d -> %d", a_.fds,    \
				 b_.fds, a_.threads, b_.threads, a_.maps, b_.maps);                \
	} while (0)

static bool under_valgrind(void)
{
	return getenv("VT_VALGRIND") != NULL;
}

static int iters(int n)
{
	return under_valgrind() ? n / 4 + 1 : n;
}

static void assert_ctx_empty(struct vr_ctx *c)
{
	assert_int_equal(vr_ctx_stat(c, VR_STAT_REGIONS), 0);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_RANGES), 0);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES), 0);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_PURGED_BYTES), 0);
}

static int dummy_fault(struct vr_region *r, size_t off, size_t len, void *addr, void *arg)
{
	(void)r, (void)off, (void)len, (void)addr, (void)arg;
	return VR_FAULT_SIGBUS;
}

/* Give a region some state to tear down: data, a few volatile ranges
 * (page and sub-page), perhaps a fault handler, and perhaps a small purge
 * of the ctx (which ranges it takes does not matter here). */
static void populate(struct vr_ctx *c, struct vr_region *r, struct vt_rng *rng)
{
	size_t P = vt_pg(), sz = vr_region_size(r);
	uint8_t *b = vr_region_base(r);
	assert_non_null(b);
	vt_fill(b, 0, sz, vt_next(rng));
	unsigned n = 1 + (unsigned)vt_below(rng, 6);
	for (unsigned i = 0; i < n; i++) {
		size_t off = vt_below(rng, sz);
		size_t len = 1 + vt_below(rng, sz - off < 3 * P ? sz - off : 3 * P);
		int rc = vr_mark(r, off, len);
		assert_true(rc == VR_INTACT || rc == VR_PURGED);
	}
	if (vt_below(rng, 2))
		assert_int_equal(vr_region_set_fault_handler(r, dummy_fault, NULL), 0);
	if (vt_below(rng, 2))
		assert_true(vr_ctx_purge(c, 1 + vt_below(rng, 2 * P)) >= 0);
}

/* warm up once: the first vr_ctx_new does one-time process setup (signal
 * handler, trap backend probe); per-object leaks are what we measure */
static int setup(void **state)
{
	(void)state;
	struct vr_ctx *c;
	struct vr_region *r;
	if (vr_ctx_new(0, &c) < 0)
		return -1;
	if (vr_region_new(c, NAME "-warm", 1, 0, &r) < 0)
		return -1;
	vr_mark(r, 0, 1);
	vr_ctx_destroy(c);
	return 0;
}

/* ---- tests ---- */

static void test_region_churn(void **state)
{
	(void)state;
	struct vt_rng rng;
	vt_seed(&rng, vt_get_seed("region_churn"));
	size_t P = vt_pg();
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	struct snap before = take();
	int n = iters(400);
	for (int i = 0; i < n; i++) {
		struct vr_region *r;
		size_t sz = 1 + vt_below(&rng, 8 * P);
		assert_int_equal(vr_region_new(c, NAME, sz, 0, &r), 0);
		if (i % 3)
			populate(c, r, &rng);
		vr_region_destroy(r);
	}
	assert_snap_equal(before, take());
	assert_ctx_empty(c);
	vr_ctx_destroy(c);
	assert_snap_equal(before, take());
}

/* many live regions at once, destroyed in a shuffled order */
static void test_region_batch(void **state)
{
	(void)state;
	struct vt_rng rng;
	vt_seed(&rng, vt_get_seed("region_batch"));
	size_t P = vt_pg();
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	struct snap before = take();
	enum { N = 200 };
	struct vr_region *rs[N];
	int n = iters(N);
	for (int i = 0; i < n; i++) {
		assert_int_equal(vr_region_new(c, NAME, 1 + vt_below(&rng, 4 * P), 0, &rs[i]), 0);
		populate(c, rs[i], &rng);
	}
	assert_int_equal(vr_ctx_stat(c, VR_STAT_REGIONS), (uint64_t)n);
	assert_int_equal(count_maps(NAME) - before.maps >= n, 1);
	/* everything purgeable at destroy time, some of it purged */
	assert_true(vr_ctx_notify_pressure(c, VR_PRESSURE_MODERATE) >= 0);
	for (int i = n - 1; i > 0; i--) {
		int j = (int)vt_below(&rng, (uint64_t)i + 1);
		struct vr_region *t = rs[i];
		rs[i] = rs[j];
		rs[j] = t;
	}
	for (int i = 0; i < n; i++) {
		void *base = vr_region_base(rs[i]);
		vr_region_destroy(rs[i]);
		assert_null(vr_region_of(base));
		assert_int_equal(vr_ctx_stat(c, VR_STAT_REGIONS), (uint64_t)(n - i - 1));
	}
	assert_ctx_empty(c);
	assert_snap_equal(before, take());
	vr_ctx_destroy(c);
	assert_snap_equal(before, take());
}

/* contexts with and without monitor; regions left alive for ctx_destroy */
static void test_ctx_churn(void **state)
{
	(void)state;
	struct vt_rng rng;
	vt_seed(&rng, vt_get_seed("ctx_churn"));
	size_t P = vt_pg();
	struct snap before = take();
	/* every third with a monitor thread (closing PSI trigger fds costs the
	 * kernel a synchronize_rcu: ~25 ms per monitored ctx here) */
	int n = iters(240);
	for (int i = 0; i < n; i++) {
		struct vr_ctx *c;
		assert_int_equal(vr_ctx_new(i % 3 ? VR_CTX_NO_MONITOR : 0, &c), 0);
		unsigned nr = (unsigned)vt_below(&rng, 4);
		for (unsigned k = 0; k < nr; k++) {
			struct vr_region *r;
			assert_int_equal(vr_region_new(c, NAME, 1 + vt_below(&rng, 6 * P), 0, &r),
					 0);
			populate(c, r, &rng);
			if (vt_below(&rng, 4) == 0)
				vr_region_destroy(r);
		}
		if (i % 5 == 0)
			assert_int_equal(vr_ctx_set_limit(c, P), 0);
		vr_ctx_destroy(c);
	}
	assert_snap_equal(before, take());
}

/* vr_ctx_destroy destroys the regions it still owns */
static void test_ctx_destroy_live_regions(void **state)
{
	(void)state;
	struct vt_rng rng;
	vt_seed(&rng, vt_get_seed("ctx_destroy_live_regions"));
	size_t P = vt_pg();
	struct snap before = take();
	for (int round = 0; round < 2; round++) {
		struct vr_ctx *c;
		assert_int_equal(vr_ctx_new(round ? 0 : VR_CTX_NO_MONITOR, &c), 0);
		enum { N = 64 };
		void *bases[N];
		int n = iters(N);
		for (int i = 0; i < n; i++) {
			struct vr_region *r;
			assert_int_equal(vr_region_new(c, NAME, P + vt_below(&rng, 4 * P), 0, &r),
					 0);
			populate(c, r, &rng);
			bases[i] = vr_region_base(r);
			assert_ptr_equal(vr_region_of(bases[i]), r);
		}
		/* half purged, half volatile and intact at destroy time */
		assert_true(vr_ctx_notify_pressure(c, VR_PRESSURE_MODERATE) >= 0);
		assert_int_equal(vr_ctx_stat(c, VR_STAT_REGIONS), (uint64_t)n);
		assert_true(count_maps(NAME) - before.maps >= n);
		assert_true(vt_count_fds() - before.fds >= n);
		vr_ctx_destroy(c);
		for (int i = 0; i < n; i++)
			assert_null(vr_region_of(bases[i]));
		assert_snap_equal(before, take());
	}
}

/* vr_region_from_fd: dup()s the fd, maps the whole file; destroy closes
 * the dup and unmaps, and leaves the caller's fd alone */
static void test_from_fd_churn(void **state)
{
	(void)state;
	struct vt_rng rng;
	vt_seed(&rng, vt_get_seed("from_fd_churn"));
	size_t P = vt_pg();
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	int fd = memfd_create(NAME "-fd", MFD_CLOEXEC);
	assert_true(fd >= 0);
	size_t sz = 5 * P + 17;
	assert_int_equal(ftruncate(fd, (off_t)sz), 0);
	struct snap before = take();
	int n = iters(300);
	for (int i = 0; i < n; i++) {
		struct vr_region *r, *r2 = NULL;
		assert_int_equal(vr_region_from_fd(c, fd, 0, &r), 0);
		assert_int_equal(vr_region_size(r), sz);
		assert_true(vr_region_fd(r) != fd);
		/* one region per file in a process (S33): refused, nothing leaks */
		if (vt_below(&rng, 2))
			assert_int_equal(vr_region_from_fd(c, fd, 0, &r2), -EBUSY);
		populate(c, r, &rng);
		vr_region_destroy(r);
		/* the caller's fd is still open */
		assert_true(fcntl(fd, F_GETFD) >= 0);
		assert_int_equal(vt_count_fds(), before.fds);
	}
	assert_int_equal(count_maps(NAME "-fd"), 0);
	/* and once with live from_fd regions left to vr_ctx_destroy */
	struct vr_region *r;
	assert_int_equal(vr_region_from_fd(c, fd, 0, &r), 0);
	populate(c, r, &rng);
	int fd2 = memfd_create(NAME "-fd", MFD_CLOEXEC);
	assert_true(fd2 >= 0);
	assert_int_equal(ftruncate(fd2, (off_t)sz), 0);
	assert_int_equal(vr_region_from_fd(c, fd2, 0, &r), 0);
	close(fd2);
	assert_int_equal(vt_count_fds(), before.fds + 2 * vt_region_fds());
	assert_true(count_maps(NAME "-fd") >= 2);
	vr_ctx_destroy(c);
	assert_snap_equal(before, take());
	assert_int_equal(count_maps(NAME "-fd"), 0);
	assert_true(fcntl(fd, F_GETFD) >= 0);
	close(fd);
}

/* ---- destroying a region while other regions of its ctx are in use ---- */

struct marker {
	struct vr_ctx *c;
	struct vr_region *r[2];
	_Atomic bool stop;
	_Atomic unsigned long ops;
	int fail; /* line of the failed check, 0 if none */
	size_t fail_off;
	uint64_t seed;
};

#define MCHUNKS 16

static void *marker_main(void *arg)
{
	struct marker *m = arg;
	struct vt_rng rng;
	vt_seed(&rng, m->seed);
	size_t P = vt_pg(), clen = P + P / 2; /* chunks straddle pages */
	uint64_t gen[2][MCHUNKS];
	bool vol[2][MCHUNKS] = { { false } };
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < MCHUNKS; i++) {
			gen[k][i] = vt_next(&rng);
			vt_fill((uint8_t *)vr_region_base(m->r[k]) + i * clen, i * clen, clen,
				gen[k][i]);
		}
	while (!atomic_load(&m->stop) || atomic_load(&m->ops) < 64) {
		int k = (int)vt_below(&rng, 2), i = (int)vt_below(&rng, MCHUNKS);
		uint8_t *p = (uint8_t *)vr_region_base(m->r[k]) + i * clen;
		size_t off = i * clen;
		if (!vol[k][i]) {
			size_t bad = vt_check(p, off, clen, gen[k][i]);
			if (bad != SIZE_MAX) { /* S9: non-volatile bytes never change */
				m->fail = __LINE__, m->fail_off = off + bad;
				break;
			}
			int rc = vr_mark(m->r[k], off, clen);
			if (rc != VR_INTACT && rc != VR_PURGED) {
				m->fail = __LINE__;
				break;
			}
			vol[k][i] = true;
		} else {
			int rc = vr_unmark(m->r[k], off, clen);
			if (rc == VR_INTACT) {
				size_t bad = vt_check(p, off, clen, gen[k][i]);
				if (bad != SIZE_MAX) {
					m->fail = __LINE__, m->fail_off = off + bad;
					break;
				}
			} else if (rc != VR_PURGED) {
				m->fail = __LINE__;
				break;
			}
			vol[k][i] = false;
			gen[k][i] = vt_next(&rng);
			vt_fill(p, off, clen, gen[k][i]);
		}
		atomic_fetch_add(&m->ops, 1);
	}
	return NULL;
}

static void *purger_main(void *arg)
{
	struct marker *m = arg;
	unsigned i = 0;
	while (!atomic_load(&m->stop)) {
		if (i++ % 2)
			vr_ctx_purge(m->c, vt_pg());
		else
			vr_ctx_notify_pressure(m->c, VR_PRESSURE_MODERATE);
		sched_yield();
	}
	return NULL;
}

static void destroy_while_marking(int ctx_flags)
{
	struct vt_rng rng;
	vt_seed(&rng, vt_get_seed("destroy_while_marking"));
	size_t P = vt_pg();
	struct snap before = take();
	struct marker m = { .seed = vt_next(&rng) };
	assert_int_equal(vr_ctx_new(ctx_flags, &m.c), 0);
	for (int k = 0; k < 2; k++)
		assert_int_equal(vr_region_new(m.c, NAME, MCHUNKS * (P + P / 2), 0, &m.r[k]), 0);
	pthread_t tm, tp;
	assert_int_equal(pthread_create(&tm, NULL, marker_main, &m), 0);
	assert_int_equal(pthread_create(&tp, NULL, purger_main, &m), 0);
	int n = iters(300);
	for (int i = 0; i < n; i++) {
		struct vr_region *r;
		assert_int_equal(vr_region_new(m.c, NAME, 1 + vt_below(&rng, 4 * P), 0, &r), 0);
		populate(m.c, r, &rng);
		void *base = vr_region_base(r);
		vr_region_destroy(r);
		assert_null(vr_region_of(base));
	}
	atomic_store(&m.stop, true);
	pthread_join(tm, NULL);
	pthread_join(tp, NULL);
	if (m.fail)
		fail_msg("marker thread: check at line %d failed (offset %zu)", m.fail, m.fail_off);
	fprintf(stderr, "destroy_while_marking: %d regions destroyed during %lu mark/unmark ops\n",
		n, atomic_load(&m.ops));
	assert_int_equal(vr_ctx_stat(m.c, VR_STAT_REGIONS), 2);
	/* only the marker's two regions remain: unmark all, gauges go to 0 */
	for (int k = 0; k < 2; k++) {
		int rc = vr_unmark(m.r[k], 0, vr_region_size(m.r[k]));
		assert_true(rc == VR_INTACT || rc == VR_PURGED);
	}
	assert_int_equal(vr_ctx_stat(m.c, VR_STAT_RANGES), 0);
	assert_int_equal(vr_ctx_stat(m.c, VR_STAT_VOLATILE_BYTES), 0);
	assert_int_equal(vr_ctx_stat(m.c, VR_STAT_PURGED_BYTES), 0);
	vr_ctx_destroy(m.c); /* with the two regions still alive */
	assert_snap_equal(before, take());
}

static void test_destroy_while_marking(void **state)
{
	(void)state;
	destroy_while_marking(VR_CTX_NO_MONITOR);
}

static void test_destroy_while_marking_monitor(void **state)
{
	(void)state;
	destroy_while_marking(0);
}

/* ---- the same churn under the mprotect backend (VMA splits to undo) ---- */

static void sc_mprotect_churn(void)
{
	struct vt_rng rng;
	vt_seed(&rng, vt_get_seed("mprotect_churn"));
	size_t P = vt_pg();
	struct vr_ctx *c;
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	CK_EQ(vr_trap_backend(), VR_TRAP_MPROTECT);
	struct snap before = take();
	for (int i = 0; i < 300; i++) {
		struct vr_region *r;
		CK_EQ(vr_region_new(c, NAME, 16 * P, 0, &r), 0);
		/* alternating pages: each purge splits the mapping */
		for (size_t pg = 0; pg < 16; pg += 2)
			CK_EQ(vr_mark(r, pg * P, P), VR_INTACT);
		CK_EQ(vr_ctx_purge(c, SIZE_MAX), (ssize_t)(8 * P));
		CK(count_maps(NAME) - before.maps >= 16, "(%d maps)", count_maps(NAME));
		if (i & 1)
			vr_region_destroy(r);
	}
	vr_ctx_destroy(c);
	struct snap after = take();
	CK_EQ(after.fds, before.fds);
	CK_EQ(after.threads, before.threads);
	CK_EQ(after.maps, before.maps);
	exit(0);
}

static const struct vt_scenario scenarios[] = {
	{ "mprotect_churn", sc_mprotect_churn },
};

static void test_mprotect_churn(void **state)
{
	(void)state;
	if (under_valgrind()) {
		/* under valgrind /proc/self/exe is valgrind's own launcher, so
		 * the scenario cannot be re-exec'd (and would escape valgrind) */
		fprintf(stderr, "skip: scenario re-exec not possible under valgrind\n");
		skip();
	}
	setenv("VRANGE_TRAP", "mprotect", 1);
	int st = vt_run_scenario("mprotect_churn");
	unsetenv("VRANGE_TRAP");
	vt_assert_exit_ok(st);
}

int main(int argc, char **argv)
{
	int rc = vt_scenario_dispatch(argc, argv, scenarios,
				      sizeof(scenarios) / sizeof(scenarios[0]), 60);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_region_churn),
		cmocka_unit_test(test_region_batch),
		cmocka_unit_test(test_ctx_churn),
		cmocka_unit_test(test_ctx_destroy_live_regions),
		cmocka_unit_test(test_from_fd_churn),
		cmocka_unit_test(test_destroy_while_marking),
		cmocka_unit_test(test_destroy_while_marking_monitor),
		cmocka_unit_test(test_mprotect_churn),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
