/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-uffd.c - the userfaultfd trap backend (VR_TRAP_UFFD, API S32) and
 * the library's SIGBUS entry
 *
 * Every scenario runs in a fresh process (tests.h re-exec), since the
 * library's signal handlers are process-wide and cmocka has its own.
 * The fault, review, stress and vma tests run their scenarios under
 * VRANGE_TRAP=uffd as well; this file checks what is particular to it:
 *   - userfaultfd blocked by a seccomp filter (as in Docker's default
 *     profile): the default backend still traps, VRANGE_TRAP=uffd makes
 *     vr_ctx_new fail with -EOPNOTSUPP and installs nothing;
 *   - SIGBUS sent by kill/tgkill/sigqueue, a kernel SIGBUS outside every
 *     region, and the library's own SIGBUS for an unhandled trap each
 *     reach the application's handler exactly once, with their siginfo;
 *   - system calls: non-volatile pages that were never written are
 *     readable and writable by the kernel (present from creation), a
 *     discarded one gives EFAULT (S14), and reads 0 after vr_unmark;
 *   - the automatic choice never picks uffd.
 * Only shared regions are registered with userfaultfd (trap.c's rule), so
 * the trap scenarios use VR_REGION_SHARED; test-peers.c checks that plain
 * memfd regions keep S17 under this backend (issue 21, items 4 and 5).
 */
#define _GNU_SOURCE
#include "tests.h"
#include "vt-seccomp.h"

#include <stdatomic.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

static inline uint8_t rd(const void *p)
{
	return *(const volatile uint8_t *)p;
}

static const char *env_or(const char *k, const char *d)
{
	const char *v = getenv(k);
	return v ? v : d;
}

/* ---- the application's SIGBUS handler, installed before vr_ctx_new ---- */
static volatile struct {
	sig_atomic_t hits, jump;
	int code;
	void *addr;
	pid_t tid;
} APP;
static sigjmp_buf app_env;

static void app_bus(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	APP.hits++;
	APP.code = si->si_code;
	APP.addr = si->si_addr;
	APP.tid = (pid_t)syscall(SYS_gettid);
	if (APP.jump)
		siglongjmp(app_env, 1);
}

static void install_app_bus(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = app_bus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	CK_EQ(sigaction(SIGBUS, &sa, NULL), 0);
}

/* a ctx on the backend VRANGE_TRAP forces (exit 77 if uffd is refused) */
static struct vr_ctx *uffd_ctx(void)
{
	struct vr_ctx *c = NULL;
	int rc = vr_ctx_new(VR_CTX_NO_MONITOR, &c);
	if (rc == -EOPNOTSUPP) {
		fprintf(stderr, "userfaultfd not available here: skip\n");
		_exit(77);
	}
	CK_EQ(rc, 0);
	CK_EQ(vr_trap_backend(), VR_TRAP_UFFD);
	return c;
}

/* a shared region (userfaultfd-trapped) of n pages filled with pattern
 * gen */
static struct vr_region *filled(struct vr_ctx *c, size_t n, uint64_t gen)
{
	struct vr_region *r = NULL;
	CK_EQ(vr_region_new(c, "vt-uffd", n * vt_pg(), VR_REGION_SHARED, &r), 0);
	vt_fill(vr_region_base(r), 0, n * vt_pg(), gen);
	return r;
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

/* ---- seccomp: userfaultfd refused ---- */

static void block_userfaultfd(int err)
{
	CK_EQ(vt_block_userfaultfd(err), 0);
}

/* VT_ERRNO: what the filter returns; VRANGE_TRAP: uffd or unset */
static void sc_seccomp(void)
{
	size_t P = vt_pg();
	block_userfaultfd(strcmp(env_or("VT_ERRNO", "EPERM"), "ENOSYS") == 0 ? ENOSYS : EPERM);
	const char *t = getenv("VRANGE_TRAP");
	struct vr_ctx *c = NULL;
	if (t && strcmp(t, "uffd") == 0) {
		CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c), -EOPNOTSUPP);
		CK(c == NULL);
		CK_EQ(vr_trap_backend(), VR_TRAP_NONE);
		/* a failed vr_ctx_new installs nothing */
		struct sigaction sa;
		CK_EQ(sigaction(SIGBUS, NULL, &sa), 0);
		CK(!(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL);
		CK_EQ(sigaction(SIGSEGV, NULL, &sa), 0);
		CK(!(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL);
		return;
	}
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	int b = vr_trap_backend();
	CK(b == VR_TRAP_GUARD || b == VR_TRAP_MPROTECT, "(backend %d)", b);
	/* and it traps: a touch regenerates, never reads zeros */
	struct vr_region *r = filled(c, 4, 1);
	atomic_int calls = 0;
	CK_EQ(vr_region_set_fault_handler(r, refill_fn, &calls), 0);
	CK_EQ(vr_mark(r, P, 2 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), (ssize_t)(2 * P));
	uint8_t *base = vr_region_base(r);
	CK_EQ(rd(base + P + 5), vt_pat(9, P + 5));
	CK_EQ(atomic_load(&calls), 1);
	CK(vt_check(base, 0, P, 1) == SIZE_MAX);
	CK(vt_check(base + 3 * P, 3 * P, P, 1) == SIZE_MAX);
	vr_ctx_destroy(c);
}

/* a read of a discarded page at a ends in the application's handler: its
 * hits-th SIGBUS, with BUS_ADRERR, the address and this thread; the
 * faults-th trap counted */
__attribute__((noinline)) static void expect_sigbus(struct vr_ctx *c, uint8_t *a, int hits,
						    uint64_t faults)
{
	if (sigsetjmp(app_env, 1) == 0) {
		(void)rd(a);
		CK(0, "read of a discarded page returned");
	}
	CK_EQ(APP.hits, hits);
	CK_EQ(APP.code, BUS_ADRERR);
	CK(APP.addr == a, "si_addr %p, expected %p", APP.addr, (void *)a);
	CK_EQ(APP.tid, (pid_t)syscall(SYS_gettid));
	CK_EQ(vr_ctx_stat(c, VR_STAT_FAULTS), faults);
}

/* ---- SIGBUS: every kind reaches the application once ---- */
static void sc_sigbus_kinds(void)
{
	size_t P = vt_pg();
	install_app_bus();
	struct vr_ctx *c = uffd_ctx();
	struct sigaction cur;
	CK_EQ(sigaction(SIGBUS, NULL, &cur), 0);
	CK(cur.sa_sigaction != app_bus, "(the library installed no SIGBUS handler)");

	/* sent by a process: the original siginfo, once */
	APP.jump = 0;
	CK_EQ(kill(getpid(), SIGBUS), 0);
	CK_EQ(APP.hits, 1);
	CK_EQ(APP.code, SI_USER);
	CK_EQ(syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), SIGBUS), 0);
	CK_EQ(APP.hits, 2);
	CK_EQ(APP.code, SI_TKILL);
	CK_EQ(sigqueue(getpid(), SIGBUS, (union sigval){ .sival_int = 7 }), 0);
	CK_EQ(APP.hits, 3);
	CK_EQ(APP.code, SI_QUEUE);

	/* a kernel SIGBUS outside every region: a page past the end of a
	 * file mapping */
	int fd = memfd_create("vt-foreign", MFD_CLOEXEC);
	CK(fd >= 0);
	CK_EQ(ftruncate(fd, (off_t)P), 0);
	uint8_t *m = mmap(NULL, P, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CK(m != MAP_FAILED);
	CK_EQ(ftruncate(fd, 0), 0);
	APP.jump = 1;
	if (sigsetjmp(app_env, 1) == 0) {
		(void)rd(m + 3);
		CK(0, "read past the end of a file returned");
	}
	CK_EQ(APP.hits, 4);
	CK_EQ(APP.code, BUS_ADRERR);
	CK(APP.addr == m + 3);
	munmap(m, P);
	close(fd);
	CK_EQ(vr_ctx_stat(c, VR_STAT_FAULTS), 0);

	/* a trap with no fault handler: the library's SIGBUS, exactly once,
	 * never taken for another trap; counted once */
	struct vr_region *r = filled(c, 4, 2);
	uint8_t *b = vr_region_base(r);
	CK_EQ(vr_mark(r, 0, 4 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), (ssize_t)(4 * P));
	for (int i = 0; i < 3; i++)
		expect_sigbus(c, b + (size_t)i * P + 17, 5 + i, (uint64_t)i + 1);
	/* a handler that fixes: no SIGBUS reaches the application */
	atomic_int calls = 0;
	CK_EQ(vr_region_set_fault_handler(r, refill_fn, &calls), 0);
	CK_EQ(rd(b + 3 * P + 1), vt_pat(9, 3 * P + 1));
	CK_EQ(atomic_load(&calls), 1);
	CK_EQ(APP.hits, 7);
	CK_EQ(vr_ctx_stat(c, VR_STAT_FAULTS), 4);
	vr_ctx_destroy(c);
}

/* ---- system calls on present, never-written and discarded pages ---- */
static void sc_syscalls(void)
{
	size_t P = vt_pg();
	struct vr_ctx *c = uffd_ctx();
	struct vr_region *r = NULL;
	CK_EQ(vr_region_new(c, "vt-uffd-sys", 4 * P, VR_REGION_SHARED, &r), 0);
	uint8_t *b = vr_region_base(r);
	int p[2];
	CK_EQ(pipe(p), 0);
	/* never written, non-volatile: the kernel reads zeros and writes */
	CK_EQ(write(p[1], b + 2 * P, 64), 64);
	uint8_t buf[64];
	CK_EQ(read(p[0], buf, 64), 64);
	for (int i = 0; i < 64; i++)
		CK_EQ(buf[i], 0);
	CK_EQ(write(p[1], "abcdef", 6), 6);
	CK_EQ(read(p[0], b + 3 * P + 10, 6), 6);
	CK(memcmp(b + 3 * P + 10, "abcdef", 6) == 0);

	/* discarded: EFAULT both ways (S14), and no fault counted */
	vt_fill(b, 0, 4 * P, 3);
	CK_EQ(vr_mark(r, P, 2 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), (ssize_t)(2 * P));
	errno = 0;
	CK_EQ(write(p[1], b + P + 1, 8), -1);
	CK_EQ(errno, EFAULT);
	CK_EQ(write(p[1], "12345678", 8), 8);
	errno = 0;
	CK_EQ(read(p[0], b + 2 * P, 8), -1);
	CK_EQ(errno, EFAULT);
	CK_EQ(vr_ctx_stat(c, VR_STAT_FAULTS), 0);
	/* unmarked: present again, zeros, to the kernel and to loads */
	CK_EQ(vr_unmark(r, P, 2 * P), VR_PURGED);
	CK_EQ(read(p[0], b + 2 * P, 8), 8);
	CK(memcmp(b + 2 * P, "12345678", 8) == 0);
	CK(vt_all_zero(b + P, P));
	CK(vt_check(b, 0, P, 3) == SIZE_MAX);
	CK(vt_check(b + 3 * P, 3 * P, P, 3) == SIZE_MAX);
	close(p[0]);
	close(p[1]);
	vr_ctx_destroy(c);
}

/* ---- the automatic choice ---- */
static void sc_default(void)
{
	struct vr_ctx *c = NULL;
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	int b = vr_trap_backend();
	CK(b == VR_TRAP_GUARD || b == VR_TRAP_MPROTECT, "(backend %d)", b);
	/* S32: a SIGBUS handler from the first vr_ctx_new wherever
	 * userfaultfd works (shared regions use it), none elsewhere */
	struct sigaction sa;
	CK_EQ(sigaction(SIGBUS, NULL, &sa), 0);
	struct vr_region *r = NULL;
	int rc = vr_region_new(c, "vt-default", 4 * vt_pg(), VR_REGION_SHARED, &r);
	if (rc == 0) {
		CK((sa.sa_flags & SA_SIGINFO) && sa.sa_handler != SIG_DFL);
		CK_EQ(vr_trap_backend(), VR_TRAP_UFFD);
		vr_region_destroy(r);
	} else {
		CK_EQ(rc, -EOPNOTSUPP);
		CK(!(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL);
	}
	vr_ctx_destroy(c);
}

static const struct vt_scenario scenarios[] = {
	{ "seccomp", sc_seccomp },
	{ "sigbus_kinds", sc_sigbus_kinds },
	{ "syscalls", sc_syscalls },
	{ "default", sc_default },
};

static void run(const char *name, const char *trap, const char *errno_name)
{
	if (errno_name)
		setenv("VT_ERRNO", errno_name, 1);
	int st;
	if (trap) {
		st = vt_run_scenario_trap(name, trap, NULL);
	} else {
		unsetenv("VRANGE_TRAP");
		st = vt_run_scenario(name);
	}
	unsetenv("VT_ERRNO");
	if (st == -77)
		skip();
	vt_assert_exit_ok(st);
}

static void test_seccomp_default_backend(void **state)
{
	(void)state;
	run("seccomp", NULL, "EPERM");
	run("seccomp", NULL, "ENOSYS");
}

static void test_seccomp_forced_uffd(void **state)
{
	(void)state;
	run("seccomp", "uffd", "EPERM");
	run("seccomp", "uffd", "ENOSYS");
}

static void test_sigbus_kinds(void **state)
{
	(void)state;
	run("sigbus_kinds", "uffd", NULL);
}

static void test_syscalls(void **state)
{
	(void)state;
	run("syscalls", "uffd", NULL);
}

static void test_default_is_not_uffd(void **state)
{
	(void)state;
	run("default", NULL, NULL);
}

int main(int argc, char **argv)
{
	int rc = vt_scenario_dispatch(argc, argv, scenarios,
				      sizeof(scenarios) / sizeof(scenarios[0]), 30);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seccomp_default_backend),
		cmocka_unit_test(test_seccomp_forced_uffd),
		cmocka_unit_test(test_sigbus_kinds),
		cmocka_unit_test(test_syscalls),
		cmocka_unit_test(test_default_is_not_uffd),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
