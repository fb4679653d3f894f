/* test-monitor.c - the memory-pressure monitor (issue 5, API S11)
 *
 * Real sources where this machine has them (a PSI trigger on
 * /proc/pressure/memory, cgroup v1 memory.pressure_level, /proc/meminfo),
 * and the VRANGE_CGROUP_DIR seam on a mkdtemp() directory for reactions:
 * the real cgroups of the machine are never created or modified.
 * Environment variables are read by vr_ctx_new, so each test sets them
 * before creating its ctx.  Waits are on conditions with generous
 * deadlines, never sleep-and-hope.
 */
#include "tests.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <limits.h>
#include <stdbool.h>
#include <sys/eventfd.h>
#include <sys/stat.h>

#define DEADLINE_MS 10000

static uint64_t ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static double us_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* waits until stat >= want; true if reached before the deadline */
static bool wait_stat(struct vr_ctx *c, enum vr_stat which, uint64_t want)
{
	uint64_t end = ms_now() + DEADLINE_MS;
	while (vr_ctx_stat(c, which) < want) {
		if (ms_now() > end)
			return false;
		sleep_ms(1);
	}
	return true;
}

/* the limit watcher (S34) is off unless a test turns it on: the machine
 * running the tests may have a memory limit of its own */
static void clear_env(void)
{
	unsetenv("VRANGE_MONITOR");
	unsetenv("VRANGE_CGROUP_DIR");
	setenv("VRANGE_MEMORY_LIMIT", "off", 1);
}

/* ---- /proc helpers ---- */

/* the thread count comes back once the joined thread is reaped */
static bool wait_threads(int want)
{
	uint64_t end = ms_now() + DEADLINE_MS;
	while (vt_count_threads() != want) {
		if (ms_now() > end)
			return false;
		sleep_ms(1);
	}
	return true;
}

/* open fds whose /proc/self/fd link equals target */
static int count_fds_to(const char *target)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char p[300], l[PATH_MAX];
		snprintf(p, sizeof(p), "/proc/self/fd/%s", e->d_name);
		ssize_t k = readlink(p, l, sizeof(l) - 1);
		if (k < 0)
			continue;
		l[k] = '\0';
		if (strcmp(l, target) == 0)
			n++;
	}
	closedir(d);
	return n;
}

/* tid of the thread named vrange-mon (the first one), or 0 */
static pid_t monitor_tid(void)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return 0;
	pid_t tid = 0;
	struct dirent *e;
	while (!tid && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char p[300], comm[64] = "";
		snprintf(p, sizeof(p), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(p, "re");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && strcmp(comm, "vrange-mon\n") == 0)
			tid = atoi(e->d_name);
		fclose(f);
	}
	closedir(d);
	return tid;
}

/* ---- independent probes of what this machine offers ---- */

/* can a memory PSI trigger be registered here (2 s window: works with or
 * without CAP_SYS_RESOURCE)? */
static bool probe_psi(const char *kind)
{
	int fd = open("/proc/pressure/memory", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return false;
	char t[64];
	int n = snprintf(t, sizeof(t), "%s 300000 2000000", kind);
	bool ok = write(fd, t, (size_t)n + 1) == n + 1;
	close(fd);
	return ok;
}

/* the process's path in the hierarchy whose controller list has @ctrl
 * ("" for the v2 line "0::"), or false */
static bool cgroup_path(const char *ctrl, char *out, size_t size)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return false;
	char line[1024];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		char *c = strchr(line, ':'), *p = c ? strchr(c + 1, ':') : NULL;
		if (!p)
			continue;
		*p++ = '\0';
		c++;
		if (!*ctrl) {
			found = !*c;
		} else {
			for (char *s, *t = strtok_r(c, ",", &s); t && !found;
			     t = strtok_r(NULL, ",", &s))
				found = strcmp(t, ctrl) == 0;
		}
		if (found)
			snprintf(out, size, "%s", p);
	}
	fclose(f);
	return found;
}

/* can a cgroup v1 memory.pressure_level listener be registered for this
 * process's memory cgroup (at the usual mount point)? */
static bool probe_cgroup1(void)
{
	char path[512], dir[1024], p[1100];
	if (!cgroup_path("memory", path, sizeof(path)))
		return false;
	snprintf(dir, sizeof(dir), "/sys/fs/cgroup/memory%s", strcmp(path, "/") ? path : "");
	snprintf(p, sizeof(p), "%s/memory.pressure_level", dir);
	int lvl = open(p, O_RDONLY | O_CLOEXEC);
	snprintf(p, sizeof(p), "%s/cgroup.event_control", dir);
	int ctl = open(p, O_WRONLY | O_CLOEXEC);
	int efd = eventfd(0, EFD_CLOEXEC);
	bool ok = false;
	if (lvl >= 0 && ctl >= 0 && efd >= 0) {
		char b[64];
		int n = snprintf(b, sizeof(b), "%d %d critical,hierarchy", efd, lvl);
		ok = write(ctl, b, (size_t)n) == n;
	}
	if (efd >= 0)
		close(efd);
	if (ctl >= 0)
		close(ctl);
	if (lvl >= 0)
		close(lvl);
	return ok;
}

static bool probe_meminfo(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	if (!f)
		return false;
	char line[256];
	bool total = false, avail = false;
	while (fgets(line, sizeof(line), f)) {
		total |= strncmp(line, "MemTotal:", 9) == 0;
		avail |= strncmp(line, "MemAvailable:", 13) == 0;
	}
	fclose(f);
	return total && avail;
}

/* ---- the seam directory ---- */

