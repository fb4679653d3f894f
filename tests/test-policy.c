/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-policy.c - the monitor's pure policy (src/monitor/monitor-policy.c) and its
 * parsers and limit walk (src/monitor/monitor-platform.c), through the internal
 * static library: times are parameters, texts are strings, and the limit
 * walk runs on a scratch directory tree (the seam for cgroup files).
 */
#include "tests.h"

#include <sys/stat.h>

#include "monitor/monitor.h"

#define MiB (1ull << 20)

static void test_coalescing(void **state)
{
	(void)state;
	struct mon_policy p = { 0 };
	unsigned co = 99;
	assert_int_equal(mon_pol_take(&p, 1000, &co), VR_PRESSURE_NONE);
	assert_true(mon_pol_deadline(&p) == UINT64_MAX);
	mon_pol_raise(&p, VR_PRESSURE_MODERATE);
	assert_true(mon_pol_deadline(&p) == 0); /* due at once */
	assert_int_equal(mon_pol_take(&p, 1000, &co), VR_PRESSURE_MODERATE);
	assert_int_equal(co, 0);
	/* within the gap: pending, folded */
	mon_pol_raise(&p, VR_PRESSURE_MODERATE);
	mon_pol_raise(&p, VR_PRESSURE_MODERATE);
	assert_int_equal(mon_pol_take(&p, 1000 + MON_GAP_MS - 1, &co), VR_PRESSURE_NONE);
	assert_true(mon_pol_deadline(&p) == 1000 + MON_GAP_MS);
	assert_int_equal(mon_pol_take(&p, 1000 + MON_GAP_MS, &co), VR_PRESSURE_MODERATE);
	assert_int_equal(co, 1);
	/* CRITICAL swallows a pending MODERATE */
	mon_pol_raise(&p, VR_PRESSURE_MODERATE);
	mon_pol_raise(&p, VR_PRESSURE_CRITICAL);
	assert_int_equal(mon_pol_take(&p, 1300, &co), VR_PRESSURE_CRITICAL);
	assert_int_equal(co, 1);
	assert_int_equal(mon_pol_take(&p, 5000, &co), VR_PRESSURE_NONE);
	/* out-of-range levels are ignored */
	mon_pol_raise(&p, VR_PRESSURE_NONE);
	mon_pol_raise(&p, 7);
	assert_true(mon_pol_deadline(&p) == UINT64_MAX);
}

static void test_hold(void **state)
{
	(void)state;
	struct mon_hold h = { 0 };
	assert_false(mon_hold_update(&h, VR_PRESSURE_NONE, 0));
	assert_true(mon_hold_update(&h, VR_PRESSURE_MODERATE, 100));
	assert_false(mon_hold_update(&h, VR_PRESSURE_MODERATE, 100 + MON_REPEAT_MODERATE_MS - 1));
	assert_true(mon_hold_update(&h, VR_PRESSURE_MODERATE, 100 + MON_REPEAT_MODERATE_MS));
	assert_true(mon_hold_update(&h, VR_PRESSURE_CRITICAL, 20000)); /* a rise */
	assert_false(mon_hold_update(&h, VR_PRESSURE_CRITICAL, 20000 + MON_REPEAT_CRITICAL_MS - 1));
	assert_true(mon_hold_update(&h, VR_PRESSURE_CRITICAL, 20000 + MON_REPEAT_CRITICAL_MS));
	assert_false(mon_hold_update(&h, VR_PRESSURE_NONE, 30000));
	assert_true(mon_hold_update(&h, VR_PRESSURE_MODERATE, 30001));
}

