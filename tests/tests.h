/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tests.h - helpers shared by libvrange's own test programs
 *
 * Scenarios: cmocka installs its own SIGSEGV/SIGBUS handlers around every
 * test with signal(), replacing the library's.  Anything that needs the
 * fault path (or must die) runs as a scenario: main() calls
 * vt_scenario_dispatch() first; a cmocka test calls vt_run_scenario(name),
 * which fork()s and exec()s "/proc/self/exe --scenario NAME" so that the
 * scenario runs in a fresh process with default signal dispositions.  It
 * reports through its exit status (0 ok, 3 check failed) or its signal.
 */
#ifndef VT_TESTS_H
#define VT_TESTS_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <dirent.h>

#include <vrange.h>

static inline size_t vt_pg(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

static inline uint64_t vt_mix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/* byte i of data generation gen */
static inline uint8_t vt_pat(uint64_t gen, size_t i)
{
	return (uint8_t)(vt_mix(gen * 0x100000001B3ull + (i >> 3)) >> ((i & 7) * 8));
}

static inline void vt_fill(uint8_t *p, size_t off, size_t len, uint64_t gen)
{
	for (size_t i = 0; i < len; i++)
		p[i] = vt_pat(gen, off + i);
}

/* index of the first byte that differs from the pattern, or SIZE_MAX */
static inline size_t vt_check(const uint8_t *p, size_t off, size_t len, uint64_t gen)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != vt_pat(gen, off + i))
			return i;
	return SIZE_MAX;
}

static inline int vt_all_zero(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return 0;
	return 1;
}

/* ---- process resources, for leak checks: compare counts, not values ---- */