static void put(const char *dir, const char *name, const char *text)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static void put_events(const char *dir, int high, int max, int oom)
{
	char b[256];
	snprintf(b, sizeof(b), "low 0\nhigh %d\nmax %d\noom %d\noom_kill %d\noom_group_kill 0\n",
		 high, max, oom, oom);
	put(dir, "memory.events", b);
}

/* a fake cgroup v2 directory far from any limit */
static char *make_seam(void)
{
	char *dir = strdup("/tmp/vt-monitor-XXXXXX");
	assert_non_null(dir);
	assert_non_null(mkdtemp(dir));
	put_events(dir, 0, 0, 0);
	put(dir, "memory.current", "50000000\n");
	put(dir, "memory.high", "max\n");
	put(dir, "memory.max", "max\n");
	return dir;
}

static void remove_seam(char *dir)
{
	static const char *const names[] = { "memory.events", "memory.current", "memory.high",
					     "memory.max", "memory.pressure" };
	char p[PATH_MAX];
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		unlink(p);
	}
	rmdir(dir);
	free(dir);
}

/* ---- a region with @n separate 2-page volatile ranges (oldest first) ---- */

struct marked {
	struct vr_region *r;
	size_t n;
};

static struct marked mark_ranges(struct vr_ctx *c, size_t n)
{
	size_t P = vt_pg();
	struct marked mk = { NULL, n };
	assert_int_equal(vr_region_new(c, "monitor", 3 * n * P, 0, &mk.r), 0);
	vt_fill(vr_region_base(mk.r), 0, 3 * n * P, 7);
	/* 2 pages volatile, 1 page not: the ranges never merge */
	for (size_t i = 0; i < n; i++)
		assert_int_equal(vr_mark(mk.r, 3 * i * P, 2 * P), VR_INTACT);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES), 2 * n * P);
	return mk;
}

static int range_status(struct marked *mk, size_t i)
{
	size_t P = vt_pg();
	return vr_status(mk->r, 3 * i * P, 2 * P);
}

/* the ctx still does its job: mark, purge, unmark, notify */
static void assert_ctx_works(struct vr_ctx *c)
{
	size_t P = vt_pg();
	struct vr_region *r;
	assert_int_equal(vr_region_new(c, "works", 4 * P, 0, &r), 0);
	uint8_t *b = vr_region_base(r);
	vt_fill(b, 0, 4 * P, 3);
	assert_int_equal(vr_mark(r, 0, 2 * P), VR_INTACT);
	assert_true(vr_ctx_purge(c, SIZE_MAX) >= (ssize_t)(2 * P));
	assert_int_equal(vr_unmark(r, 0, 2 * P), VR_PURGED);
	assert_true(vt_check(b + 2 * P, 2 * P, 2 * P, 3) == SIZE_MAX);
	assert_int_equal(vr_mark(r, 2 * P, 2 * P), VR_INTACT);
	uint64_t ev = vr_ctx_stat(c, VR_STAT_PRESSURE_EVENTS);
	assert_int_equal(vr_ctx_notify_pressure(c, VR_PRESSURE_CRITICAL), (ssize_t)(2 * P));
	assert_true(vr_ctx_stat(c, VR_STAT_PRESSURE_EVENTS) >= ev + 1);
	vr_region_destroy(r);
}

/* ---------------------------------------------------------------------- */

/* VRANGE_MONITOR=psi: a real trigger on /proc/pressure/memory, one fd per
 * trigger, a named thread that is gone after destroy */
static void test_psi_real_trigger(void **state)
{
	(void)state;
	clear_env();
	setenv("VRANGE_MONITOR", "psi", 1);
	bool some = probe_psi("some"), full = probe_psi("full");
	int threads = vt_count_threads(), fds = count_fds_to("/proc/pressure/memory");
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(0, &c), 0);
	printf("# psi probe: some=%d full=%d; source %s\n", some, full,
	       vr_monitor_source_name(vr_ctx_monitor_source(c)));
	assert_int_equal(vr_ctx_monitor_source(c), some ? VR_MONITOR_PSI : VR_MONITOR_NONE);
	assert_int_equal(count_fds_to("/proc/pressure/memory"), fds + (some ? 1 + full : 0));
	/* exactly one monitor thread; the total may also grow by a
	 * sanitizer's background thread, started lazily (TSan) */
	assert_int_equal(vt_count_monitor_threads(), 1);
	assert_true(vt_count_threads() >= threads + 1);
	int others = vt_count_threads() - 1; /* everything but the monitor */
	assert_true(monitor_tid() > 0);
	assert_ctx_works(c);
	vr_ctx_destroy(c);
	assert_true(wait_threads(others));
	assert_int_equal(vt_count_monitor_threads(), 0);
	assert_int_equal(count_fds_to("/proc/pressure/memory"), fds);
	clear_env();
}

/* no env: the first source that works on this machine */
static void test_default_order(void **state)
{
	(void)state;
	clear_env();
	char v2[512] = "";
	/* a non-root v2 cgroup may be usable; the root of the v2 hierarchy
	 * (as on this hybrid machine) is left to system PSI */
	bool v2_possible = cgroup_path("", v2, sizeof(v2)) && strcmp(v2, "/") != 0;
	int expect = probe_psi("some") ? VR_MONITOR_PSI
		     : probe_cgroup1() ? VR_MONITOR_CGROUP1
		     : probe_meminfo() ? VR_MONITOR_MEMINFO
				       : VR_MONITOR_NONE;
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(0, &c), 0);
	int got = vr_ctx_monitor_source(c);
	printf("# default source: %s (v2 cgroup \"%s\", expected %s%s)\n",
	       vr_monitor_source_name(got), v2, v2_possible ? "cgroup2 or " : "",
	       vr_monitor_source_name(expect));
	if (!(v2_possible && got == VR_MONITOR_CGROUP2))
		assert_int_equal(got, expect);
	assert_ctx_works(c);
	vr_ctx_destroy(c);
}

