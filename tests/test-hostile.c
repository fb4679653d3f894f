/*
 * test-hostile.c - libvrange in hostile environments
 *
 * Each case runs as a re-exec'd scenario (it changes rlimits, seals or a
 * private mount namespace, none of which may leak into other tests):
 *   - seals on the memfd: F_SEAL_FUTURE_WRITE makes hole punching fail
 *     with EPERM: purges are skipped and counted, data is kept, nothing is
 *     reported purged; F_SEAL_WRITE makes vr_region_from_fd fail cleanly;
 *   - /proc/pressure hidden (empty tmpfs over it, private mount namespace):
 *     the psi source is unusable, the monitor falls through, ctx works;
 *   - a read-only cgroup file system (read-only bind mount, private
 *     namespace): cgroup v1 registration fails, the monitor falls through;
 *   - RLIMIT_NOFILE exhausted: region and ctx creation fail with -EMFILE,
 *     nothing leaks, one more fd makes a region; RLIMIT_AS low: big
 *     regions fail with -ENOMEM, small ones work;
 *   - the heap exhausted: purges, the limit and destroy still work (they
 *     allocate nothing).
 * The machine's own mounts and cgroups are never changed: the mount
 * namespace is private to the scenario process.
 */
#include "tests.h"

#include <dirent.h>
#include <stdbool.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

static size_t P;

/* a ctx (no monitor) with one 8-page region, pages 0-3 marked */
static void fixture(struct vr_ctx **c, struct vr_region **r)
{
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, c), 0);
	CK_EQ(vr_region_new(*c, "vt-hostile", 8 * P, 0, r), 0);
	vt_fill(vr_region_base(*r), 0, 8 * P, 77);
	CK_EQ(vr_mark(*r, 0, 2 * P), VR_INTACT);
	CK_EQ(vr_mark(*r, 3 * P, P), VR_INTACT);
}

static void sc_seal_future_write(void)
{
	struct vr_ctx *c;
	struct vr_region *r;
	P = vt_pg();
	fixture(&c, &r);
	CK_EQ(fcntl(vr_region_fd(r), F_ADD_SEALS, F_SEAL_FUTURE_WRITE), 0);
	/* punching now fails with EPERM: skipped, not half-purged (S8) */
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), 0);
	CK_EQ(vr_ctx_stat(c, VR_STAT_SKIPPED), 2);
	CK_EQ(vr_ctx_stat(c, VR_STAT_PURGES), 0);
	CK_EQ(vr_ctx_notify_pressure(c, VR_PRESSURE_CRITICAL), 0);
	CK_EQ(vr_status(r, 0, 8 * P), VR_STATE_VOLATILE);
	/* the pages were not left trapped: readable and writable */
	uint8_t *b = vr_region_base(r);
	CK(vt_check(b, 0, 8 * P, 77) == SIZE_MAX);
	b[P] ^= 0;
	CK_EQ(vr_unmark(r, 0, 8 * P), VR_INTACT);
	CK(vt_check(b, 0, 8 * P, 77) == SIZE_MAX);
	vr_ctx_destroy(c);
}

static void sc_seal_write_from_fd(void)
{
	struct vr_ctx *c;
	struct vr_region *r;
	P = vt_pg();
	int fds = vt_count_fds();
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	int fd = memfd_create("vt-sealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	CK(fd >= 0);
	CK_EQ(ftruncate(fd, (off_t)(4 * P)), 0);
	CK_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), 0);
	int rc = vr_region_from_fd(c, fd, 0, &r);
	CK_EQ(rc, -EPERM); /* a writable shared mapping is refused */
	CK_EQ(vr_ctx_stat(c, VR_STAT_REGIONS), 0);
	close(fd);
	vr_ctx_destroy(c);
	CK_EQ(vt_count_fds(), fds);
}

/* a private mount namespace, so mounts below never reach the machine */
static bool private_mounts(void)
{
	if (unshare(CLONE_NEWNS) < 0)
		return false;
	return mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
}

static void sc_no_proc_pressure(void)
{
	P = vt_pg();
	if (!private_mounts() || mount("none", "/proc/pressure", "tmpfs", MS_RDONLY, NULL) < 0) {
		printf("SKIP: cannot hide /proc/pressure (%s)\n", strerror(errno));
		_exit(77);
	}
	CK(access("/proc/pressure/memory", F_OK) < 0);
	struct vr_ctx *c;
	struct vr_region *r;
	setenv("VRANGE_MONITOR", "psi", 1);
	CK_EQ(vr_ctx_new(0, &c), 0);
	CK_EQ(vr_ctx_monitor_source(c), VR_MONITOR_NONE);
	CK_EQ(vr_region_new(c, "vt-hostile", 4 * P, 0, &r), 0);
	CK_EQ(vr_mark(r, 0, P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), (ssize_t)P);
	vr_ctx_destroy(c);
	/* without a forced source: not psi, something later (or none) */
	unsetenv("VRANGE_MONITOR");
	CK_EQ(vr_ctx_new(0, &c), 0);
	int src = vr_ctx_monitor_source(c);
	printf("source without /proc/pressure: %s\n", vr_monitor_source_name(src));
	CK(src != VR_MONITOR_PSI);
	vr_ctx_destroy(c);
}

