/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-misuse.c - what a new user gets wrong, and the environment's
 * mistakes (issue 21, items 8 (A2) and 9)
 *
 * Every scenario runs in a fresh process (tests.h), its stderr captured
 * by the test:
 *   double_destroy   a second vr_ctx_destroy of one ctx aborts (SIGABRT)
 *                    with a message naming the call, never hangs;
 *   huge_obj         vr_obj_new of 1 TiB (more than any memory here) fails
 *                    with -ENOMEM and costs no memory; a 1 GiB object costs
 *                    no memory until it is touched, is found by vr_obj_of
 *                    anywhere in it, and traps after a purge anywhere in it;
 *   trap_unknown     VRANGE_TRAP=bogus: ignored (the automatic choice),
 *                    one warning line on stderr for two contexts;
 *   trap_unknown_fn  the same warning reaches a vr_log_fn at VR_LOG_WARNING,
 *                    once, also after a first vr_ctx_new short of fds;
 *   guard_refused    VRANGE_TRAP=guard where guard markers are refused (a
 *                    seccomp filter makes MADV_GUARD_INSTALL fail with
 *                    EINVAL, as kernels before 6.13 do): vr_ctx_new fails
 *                    with -EOPNOTSUPP (A2); VRANGE_TRAP=uffd behind a
 *                    filter that refuses userfaultfd is test-uffd's.
 */
#define _GNU_SOURCE
#include "tests.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

/* resident bytes of this process, per /proc/self/statm */
static uint64_t rss(void)
{
	FILE *f = fopen("/proc/self/statm", "re");
	CK(f != NULL);
	unsigned long size = 0, res = 0;
	CK_EQ(fscanf(f, "%lu %lu", &size, &res), 2);
	fclose(f);
	return (uint64_t)res * vt_pg();
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ---- item 9: a second vr_ctx_destroy ---- */
static void sc_double_destroy(void)
{
	struct vr_ctx *c = NULL;
	CK_EQ(vr_ctx_new(0, &c), 0); /* with its monitor thread */
	struct vr_region *r = NULL;
	CK_EQ(vr_region_new(c, "vt-misuse", 4 * vt_pg(), 0, &r), 0);
	vr_ctx_destroy(c);
	fprintf(stderr, "destroyed once\n");
	fflush(stderr);
	vr_ctx_destroy(c); /* must abort */
	fprintf(stderr, "second destroy returned\n");
	_exit(5);
}

/* ---- item 9: objects larger than the system, and large ones ---- */
static atomic_int obj_faults;

static int pin_fn(struct vr_obj *o, void *addr, void *arg)
{
	(void)addr;
	(void)arg;
	atomic_fetch_add(&obj_faults, 1);
	CK_EQ(vr_obj_pin(o), VR_PURGED);
	return VR_FAULT_RETRY;
}

static void sc_huge_obj(void)
{
	size_t P = vt_pg();
	struct vr_ctx *c = NULL;
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	/* the library's first object allocations (metadata blocks) */
	struct vr_obj *w = NULL;
	CK_EQ(vr_obj_new(c, 16 * P, 0, &w), 0);
	vr_obj_free(w);

	uint64_t r0 = rss();
	double t0 = now_s();
	struct vr_obj *o = NULL;
	int rc = vr_obj_new(c, (size_t)1 << 40, 0, &o);
	double t1 = now_s();
	uint64_t r1 = rss();
	printf("vr_obj_new(1 TiB): %d in %.3f s, RSS %+lld KiB\n", rc, t1 - t0,
	       (long long)(r1 - r0) / 1024);
	CK_EQ(rc, -ENOMEM);
	CK(o == NULL);
	CK(r1 < r0 + ((uint64_t)1 << 20), "(RSS grew by %llu bytes)",
	   (unsigned long long)(r1 - r0));
	CK_EQ(vr_ctx_stat(c, VR_STAT_OBJECTS), 0);

	/* 1 GiB: possible, and free until touched */
	size_t G = (size_t)1 << 30;
	r0 = rss();
	t0 = now_s();
	CK_EQ(vr_obj_new(c, G, 0, &o), 0);
	t1 = now_s();
	r1 = rss();
	printf("vr_obj_new(1 GiB): 0 in %.3f s, RSS %+lld KiB\n", t1 - t0,
	       (long long)(r1 - r0) / 1024);
	CK(r1 < r0 + 256 * 1024, "(RSS grew by %llu bytes)", (unsigned long long)(r1 - r0));
	uint8_t *b = vr_obj_ptr(o);
	CK(vr_obj_of(b) == o);
	CK(vr_obj_of(b + G / 2 + 12345) == o);
	CK(vr_obj_of(b + G - 1) == o);
	CK(vr_obj_of(b + G) == NULL);
	/* touched pages cost what they are */
	b[G / 2] = 7;
	b[G - 1] = 9;
	uint64_t r2 = rss();
	CK(r2 < r1 + 256 * 1024, "(RSS grew by %llu bytes)", (unsigned long long)(r2 - r1));
	/* purged, it traps anywhere: the object handler's pin reads zeros */
	CK_EQ(vr_ctx_set_obj_fault_handler(c, pin_fn, NULL), 0);
	CK_EQ(vr_obj_unpin(o), 0);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), (ssize_t)G);
	CK_EQ(vr_obj_status(o), VR_STATE_VOLATILE | VR_STATE_PURGED);
	CK(vr_obj_of(b + G / 2 + P + 3) == o);
	CK_EQ(*(volatile uint8_t *)(b + G / 2), 0);
	CK_EQ(atomic_load(&obj_faults), 1);
	CK_EQ(b[G - 1], 0);
	CK_EQ(vr_obj_status(o), 0);
	vr_obj_free(o);
	/* the space is reused by an object of the same size */
	CK_EQ(vr_obj_new(c, G, 0, &o), 0);
	CK(vr_obj_of((uint8_t *)vr_obj_ptr(o) + G / 3) == o);
	CK_EQ(*(volatile uint8_t *)((uint8_t *)vr_obj_ptr(o) + G - 1), 0);
	vr_ctx_destroy(c);
}

