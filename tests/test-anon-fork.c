/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-anon-fork.c - fork() and anonymous memory (API S26, S18)
 *
 * Every test is a scenario (tests.h) that forks children, in the style of
 * test-fork.c, with both trap backends:
 *   - VR_REGION_ANON regions are MADV_DONTFORK: a child has no mapping;
 *   - adopted spans are inherited as the caller's memory: a page
 *     discarded before the fork is never read as data in the child
 *     (SIGSEGV), until the child destroys the inherited region, which
 *     makes the span readable and writable in the child only, reading 0;
 *   - a purge after the fork frees nothing while the child still holds
 *     the pages: VR_STAT_RECLAIMED_BYTES counts what this process
 *     discarded (its resident pages drop), the child keeps its data.
 */
#include "tests.h"

/* internals: the kind's footprint (tests link the internal library) */
#include "mem/mem-kind.h"
#include "mem/mem.h"
#include "ctx.h"

#include <stdbool.h>

#define SC_TIMEOUT 30

static size_t P;

static inline uint8_t rd(const void *p)
{
	return *(const volatile uint8_t *)p;
}

static int wait_child(pid_t pid)
{
	int st = 0;
	while (waitpid(pid, &st, 0) < 0)
		CK(errno == EINTR, "waitpid: %s", strerror(errno));
	return st;
}

static void ck_child_ok(int st, const char *what)
{
	CK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: child status 0x%x (%s %d)", what, st,
	   WIFSIGNALED(st) ? "signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

/* a child touching p must die of SIGSEGV or SIGBUS, never read data */
static void ck_touch_kills(const void *p, const char *what)
{
	pid_t pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		alarm(10);
		uint8_t v = rd(p);
		fprintf(stderr, "%s: child read %#x\n", what, v);
		_exit(0);
	}
	int st = wait_child(pid);
	CK(WIFSIGNALED(st) && (WTERMSIG(st) == SIGSEGV || WTERMSIG(st) == SIGBUS),
	   "%s: child status 0x%x, expected SIGSEGV or SIGBUS", what, st);
}

/* the kernel can read [p, p + n) (a trapped page gives EFAULT) */
static bool readable(const void *p, size_t n)
{
	int fd[2];
	CK_EQ(pipe2(fd, O_CLOEXEC), 0);
	bool ok = true;
	for (size_t off = 0; off < n && ok; off += P) {
		static uint8_t sink[65536];
		size_t k = n - off < P ? n - off : P;
		ssize_t w = write(fd[1], (const uint8_t *)p + off, k);
		if (w < 0 && errno == EFAULT)
			ok = false;
		else
			CK(w == (ssize_t)k && read(fd[0], sink, k) == (ssize_t)k);
	}
	close(fd[0]);
	close(fd[1]);
	return ok;
}

static size_t present_pages(const void *p, size_t len)
{
	long n = vt_pages_present(p, len);
	CK(n >= 0);
	return (size_t)n;
}

/* flags 0: with the monitor thread running (it may purge under pressure,
 * so only scenarios that never read volatile bytes use it) */
static struct vr_ctx *sc_ctx(unsigned flags)
{
	struct vr_ctx *c = NULL;
	int rc = vr_ctx_new(flags, &c);
	const char *t = getenv("VRANGE_TRAP");
	if (rc == -EOPNOTSUPP && vt_trap_optional(t))
		_exit(77);
	CK_EQ(rc, 0);
	return c;
}

static uint8_t *map_anon(size_t len)
{
	uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CK(m != MAP_FAILED);
	return m;
}

/* purge before the fork: the child cannot read the discarded pages until
 * it destroys the inherited region; then they read 0, in the child only */
