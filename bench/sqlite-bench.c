// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * sqlite-bench.c - the SQLite workload of tests/vt-sqlite.h timed on
 * SQLite's default page cache and on libvrange-sqlite's (S38), in the same
 * run: each run in a child process of its own (a page cache is
 * process-global), the caches alternating, ROUNDS rounds; prints each
 * cache's median time, the ratio to the default cache's, and whether
 * every query's rows were identical.  Nothing is asserted about time; the
 * exit status is 1 only when results differ or a run fails.
 *
 *   build/bench/sqlite-bench [ROUNDS [SCALE]]   (default 3 rounds, scale 2)
 *
 * Caches: default (SQLite's), vrange (this library, no purging), vrange+purge
 * (a thread purging the ctx continuously: every released page is lost).
 *
 *   build/bench/sqlite-bench --limit MIB [ROUNDS [DB_MIB]]   (3 rounds, 100 MB)
 *
 * Under a memory limit: tests/vt-sqlite.h's big database (DB_MIB MiB, a
 * cache_size of 256 MiB: inserts, an index, updates, scans, a delete,
 * VACUUM, an integrity check), each cache without a limit and in a child
 * memory cgroup limited to MIB MiB (nested in this process's own, removed
 * at the end; exit 77 without one): default, vrange, vrange@limit,
 * default@limit (OOM-killed when its cache does not fit: reported as
 * such), and default-2MiB@limit (SQLite's own default cache_size, what an
 * application can do by hand).  Besides each median, the median over the
 * rounds of vrange@limit's time over vrange's in the same round.
 */
#include "vt-sqlite.h"
#include "vt-cgroup.h"

#include <errno.h>
#include <sched.h>
#include <sys/wait.h>
#include <time.h>

#include <vrange-sqlite.h>

static const char *const caches[] = { "default", "vrange", "vrange+purge" };
#define NCACHES (sizeof(caches) / sizeof(caches[0]))

/* --limit: the caches (kind: 0 default, 1 vrange), with or without the
 * cgroup, and the cache_size (KiB, 0: the big database's 256 MiB) */
static const struct {
	const char *name;
	unsigned kind;
	bool in_cg;
	unsigned kib;
} lcaches[] = {
	{ "default", 0, false, 0 },
	{ "vrange", 1, false, 0 },
	{ "vrange@limit", 1, true, 0 },
	{ "default@limit", 0, true, 0 },
	{ "default-2MiB@limit", 0, true, 2048 },
};
#define NLCACHES (sizeof(lcaches) / sizeof(lcaches[0]))

static volatile int stop;

static void *purge_loop(void *arg)
{
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		vr_ctx_purge(arg, SIZE_MAX);
		sched_yield();
	}
	return NULL;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* the child: runs the workload on cache @c, writes time, count, hashes */
static int child(unsigned c, unsigned scale, int fd)
{
	struct vs_run r = { .scale = scale };
	const char *cg = getenv("SB_CG"), *big = getenv("SB_BIG_MIB");
	if (cg && *cg) {
		struct vt_cg g;
		snprintf(g.dir, sizeof(g.dir), "%s", cg);
		VS_CK(vt_cg_enter(&g) == 0, "entering cgroup %s: %s", cg, strerror(errno));
	}
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(r.dir, sizeof(r.dir), "%s/sqlite-bench-%d-XXXXXX", tmp, (int)getpid());
	VS_CK(mkdtemp(r.dir), "mkdtemp: %s", strerror(errno));
	struct vr_ctx *ctx = NULL;
	pthread_t th;
	if (c > 0) {
		VS_CK(vr_ctx_new(0, &ctx) == 0, "vr_ctx_new");
		VS_CK(vr_sqlite_pcache_install(ctx) == 0, "install");
	}
	if (c == 2)
		VS_CK(pthread_create(&th, NULL, purge_loop, ctx) == 0, "pthread_create");
	double t0 = now();
	if (big)
		vs_big_db(&r, (unsigned)atoi(big));
	else
		vs_workload(&r);
	double t = now() - t0;
	if (c == 2) {
		__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
		pthread_join(th, NULL);
	}
	sqlite3_shutdown();
	vr_ctx_destroy(ctx);
	rmdir(r.dir);
	VS_CK(write(fd, &t, sizeof(t)) == sizeof(t) &&
		      write(fd, &r.n, sizeof(r.n)) == sizeof(r.n) &&
		      write(fd, r.h, r.n * sizeof(*r.h)) == (ssize_t)(r.n * sizeof(*r.h)),
	      "write");
	free(r.h);
	return 0;
}