/* VRANGE_MEMORY_LIMIT: the limit watcher runs beside the pressure
 * source, reports the override, and is stopped by "off" and by
 * VRANGE_MONITOR=off; VRANGE_MONITOR=limit runs it alone */
static void test_memory_limit_env(void **state)
{
	(void)state;
	clear_env();
	const unsigned lim = 1u << VR_MONITOR_LIMIT;
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(0, &c), 0);
	int primary = vr_ctx_monitor_source(c);
	assert_true(vr_ctx_memory_limit(c) == 0);
	assert_false(vr_ctx_monitor_sources(c) & lim);
	assert_true(vr_ctx_stat(c, VR_STAT_BUDGET) == 0);
	vr_ctx_destroy(c);

	/* far above anything this machine (24 GiB) can use: the budget must
	 * not get in the way of assert_ctx_works */
	setenv("VRANGE_MEMORY_LIMIT", "512g", 1);
	assert_int_equal(vr_ctx_new(0, &c), 0);
	assert_true(vr_ctx_memory_limit(c) == 512ull << 30);
	assert_true(vr_ctx_monitor_sources(c) & lim);
	assert_int_equal(vr_ctx_monitor_source(c), primary); /* beside, not instead */
	if (primary != VR_MONITOR_NONE)
		assert_true(vr_ctx_monitor_sources(c) & (1u << primary));
	assert_true(vr_ctx_stat(c, VR_STAT_BUDGET) > 0);
	assert_string_equal(vr_monitor_source_name(VR_MONITOR_LIMIT), "limit");
	assert_ctx_works(c);
	vr_ctx_destroy(c);

	setenv("VRANGE_MONITOR", "limit", 1);
	setenv("VRANGE_MEMORY_LIMIT", "64m", 1);
	assert_int_equal(vr_ctx_new(0, &c), 0);
	assert_true(vr_ctx_memory_limit(c) == 64u << 20);
	assert_int_equal(vr_ctx_monitor_source(c), VR_MONITOR_NONE);
	assert_int_equal(vr_ctx_monitor_sources(c), lim);
	vr_ctx_destroy(c);

	setenv("VRANGE_MONITOR", "off", 1);
	assert_int_equal(vr_ctx_new(0, &c), 0);
	assert_int_equal(vr_ctx_monitor_sources(c), 0);
	assert_true(vr_ctx_memory_limit(c) == 0);
	vr_ctx_destroy(c);

	/* NO_MONITOR and NULL: nothing */
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_ctx_monitor_sources(c), 0);
	assert_true(vr_ctx_memory_limit(c) == 0);
	assert_int_equal(vr_ctx_memory_limit_scope(c), VR_LIMIT_NONE);
	vr_ctx_destroy(c);
	assert_int_equal(vr_ctx_monitor_sources(NULL), 0);
	assert_true(vr_ctx_memory_limit(NULL) == 0);
	assert_int_equal(vr_ctx_memory_limit_scope(NULL), VR_LIMIT_NONE);
	clear_env();
}

/* a budget of nothing (a limit far under what the process already uses):
 * vr_mark purges in the marking thread before it returns, like S10 */
static void test_budget_enforced_by_mark(void **state)
{
	(void)state;
	clear_env();
	setenv("VRANGE_MEMORY_LIMIT", "4k", 1); /* under what the process itself holds */
	struct vr_ctx *c;
	struct vr_region *r;
	assert_int_equal(vr_ctx_new(0, &c), 0);
	assert_true(vr_ctx_memory_limit(c) == 4096);
	assert_int_equal(vr_ctx_memory_limit_scope(c), VR_LIMIT_PROCESS);
	assert_true(vr_ctx_stat(c, VR_STAT_BUDGET) == 1);
	size_t pg = vt_pg();
	assert_int_equal(vr_region_new(c, "budget", 64 * pg, 0, &r), 0);
	uint8_t *p = vr_region_base(r);
	memset(p, 7, 64 * pg);
	assert_int_equal(vr_mark(r, 0, 16 * pg), VR_PURGED);
	assert_true(vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES) == 0);
	/* non-volatile bytes are never touched */
	for (size_t i = 16 * pg; i < 64 * pg; i++)
		assert_int_equal(p[i], 7);
	/* the application's limit alone would keep it: the smaller wins */
	assert_int_equal(vr_ctx_set_limit(c, 1u << 30), 0);
	assert_int_equal(vr_mark(r, 32 * pg, 16 * pg), VR_PURGED);
	vr_region_destroy(r);
	vr_ctx_destroy(c);
	clear_env();
}

/* VRANGE_MEMORY_LIMIT counts RssAnon + RssShmem: still read once the main
 * thread has called pthread_exit() (the leader is then a zombie without an
 * mm, and /proc/self/status, the leader's, has no Rss lines at all).  In a
 * forked child: its main thread exits, a worker grows its own memory by
 * 32 MiB and waits for VR_STAT_LIMIT_USAGE to see it. */
static struct vr_ctx *leader_ctx;

