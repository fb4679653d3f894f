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
 */
#include "vt-sqlite.h"

#include <errno.h>
#include <sched.h>
#include <sys/wait.h>
#include <time.h>

#include <vrange-sqlite.h>

static const char *const caches[] = { "default", "vrange", "vrange+purge" };
#define NCACHES (sizeof(caches) / sizeof(caches[0]))

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

/* runs cache @c once: its workload time; its hashes in r */
static double run(unsigned c, unsigned scale, struct vs_run *r)
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
	VS_CK(ok && WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: child status 0x%x", caches[c], st);
	return t;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "--child") == 0)
		return child((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]), atoi(argv[4]));
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
				same[c] = same[c] && r.n == ref.n &&
					  memcmp(r.h, ref.h, r.n * sizeof(*r.h)) == 0;
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
