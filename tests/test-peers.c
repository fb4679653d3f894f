/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-peers.c - several mappings of one plain memfd (S17, S33), under
 * every trap backend (issue 21, items 4 and 5)
 *
 * A plain memfd region's volatility is its process's own (S17): a purge
 * discards for every mapping of the file, the others read zeros without
 * a trap, and the purging mapping keeps trapping whatever the others do.
 * Each scenario runs with VRANGE_TRAP=guard, mprotect and uffd:
 *   ebusy        a second region on a memfd this process maps is refused
 *                with -EBUSY (S33) and leaves the first one's purged
 *                pages trapped (the uffd backend filled them: zeros, no
 *                trap);
 *   join_after   another process that maps the file after the purge
 *                leaves the purger's pages trapped (same fill);
 *   peer_reads   another process that mapped the file before the purge
 *                reads the purged page as zeros and is not killed (the
 *                uffd backend's registration gave it SIGBUS), and the
 *                purger still traps after that read;
 *   peer_races   another mapping reads the page while the purger punches
 *                it: the purger still traps;
 *   fd_out_budget  the VMAs the mprotect traps of a region whose memfd is
 *                out may take;
 *   fd_out_held  ranges on markers do not give back the budget of ranges
 *                still on mprotect, one unmark of many ranges gives all
 *                theirs back, a fork child's budget is its own.
 */
#define _GNU_SOURCE
#include "tests.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

static inline uint8_t rd(const void *p)
{
	return *(const volatile uint8_t *)p;
}

/* a ctx on the backend VRANGE_TRAP forces (exit 77 where it cannot work) */
static struct vr_ctx *ctx_forced(void)
{
	struct vr_ctx *c = NULL;
	int rc = vr_ctx_new(VR_CTX_NO_MONITOR, &c);
	const char *t = getenv("VRANGE_TRAP");
	if (rc == -EOPNOTSUPP && vt_trap_optional(t))
		_exit(77);
	CK_EQ(rc, 0);
	if (t)
		CK_EQ(vr_trap_backend(), vt_trap_id(t));
	return c;
}

static int refill_fn(struct vr_region *r, size_t off, size_t len, void *addr, void *arg)
{
	(void)addr;
	atomic_int *calls = arg;
	atomic_fetch_add(calls, 1);
	CK_EQ(vr_unmark(r, off, len), VR_PURGED);
	vt_fill((uint8_t *)vr_region_base(r) + off, off, len, 9);
	return VR_FAULT_RETRY;
}

/* 6 pages of pattern 1, pages 1 and 3 purged as two ranges */
static struct vr_region *purged_region(struct vr_ctx *c, atomic_int *calls)
{
	size_t P = vt_pg();
	struct vr_region *r = NULL;
	CK_EQ(vr_region_new(c, "vt-peers", 6 * P, 0, &r), 0);
	vt_fill(vr_region_base(r), 0, 6 * P, 1);
	CK_EQ(vr_region_set_fault_handler(r, refill_fn, calls), 0);
	CK_EQ(vr_mark(r, P, P), VR_INTACT);
	CK_EQ(vr_mark(r, 3 * P, P), VR_INTACT);
	return r;
}

static void purge_all(struct vr_ctx *c)
{
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), (ssize_t)(2 * vt_pg()));
}

/* a touch of page pi (purged) calls the handler: the calls-th call, and
 * the refilled data */
static void expect_trap(struct vr_region *r, size_t pi, atomic_int *calls, int n)
{
	size_t P = vt_pg(), at = pi * P + 5;
	uint8_t v = rd((uint8_t *)vr_region_base(r) + at);
	CK_EQ(atomic_load(calls), n);
	CK_EQ(v, vt_pat(9, at));
}

/* the pages nobody purged keep their data */
static void expect_kept(const uint8_t *b)
{
	size_t P = vt_pg();
	CK(vt_check(b, 0, P, 1) == SIZE_MAX);
	CK(vt_check(b + 2 * P, 2 * P, P, 1) == SIZE_MAX);
	CK(vt_check(b + 4 * P, 4 * P, 2 * P, 1) == SIZE_MAX);
}