static void *leader_gone_worker(void *arg)
{
	(void)arg;
	usleep(100 * 1000); /* the leader is gone by now */
	uint64_t before = vr_ctx_stat(leader_ctx, VR_STAT_LIMIT_USAGE);
	size_t len = 32u << 20;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		_exit(2);
	memset(p, 1, len);
	uint64_t end = ms_now() + DEADLINE_MS;
	while (ms_now() < end) {
		if (vr_ctx_stat(leader_ctx, VR_STAT_LIMIT_USAGE) >= before + len / 2)
			_exit(0);
		usleep(10 * 1000);
	}
	fprintf(stderr, "usage counted stayed at %" PRIu64 " after 32 MiB more\n",
		vr_ctx_stat(leader_ctx, VR_STAT_LIMIT_USAGE));
	_exit(3);
}

static void test_memory_limit_env_leader_gone(void **state)
{
	(void)state;
	clear_env();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		setenv("VRANGE_MONITOR", "limit", 1);
		setenv("VRANGE_MEMORY_LIMIT", "512g", 1);
		if (vr_ctx_new(0, &leader_ctx) != 0)
			_exit(2);
		pthread_t t;
		if (pthread_create(&t, NULL, leader_gone_worker, NULL) != 0)
			_exit(2);
		pthread_exit(NULL);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	clear_env();
}

static void test_no_monitor_flag(void **state)
{
	(void)state;
	clear_env();
	int threads = vt_count_threads();
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_ctx_monitor_source(c), VR_MONITOR_NONE);
	assert_int_equal(vt_count_threads(), threads);
	vr_ctx_destroy(c);
}

/* off: no source, but the thread is still started and joined */
static void test_off(void **state)
{
	(void)state;
	clear_env();
	setenv("VRANGE_MONITOR", "off", 1);
	int threads = vt_count_threads();
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(0, &c), 0);
	assert_int_equal(vr_ctx_monitor_source(c), VR_MONITOR_NONE);
	assert_int_equal(vt_count_threads(), threads + 1);
	assert_ctx_works(c);
	vr_ctx_destroy(c);
	assert_true(wait_threads(threads));
	clear_env();
}

static void test_forced_meminfo(void **state)
{
	(void)state;
	clear_env();
	setenv("VRANGE_MONITOR", "meminfo", 1);
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(0, &c), 0);
	assert_int_equal(vr_ctx_monitor_source(c),
			 probe_meminfo() ? VR_MONITOR_MEMINFO : VR_MONITOR_NONE);
	assert_ctx_works(c);
	vr_ctx_destroy(c);
	clear_env();
}

/* cgroup1 is whatever this machine really offers: a listener we can
 * register ourselves -> the monitor registers two (medium, critical) */
static int count_eventfds(void)
{
	return count_fds_to("anon_inode:[eventfd]");
}

static void test_forced_cgroup1(void **state)
{
	(void)state;
	clear_env();
	setenv("VRANGE_MONITOR", "cgroup1", 1);
	bool ok = probe_cgroup1();
	int efds = count_eventfds();
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(0, &c), 0);
	printf("# cgroup1 probe: %d; source %s\n", ok,
	       vr_monitor_source_name(vr_ctx_monitor_source(c)));
	assert_int_equal(vr_ctx_monitor_source(c), ok ? VR_MONITOR_CGROUP1 : VR_MONITOR_NONE);
	/* the wake-up eventfd, plus one per registered level */
	assert_int_equal(count_eventfds(), efds + 1 + (ok ? 2 : 0));
	assert_ctx_works(c);
	vr_ctx_destroy(c);
	assert_int_equal(count_eventfds(), efds);
	clear_env();
}

/* a forced source that does not work leaves the monitor idle, no fallback */
static void test_forced_cgroup2_missing(void **state)
{
	(void)state;
	clear_env();
	setenv("VRANGE_MONITOR", "cgroup2", 1);
	setenv("VRANGE_CGROUP_DIR", "/nonexistent/vrange-test", 1);
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(0, &c), 0);
	assert_int_equal(vr_ctx_monitor_source(c), VR_MONITOR_NONE);
	assert_ctx_works(c);
	vr_ctx_destroy(c);
	clear_env();
}

/* auto order: a broken cgroup2 falls through to the next source */
static void test_fallback_order(void **state)
{
	(void)state;
	clear_env();
	int expect = probe_psi("some") ? VR_MONITOR_PSI
		     : probe_cgroup1() ? VR_MONITOR_CGROUP1
		     : probe_meminfo() ? VR_MONITOR_MEMINFO
				       : VR_MONITOR_NONE;
	struct vr_ctx *c;

	/* missing directory */
	setenv("VRANGE_CGROUP_DIR", "/nonexistent/vrange-test", 1);
	assert_int_equal(vr_ctx_new(0, &c), 0);
	assert_int_equal(vr_ctx_monitor_source(c), expect);
	assert_ctx_works(c);
	vr_ctx_destroy(c);

	/* a directory without any memory.* file (like the root cgroup) */
	char dir[] = "/tmp/vt-monitor-empty-XXXXXX";
	assert_non_null(mkdtemp(dir));
	setenv("VRANGE_CGROUP_DIR", dir, 1);
	assert_int_equal(vr_ctx_new(0, &c), 0);
	assert_int_equal(vr_ctx_monitor_source(c), expect);
	vr_ctx_destroy(c);

	/* psi forced off the list: cgroup2 broken + VRANGE_MONITOR=psi */
	setenv("VRANGE_MONITOR", "psi", 1);
	assert_int_equal(vr_ctx_new(0, &c), 0);
	assert_int_equal(vr_ctx_monitor_source(c),
			 probe_psi("some") ? VR_MONITOR_PSI : VR_MONITOR_NONE);
	vr_ctx_destroy(c);
	rmdir(dir);
	clear_env();
}