static void test_levels(void **state)
{
	(void)state;
	assert_int_equal(mon_cg2_level(false, 100, 1, 1), VR_PRESSURE_NONE);
	assert_int_equal(mon_cg2_level(true, 97, UINT64_MAX, 100), VR_PRESSURE_CRITICAL);
	assert_int_equal(mon_cg2_level(true, 96, UINT64_MAX, 100), VR_PRESSURE_MODERATE);
	assert_int_equal(mon_cg2_level(true, 90, UINT64_MAX, 100), VR_PRESSURE_MODERATE);
	assert_int_equal(mon_cg2_level(true, 89, UINT64_MAX, 100), VR_PRESSURE_NONE);
	assert_int_equal(mon_cg2_level(true, 51, 50, UINT64_MAX), VR_PRESSURE_MODERATE);
	assert_int_equal(mon_cg2_level(true, 50, 50, UINT64_MAX), VR_PRESSURE_NONE);
	assert_int_equal(mon_cg2_level(true, UINT64_MAX - 1, UINT64_MAX, UINT64_MAX - 2),
			 VR_PRESSURE_CRITICAL); /* no overflow */
	assert_int_equal(mon_meminfo_level(74), VR_PRESSURE_NONE);
	assert_int_equal(mon_meminfo_level(75), VR_PRESSURE_MODERATE);
	assert_int_equal(mon_meminfo_level(85), VR_PRESSURE_CRITICAL);
	assert_int_equal(mon_meminfo_level(-5), VR_PRESSURE_NONE);
}

static void test_limit_lines(void **state)
{
	(void)state;
	struct mon_limit_plan pl;
	mon_limit_plan(256 * MiB, &pl);
	assert_true(pl.limit == 256 * MiB);
	assert_true(pl.threshold == 248 * MiB);
	assert_true(pl.line == 240 * MiB);
	assert_true(pl.target == 192 * MiB);
	/* order, and a margin of at least 10% of the limit under the threshold */
	assert_true(pl.target < pl.line && pl.line < pl.threshold && pl.threshold < pl.limit);
	assert_true(pl.threshold - pl.target >= pl.limit / 10);
	/* a crossing purges exactly down to the target, never below */
	assert_true(mon_limit_excess(&pl, 250 * MiB) == 58 * MiB);
	assert_true(mon_limit_excess(&pl, 192 * MiB) == 0);
	assert_true(mon_limit_excess(&pl, 10 * MiB) == 0);
	/* budget: the line minus everything that is not our volatile bytes */
	assert_true(mon_limit_budget(&pl, 200 * MiB, 150 * MiB) == 190 * MiB);
	assert_true(mon_limit_budget(&pl, 200 * MiB, 0) == 40 * MiB);
	assert_true(mon_limit_budget(&pl, 300 * MiB, 10 * MiB) == 1); /* none left */
	assert_true(mon_limit_budget(&pl, 5 * MiB, 50 * MiB) == 240 * MiB);
	/* A3: pressure waits while more than L/32 of file cache beyond the
	 * reserve is reclaimable */
	assert_true(mon_pressure_file_first(&pl, 9 * MiB));
	assert_false(mon_pressure_file_first(&pl, 8 * MiB));
	assert_false(mon_pressure_file_first(&pl, 0));
	/* tiny limits keep their order */
	mon_limit_plan(64, &pl);
	assert_true(pl.target <= pl.line && pl.line <= pl.threshold && pl.threshold <= pl.limit);
}

/* A3: the usage counted leaves out the file cache but for a reserve of
 * L/16 (two readahead windows when larger, up to L/4); v1 reads the subtree's total_ keys, v2 its own (hierarchical) */