/* ---- item 4, one process: the refused second region ---- */
static void sc_ebusy(void)
{
	struct vr_ctx *c = ctx_forced();
	atomic_int calls = 0;
	struct vr_region *r = purged_region(c, &calls);
	purge_all(c);
	struct vr_region *r2 = NULL;
	CK_EQ(vr_region_from_fd(c, vr_region_fd(r), 0, &r2), -EBUSY);
	CK(r2 == NULL);
	CK_EQ(vr_status(r, vt_pg(), vt_pg()), VR_STATE_VOLATILE | VR_STATE_PURGED);
	expect_trap(r, 1, &calls, 1);
	expect_trap(r, 3, &calls, 2);
	expect_kept(vr_region_base(r));
	vr_ctx_destroy(c);
}

/* ---- the other process (re-executed with the fd and two pipes) ---- */
static int env_fd(const char *k)
{
	const char *v = getenv(k);
	CK(v != NULL, "(%s not set)", k);
	return atoi(v);
}

static void step(int ack, int go, char say)
{
	CK_EQ(write(ack, &say, 1), 1);
	char x;
	CK_EQ(read(go, &x, 1), 1);
}

/* maps the file, says 'm'; then (VT_READ) reads the purged pages as
 * zeros and the others as data, says 'r' */
static void sc_peer(void)
{
	size_t P = vt_pg();
	int fd = env_fd("VT_FD"), go = env_fd("VT_GO"), ack = env_fd("VT_ACK");
	struct vr_ctx *c = ctx_forced();
	struct vr_region *r = NULL;
	CK_EQ(vr_region_from_fd(c, fd, 0, &r), 0);
	uint8_t *b = vr_region_base(r);
	step(ack, go, 'm');
	if (getenv("VT_READ")) {
		/* S17: another process's purge reads as zeros here, no trap */
		CK(vt_all_zero(b + P, P));
		CK(vt_all_zero(b + 3 * P, P));
		expect_kept(b);
		CK_EQ(vr_status(r, 0, 6 * P), 0);
		CK_EQ(vr_ctx_stat(c, VR_STAT_FAULTS), 0);
	}
	vr_ctx_destroy(c);
	char x = 'r';
	CK_EQ(write(ack, &x, 1), 1);
}

struct peer {
	pid_t pid;
	int go, ack;
};

static struct peer peer_start(struct vr_region *r, bool reads)
{
	int go[2], ack[2];
	CK_EQ(pipe(go), 0);
	CK_EQ(pipe(ack), 0);
	int fd = fcntl(vr_region_fd(r), F_DUPFD, 0); /* inherited across exec */
	CK(fd >= 0);
	char buf[16];
	snprintf(buf, sizeof(buf), "%d", fd);
	setenv("VT_FD", buf, 1);
	snprintf(buf, sizeof(buf), "%d", go[0]);
	setenv("VT_GO", buf, 1);
	snprintf(buf, sizeof(buf), "%d", ack[1]);
	setenv("VT_ACK", buf, 1);
	if (reads)
		setenv("VT_READ", "1", 1);
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		execl("/proc/self/exe", "vt-scenario", "--scenario", "peer", (char *)NULL);
		_exit(127);
	}
	close(fd);
	close(go[0]);
	close(ack[1]);
	struct peer p = { pid, go[1], ack[0] };
	char x;
	CK_EQ(read(p.ack, &x, 1), 1); /* mapped */
	CK_EQ(x, 'm');
	return p;
}

/* lets the peer go on, waits for its 'r' and its exit 0 */
static void peer_finish(struct peer *p)
{
	char x = 0;
	CK_EQ(write(p->go, "g", 1), 1);
	ssize_t n = read(p->ack, &x, 1);
	int st = 0;
	CK_EQ(waitpid(p->pid, &st, 0), p->pid);
	CK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "peer: status 0x%x (%s %d)", st,
	   WIFSIGNALED(st) ? "signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	CK(n == 1 && x == 'r');
	close(p->go);
	close(p->ack);
}