/* memory.events "high" rising -> one MODERATE: half the volatile bytes,
 * oldest ranges first; then "max" rising -> CRITICAL: everything */
static void test_cgroup2_events(void **state)
{
	(void)state;
	clear_env();
	size_t P = vt_pg();
	char *dir = make_seam();
	setenv("VRANGE_CGROUP_DIR", dir, 1);
	int fds = vt_count_dir("/proc/self/fd");
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(0, &c), 0);
	assert_int_equal(vr_ctx_monitor_source(c), VR_MONITOR_CGROUP2);
	/* the wake-up eventfd and the inotify fd */
	assert_int_equal(count_fds_to("anon_inode:inotify"), 1);
	struct marked mk = mark_ranges(c, 4);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_PRESSURE_EVENTS), 0);

	put_events(dir, 1, 0, 0);
	assert_true(wait_stat(c, VR_STAT_PRESSURE_EVENTS, 1));
	assert_true(wait_stat(c, VR_STAT_PURGES, 2));
	assert_int_equal(vr_ctx_stat(c, VR_STAT_PRESSURE_EVENTS), 1);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES), 4 * P);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_RECLAIMED_BYTES), 4 * P);
	assert_int_equal(range_status(&mk, 0), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(range_status(&mk, 1), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(range_status(&mk, 2), VR_STATE_VOLATILE);
	assert_int_equal(range_status(&mk, 3), VR_STATE_VOLATILE);

	/* an unchanged file is no event: a periodic re-read later, still 1 */
	sleep_ms(1200);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_PRESSURE_EVENTS), 1);

	put_events(dir, 1, 1, 0);
	assert_true(wait_stat(c, VR_STAT_PRESSURE_EVENTS, 2));
	assert_true(wait_stat(c, VR_STAT_PURGES, 4));
	assert_int_equal(vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES), 0);
	assert_int_equal(range_status(&mk, 3), VR_STATE_VOLATILE | VR_STATE_PURGED);

	/* oom rising is CRITICAL too: it counts, though nothing is left */
	put_events(dir, 1, 1, 1);
	assert_true(wait_stat(c, VR_STAT_PRESSURE_EVENTS, 3));

	vr_ctx_destroy(c);
	assert_int_equal(vt_count_dir("/proc/self/fd"), fds);
	remove_seam(dir);
	clear_env();
}

/* a seam with memory.high 100 MB and memory.max 200 MB, and a ctx whose
 * monitor watches it (cgroup2); memory.current at 50 MB, far from both */
static char *headroom_seam(struct vr_ctx **c)
{
	clear_env();
	char *dir = make_seam();
	put(dir, "memory.high", "100000000\n");
	put(dir, "memory.max", "200000000\n");
	setenv("VRANGE_CGROUP_DIR", dir, 1);
	assert_int_equal(vr_ctx_new(0, c), 0);
	assert_int_equal(vr_ctx_monitor_source(*c), VR_MONITOR_CGROUP2);
	return dir;
}

/* memory.current above memory.high -> MODERATE; near memory.max -> CRITICAL */
static void test_cgroup2_headroom(void **state)
{
	(void)state;
	size_t P = vt_pg();
	struct vr_ctx *c;
	char *dir = headroom_seam(&c);
	struct marked mk = mark_ranges(c, 4);

	put(dir, "memory.current", "150000000\n"); /* > high, 75% of max */
	assert_true(wait_stat(c, VR_STAT_PURGES, 2));
	assert_true(vr_ctx_stat(c, VR_STAT_PRESSURE_EVENTS) >= 1);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES), 4 * P);
	assert_int_equal(range_status(&mk, 0), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(range_status(&mk, 3), VR_STATE_VOLATILE);

	put(dir, "memory.current", "196000000\n"); /* 98% of max */
	assert_true(wait_stat(c, VR_STAT_PURGES, 4));
	assert_int_equal(vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES), 0);

	vr_ctx_destroy(c);
	remove_seam(dir);
	clear_env();
}

/* A purge handler run by the monitor thread forks, and the child returns
 * from it: the child's only thread is then that monitor thread, on an
 * inherited ctx.  It must stop (the child exits, as its last thread
 * ends), not watch the parent's files for ever (without the fix: still
 * running after 10 s, killed). */
static _Atomic pid_t mfork_child;

static void mfork_handler(struct vr_obj *o, void *arg)
{
	(void)o;
	(void)arg;
	pid_t zero = 0;
	if (atomic_load(&mfork_child) != 0)
		return;
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid > 0)
		atomic_compare_exchange_strong(&mfork_child, &zero, pid);
	/* pid 0: the child returns into the monitor's purge */
}