/* runs cache @c once: its workload time; its hashes in r.  With
 * @may_die, a child killed by a signal (the OOM killer) returns -1 */
static double run_as(const char *name, unsigned c, unsigned scale, struct vs_run *r, bool may_die)
{
	int p[2];
	VS_CK(pipe(p) == 0, "pipe");
	pid_t pid = fork();
	VS_CK(pid >= 0, "fork");
	if (pid == 0) {
		char a[3][16];
		close(p[0]);
		snprintf(a[0], sizeof(a[0]), "%u", c);
		snprintf(a[1], sizeof(a[1]), "%u", scale);
		snprintf(a[2], sizeof(a[2]), "%d", p[1]);
		execl("/proc/self/exe", "sqlite-bench", "--child", a[0], a[1], a[2], (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	FILE *f = fdopen(p[0], "r");
	double t = -1;
	size_t n = 0;
	bool ok = f && fread(&t, sizeof(t), 1, f) == 1 && fread(&n, sizeof(n), 1, f) == 1;
	r->n = 0;
	for (size_t i = 0; ok && i < n; i++) {
		uint64_t h;
		ok = fread(&h, sizeof(h), 1, f) == 1;
		vs_add(r, h);
	}
	if (f)
		fclose(f);
	int st;
	VS_CK(waitpid(pid, &st, 0) == pid, "waitpid");
	if (may_die && WIFSIGNALED(st))
		return -1;
	VS_CK(ok && WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: child status 0x%x", name, st);
	return t;
}

static double run(unsigned c, unsigned scale, struct vs_run *r)
{
	return run_as(caches[c], c, scale, r, false);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static bool same_as(const struct vs_run *r, const struct vs_run *ref)
{
	return r->n == ref->n && memcmp(r->h, ref->h, r->n * sizeof(*r->h)) == 0;
}

static struct vt_cg cg; /* --limit's: removed at exit, also on failure */

static void cg_cleanup(void)
{
	vt_cg_remove(&cg);
}

/* --limit MIB [ROUNDS [DB_MIB]] */
static int limit_mode(int argc, char **argv)
{
	unsigned mib = argc > 2 ? (unsigned)atoi(argv[2]) : 0;
	unsigned rounds = argc > 3 ? (unsigned)atoi(argv[3]) : 3;
	unsigned db = argc > 4 ? (unsigned)atoi(argv[4]) : 100;
	if (!mib || !rounds || rounds > 50 || !db) {
		fprintf(stderr, "usage: %s --limit MIB [ROUNDS [DB_MIB]]\n", argv[0]);
		return 2;
	}
	const char *why = NULL;
	if (vt_cg_create(&cg, (uint64_t)mib << 20, &why) != 0) {
		fprintf(stderr, "sqlite-bench --limit: skipped: %s\n", why);
		return 77;
	}
	atexit(cg_cleanup);
	char dbs[16];
	snprintf(dbs, sizeof(dbs), "%u", db);
	VS_CK(setenv("SB_BIG_MIB", dbs, 1) == 0, "setenv");
	double t[NLCACHES][50], ratio[50];
	unsigned killed[NLCACHES] = { 0 };
	bool same[NLCACHES];
	struct vs_run ref = { 0 }, r = { 0 };
	for (unsigned c = 0; c < NLCACHES; c++)
		same[c] = true;
	for (unsigned i = 0; i < rounds; i++) {
		for (unsigned c = 0; c < NLCACHES; c++) {
			VS_CK(setenv("SB_CG", lcaches[c].in_cg ? cg.dir : "", 1) == 0, "setenv");
			unsetenv("VT_BIG_CACHE_KIB");
			if (lcaches[c].kib) {
				char kib[16];
				snprintf(kib, sizeof(kib), "%u", lcaches[c].kib);
				VS_CK(setenv("VT_BIG_CACHE_KIB", kib, 1) == 0, "setenv");
			}
			struct vs_run *out = c == 0 && i == 0 ? &ref : &r;
			t[c][i] =
				run_as(lcaches[c].name, lcaches[c].kind, 1, out, lcaches[c].in_cg);
			if (t[c][i] < 0)
				killed[c]++;
			else if (out == &r)
				same[c] = same[c] && same_as(&r, &ref);
		}
		ratio[i] = t[2][i] / t[1][i];
	}
	unsetenv("SB_CG");
	printf("sqlite-bench --limit: %u MiB cgroup, a %u MB database with a 256 MiB cache_size, "
	       "%u rounds, %zu queries per run\n",
	       mib, db, rounds, ref.n);
	printf("%-20s %10s %8s %10s\n", "cache", "median s", "ratio", "identical");
	double base = 0;
	bool all = true;
	for (unsigned c = 0; c < NLCACHES; c++) {
		if (killed[c] == rounds) {
			printf("%-20s %10s %8s %10s  (OOM-killed %u of %u)\n", lcaches[c].name, "-",
			       "-", "-", killed[c], rounds);
			continue;
		}
		/* the killed runs (-1) sort first: the median of the others */
		qsort(t[c], rounds, sizeof(double), cmp_double);
		double med = t[c][killed[c] + (rounds - killed[c]) / 2];
		if (c == 0)
			base = med;
		all = all && same[c];
		printf("%-20s %10.3f %8.3f %10s", lcaches[c].name, med, med / base,
		       same[c] ? "yes" : "NO");
		if (killed[c])
			printf("  (OOM-killed %u of %u)", killed[c], rounds);
		printf("\n");
	}
	VS_CK(killed[2] == 0, "vrange@limit was killed");
	qsort(ratio, rounds, sizeof(double), cmp_double);
	printf("SUMMARY: vrange@limit/vrange in the same round: median %.3f (%.3f-%.3f), "
	       "identical results: %s\n",
	       ratio[rounds / 2], ratio[0], ratio[rounds - 1], all ? "yes" : "NO");
	free(ref.h);
	free(r.h);
	return all ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "--child") == 0)
		return child((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]), atoi(argv[4]));
	if (argc > 1 && strcmp(argv[1], "--limit") == 0)
		return limit_mode(argc, argv);
	unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 3;
	unsigned scale = argc > 2 ? (unsigned)atoi(argv[2]) : 2;
	if (!rounds || !scale || rounds > 50) {
		fprintf(stderr, "usage: %s [ROUNDS [SCALE]]\n", argv[0]);
		return 2;
	}
	double t[NCACHES][50];
	struct vs_run ref = { 0 }, r = { 0 };
	bool same[NCACHES] = { true, true, true };
	for (unsigned i = 0; i < rounds; i++) {
		for (unsigned c = 0; c < NCACHES; c++) {
			struct vs_run *out = c == 0 && i == 0 ? &ref : &r;
			t[c][i] = run(c, scale, out);
			if (out == &r)
				same[c] = same[c] && same_as(&r, &ref);
		}
	}
	printf("sqlite-bench: %u rounds, scale %u, %zu queries per run\n", rounds, scale, ref.n);
	printf("%-14s %10s %8s %10s\n", "cache", "median s", "ratio", "identical");
	double base = 0;
	for (unsigned c = 0; c < NCACHES; c++) {
		qsort(t[c], rounds, sizeof(double), cmp_double);
		double med = t[c][rounds / 2];
		if (c == 0)
			base = med;
		printf("%-14s %10.3f %8.3f %10s\n", caches[c], med, med / base,
		       same[c] ? "yes" : "NO");
	}
	bool all = same[0] && same[1] && same[2];
	printf("SUMMARY: vrange/default %.3f, identical results: %s\n",
	       (rounds ? t[1][rounds / 2] : 0) / base, all ? "yes" : "NO");
	free(ref.h);
	free(r.h);
	return all ? 0 : 1;
}