/* ---- item 4, two processes: a peer that maps the file after the purge */
static void sc_join_after(void)
{
	struct vr_ctx *c = ctx_forced();
	atomic_int calls = 0;
	struct vr_region *r = purged_region(c, &calls);
	purge_all(c);
	struct peer p = peer_start(r, false);
	/* the peer mapped the file: the purged pages still trap here */
	expect_trap(r, 1, &calls, 1);
	peer_finish(&p);
	expect_trap(r, 3, &calls, 2);
	expect_kept(vr_region_base(r));
	vr_ctx_destroy(c);
}

/* ---- item 5: a peer that mapped the file before the purge reads it */
static void sc_peer_reads(void)
{
	struct vr_ctx *c = ctx_forced();
	atomic_int calls = 0;
	struct vr_region *r = purged_region(c, &calls);
	struct peer p = peer_start(r, true);
	purge_all(c);
	peer_finish(&p); /* it read zeros and lived */
	/* its reads made the pages present again: they still trap here */
	expect_trap(r, 1, &calls, 1);
	expect_trap(r, 3, &calls, 2);
	expect_kept(vr_region_base(r));
	vr_ctx_destroy(c);
}

/* ---- another mapping reading the page while the purger punches it ----
 * A mapping of the file that is not the region (here this process's own
 * mmap of vr_region_fd(); another process's would do the same) reads
 * page 1 without pause while the region marks it, purges it and reads
 * it back.  The reader faults the page in while the punch runs, and the
 * kernel's second unmap of that page dropped the region's guard marker:
 * the region's read found the hole untrapped and read 0 as data, the
 * range still purged (mem-pages.c, MARKERS LOST TO A PUNCH) */
#define PR_ROUNDS 20000

static struct {
	const uint8_t *map;
	atomic_bool stop;
} PR;

static void *pr_reader(void *arg)
{
	(void)arg;
	size_t P = vt_pg();
	while (!atomic_load(&PR.stop))
		(void)rd(PR.map + P + 7);
	return NULL;
}

static void sc_peer_races(void)
{
	size_t P = vt_pg();
	struct vr_ctx *c = ctx_forced();
	atomic_int calls = 0;
	struct vr_region *r = NULL;
	CK_EQ(vr_region_new(c, "vt-peers", 4 * P, 0, &r), 0);
	uint8_t *b = vr_region_base(r);
	vt_fill(b, 0, 4 * P, 1);
	CK_EQ(vr_region_set_fault_handler(r, refill_fn, &calls), 0);
	PR.map = mmap(NULL, 4 * P, PROT_READ, MAP_SHARED, vr_region_fd(r), 0);
	CK(PR.map != MAP_FAILED);
	pthread_t t;
	CK_EQ(pthread_create(&t, NULL, pr_reader, NULL), 0);
	for (int i = 0; i < PR_ROUNDS; i++) {
		CK_EQ(vr_mark(r, P, P), VR_INTACT);
		CK_EQ(vr_ctx_purge(c, SIZE_MAX), (ssize_t)P);
		int n = atomic_load(&calls);
		uint8_t v = rd(b + P + 5);
		CK(atomic_load(&calls) == n + 1 && v == vt_pat(9, P + 5),
		   "(round %d: read %d, %d handler calls, status %d)", i, v,
		   atomic_load(&calls) - n, vr_status(r, P, P));
	}
	atomic_store(&PR.stop, true);
	pthread_join(t, NULL);
	munmap((void *)PR.map, 4 * P);
	vr_ctx_destroy(c);
}

/* ---- the VMAs those mprotect traps take ----
 * A region whose memfd is out traps a purged range with mprotect, up to
 * two VMAs each, which are the application's too: at most 4096 ranges at
 * a time in the process, markers beyond (mem-pages.c, PROT_OUT_MAX).  6000
 * alternating one-page ranges purged: the VMAs grow by about 2 x 4096,
 * not 2 x 6000, every range is purged and traps; unmarked, the VMAs come
 * back and so do the 4096 */