static void test_limit_usage(void **state)
{
	(void)state;
	struct mon_limit_plan pl;
	mon_limit_plan(128 * MiB, &pl);
	assert_true(mon_limit_reclaimable(&pl, 100 * MiB) == 92 * MiB);
	assert_true(mon_limit_reclaimable(&pl, 8 * MiB) == 0);
	assert_true(mon_limit_reclaimable(&pl, 0) == 0);
	/* the reserve: two readahead windows, within [L/16, L/4] */
	assert_true(mon_file_reserve(128 * MiB, 128 * 1024) == 8 * MiB);
	assert_true(mon_file_reserve(128 * MiB, 8 * MiB) == 16 * MiB);
	assert_true(mon_file_reserve(128 * MiB, 64 * MiB) == 32 * MiB);
	assert_true(mon_file_reserve(128 * MiB, UINT64_MAX) == 32 * MiB);
	assert_true(mon_file_reserve(128 * MiB, 0) == 8 * MiB);
	pl.file_reserve = mon_file_reserve(128 * MiB, 8 * MiB);
	assert_true(mon_limit_reclaimable(&pl, 100 * MiB) == 84 * MiB);
	assert_true(mon_limit_reclaimable(&pl, 16 * MiB) == 0);
	/* read_ahead_kb of each device in a sysfs-like directory: the
	 * largest, in bytes; unreadable or malformed entries skipped */
	char dir[] = "/tmp/vt-readahead-XXXXXX";
	assert_non_null(mkdtemp(dir));
	assert_true(mon_readahead_max(dir) == 0);
	static const struct {
		const char *dev, *text;
	} devs[] = { { "vda", "8192\n" }, { "loop0", "128\n" },     { "sr0", "junk\n" },
		     { "md0", "-5\n" },   { "nvme0n1", "16384\n" }, { "zram0", "" } };
	char path[512];
	for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, devs[i].dev);
		assert_int_equal(mkdir(path, 0700), 0);
		snprintf(path, sizeof(path), "%s/%s/queue", dir, devs[i].dev);
		assert_int_equal(mkdir(path, 0700), 0);
		snprintf(path, sizeof(path), "%s/%s/queue/read_ahead_kb", dir, devs[i].dev);
		FILE *f = fopen(path, "w");
		assert_non_null(f);
		fputs(devs[i].text, f);
		fclose(f);
	}
	snprintf(path, sizeof(path), "%s/noqueue", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	uint64_t ra = mon_readahead_max(dir);
	for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s/queue/read_ahead_kb", dir, devs[i].dev);
		unlink(path);
		snprintf(path, sizeof(path), "%s/%s/queue", dir, devs[i].dev);
		rmdir(path);
		snprintf(path, sizeof(path), "%s/%s", dir, devs[i].dev);
		rmdir(path);
	}
	snprintf(path, sizeof(path), "%s/noqueue", dir);
	rmdir(path);
	assert_int_equal(rmdir(dir), 0);
	assert_true(ra == 16384 * 1024ull);
	const char *v1 = "cache 1\ninactive_file 4096\nactive_file 4096\n"
			 "total_inactive_file 1000\ntotal_active_file 24\ntotal_shmem 7\n";
	assert_true(mon_stat_file_cache(v1, true) == 1024);
	const char *v2 = "anon 5\nfile 9\nshmem 3\ninactive_anon 2\ninactive_file 300\n"
			 "active_file 12\n";
	assert_true(mon_stat_file_cache(v2, false) == 312);
	assert_true(mon_stat_file_cache("anon 5\n", false) == 0); /* never less than raw */
	uint64_t own = 0;
	const char *st = "Name:\tx\nVmRSS:\t  900 kB\nRssAnon:\t  300 kB\nRssFile:\t"
			 "  500 kB\nRssShmem:\t  100 kB\n";
	assert_true(mon_status_own(st, &own));
	assert_true(own == 400 * 1024); /* anon + shmem, not file */
	assert_false(mon_status_own("Name:\tx\nRssAnon:\t1 kB\n", &own));
}

static void test_limit_interval(void **state)
{
	(void)state;
	struct mon_limit_plan pl;
	mon_limit_plan(256 * MiB, &pl);
	/* at or above the threshold: as fast as allowed */
	assert_int_equal(mon_limit_interval(&pl, 250 * MiB, 200 * MiB, 5), MON_LIMIT_MIN_MS);
	/* the time to fill the distance to the threshold at 1 MiB/ms */
	assert_int_equal(mon_limit_interval(&pl, 238 * MiB, 100 * MiB, 5), 10);
	assert_int_equal(mon_limit_interval(&pl, 0, 100 * MiB, 5), 248);
	mon_limit_plan(1024 * MiB, &pl);
	assert_int_equal(mon_limit_interval(&pl, 0, 100 * MiB, 5), MON_LIMIT_MAX_MS);
	mon_limit_plan(256 * MiB, &pl);
	/* the interval shrinks as headroom shrinks */
	unsigned prev = UINT32_MAX;
	for (uint64_t u = 0; u < 256 * MiB; u += 8 * MiB) {
		unsigned ms = mon_limit_interval(&pl, u, 0, 0);
		assert_true(ms <= prev);
		assert_true(ms >= MON_LIMIT_MIN_MS && ms <= MON_LIMIT_MAX_MS);
		prev = ms;
	}
	/* standing still backs off, bounded to about twice the fill time */
	unsigned ms = mon_limit_interval(&pl, 238 * MiB, 238 * MiB, 10);
	assert_int_equal(ms, 20);
	ms = mon_limit_interval(&pl, 238 * MiB, 238 * MiB, ms);
	assert_true(ms <= 2 * 10 + 8 * MON_LIMIT_MIN_MS);
}