/* ---- A2: VRANGE_TRAP values ---- */
static void two_ctxs_automatic(void)
{
	struct vr_ctx *c1 = NULL, *c2 = NULL;
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c1), 0);
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c2), 0);
	int b = vr_trap_backend();
	CK(b == VR_TRAP_GUARD || b == VR_TRAP_MPROTECT, "(backend %d)", b);
	vr_ctx_destroy(c1);
	vr_ctx_destroy(c2);
}

static void sc_trap_unknown(void)
{
	two_ctxs_automatic();
}

static atomic_int warnings, others;

static void log_fn(int prio, const char *msg, void *arg)
{
	(void)arg;
	if (prio == VR_LOG_WARNING && strstr(msg, "VRANGE_TRAP"))
		atomic_fetch_add(&warnings, 1);
	else
		atomic_fetch_add(&others, 1);
}

static void sc_trap_unknown_fn(void)
{
	vr_set_log_fn(log_fn, NULL);
	/* a first call short of fds chooses nothing (mem-trap.c, PROBES):
	 * the next one reads VRANGE_TRAP again, but warns no second time */
	struct rlimit old, rl;
	CK_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
	rl.rlim_cur = 3;
	rl.rlim_max = old.rlim_max;
	CK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
	struct vr_ctx *c = NULL;
	int rc = vr_ctx_new(VR_CTX_NO_MONITOR, &c);
	CK_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
	CK_EQ(rc, -EMFILE);
	two_ctxs_automatic();
	CK_EQ(atomic_load(&warnings), 1);
	vr_set_log_fn(NULL, NULL);
}

/* madvise(..., MADV_GUARD_INSTALL) fails with EINVAL from now on, as on a
 * kernel without guard markers; nothing else is touched */