static void sc_adopted_purged_before(void)
{
	struct vr_ctx *c = sc_ctx(VR_CTX_NO_MONITOR);
	uint8_t *m = map_anon(8 * P);
	vt_fill(m, 0, 8 * P, 1);
	struct vr_region *r = NULL;
	CK_EQ(vr_region_adopt(c, m, 8 * P, 0, &r), 0);
	CK_EQ(vr_mark(r, 0, 2 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), 2 * P);
	CK_EQ(vr_mark(r, 4 * P, P), VR_INTACT); /* volatile, not purged */

	ck_touch_kills(m + P + 3, "discarded page, inherited region alive");

	pid_t pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		alarm(10);
		/* S18: the handle is inherited: only destroy works */
		CK(vr_region_of(m) == NULL);
		CK_EQ(vr_mark(r, 0, P), -EINVAL);
		CK_EQ(vr_unmark(r, 0, 2 * P), -EINVAL);
		CK_EQ(vr_region_fd(r), -EINVAL);
		CK(vr_region_base(r) == NULL);
		CK(!readable(m, 2 * P));
		CK(vt_check(m + 2 * P, 2 * P, 6 * P, 1) == SIZE_MAX);
		vr_region_destroy(r);
		CK(readable(m, 8 * P));
		CK(vt_all_zero(m, 2 * P));
		CK(vt_check(m + 2 * P, 2 * P, 6 * P, 1) == SIZE_MAX);
		memset(m, 0x77, 2 * P);
		CK_EQ(m[P], 0x77);
		_exit(0);
	}
	ck_child_ok(wait_child(pid), "child destroying the inherited adopted region");

	/* the parent's pages are still trapped and still purged */
	CK(!readable(m, 2 * P));
	ck_touch_kills(m, "discarded page after a child destroyed its copy");
	CK_EQ(vr_status(r, 0, 2 * P), VR_STATE_VOLATILE | VR_STATE_PURGED);

	/* an inherited ctx destroyed in a child releases its adopted spans */
	pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		alarm(10);
		vr_ctx_destroy(c);
		CK(readable(m, 8 * P));
		CK(vt_all_zero(m, 2 * P));
		m[0] = 1;
		/* the child may adopt the span again in a new ctx */
		struct vr_ctx *c2 = NULL;
		struct vr_region *r2 = NULL;
		CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c2), 0);
		CK_EQ(vr_region_adopt(c2, m, 8 * P, 0, &r2), 0);
		CK_EQ(vr_mark(r2, 0, 8 * P), VR_INTACT);
		CK_EQ(vr_ctx_purge(c2, SIZE_MAX), 8 * P);
		vr_ctx_destroy(c2);
		CK(vt_all_zero(m, 8 * P));
		_exit(0);
	}
	ck_child_ok(wait_child(pid), "child destroying the inherited ctx");

	CK_EQ(vr_unmark(r, 0, 8 * P), VR_PURGED);
	CK(vt_all_zero(m, 2 * P));
	CK(vt_check(m + 2 * P, 2 * P, 6 * P, 1) == SIZE_MAX);
	vr_ctx_destroy(c);
	munmap(m, 8 * P);
}

/* purge after the fork: the child keeps its copy of the data; the parent
 * counts the pages as reclaimed (they left its resident set) although
 * the system gets nothing back while the child holds them */
static void sc_adopted_purged_after(void)
{
	struct vr_ctx *c = sc_ctx(VR_CTX_NO_MONITOR);
	size_t len = 32 * P;
	uint8_t *m = map_anon(len);
	vt_fill(m, 0, len, 2);
	struct vr_region *r = NULL;
	CK_EQ(vr_region_adopt(c, m, len, 0, &r), 0);
	CK_EQ(vr_mark(r, 0, len), VR_INTACT);
	int go[2], done[2];
	CK_EQ(pipe(go), 0);
	CK_EQ(pipe(done), 0);
	pid_t pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		alarm(10);
		char b;
		CK_EQ(read(go[0], &b, 1), 1);
		/* the parent purged: the child's pages are its own */
		CK(readable(m, len));
		CK(vt_check(m, 0, len, 2) == SIZE_MAX);
		CK_EQ(present_pages(m, len), len / P);
		_exit(0);
	}
	CK_EQ(present_pages(m, len), len / P);
	CK_EQ(r->kind->footprint(r), len);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), len);
	/* counted as reclaimed, and gone from this process's footprint,
	 * although the child still holds every page */
	CK_EQ(vr_ctx_stat(c, VR_STAT_RECLAIMED_BYTES), len);
	CK_EQ(r->kind->footprint(r), 0);
	CK_EQ(present_pages(m, len), 0);
	CK(!readable(m, len));
	CK_EQ(write(go[1], "g", 1), 1);
	ck_child_ok(wait_child(pid), "child reading its copy after the parent purged");
	CK_EQ(vr_unmark(r, 0, len), VR_PURGED);
	CK(vt_all_zero(m, len));
	vr_ctx_destroy(c);
	CK(vt_all_zero(m, len));
	munmap(m, len);
	close(go[0]);
	close(go[1]);
	close(done[0]);
	close(done[1]);
}