static void sc_readonly_cgroupfs(void)
{
	const char *dir = "/sys/fs/cgroup/memory";
	struct stat st;
	P = vt_pg();
	if (stat(dir, &st) < 0 || !private_mounts() ||
	    mount(dir, dir, NULL, MS_BIND | MS_REC, NULL) < 0 ||
	    mount(NULL, dir, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0) {
		printf("SKIP: no cgroup v1 memory controller to make read-only (%s)\n",
		       strerror(errno));
		_exit(77);
	}
	struct vr_ctx *c;
	setenv("VRANGE_MONITOR", "cgroup1", 1);
	CK_EQ(vr_ctx_new(0, &c), 0);
	/* registering through cgroup.event_control needs a write */
	CK_EQ(vr_ctx_monitor_source(c), VR_MONITOR_NONE);
	struct vr_region *r;
	CK_EQ(vr_region_new(c, "vt-hostile", 2 * P, 0, &r), 0);
	CK_EQ(vr_mark(r, 0, P), VR_INTACT);
	CK_EQ(vr_ctx_notify_pressure(c, VR_PRESSURE_CRITICAL), (ssize_t)P);
	vr_ctx_destroy(c);
}

/* sanitizer runtimes reserve address space and allocate on their own:
 * an address-space limit or an exhausted heap tests them, not us */
static void skip_under_sanitizers(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	printf("SKIP: rlimit/heap-exhaustion scenario under a sanitizer (the gcc leg runs it)\n");
	_exit(77);
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
	printf("SKIP: rlimit/heap-exhaustion scenario under a sanitizer (the gcc leg runs it)\n");
	_exit(77);
#endif
#endif
}

/* RLIMIT_NOFILE with every fd slot taken: creating a region needs one fd
 * (the memfd) and fails with -EMFILE, changing nothing; one free slot
 * makes it work; a ctx with a monitor needs its wake-up eventfd and fails
 * cleanly without it */
static void sc_nofile(void)
{
	P = vt_pg();
	struct vr_ctx *c;
	struct vr_region *r = NULL;
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0); /* trap probe done: it needs fds */
	int fds = vt_count_fds();
	struct rlimit old, rl;
	CK_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
	rl.rlim_cur = (rlim_t)fds + 32;
	rl.rlim_max = old.rlim_max;
	CK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
	int fill[64], nf = 0, f;
	while (nf < 64 && (f = dup(0)) >= 0)
		fill[nf++] = f;
	CK(nf < 64 && errno == EMFILE, "filled %d slots", nf);
	CK_EQ(vr_region_new(c, "vt-hostile", 2 * P, 0, &r), -EMFILE);
	CK(r == NULL);
	CK_EQ(vr_ctx_stat(c, VR_STAT_REGIONS), 0);
	struct vr_ctx *c2 = NULL;
	CK_EQ(vr_ctx_new(0, &c2), -EMFILE); /* the monitor's eventfd */
	CK(c2 == NULL);
	for (int i = 0; i < vt_region_fds(); i++)
		close(fill[--nf]); /* room for one region */
	CK_EQ(vr_region_new(c, "vt-hostile", 2 * P, 0, &r), 0);
	struct vr_region *r2 = NULL;
	CK_EQ(vr_region_new(c, "vt-hostile", 2 * P, 0, &r2), -EMFILE);
	CK(r2 == NULL);
	CK_EQ(vr_mark(r, 0, P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), (ssize_t)P);
	CK_EQ(vr_unmark(r, 0, P), VR_PURGED);
	vr_region_destroy(r);
	while (nf > 0)
		close(fill[--nf]);
	CK_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
	vr_ctx_destroy(c);
	CK_EQ(vt_count_fds(), fds);
	/* and all is well with the limit lifted */
	fixture(&c, &r);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), (ssize_t)(3 * P));
	vr_ctx_destroy(c);
}

static size_t mapped_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "re");
	CK(f != NULL);
	unsigned long pages = 0;
	CK(fscanf(f, "%lu", &pages) == 1);
	fclose(f);
	return pages * P;
}

/* a low RLIMIT_AS: big regions fail with -ENOMEM, small ones work */
static void sc_low_as(void)
{
	skip_under_sanitizers();
	P = vt_pg();
	struct vr_ctx *c = NULL;
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	struct rlimit old, rl;
	CK_EQ(getrlimit(RLIMIT_AS, &old), 0);
	rl.rlim_cur = mapped_bytes() + (8u << 20);
	rl.rlim_max = old.rlim_max;
	CK_EQ(setrlimit(RLIMIT_AS, &rl), 0);
	struct vr_region *r = NULL;
	CK_EQ(vr_region_new(c, "vt-hostile", 64u << 20, 0, &r), -ENOMEM);
	CK(r == NULL);
	CK_EQ(vr_ctx_stat(c, VR_STAT_REGIONS), 0);
	CK_EQ(vr_region_new(c, "vt-hostile", 4 * P, 0, &r), 0);
	CK_EQ(vr_mark(r, 0, 2 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), (ssize_t)(2 * P));
	CK_EQ(vr_unmark(r, 0, 2 * P), VR_PURGED);
	vr_ctx_destroy(c);
	CK_EQ(setrlimit(RLIMIT_AS, &old), 0);
	fixture(&c, &r);
	vr_ctx_destroy(c);
}