static void refuse_guard_markers(void)
{
	struct sock_filter f[] = {
#if defined(__x86_64__)
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
#endif
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_madvise, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 102 /* MADV_GUARD_INSTALL */, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EINVAL),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };
	CK_EQ(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	CK_EQ(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0), 0);
	/* the filter works: the scenario can fail */
	void *m = mmap(NULL, vt_pg(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CK(m != MAP_FAILED);
	errno = 0;
	CK_EQ(madvise(m, vt_pg(), 102), -1);
	CK_EQ(errno, EINVAL);
	CK_EQ(madvise(m, vt_pg(), MADV_DONTNEED), 0);
	munmap(m, vt_pg());
}

static void sc_guard_refused(void)
{
	refuse_guard_markers();
	struct vr_ctx *c = NULL;
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c), -EOPNOTSUPP);
	CK(c == NULL);
	CK_EQ(vr_trap_backend(), VR_TRAP_NONE);
	struct sigaction sa;
	CK_EQ(sigaction(SIGSEGV, NULL, &sa), 0);
	CK(!(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL);
}

static const struct vt_scenario scenarios[] = {
	{ "double_destroy", sc_double_destroy }, { "huge_obj", sc_huge_obj },
	{ "trap_unknown", sc_trap_unknown },     { "trap_unknown_fn", sc_trap_unknown_fn },
	{ "guard_refused", sc_guard_refused },
};

/* runs the scenario with VRANGE_TRAP=trap (NULL: as the test's), its stderr
 * into out (NUL-terminated); returns the raw wait status */
static int run_captured(const char *name, const char *trap, char *out, size_t cap)
{
	int fd = memfd_create("vt-stderr", MFD_CLOEXEC);
	assert_true(fd >= 0);
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (trap)
			setenv("VRANGE_TRAP", trap, 1);
		dup2(fd, STDERR_FILENO);
		vt_default_signals();
		execl(program_invocation_name, "vt-scenario", "--scenario", name, (char *)NULL);
		execl("/proc/self/exe", "vt-scenario", "--scenario", name, (char *)NULL);
		_exit(127);
	}
	int st = 0;
	while (waitpid(pid, &st, 0) < 0)
		assert_int_equal(errno, EINTR);
	ssize_t n = pread(fd, out, cap - 1, 0);
	out[n > 0 ? n : 0] = 0;
	close(fd);
	fputs(out, stderr); /* for the test log */
	return st;
}

static int count(const char *s, const char *what)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, what)); p++)
		n++;
	return n;
}

static char errbuf[65536];

static void test_double_destroy_aborts(void **state)
{
	(void)state;
	int st = run_captured("double_destroy", NULL, errbuf, sizeof(errbuf));
	vt_assert_killed_by(st, SIGABRT);
	assert_int_equal(count(errbuf, "destroyed once"), 1);
	assert_int_equal(count(errbuf, "vr_ctx_destroy("), 1);
	assert_int_equal(count(errbuf, "second destroy returned"), 0);
}

static void test_huge_object(void **state)
{
	(void)state;
	int st = run_captured("huge_obj", NULL, errbuf, sizeof(errbuf));
	vt_assert_exit_ok(st);
}

static void test_unknown_trap_warns_once(void **state)
{
	(void)state;
	int st = run_captured("trap_unknown", "bogus", errbuf, sizeof(errbuf));
	vt_assert_exit_ok(st);
	assert_int_equal(count(errbuf, "\n"), 1);
	assert_int_equal(count(errbuf, "warning"), 1);
	assert_int_equal(count(errbuf, "VRANGE_TRAP=bogus"), 1);
	st = run_captured("trap_unknown_fn", "bogus", errbuf, sizeof(errbuf));
	vt_assert_exit_ok(st);
	assert_int_equal(count(errbuf, "VRANGE_TRAP"), 0);
	/* a known value warns nothing */
	st = run_captured("trap_unknown", "mprotect", errbuf, sizeof(errbuf));
	assert_true(st != -1 && WIFEXITED(st));
	assert_int_equal(count(errbuf, "warning"), 0);
}

static void test_forced_guard_refused(void **state)
{
	(void)state;
	int st = run_captured("guard_refused", "guard", errbuf, sizeof(errbuf));
	vt_assert_exit_ok(st);
}

int main(int argc, char **argv)
{
	int rc = vt_scenario_dispatch(argc, argv, scenarios,
				      sizeof(scenarios) / sizeof(scenarios[0]), 60);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_double_destroy_aborts),
		cmocka_unit_test(test_huge_object),
		cmocka_unit_test(test_unknown_trap_warns_once),
		cmocka_unit_test(test_forced_guard_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