/* entries of a /proc directory, "." and ".." left out */
static inline int vt_count_dir(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* open fds, not counting the one vt_count_dir() opens to count them */
static inline int vt_count_fds(void)
{
	return vt_count_dir("/proc/self/fd") - 1;
}

/* VRANGE_TRAP values that a system may not support (vr_ctx_new then
 * fails with -EOPNOTSUPP, and the scenario skips) */
static inline bool vt_trap_optional(const char *t)
{
	return t && (strcmp(t, "guard") == 0 || strcmp(t, "uffd") == 0);
}

/* the vr_trap_backend() value that VRANGE_TRAP=t forces */
static inline int vt_trap_id(const char *t)
{
	return strcmp(t, "guard") == 0  ? VR_TRAP_GUARD
	       : strcmp(t, "uffd") == 0 ? VR_TRAP_UFFD
					: VR_TRAP_MPROTECT;
}

/* fds a plain memfd region holds: its memfd (a userfaultfd only comes
 * with a shared region, whatever the backend) */
static inline int vt_region_fds(void)
{
	return 1;
}

static inline int vt_count_threads(void)
{
	return vt_count_dir("/proc/self/task");
}

/* threads of this process named vrange-mon (the pressure monitors) */
static inline int vt_count_monitor_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -1;
	int n = 0;
	for (struct dirent *e; (e = readdir(d));) {
		char p[300], comm[64] = "";
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(p, "re");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && strcmp(comm, "vrange-mon\n") == 0)
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

struct vt_rng {
	uint64_t s;
};
static inline uint64_t vt_next(struct vt_rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 2685821657736338717ull;
}
static inline uint64_t vt_below(struct vt_rng *r, uint64_t n)
{
	return n ? vt_next(r) % n : 0;
}
static inline void vt_seed(struct vt_rng *r, uint64_t seed)
{
	r->s = vt_mix(seed) | 1;
}

/* seed from VT_SEED or the clock, printed so a failure can be replayed */
static inline uint64_t vt_get_seed(const char *what)
{
	const char *e = getenv("VT_SEED");
	uint64_t s = e ? strtoull(e, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	fprintf(stderr, "%s: seed=%" PRIu64 " (replay with VT_SEED=%" PRIu64 ")\n", what, s, s);
	return s;
}

/* checks usable in scenario processes and threads (no cmocka state) */
__attribute__((noreturn, format(printf, 4, 5))) static inline void
vt_die(const char *file, int line, const char *expr, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s:%d: CHECK FAILED: %s", file, line, expr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	_exit(3);
}
#define CK(cond, ...)                                                                              \
	do {                                                                                       \
		if (!(cond))                                                                       \
			vt_die(__FILE__, __LINE__, #cond, " " __VA_ARGS__);                        \
	} while (0)
#define CK_EQ(a, b)                                                                                \
	do {                                                                                       \
		long long vt_a_ = (long long)(a), vt_b_ = (long long)(b);                          \
		if (vt_a_ != vt_b_)                                                                \
			vt_die(__FILE__, __LINE__, #a " == " #b, "(%lld != %lld)", vt_a_, vt_b_);  \
	} while (0)

static inline void vt_default_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

struct vt_scenario {
	const char *name;
	void (*fn)(void);
};

/* returns -1 if argv is not a scenario call; else the scenario's result */
static inline int vt_scenario_dispatch(int argc, char **argv, const struct vt_scenario *t, size_t n,
				       unsigned timeout_s)
{
	if (argc != 3 || strcmp(argv[1], "--scenario") != 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (strcmp(t[i].name, argv[2]) == 0) {
			struct rlimit rl = { 0, 0 };
			setrlimit(RLIMIT_CORE, &rl);
			vt_default_signals();
			alarm(timeout_s);
			t[i].fn();
			fflush(stdout);
			fflush(stderr);
			return 0;
		}
	fprintf(stderr, "unknown scenario %s\n", argv[2]);
	return 2;
}

/* raw wait status of "<this executable> --scenario name" */
static inline int vt_run_scenario(const char *name)
{
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		vt_default_signals();
		/* argv[0] as meson ran it (an absolute path), not /proc/self/exe,
		 * which under valgrind is valgrind's own launcher */
		execl(program_invocation_name, "vt-scenario", "--scenario", name, (char *)NULL);
		execl("/proc/self/exe", "vt-scenario", "--scenario", name, (char *)NULL);
		_exit(127);
	}
	int st = 0;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return st;
}

/* pages of [p, p + len) present in this process's page tables
 * (/proc/self/pagemap bit 63: a freed page or a guard marker is not), or
 * -1 if pagemap cannot be read */
static inline long vt_pages_present(const void *p, size_t len)
{
	size_t pg = vt_pg();
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	long n = 0;
	for (size_t off = 0; off < len; off += pg) {
		uint64_t e = 0;
		off_t at = (off_t)(((uintptr_t)p + off) / pg * sizeof(e));
		if (pread(fd, &e, sizeof(e), at) != (ssize_t)sizeof(e)) {
			n = -1;
			break;
		}
		n += (long)((e >> 63) & 1);
	}
	close(fd);
	return n;
}

/* raw wait status of the scenario with VRANGE_TRAP=trap and, if given,
 * the variable var set to 1; exit 77 (the scenario's "not supported
 * here") is reported on stdout and returned as -77 */
static inline int vt_run_scenario_trap(const char *name, const char *trap, const char *var)
{
	setenv("VRANGE_TRAP", trap, 1);
	if (var)
		setenv(var, "1", 1);
	int st = vt_run_scenario(name);
	unsetenv("VRANGE_TRAP");
	if (var)
		unsetenv(var);
	if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 77) {
		printf("[  SKIP    ] scenario %s with VRANGE_TRAP=%s: not supported here\n", name,
		       trap);
		return -77;
	}
	return st;
}

#define vt_assert_exit_ok(st)                                                                      \
	do {                                                                                       \
		int vt_st_ = (st);                                                                 \
		if (!(vt_st_ != -1 && WIFEXITED(vt_st_) && WEXITSTATUS(vt_st_) == 0))              \
			fail_msg("scenario: status 0x%x (%s %d)", vt_st_,                          \
				 WIFSIGNALED(vt_st_) ? "signal" : "exit",                          \
				 WIFSIGNALED(vt_st_) ? WTERMSIG(vt_st_) : WEXITSTATUS(vt_st_));    \
	} while (0)

/* the scenario under each trap backend in turn (guard, mprotect, uffd);
 * a backend that does not work here is skipped, any other status than
 * exit 0 fails the test */
static inline void vt_run_scenario_each_trap(const char *name)
{
	static const char *const traps[] = { "guard", "mprotect", "uffd" };
	for (size_t i = 0; i < sizeof(traps) / sizeof(traps[0]); i++) {
		int st = vt_run_scenario_trap(name, traps[i], NULL);
		if (st == -77)
			continue;
		if (!(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0))
			fail_msg("%s with VRANGE_TRAP=%s: status 0x%x", name, traps[i], st);
	}
}

#define vt_assert_killed_by(st, sig)                                                               \
	do {                                                                                       \
		int vt_st_ = (st);                                                                 \
		if (!(vt_st_ != -1 && WIFSIGNALED(vt_st_) && WTERMSIG(vt_st_) == (sig)))           \
			fail_msg("scenario: expected signal %d, status 0x%x", (sig), vt_st_);      \
	} while (0)

#endif