/* issue 13, item 4: with the heap exhausted and 40 regions, pressure and
 * explicit purges reclaim, the limit holds at every mark, and destroy
 * returns: the purge path allocates nothing */
static void sc_oom(void)
{
	skip_under_sanitizers();
	P = vt_pg();
	enum { N = 40 };
	struct vr_ctx *c;
	struct vr_region *r[N];
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	for (int i = 0; i < N; i++) {
		CK_EQ(vr_region_new(c, "vt-oom", 4 * P, 0, &r[i]), 0);
		vt_fill(vr_region_base(r[i]), 0, 4 * P, (uint64_t)i);
		/* warm each region's node slab: marking needs no malloc then */
		CK_EQ(vr_mark(r[i], 0, 4 * P), VR_INTACT);
		CK_EQ(vr_unmark(r[i], 0, 4 * P), VR_INTACT);
	}
	size_t limit = 33 * 4 * P;
	CK_EQ(vr_ctx_set_limit(c, limit), 0);

	/* exhaust the heap under an address-space limit */
	struct rlimit old, rl;
	CK_EQ(getrlimit(RLIMIT_AS, &old), 0);
	rl.rlim_cur = mapped_bytes() + (2u << 20);
	rl.rlim_max = old.rlim_max;
	CK_EQ(setrlimit(RLIMIT_AS, &rl), 0);
	void **blocks = NULL;
	size_t nb = 0;
	for (size_t sz = 1 << 16; sz >= 16; sz /= 2) {
		void *p;
		while ((p = malloc(sz)) != NULL) {
			*(void **)p = blocks;
			blocks = p;
			nb++;
		}
	}
	CK(nb > 0);
	CK(malloc(16) == NULL); /* really exhausted */

	for (int i = 0; i < N; i++) {
		int rc = vr_mark(r[i], 0, 4 * P);
		CK(rc == VR_INTACT || rc == VR_PURGED, "mark %d: %d", i, rc);
		CK(vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES) <= limit, "mark %d: %llu volatile bytes",
		   i, (unsigned long long)vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES));
	}
	CK(vr_ctx_stat(c, VR_STAT_PURGES) >= N - 33);
	uint64_t vol = vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES);
	CK_EQ(vr_ctx_notify_pressure(c, VR_PRESSURE_CRITICAL), (ssize_t)vol);
	CK_EQ(vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES), 0);
	/* unmark all, mark again, purge everything explicitly */
	for (int i = 0; i < N; i++) {
		CK_EQ(vr_unmark(r[i], 0, 4 * P), VR_PURGED);
		CK_EQ(vr_mark(r[i], 0, 2 * P), VR_INTACT);
	}
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), (ssize_t)(N * 2 * P));
	/* destroy returns while memory is still exhausted */
	for (int i = 0; i < N / 2; i++)
		vr_region_destroy(r[i]);
	CK_EQ(vr_ctx_stat(c, VR_STAT_REGIONS), N - N / 2);

	while (blocks) {
		void *next = *(void **)blocks;
		free(blocks);
		blocks = next;
	}
	CK_EQ(setrlimit(RLIMIT_AS, &old), 0);
	vr_ctx_destroy(c);
}

static const struct vt_scenario scenarios[] = {
	{ "seal_future_write", sc_seal_future_write },
	{ "seal_write_from_fd", sc_seal_write_from_fd },
	{ "no_proc_pressure", sc_no_proc_pressure },
	{ "readonly_cgroupfs", sc_readonly_cgroupfs },
	{ "nofile", sc_nofile },
	{ "low_as", sc_low_as },
	{ "oom", sc_oom },
};

static void run(const char *name)
{
	int st = vt_run_scenario(name);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
		print_message("%s: skipped\n", name);
		skip();
	}
	vt_assert_exit_ok(st);
}

#define T(name)                                                                                    \
	static void test_##name(void **state)                                                      \
	{                                                                                          \
		(void)state;                                                                       \
		run(#name);                                                                        \
	}
T(seal_future_write)
T(seal_write_from_fd)
T(no_proc_pressure)
T(readonly_cgroupfs)
T(nofile)
T(low_as)
T(oom)

int main(int argc, char **argv)
{
	int rc = vt_scenario_dispatch(argc, argv, scenarios,
				      sizeof(scenarios) / sizeof(scenarios[0]), 60);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seal_future_write),
		cmocka_unit_test(test_seal_write_from_fd),
		cmocka_unit_test(test_no_proc_pressure),
		cmocka_unit_test(test_readonly_cgroupfs),
		cmocka_unit_test(test_nofile),
		cmocka_unit_test(test_low_as),
		cmocka_unit_test(test_oom),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
