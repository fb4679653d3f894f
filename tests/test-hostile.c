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
 *   - RLIMIT_NOFILE nearly exhausted and RLIMIT_AS low: every call either
 *     works or fails with a negative errno, nothing leaks, and the library
 *     works again once the limit is lifted.
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

static void sc_nofile(void)
{
	P = vt_pg();
	int fds = vt_count_fds();
	struct rlimit old, rl;
	CK_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
	int open_now = fds;
	int ok_ctx = 0, ok_region = 0;
	for (int spare = 0; spare <= 4; spare++) {
		rl.rlim_cur = (rlim_t)(open_now + 3 + spare);
		rl.rlim_max = old.rlim_max;
		CK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
		struct vr_ctx *c = NULL;
		int rc = vr_ctx_new(0, &c);
		CK(rc == 0 || (rc < 0 && rc > -4096), "rc=%d", rc);
		if (rc == 0) {
			ok_ctx++;
			struct vr_region *r = NULL;
			rc = vr_region_new(c, "vt-hostile", 2 * P, 0, &r);
			CK(rc == 0 || rc == -EMFILE || rc == -ENFILE, "rc=%d", rc);
			if (rc == 0) {
				ok_region++;
				CK_EQ(vr_mark(r, 0, P), VR_INTACT);
				CK_EQ(vr_ctx_purge(c, SIZE_MAX), (ssize_t)P);
				CK_EQ(vr_unmark(r, 0, P), VR_PURGED);
			}
			vr_ctx_destroy(c);
		}
		CK_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
		CK_EQ(vt_count_fds(), fds);
	}
	printf("nofile: %d ctx and %d regions created across 5 limits\n", ok_ctx, ok_region);
	/* and all is well with the limit lifted */
	struct vr_ctx *c;
	struct vr_region *r;
	fixture(&c, &r);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), (ssize_t)(3 * P));
	vr_ctx_destroy(c);
	CK_EQ(vt_count_fds(), fds);
}

static void sc_low_as(void)
{
	P = vt_pg();
	struct rlimit old, rl;
	CK_EQ(getrlimit(RLIMIT_AS, &old), 0);
	/* room for what is mapped now plus a little: thread stacks and big
	 * regions cannot be mapped */
	FILE *f = fopen("/proc/self/statm", "re");
	CK(f != NULL);
	unsigned long pages = 0;
	CK(fscanf(f, "%lu", &pages) == 1);
	fclose(f);
	rl.rlim_cur = pages * P + (4u << 20);
	rl.rlim_max = old.rlim_max;
	CK_EQ(setrlimit(RLIMIT_AS, &rl), 0);
	struct vr_ctx *c = NULL;
	int rc = vr_ctx_new(0, &c);
	CK(rc == 0 || (rc < 0 && rc > -4096), "ctx rc=%d", rc);
	if (rc == 0) {
		struct vr_region *r = NULL;
		rc = vr_region_new(c, "vt-hostile", 64u << 20, 0, &r);
		CK_EQ(rc, -ENOMEM);
		rc = vr_region_new(c, "vt-hostile", 4 * P, 0, &r);
		CK(rc == 0 || rc == -ENOMEM, "rc=%d", rc);
		if (rc == 0) {
			CK_EQ(vr_mark(r, 0, 2 * P), VR_INTACT);
			CK_EQ(vr_ctx_purge(c, SIZE_MAX), (ssize_t)(2 * P));
		}
		vr_ctx_destroy(c);
	}
	CK_EQ(setrlimit(RLIMIT_AS, &old), 0);
	struct vr_region *r;
	fixture(&c, &r);
	vr_ctx_destroy(c);
}

static const struct vt_scenario scenarios[] = {
	{ "seal_future_write", sc_seal_future_write },
	{ "seal_write_from_fd", sc_seal_write_from_fd },
	{ "no_proc_pressure", sc_no_proc_pressure },
	{ "readonly_cgroupfs", sc_readonly_cgroupfs },
	{ "nofile", sc_nofile },
	{ "low_as", sc_low_as },
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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