static void test_fork_in_monitor_purge(void **state)
{
	(void)state;
	size_t P = vt_pg();
	struct vr_ctx *c;
	char *dir = headroom_seam(&c);
	struct vr_group *g;
	assert_int_equal(vr_group_new(c, 3, &g), 0);
	assert_int_equal(vr_group_set_purge_handler(g, mfork_handler, NULL), 0);
	struct vr_obj *o[4];
	for (int i = 0; i < 4; i++) {
		assert_int_equal(vr_obj_new_in(g, 2 * P, 0, 0, &o[i]), 0);
		assert_int_equal(vr_obj_unpin(o[i]), 0);
	}
	put(dir, "memory.current", "196000000\n"); /* 98% of max: the monitor purges */
	assert_true(wait_stat(c, VR_STAT_PURGES, 4));
	pid_t pid = 0; /* the report follows the count */
	for (uint64_t end = ms_now() + DEADLINE_MS; !pid && ms_now() < end; sleep_ms(1))
		pid = atomic_load(&mfork_child);
	assert_true(pid > 0);
	/* the child's monitor thread leaves after its round: it exits */
	int st = 0;
	pid_t got = 0;
	for (uint64_t end = ms_now() + DEADLINE_MS; got == 0 && ms_now() < end;) {
		got = waitpid(pid, &st, WNOHANG);
		if (got == 0)
			sleep_ms(10);
	}
	if (got == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	vr_ctx_destroy(c);
	remove_seam(dir);
	clear_env();
	assert_int_equal(got, pid); /* else: still running after 10 s */
	/* it ended by itself (its status is not the point: a leak checker
	 * fails a process that leaves an inherited ctx's copy behind) */
	assert_true(WIFEXITED(st));
}

/* below the limits nothing happens (the level sources do not fire at rest) */
static void test_cgroup2_at_rest(void **state)
{
	(void)state;
	clear_env();
	size_t P = vt_pg();
	char *dir = make_seam();
	put(dir, "memory.high", "100000000\n");
	put(dir, "memory.max", "200000000\n");
	put(dir, "memory.current", "90000000\n"); /* < high, 45% of max */
	setenv("VRANGE_CGROUP_DIR", dir, 1);
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(0, &c), 0);
	mark_ranges(c, 2);
	put(dir, "memory.current", "95000000\n");
	sleep_ms(1200);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_PRESSURE_EVENTS), 0);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES), 4 * P);
	vr_ctx_destroy(c);
	remove_seam(dir);
	clear_env();
}

/* a seam directory with only an ordinary memory.pressure file is usable
 * (by the files it may get later), and the file is never written to: PSI
 * triggers are registered on a real cgroup2 file system only */
static void test_cgroup2_seam_pressure_untouched(void **state)
{
	(void)state;
	clear_env();
	char dir[] = "/tmp/vt-monitor-psi-XXXXXX";
	assert_non_null(mkdtemp(dir));
	static const char text[] = "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
				   "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
	put(dir, "memory.pressure", text);
	setenv("VRANGE_CGROUP_DIR", dir, 1);
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(0, &c), 0);
	assert_int_equal(vr_ctx_monitor_source(c), VR_MONITOR_CGROUP2);
	/* memory.events appearing later is picked up */
	put_events(dir, 0, 0, 0);
	sleep_ms(1200);
	mark_ranges(c, 2);
	put_events(dir, 1, 0, 0);
	assert_true(wait_stat(c, VR_STAT_PURGES, 1));
	vr_ctx_destroy(c);

	char p[PATH_MAX], buf[512] = "";
	snprintf(p, sizeof(p), "%s/memory.pressure", dir);
	FILE *f = fopen(p, "re");
	assert_non_null(f);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	assert_int_equal(n, strlen(text));
	assert_memory_equal(buf, text, n);
	unlink(p);
	snprintf(p, sizeof(p), "%s/memory.events", dir);
	unlink(p);
	rmdir(dir);
	clear_env();
}

/* the files vanish (and the directory): the ctx keeps working, the
 * monitor picks the files up again when they return, destroy is clean */
static void test_cgroup2_files_removed(void **state)
{
	(void)state;
	clear_env();
	char *dir = make_seam();
	setenv("VRANGE_CGROUP_DIR", dir, 1);
	int threads = vt_count_threads();
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(0, &c), 0);
	assert_int_equal(vr_ctx_monitor_source(c), VR_MONITOR_CGROUP2);

	char p[PATH_MAX];
	static const char *const names[] = { "memory.events", "memory.current", "memory.high",
					     "memory.max" };
	for (size_t i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		assert_int_equal(unlink(p), 0);
	}
	sleep_ms(1200); /* at least one periodic re-read without files */
	assert_int_equal(vr_ctx_monitor_source(c), VR_MONITOR_CGROUP2);
	assert_ctx_works(c);

	/* files back: a new baseline, then a rise is seen again */
	put_events(dir, 5, 0, 0);
	sleep_ms(1200);
	uint64_t ev = vr_ctx_stat(c, VR_STAT_PRESSURE_EVENTS);
	put_events(dir, 6, 0, 0);
	assert_true(wait_stat(c, VR_STAT_PRESSURE_EVENTS, ev + 1));

	/* the directory itself goes away */
	unlink(p);
	snprintf(p, sizeof(p), "%s/memory.events", dir);
	unlink(p);
	assert_int_equal(rmdir(dir), 0);
	sleep_ms(1200);
	assert_ctx_works(c);

	/* ... and comes back */
	assert_int_equal(mkdir(dir, 0755), 0);
	put_events(dir, 1, 0, 0);
	sleep_ms(1200);
	ev = vr_ctx_stat(c, VR_STAT_PRESSURE_EVENTS);
	put_events(dir, 2, 0, 0);
	assert_true(wait_stat(c, VR_STAT_PRESSURE_EVENTS, ev + 1));

	vr_ctx_destroy(c);
	assert_true(wait_threads(threads));
	remove_seam(dir);
	clear_env();
}

/* a storm of memory.events changes is coalesced: at most one action per
 * level per 200 ms (bound relative to the storm's measured duration) */