/* VR_REGION_ANON: MADV_DONTFORK, like memfd regions (S18) */
static void sc_anon_dontfork(void)
{
	struct vr_ctx *c = sc_ctx(0);
	struct vr_region *r = NULL;
	CK_EQ(vr_region_new(c, NULL, 4 * P, VR_REGION_ANON, &r), 0);
	uint8_t *b = vr_region_base(r);
	vt_fill(b, 0, 4 * P, 3);
	CK_EQ(vr_mark(r, 0, P), VR_INTACT);
	CK(vr_ctx_purge(c, SIZE_MAX) >= 0); /* (the monitor may have been first) */
	CK_EQ(vr_status(r, 0, P), VR_STATE_VOLATILE | VR_STATE_PURGED);
	ck_touch_kills(b + 2 * P, "VR_REGION_ANON memory in a child");
	pid_t pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		alarm(10);
		CK(!readable(b + P, P)); /* not mapped */
		vr_region_destroy(r);
		struct vr_ctx *c2 = NULL;
		struct vr_region *r2 = NULL;
		CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c2), 0);
		CK_EQ(vr_region_new(c2, NULL, 4 * P, VR_REGION_ANON, &r2), 0);
		CK_EQ(vr_mark(r2, 0, 4 * P), VR_INTACT);
		CK_EQ(vr_ctx_purge(c2, SIZE_MAX), 4 * P);
		CK_EQ(vr_unmark(r2, 0, 4 * P), VR_PURGED);
		vr_ctx_destroy(c2);
		vr_ctx_destroy(c);
		_exit(0);
	}
	ck_child_ok(wait_child(pid), "child with an inherited VR_REGION_ANON region");
	CK(vt_check(b + P, P, 3 * P, 3) == SIZE_MAX);
	CK_EQ(vr_unmark(r, 0, P), VR_PURGED);
	vr_ctx_destroy(c);
}

/* A child's own adopt of an inherited span (S26: -EEXIST while a region
 * holds it).  Before the fix the child's registry forgot inherited spans:
 * the adopt succeeded, and destroying the inherited region then took the
 * new region's traps off (its purged pages read 0 without a fault), or
 * the new region's non-volatile pages kept the parent's traps. */
static void sc_adopted_readopt(void)
{
	struct vr_ctx *c = sc_ctx(VR_CTX_NO_MONITOR);
	uint8_t *m = map_anon(8 * P);
	vt_fill(m, 0, 8 * P, 4);
	struct vr_region *r = NULL;
	CK_EQ(vr_region_adopt(c, m, 8 * P, 0, &r), 0);
	CK_EQ(vr_mark(r, 2 * P, 2 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), 2 * P);
	pid_t pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		alarm(10);
		struct vr_ctx *c2 = NULL;
		struct vr_region *r2 = NULL;
		CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c2), 0);
		/* the inherited region still holds the span, also the part of
		 * it with no discarded page, and in a grandchild */
		CK_EQ(vr_region_adopt(c2, m + 4 * P, 4 * P, 0, &r2), -EEXIST);
		CK_EQ(vr_region_adopt(c2, m, 8 * P, 0, &r2), -EEXIST);
		pid_t g = fork();
		CK(g >= 0);
		if (g == 0) {
			CK_EQ(vr_region_adopt(c2, m + 4 * P, 4 * P, 0, &r2),
			      -EINVAL); /* c2 inherited */
			struct vr_ctx *c3 = NULL;
			CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c3), 0);
			CK_EQ(vr_region_adopt(c3, m + 4 * P, 4 * P, 0, &r2), -EEXIST);
			vr_region_destroy(r);
			CK_EQ(vr_region_adopt(c3, m + 4 * P, 4 * P, 0, &r2), 0);
			vr_ctx_destroy(c3);
			_exit(0);
		}
		ck_child_ok(wait_child(g), "grandchild adopting an inherited span");
		/* once destroyed, the span is the child's to adopt; the inherited
		 * region's destroy never touches it again */
		vr_region_destroy(r);
		CK_EQ(vr_region_adopt(c2, m, 8 * P, 0, &r2), 0);
		CK(readable(m, 8 * P));
		CK(vt_all_zero(m + 2 * P, 2 * P));
		CK(vt_check(m + 4 * P, 4 * P, 4 * P, 4) == SIZE_MAX);
		CK_EQ(vr_mark(r2, 4 * P, 2 * P), VR_INTACT);
		CK_EQ(vr_ctx_purge(c2, SIZE_MAX), 2 * P);
		CK(!readable(m + 4 * P, P));
		vr_ctx_destroy(c); /* the inherited ctx: its regions are gone */
		CK(!readable(m + 4 * P, P));
		CK_EQ(vr_status(r2, 4 * P, 2 * P), VR_STATE_VOLATILE | VR_STATE_PURGED);
		vr_ctx_destroy(c2);
		CK(readable(m, 8 * P));
		_exit(0);
	}
	ck_child_ok(wait_child(pid), "child adopting an inherited span");
	CK(!readable(m + 2 * P, P));
	CK(vt_check(m + 4 * P, 4 * P, 4 * P, 4) == SIZE_MAX);
	vr_ctx_destroy(c);
	CK(readable(m, 8 * P));
	munmap(m, 8 * P);
}