#define BUDGET 4096
#define BR 6000

static long maps_lines(void)
{
	char buf[1 << 16];
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	CK(fd >= 0);
	long n = 0;
	ssize_t k;
	while ((k = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < k; i++)
			n += buf[i] == '\n';
	close(fd);
	return n;
}

static void budget_round(struct vr_ctx *c, struct vr_region *r, atomic_int *calls)
{
	size_t P = vt_pg();
	uint8_t *b = vr_region_base(r);
	for (size_t i = 0; i < BR; i++)
		CK_EQ(vr_mark(r, (2 * i + 1) * P, P), VR_INTACT);
	long v0 = maps_lines();
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), (ssize_t)(BR * P));
	long grew = maps_lines() - v0;
	CK(grew >= 2 * BUDGET - 8 && grew <= 2 * BUDGET + 8, "(VMAs grew by %ld)", grew);
	CK_EQ(vr_ctx_stat(c, VR_STAT_SKIPPED), 0);
	/* the first and the last range (markers there) both trap */
	int n = atomic_load(calls);
	CK_EQ(rd(b + P + 5), vt_pat(9, P + 5));
	CK_EQ(rd(b + (2 * BR - 1) * P + 5), vt_pat(9, (2 * BR - 1) * P + 5));
	CK_EQ(atomic_load(calls), n + 2);
	for (size_t i = 1; i + 1 < BR; i++)
		CK_EQ(vr_unmark(r, (2 * i + 1) * P, P), VR_PURGED);
	CK(maps_lines() <= v0 + 2, "(VMAs %ld after the unmarks, %ld before)", maps_lines(), v0);
}

static void sc_fd_out_budget(void)
{
	size_t P = vt_pg();
	struct vr_ctx *c = ctx_forced();
	if (vr_trap_backend() != VR_TRAP_GUARD && vr_trap_backend() != VR_TRAP_UFFD)
		_exit(0); /* mprotect everywhere already: nothing to count */
	atomic_int calls = 0;
	struct vr_region *r = NULL;
	CK_EQ(vr_region_new(c, "vt-budget", 2 * BR * P, 0, &r), 0);
	CK_EQ(vr_region_set_fault_handler(r, refill_fn, &calls), 0);
	CK(vr_region_fd(r) >= 0); /* the memfd is out */
	budget_round(c, r, &calls);
	budget_round(c, r, &calls); /* the budget came back */
	vr_ctx_destroy(c);
}

/* ---- the budget is held by the ranges on mprotect, not by restores ----
 * Sets of BUDGET alternating one-page ranges: A purged (mprotect, the
 * whole budget), B purged (markers) and unmarked, C purged: C must get
 * markers while A stays purged (a count given back by any restore let B's
 * unmarks give back A's: C took mprotect, 2 x 4096 VMAs more, and so on
 * without bound).  Then one unmark of all gives A's and C's back: A
 * purged again takes mprotect (a restore gave back at most one).  Then a
 * fork child, while A holds the budget: its own region takes mprotect
 * (the parent's ranges are not the child's).  (A reviewer's test.) */
static void budget_set(struct vr_ctx *c, struct vr_region *r, size_t set, bool unmark)
{
	size_t P = vt_pg();
	for (size_t j = set * BUDGET; j < (set + 1) * BUDGET; j++)
		CK_EQ(vr_mark(r, (2 * j + 1) * P, P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), (ssize_t)(BUDGET * P));
	for (size_t j = set * BUDGET; unmark && j < (set + 1) * BUDGET; j++)
		CK_EQ(vr_unmark(r, (2 * j + 1) * P, P), VR_PURGED);
}