static void test_cgroup2_storm(void **state)
{
	(void)state;
	clear_env();
	char *dir = make_seam();
	setenv("VRANGE_CGROUP_DIR", dir, 1);
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(0, &c), 0);
	mark_ranges(c, 2);
	uint64_t t0 = ms_now();
	int bumps = 0;
	while (ms_now() - t0 < 800)
		put_events(dir, ++bumps, 0, 0);
	uint64_t ev = 0, end = ms_now() + DEADLINE_MS;
	assert_true(wait_stat(c, VR_STAT_PRESSURE_EVENTS, 1));
	/* let the pending, coalesced action land */
	sleep_ms(300);
	ev = vr_ctx_stat(c, VR_STAT_PRESSURE_EVENTS);
	uint64_t elapsed = ms_now() - t0;
	printf("# storm: %d bumps in 0.8 s -> %" PRIu64 " pressure events in %" PRIu64 " ms\n",
	       bumps, ev, elapsed);
	assert_true(ms_now() < end);
	assert_true(ev >= 1);
	assert_true(ev <= elapsed / 200 + 2);
	assert_true(ev < (uint64_t)bumps || bumps < 8);
	vr_ctx_destroy(c);
	remove_seam(dir);
	clear_env();
}

/* the monitor thread blocks every signal but the synchronous ones, so it
 * never takes the application's signals */
static void test_thread_signal_mask(void **state)
{
	(void)state;
	clear_env();
	setenv("VRANGE_MONITOR", "off", 1);
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(0, &c), 0);
	pid_t tid = monitor_tid();
	assert_true(tid > 0);
	char p[64], line[256];
	/* a new thread runs with every signal blocked until glibc installs
	 * the mask it was created with: wait until it sleeps in poll */
	snprintf(p, sizeof(p), "/proc/self/task/%d/stat", (int)tid);
	uint64_t end = ms_now() + DEADLINE_MS;
	for (;;) {
		char st = '?';
		FILE *f = fopen(p, "re");
		assert_non_null(f);
		if (fgets(line, sizeof(line), f) && strrchr(line, ')'))
			st = strrchr(line, ')')[2];
		fclose(f);
		if (st == 'S')
			break;
		assert_true(ms_now() < end);
		sleep_ms(1);
	}
	snprintf(p, sizeof(p), "/proc/self/task/%d/status", (int)tid);
	FILE *f = fopen(p, "re");
	assert_non_null(f);
	unsigned long long blk = 0;
	bool found = false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "SigBlk: %llx", &blk) == 1)
			found = true;
	fclose(f);
	assert_true(found);
	/* valgrind keeps SIGRTMAX for itself */
	const char *pre = getenv("LD_PRELOAD");
	bool valgrind = pre && strstr(pre, "vgpreload");
	for (int s = 1; s <= 64; s++) {
		bool blocked = blk & (1ull << (s - 1));
		bool sync = s == SIGSEGV || s == SIGBUS || s == SIGILL || s == SIGFPE;
		/* SIGKILL and SIGSTOP cannot be blocked; 32 and 33 are
		 * glibc's own (cancellation, setxid) */
		if (s == SIGKILL || s == SIGSTOP || s == 32 || s == 33 || (s == 64 && valgrind))
			continue;
		if (blocked == sync)
			fail_msg("signal %d: blocked=%d in the monitor thread (SigBlk %llx)", s,
				 blocked, blk);
	}
	vr_ctx_destroy(c);
	clear_env();
}

/* fork while the monitor runs: the child builds its own ctx + monitor, which
 * reacts; the parent's monitor keeps reacting afterwards */
static void test_fork(void **state)
{
	(void)state;
	clear_env();
	size_t P = vt_pg();
	char *pdir = make_seam(), *cdir = make_seam();
	setenv("VRANGE_CGROUP_DIR", pdir, 1);
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(0, &c), 0);
	assert_int_equal(vr_ctx_monitor_source(c), VR_MONITOR_CGROUP2);
	mark_ranges(c, 4);

	fflush(stdout);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		setenv("VRANGE_CGROUP_DIR", cdir, 1);
		vr_ctx_destroy(c); /* inherited: frees our copy only */
		struct vr_ctx *cc;
		struct vr_region *r;
		CK_EQ(vr_ctx_new(0, &cc), 0);
		CK_EQ(vr_ctx_monitor_source(cc), VR_MONITOR_CGROUP2);
		CK(monitor_tid() > 0);
		CK_EQ(vr_region_new(cc, "child", 8 * P, 0, &r), 0);
		CK_EQ(vr_mark(r, 0, 2 * P), VR_INTACT);
		CK_EQ(vr_mark(r, 4 * P, 2 * P), VR_INTACT);
		char b[128];
		snprintf(b, sizeof(b), "high 1\nmax 0\noom 0\n");
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/memory.events", cdir);
		FILE *f = fopen(p, "w");
		CK(f);
		fputs(b, f);
		fclose(f);
		uint64_t end = ms_now() + DEADLINE_MS;
		while (vr_ctx_stat(cc, VR_STAT_PURGES) < 1 && ms_now() < end)
			sleep_ms(1);
		CK_EQ(vr_ctx_stat(cc, VR_STAT_PURGES), 1);
		CK_EQ(vr_ctx_stat(cc, VR_STAT_PRESSURE_EVENTS), 1);
		CK_EQ(vr_status(r, 0, 2 * P), VR_STATE_VOLATILE | VR_STATE_PURGED);
		vr_ctx_destroy(cc);
		free(pdir);
		free(cdir);
		_exit(0);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	vt_assert_exit_ok(st);
	/* the child's event went to the child's ctx only */
	assert_int_equal(vr_ctx_stat(c, VR_STAT_PRESSURE_EVENTS), 0);
	put_events(pdir, 1, 0, 0);
	assert_true(wait_stat(c, VR_STAT_PURGES, 2));
	assert_int_equal(vr_ctx_stat(c, VR_STAT_PRESSURE_EVENTS), 1);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES), 4 * P);
	vr_ctx_destroy(c);
	remove_seam(pdir);
	remove_seam(cdir);
	clear_env();
}