static void test_parse(void **state)
{
	(void)state;
	uint64_t v;
	assert_true(mon_parse_limit("max\n", &v) && v == UINT64_MAX);
	assert_true(mon_parse_limit("9223372036854771712\n", &v) && v == UINT64_MAX);
	assert_true(mon_parse_limit("268435456\n", &v) && v == 256 * MiB);
	assert_false(mon_parse_limit("", &v));
	assert_false(mon_parse_limit("x1", &v));
	assert_true(mon_parse_bytes("off") == 0);
	assert_true(mon_parse_bytes("128m") == 128 * MiB);
	assert_true(mon_parse_bytes("2G") == 2048 * MiB);
	assert_true(mon_parse_bytes("4096") == 4096);
	assert_true(mon_parse_bytes("12x") == UINT64_MAX);
	assert_true(mon_parse_bytes("0") == UINT64_MAX);
	assert_true(mon_parse_bytes("-5") == UINT64_MAX);
	assert_true(mon_parse_bytes("") == UINT64_MAX);
	assert_true(mon_parse_bytes(NULL) == UINT64_MAX);
	assert_true(mon_parse_bytes("99999999999999999999g") == UINT64_MAX);
	assert_true(mon_find_key("high 3\nmax 7\noom 1\n", "max", &v) && v == 7);
	assert_true(mon_find_key("MemTotal:  100 kB\n", "MemTotal", &v) && v == 100);
	assert_false(mon_find_key("maxi 3\n", "max", &v));
}

static const char proc_cgroup[] = "9:name=systemd:/\n"
				  "4:memory:/process_api/abc\n"
				  "3:cpuset:/\n"
				  "0::/\n";
static const char mountinfo[] =
	"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
	"32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
	"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
	"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

static void test_discovery(void **state)
{
	(void)state;
	char *dir, *mnt, *p = mon_cg2_path(proc_cgroup);
	assert_string_equal(p, "/");
	free(p);
	assert_null(mon_cg2_path("4:memory:/x\n"));
	assert_int_equal(mon_cg1_parse_dir(proc_cgroup, mountinfo, &dir, &mnt), 0);
	assert_string_equal(dir, "/sys/fs/cgroup/memory/process_api/abc");
	assert_string_equal(mnt, "/sys/fs/cgroup/memory");
	free(dir);
	free(mnt);
	/* a namespaced mount whose root is a sub-path; controllers combined */
	assert_int_equal(mon_cg1_parse_dir("5:cpu,memory:/ns/app\n",
					   "40 1 0:9 /ns /cg rw - cgroup cgroup rw,cpu,memory\n",
					   &dir, &mnt),
			 0);
	assert_string_equal(dir, "/cg/app");
	free(dir);
	free(mnt);
	/* "memory" must be a whole word; no v1 memory hierarchy */
	assert_int_equal(mon_cg1_parse_dir("5:memoryx:/a\n", mountinfo, &dir, &mnt), -ENOENT);
	assert_int_equal(mon_cg1_parse_dir(proc_cgroup, "41 31 0:38 / /u rw - cgroup2 cgroup2 rw\n",
					   &dir, &mnt),
			 -ENOENT);
	assert_null(dir);
	assert_null(mnt);
}