/* An adopted span the caller made MADV_DONTFORK is not in the child: the
 * address is free there, and what the child maps at it is its own.
 * Before the fix, destroying the inherited region disarmed the whole span
 * in the child all the same: its own PROT_NONE mapping turned read/write
 * (mprotect backend) and its own guard markers were removed (guard
 * backend), so a touch there read 0 instead of faulting. */
static void sc_adopted_dontfork(void)
{
	struct vr_ctx *c = sc_ctx(VR_CTX_NO_MONITOR);
	uint8_t *m = map_anon(8 * P);
	CK_EQ(madvise(m, 8 * P, MADV_DONTFORK), 0);
	vt_fill(m, 0, 8 * P, 5);
	struct vr_region *r = NULL;
	CK_EQ(vr_region_adopt(c, m, 8 * P, 0, &r), 0);
	CK_EQ(vr_mark(r, 2 * P, 4 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), 4 * P);
	pid_t pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		alarm(10);
		/* the child's own memory where the span was: a PROT_NONE
		 * guard, and read/write pages with guard markers */
		CK(mmap(m, 4 * P, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1,
			0) == m);
		CK(mmap(m + 4 * P, 4 * P, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) == m + 4 * P);
		bool markers = madvise(m + 4 * P, 4 * P, 102 /* MADV_GUARD_INSTALL */) == 0;
		CK(!readable(m, 4 * P));
		vr_region_destroy(r);
		CK(!readable(m, P));
		CK(!readable(m + 2 * P, P));
		if (markers) {
			CK(!readable(m + 4 * P, P));
			CK(!readable(m + 6 * P, P));
		}
		vr_ctx_destroy(c);
		_exit(0);
	}
	ck_child_ok(wait_child(pid), "child mapping its own memory over a MADV_DONTFORK span");
	CK(!readable(m + 2 * P, P));
	CK(vt_check(m + 6 * P, 6 * P, 2 * P, 5) == SIZE_MAX);
	CK_EQ(vr_unmark(r, 2 * P, 4 * P), VR_PURGED);
	CK(vt_all_zero(m + 2 * P, 4 * P));
	vr_ctx_destroy(c);
	CK(readable(m, 8 * P));
	munmap(m, 8 * P);
}

static const struct vt_scenario scenarios[] = {
	{ "adopted-purged-before", sc_adopted_purged_before },
	{ "adopted-purged-after", sc_adopted_purged_after },
	{ "anon-dontfork", sc_anon_dontfork },
	{ "adopted-readopt", sc_adopted_readopt },
	{ "adopted-dontfork", sc_adopted_dontfork },
};

static void run_all_traps(const char *name)
{
	static const char *const traps[] = { "guard", "mprotect", "uffd" };
	for (size_t i = 0; i < 2; i++) {
		int s = vt_run_scenario_trap(name, traps[i], NULL);
		if (s != -77)
			vt_assert_exit_ok(s);
	}
}

static void test_adopted_purged_before_fork(void **state)
{
	(void)state;
	run_all_traps("adopted-purged-before");
}

static void test_adopted_purged_after_fork(void **state)
{
	(void)state;
	run_all_traps("adopted-purged-after");
}

static void test_anon_dontfork(void **state)
{
	(void)state;
	run_all_traps("anon-dontfork");
}

static void test_adopted_readopt(void **state)
{
	(void)state;
	run_all_traps("adopted-readopt");
}

static void test_adopted_dontfork(void **state)
{
	(void)state;
	run_all_traps("adopted-dontfork");
}

int main(int argc, char **argv)
{
	P = vt_pg();
	int rc = vt_scenario_dispatch(argc, argv, scenarios,
				      sizeof(scenarios) / sizeof(scenarios[0]), SC_TIMEOUT);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_adopted_purged_before_fork),
		cmocka_unit_test(test_adopted_purged_after_fork),
		cmocka_unit_test(test_anon_dontfork),
		cmocka_unit_test(test_adopted_readopt),
		cmocka_unit_test(test_adopted_dontfork),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