/* VmLck of this process in bytes, 0 if unknown */
static uint64_t vm_locked(void)
{
	char line[256];
	uint64_t kb = 0;
	FILE *f = fopen("/proc/self/status", "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %" SCNu64, &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb << 10;
}

/* the monitor mlock()s the library's code once per process; memory locks
 * are not inherited across fork(), so a fork child's first monitor must
 * lock it again (it used to lock only its own stack) */
static void test_fork_code_locked(void **state)
{
	(void)state;
	clear_env();
	setenv("VRANGE_MONITOR", "off", 1);
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(0, &c), 0);
	uint64_t end = ms_now() + DEADLINE_MS;
	while (vm_locked() <= (64u << 10) && ms_now() < end)
		sleep_ms(1);
	uint64_t parent = vm_locked();
	if (parent <= (64u << 10)) { /* RLIMIT_MEMLOCK too small: nothing to compare */
		vr_ctx_destroy(c);
		clear_env();
		skip();
	}
	fflush(stdout);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		vr_ctx_destroy(c); /* inherited */
		struct vr_ctx *cc;
		CK_EQ(vr_ctx_new(0, &cc), 0);
		uint64_t e = ms_now() + DEADLINE_MS;
		while (vm_locked() < parent && ms_now() < e)
			sleep_ms(1);
		if (vm_locked() < parent)
			fprintf(stderr, "child VmLck %" PRIu64 " < parent's %" PRIu64 "\n",
				vm_locked(), parent);
		CK(vm_locked() >= parent);
		vr_ctx_destroy(cc);
		_exit(0);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	vt_assert_exit_ok(st);
	vr_ctx_destroy(c);
	clear_env();
}

/* reaction latency from a cgroup-file change to the first byte reclaimed
 * (printed, not asserted) */
static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void test_latency(void **state)
{
	(void)state;
	clear_env();
	enum { N = 5 };
	size_t P = vt_pg();
	char *dir = make_seam();
	put(dir, "memory.high", "100000000\n");
	setenv("VRANGE_CGROUP_DIR", dir, 1);
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(0, &c), 0);
	struct vr_region *r;
	assert_int_equal(vr_region_new(c, "latency", 2 * P, 0, &r), 0);
	double ev_us[N], cur_us[N];
	for (int i = 0; i < N; i++) {
		/* memory.events high rising */
		assert_int_equal(vr_mark(r, 0, P), VR_INTACT);
		uint64_t before = vr_ctx_stat(c, VR_STAT_RECLAIMED_BYTES);
		double t0 = us_now();
		put_events(dir, i + 1, 0, 0);
		while (vr_ctx_stat(c, VR_STAT_RECLAIMED_BYTES) == before)
			assert_true(us_now() - t0 < DEADLINE_MS * 1e3);
		ev_us[i] = us_now() - t0;
		assert_int_equal(vr_unmark(r, 0, P), VR_PURGED);
		sleep_ms(250); /* past the 200 ms per-level gap */

		/* memory.current crossing memory.high */
		assert_int_equal(vr_mark(r, 0, P), VR_INTACT);
		before = vr_ctx_stat(c, VR_STAT_RECLAIMED_BYTES);
		t0 = us_now();
		put(dir, "memory.current", "150000000\n");
		while (vr_ctx_stat(c, VR_STAT_RECLAIMED_BYTES) == before)
			assert_true(us_now() - t0 < DEADLINE_MS * 1e3);
		cur_us[i] = us_now() - t0;
		assert_int_equal(vr_unmark(r, 0, P), VR_PURGED);
		put(dir, "memory.current", "50000000\n");
		sleep_ms(250);
	}
	qsort(ev_us, N, sizeof(double), cmp_double);
	qsort(cur_us, N, sizeof(double), cmp_double);
	printf("# latency memory.events high -> first byte reclaimed: min %.0f us, median %.0f us, "
	       "max %.0f us\n",
	       ev_us[0], ev_us[N / 2], ev_us[N - 1]);
	printf("# latency memory.current > memory.high -> first byte reclaimed: min %.0f us, "
	       "median %.0f us, max %.0f us\n",
	       cur_us[0], cur_us[N / 2], cur_us[N - 1]);
	vr_region_destroy(r);
	vr_ctx_destroy(c);
	remove_seam(dir);
	clear_env();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_psi_real_trigger),
		cmocka_unit_test(test_default_order),
		cmocka_unit_test(test_no_monitor_flag),
		cmocka_unit_test(test_memory_limit_env),
		cmocka_unit_test(test_budget_enforced_by_mark),
		cmocka_unit_test(test_memory_limit_env_leader_gone),
		cmocka_unit_test(test_off),
		cmocka_unit_test(test_forced_meminfo),
		cmocka_unit_test(test_forced_cgroup1),
		cmocka_unit_test(test_forced_cgroup2_missing),
		cmocka_unit_test(test_fallback_order),
		cmocka_unit_test(test_cgroup2_events),
		cmocka_unit_test(test_cgroup2_headroom),
		cmocka_unit_test(test_fork_in_monitor_purge),
		cmocka_unit_test(test_cgroup2_at_rest),
		cmocka_unit_test(test_cgroup2_seam_pressure_untouched),
		cmocka_unit_test(test_cgroup2_files_removed),
		cmocka_unit_test(test_cgroup2_storm),
		cmocka_unit_test(test_thread_signal_mask),
		cmocka_unit_test(test_fork),
		cmocka_unit_test(test_fork_code_locked),
		cmocka_unit_test(test_latency),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