static void sc_fd_out_held(void)
{
	size_t P = vt_pg(), size = (6 * BUDGET + 2) * P;
	struct vr_ctx *c = ctx_forced();
	if (vr_trap_backend() != VR_TRAP_GUARD && vr_trap_backend() != VR_TRAP_UFFD)
		_exit(0); /* mprotect everywhere already: nothing to count */
	struct vr_region *r = NULL;
	CK_EQ(vr_region_new(c, "vt-held", size, 0, &r), 0);
	CK(vr_region_fd(r) >= 0);
	/* (margins of BUDGET: a sanitizer's allocator maps too) */
	long v0 = maps_lines();
	budget_set(c, r, 0, false); /* A */
	long v1 = maps_lines();
	CK(v1 - v0 >= 2 * BUDGET - 8, "(VMAs grew by %ld with A purged)", v1 - v0);
	budget_set(c, r, 1, true);  /* B */
	budget_set(c, r, 2, false); /* C */
	long grew = maps_lines() - v1;
	CK(grew < BUDGET, "(VMAs grew by %ld more with C purged)", grew);
	CK_EQ(vr_unmark(r, 0, size), VR_PURGED);
	CK(maps_lines() < v0 + BUDGET, "(VMAs %ld after the unmark, %ld before)", maps_lines(), v0);
	long v2 = maps_lines();
	budget_set(c, r, 0, false);
	grew = maps_lines() - v2;
	CK(grew >= 2 * BUDGET - 8, "(VMAs grew by %ld: the budget was not given back)", grew);
	fflush(stderr);
	pid_t pid = fork(); /* A holds the whole budget */
	CK(pid >= 0);
	if (pid == 0) {
		alarm(20);
		struct vr_ctx *c2 = NULL;
		struct vr_region *r2 = NULL;
		CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c2), 0);
		CK_EQ(vr_region_new(c2, "vt-held-child", 4 * P, 0, &r2), 0);
		CK(vr_region_fd(r2) >= 0);
		CK_EQ(vr_mark(r2, P, P), VR_INTACT);
		long w0 = maps_lines();
		CK_EQ(vr_ctx_purge(c2, SIZE_MAX), (ssize_t)P);
		CK_EQ(maps_lines() - w0, 2); /* mprotect: the region split in three */
		vr_ctx_destroy(c2);
		_exit(0);
	}
	int st = 0;
	CK_EQ(waitpid(pid, &st, 0), pid);
	CK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "(child: status 0x%x)", st);
	CK_EQ(vr_unmark(r, 0, size), VR_PURGED);
	vr_ctx_destroy(c);
}

static const struct vt_scenario scenarios[] = {
	{ "ebusy", sc_ebusy },
	{ "fd_out_held", sc_fd_out_held },
	{ "fd_out_budget", sc_fd_out_budget },
	{ "peer_races", sc_peer_races },
	{ "join_after", sc_join_after },
	{ "peer_reads", sc_peer_reads },
	{ "peer", sc_peer },
};

static void test_ebusy_keeps_traps(void **state)
{
	(void)state;
	vt_run_scenario_each_trap("ebusy");
}

static void test_join_after_purge_keeps_traps(void **state)
{
	(void)state;
	vt_run_scenario_each_trap("join_after");
}

static void test_peer_reads_zeros(void **state)
{
	(void)state;
	vt_run_scenario_each_trap("peer_reads");
}

static void test_fd_out_vma_budget(void **state)
{
	(void)state;
	vt_run_scenario_each_trap("fd_out_budget");
}

static void test_fd_out_budget_held(void **state)
{
	(void)state;
	vt_run_scenario_each_trap("fd_out_held");
}

static void test_peer_races_punch(void **state)
{
	(void)state;
	vt_run_scenario_each_trap("peer_races");
}

int main(int argc, char **argv)
{
	int rc = vt_scenario_dispatch(argc, argv, scenarios,
				      sizeof(scenarios) / sizeof(scenarios[0]), 30);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ebusy_keeps_traps),
		cmocka_unit_test(test_join_after_purge_keeps_traps),
		cmocka_unit_test(test_peer_reads_zeros),
		cmocka_unit_test(test_peer_races_punch),
		cmocka_unit_test(test_fd_out_vma_budget),
		cmocka_unit_test(test_fd_out_budget_held),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