static void put(const char *dir, const char *name, const char *text)
{
	char p[PATH_MAX * 2];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_walk(void **state)
{
	(void)state;
	char top[] = "/tmp/vt-policy-XXXXXX", a[64], b[64];
	assert_non_null(mkdtemp(top));
	snprintf(a, sizeof(a), "%s/a", top);
	snprintf(b, sizeof(b), "%s/a/b", top);
	assert_int_equal(mkdir(a, 0700), 0);
	assert_int_equal(mkdir(b, 0700), 0);
	static const char *const v1[] = { "memory.limit_in_bytes", NULL };
	static const char *const v2[] = { "memory.max", "memory.high", NULL };
	char *where;

	/* nothing anywhere */
	assert_true(mon_walk_limit(top, b, v1, &where) == UINT64_MAX);
	assert_null(where);
	/* the root's "unlimited" value, a limit on the middle: the middle */
	put(top, "memory.limit_in_bytes", "9223372036854771712\n");
	put(a, "memory.limit_in_bytes", "1000\n");
	put(b, "memory.limit_in_bytes", "9223372036854771712\n");
	assert_true(mon_walk_limit(top, b, v1, &where) == 1000);
	assert_string_equal(where, a);
	free(where);
	/* the smallest wins, wherever it is */
	put(top, "memory.limit_in_bytes", "500\n");
	assert_true(mon_walk_limit(top, b, v1, &where) == 500);
	assert_string_equal(where, top);
	free(where);
	/* a tie: the ancestor, whose usage covers the child's and its
	 * siblings' (the child's usage missed a sibling's memory) */
	put(a, "memory.limit_in_bytes", "1000\n");
	put(b, "memory.limit_in_bytes", "1000\n");
	put(top, "memory.limit_in_bytes", "9223372036854771712\n");
	assert_true(mon_walk_limit(top, b, v1, &where) == 1000);
	assert_string_equal(where, a);
	free(where);
	put(top, "memory.limit_in_bytes", "500\n");
	/* v2: max and high both count, "max" is none */
	put(b, "memory.max", "max\n");
	put(b, "memory.high", "700\n");
	put(a, "memory.max", "900\n");
	assert_true(mon_walk_limit(top, b, v2, &where) == 700);
	assert_string_equal(where, b);
	free(where);
	/* a limit of 0 is the tightest there is, not "none" (0 means none
	 * to the callers): it reads as 1 byte */
	put(a, "memory.high", "0\n");
	assert_true(mon_walk_limit(top, b, v2, &where) == 1);
	assert_string_equal(where, a);
	free(where);
	put(a, "memory.high", "max\n");
	/* a trailing slash on top; a dir outside top walks nothing */
	char topslash[64];
	snprintf(topslash, sizeof(topslash), "%s/", top);
	assert_true(mon_walk_limit(topslash, b, v1, NULL) == 500);
	assert_true(mon_walk_limit(b, top, v1, NULL) == UINT64_MAX);
	assert_true(mon_walk_limit("/tmp/vt-policy-nothere", b, v1, NULL) == UINT64_MAX);

	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
	assert_int_equal(system(cmd), 0);
}

/* cgroup v2 memory.events is a kernfs file: each change is reported by
 * poll() as POLLERR | POLLPRI (fs/kernfs/file.c, kernfs_generic_poll).
 * That is the limit watcher's event, not the loss of its source: the
 * watcher must go on (it used to be stopped for good at the first
 * "high" or "max" event).  No limit applies here (kind 0), so the
 * observation touches no ctx. */
static void test_limit_events_pollerr(void **state)
{
	(void)state;
	char path[] = "/tmp/vt-policy-events-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "high 1\nmax 0\n", 13), 13);
	struct vr_monitor m;
	memset(&m, 0, sizeof(m));
	m.lim = (struct mon_limit){
		.usage_fd = -1, .stat_fd = -1, .thr_efd = -1, .events_fd = fd, .gate_stat_fd = -1
	};
	m.lim.recheck_ms = UINT64_MAX / 2; /* no re-detection in this call */
	assert_true(mon_src_limit.ready(&m, 1, POLLPRI | POLLERR, 1));
	assert_int_equal(m.lim.events_fd, fd); /* still watched */
	close(fd);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_coalescing),     cmocka_unit_test(test_hold),
		cmocka_unit_test(test_levels),         cmocka_unit_test(test_limit_lines),
		cmocka_unit_test(test_limit_interval), cmocka_unit_test(test_parse),
		cmocka_unit_test(test_limit_usage),    cmocka_unit_test(test_discovery),
		cmocka_unit_test(test_walk),           cmocka_unit_test(test_limit_events_pollerr),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
