// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * test-sqlite.c - libvrange-sqlite (S38): SQLite on this page cache gives
 * the same results as on its default one.
 *
 * The workload of vt-sqlite.h (every query's rows hashed, PRAGMA
 * integrity_check) runs in child processes, since a page cache is
 * process-global: once on SQLite's default cache, then on this one
 *   vrange  plainly (and the install rules: -EBUSY once SQLite runs, a ctx
 *           of its own with NULL, a bad VRANGE_SQLITE_RESERVE or _SHARE)
 *   purge   while a thread purges the ctx continuously
 *   limit   with the ctx's volatile bytes capped at 16 pages
 *           (vr_ctx_set_limit: unpins purge the oldest)
 *   spill   under a memory limit just above the process's own memory
 *           (VRANGE_MEMORY_LIMIT): the budget is spent, createFlag 1 is
 *           answered "no page" and SQLite spills
 *   tiny    the same under a limit of 99 bytes (VRANGE_MEMORY_LIMIT=99),
 *           whose reserve once rounded to 0
 * and every hash of every run must equal the default cache's.
 *
 * test-sqlite --cgroup (the test sqlite-cgroup) is the cgroup mode: a
 * database of VT_BIG_MIB (32) MiB with a cache_size of 256 MiB, in a
 * child memory cgroup nested in the test's own, limited to VT_BIG_LIMIT
 * (24) MiB, must complete with the results of SQLite's default cache (run
 * outside the cgroup, where it needs no limit).  It failed before the
 * cache answered xPagecount "full" after a refusal: VACUUM's copy, whose
 * spill size is the main database's cache_size, never spilled and its
 * dirty pages grew until the cgroup OOM-killed the process.  Without a
 * writable memory cgroup it exits 77 (skipped); the cgroup is removed
 * also when the run fails.  Each mode also checks that the cache did what
 * the mode is about (pages made in objects, purged pages seen as misses, refusals), from the caches'
 * counters (sqlite/pcache.h).  VT_SQLITE_ONLY=MODE runs one mode.
 * VT_SQLITE_TABLE=1 adds the default cache in the cgroup (it may be
 * OOM-killed: reported) and this one outside it; with VT_BIG_FIT_KIB=N
 * also the default cache in the cgroup with a cache_size of N KiB (tuned
 * by hand to fit the limit: what an application can do without this
 * cache).  VT_BIG_CACHE_KIB sets every run's cache_size (default 256 MiB).
 *
 * test-sqlite --methods (the test sqlite-methods) calls the methods
 * directly, in this process: a page is an object with its entry in the
 * side-car, xShrink purges only its cache's group, a purge by another
 * thread is dropped through the purge handler without a lookup, createFlag
 * 0/1/2, xRekey, xTruncate, bPurgeable 0, a re-made page's extra zeroed.
 */
#include "tests.h"
#include "vt-cgroup.h"
#include "vt-sqlite.h"

#include <sched.h>

#include "pcache.h"
#include <vrange-sqlite.h>

/* the modes after "default"; the last ones (where nearly every unpin
 * purges: a system call each) run the light workload, compared with a
 * light run on the default cache */
static const char *const modes[] = { "vrange", "purge", "limit", "spill", "tiny" };
#define LIGHT_FROM 2
#define BIG_MIB (getenv("VT_BIG_MIB") ? (unsigned)atoi(getenv("VT_BIG_MIB")) : 32)
#define BIG_LIMIT                                                                                  \
	(getenv("VT_BIG_LIMIT") ? strtoull(getenv("VT_BIG_LIMIT"), NULL, 0) << 20 : 24ull << 20)

struct purger {
	struct vr_ctx *ctx;
	volatile int stop;
	uint64_t calls;
};

static void *purge_loop(void *arg)
{
	struct purger *p = arg;
	while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
		CK(vr_ctx_purge(p->ctx, SIZE_MAX) >= 0);
		p->calls++;
		sched_yield();
	}
	return NULL;
}

/* VT_SQLITE_TRACE=1: the ctx's view of the limit every 250 ms */
static void *trace_loop(void *arg)
{
	struct vr_ctx *ctx = arg;
	for (;;) {
		fprintf(stderr,
			"trace: usage %" PRIu64 " file %" PRIu64 " budget %" PRIu64
			" volatile %" PRIu64 " purged %" PRIu64 " footprint %" PRIu64
			" (MiB); purges %" PRIu64 " by limit events %" PRIu64
			" pressure events %" PRIu64 "\n",
			vr_ctx_stat(ctx, VR_STAT_LIMIT_USAGE) >> 20,
			vr_ctx_stat(ctx, VR_STAT_LIMIT_FILE_CACHE) >> 20,
			vr_ctx_stat(ctx, VR_STAT_BUDGET) >> 20,
			vr_ctx_stat(ctx, VR_STAT_VOLATILE_BYTES) >> 20,
			vr_ctx_stat(ctx, VR_STAT_PURGED_BYTES) >> 20,
			vr_ctx_stat(ctx, VR_STAT_FOOTPRINT) >> 20, vr_ctx_stat(ctx, VR_STAT_PURGES),
			vr_ctx_stat(ctx, VR_STAT_LIMIT_PURGES),
			vr_ctx_stat(ctx, VR_STAT_PRESSURE_EVENTS));
		usleep(250000);
	}
	return NULL;
}

static void print_stats(const char *mode, const struct vsq_stats *s, struct vr_ctx *ctx)
{
	fprintf(stderr,
		"%s: fetches %" PRIu64 " hits %" PRIu64 " purged %" PRIu64 " created %" PRIu64
		" recycled %" PRIu64 " spared %" PRIu64 " pooled %" PRIu64
		" refused(budget) %" PRIu64 " refused(pinned) %" PRIu64 " refused(share) %" PRIu64
		"; ctx purges %" PRIu64 "; largest cache %" PRIu64 " KiB\n",
		mode, s->fetches, s->hits, s->purged, s->created, s->recycled, s->spared, s->pooled,
		s->refused_budget, s->refused_pinned, s->refused_share,
		vr_ctx_stat(ctx, VR_STAT_PURGES), vsq_peak_bytes() >> 10);
}

/* the install rules that need a process of their own */
static void check_install_rules(struct vr_ctx *ctx)
{
	/* a caller's ctx is forgotten at sqlite3_shutdown: install again */
	CK(sqlite3_initialize() == SQLITE_MISUSE);
	CK(vr_sqlite_pcache_install(ctx) == 0);
	/* SQLite runs: nothing is installed */
	CK(sqlite3_initialize() == SQLITE_OK);
	CK(vr_sqlite_pcache_install(ctx) == -EBUSY);
	CK(sqlite3_shutdown() == SQLITE_OK);
	/* doc/bad-input.md, libvrange-sqlite */
	static const char *const bad[][2] = {
		{ "VRANGE_SQLITE_RESERVE", "51" },  { "VRANGE_SQLITE_RESERVE", "-1" },
		{ "VRANGE_SQLITE_RESERVE", "12%" }, { "VRANGE_SQLITE_SHARE", "101" },
		{ "VRANGE_SQLITE_SHARE", "12%" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CK(setenv(bad[i][0], bad[i][1], 1) == 0);
		CK(vr_sqlite_pcache_install(ctx) == -EINVAL, "%s=%s taken", bad[i][0], bad[i][1]);
		CK(unsetenv(bad[i][0]) == 0);
	}
	/* empty: the defaults.  NULL: a ctx of its own, gone at
	 * sqlite3_shutdown (ASan: no leak) */
	CK(setenv("VRANGE_SQLITE_RESERVE", "", 1) == 0 &&
	   setenv("VRANGE_SQLITE_SHARE", "", 1) == 0);
	CK(vr_sqlite_pcache_install(NULL) == 0);
	CK(unsetenv("VRANGE_SQLITE_RESERVE") == 0 && unsetenv("VRANGE_SQLITE_SHARE") == 0);
	struct vsq_stats before, after;
	vsq_stats_get(&before);
	sqlite3 *db = vs_open("");
	vs_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1), (2)");
	CK(vs_hash_query(db, "SELECT sum(x) FROM t") != 0);
	sqlite3_close(db);
	vsq_stats_get(&after);
	CK(after.created > before.created, "the own ctx's cache made no page");
	CK(sqlite3_shutdown() == SQLITE_OK);
}

static int child(const char *mode, int fd)
{
	struct vs_run r = { .scale = 1, .light = strncmp(mode, "light", 5) == 0 };
	bool big = strncmp(mode, "big", 3) == 0;
	if (r.light)
		mode += 5;
	if (big)
		mode += 3;
	if (getenv("VT_SQLITE_CG")) {
		struct vt_cg cg;
		snprintf(cg.dir, sizeof(cg.dir), "%s", getenv("VT_SQLITE_CG"));
		CK(vt_cg_enter(&cg) == 0);
	}
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(r.dir, sizeof(r.dir), "%s/vt-sqlite-%d-XXXXXX", tmp, (int)getpid());
	CK(mkdtemp(r.dir));
	bool ours = strcmp(mode, "-default") != 0 && strcmp(mode, "default") != 0;
	if (*mode == '-')
		mode++;
	struct vr_ctx *ctx = NULL;
	if (strcmp(mode, "spill") == 0) {
		char lim[32];
		snprintf(lim, sizeof(lim), "%" PRIu64, vt_own_memory() + (1u << 20));
		CK(setenv("VRANGE_MEMORY_LIMIT", lim, 1) == 0);
	}
	/* a limit under 100 bytes: its reserve (12 bytes) is still above the
	 * budget of 1 it leaves, so SQLite is made to spill as under any
	 * other spent budget */
	bool tiny = strcmp(mode, "tiny") == 0;
	if (tiny)
		CK(setenv("VRANGE_MEMORY_LIMIT", "99", 1) == 0);
	if (ours) {
		CK(vr_ctx_new(0, &ctx) == 0);
		CK(vr_sqlite_pcache_install(ctx) == 0);
	}
	if (strcmp(mode, "limit") == 0)
		CK(vr_ctx_set_limit(ctx, 16 * vt_pg()) == 0);
	pthread_t tracer;
	if (ctx && getenv("VT_SQLITE_TRACE")) {
		CK(pthread_create(&tracer, NULL, trace_loop, ctx) == 0);
		CK(pthread_detach(tracer) == 0);
	}
	if (strcmp(mode, "spill") == 0 || tiny)
		CK(vr_ctx_memory_limit(ctx) > 0 &&
			   vr_ctx_memory_limit_scope(ctx) == VR_LIMIT_PROCESS,
		   "VRANGE_MEMORY_LIMIT not taken (scope %d)", vr_ctx_memory_limit_scope(ctx));
	struct purger pg = { .ctx = ctx };
	pthread_t th;
	if (strcmp(mode, "purge") == 0)
		CK(pthread_create(&th, NULL, purge_loop, &pg) == 0);

	if (big)
		vs_big_db(&r, BIG_MIB);
	else
		vs_workload(&r);

	if (strcmp(mode, "purge") == 0) {
		__atomic_store_n(&pg.stop, 1, __ATOMIC_RELEASE);
		pthread_join(th, NULL);
		CK(pg.calls > 0);
	}
	struct vsq_stats s;
	vsq_stats_get(&s);
	if (ours) {
		print_stats(mode, &s, ctx);
		CK(s.created > 0 && s.hits > 0, "SQLite did not use this cache");
	} else {
		CK(s.fetches == 0, "the default run used this cache");
	}
	if (big && ours && getenv("VT_SQLITE_CG")) {
		uint64_t limit = vr_ctx_memory_limit(ctx);
		CK(limit > 0 && vr_ctx_memory_limit_scope(ctx) == VR_LIMIT_CGROUP,
		   "no cgroup memory limit seen in the cgroup (scope %d)",
		   vr_ctx_memory_limit_scope(ctx));
		/* a cache holds at most its share of a cgroup limit (pcache.c
		 * cap_update): 90% of it pinned, SQLite is made to spill */
		const char *e = getenv("VRANGE_SQLITE_SHARE");
		uint64_t share = limit / 100 * (e ? strtoull(e, NULL, 10) : VSQ_SHARE_DEFAULT);
		CK(!share || s.refused_share > 0, "SQLite was never made to spill for the share");
		CK(!share || vsq_peak_bytes() <= share + share / 8,
		   "a cache held %" PRIu64 " KiB, its share of the limit is %" PRIu64 " KiB",
		   vsq_peak_bytes() >> 10, share >> 10);
	}
	if (strcmp(mode, "purge") == 0 || strcmp(mode, "limit") == 0)
		CK(s.purged > 0, "no purged page was ever found: the mode tested nothing");
	if (strcmp(mode, "spill") == 0 || tiny) {
		CK(s.refused_budget > 0, "no fetch was refused under a spent budget");
		/* VRANGE_MEMORY_LIMIT does not count the file cache */
		CK(s.refused_share == 0, "a share of VRANGE_MEMORY_LIMIT's limit applied");
	}
	/* the pool (sqlite/pool.c) keeps objects until SQLite shuts down */
	CK(sqlite3_shutdown() == SQLITE_OK);
	CK(vr_ctx_stat(ctx, VR_STAT_OBJECTS) == 0, "pages left behind after sqlite3_shutdown");
	if (strcmp(mode, "vrange") == 0)
		check_install_rules(ctx);
	vr_ctx_destroy(ctx);
	rmdir(r.dir);

	size_t len = r.n * sizeof(*r.h);
	CK(write(fd, &r.n, sizeof(r.n)) == (ssize_t)sizeof(r.n));
	CK(write(fd, r.h, len) == (ssize_t)len);
	free(r.h);
	return 0;
}

/* ---- --methods: the page cache's methods called directly (S35-S38) ---- */

#define M_PS 4096
#define M_EX 208 /* SQLite 3.40's szExtra for 4096-byte pages */
#define M_N 64

static sqlite3_pcache_methods2 pm;

/* page @key of @c, filled with byte @key and its extra with 0xa5, released */
static void m_fill(sqlite3_pcache *c, unsigned key)
{
	sqlite3_pcache_page *pg = pm.xFetch(c, key, 2);
	CK(pg && pg->pBuf && pg->pExtra);
	CK(*(void **)pg->pExtra == NULL, "page %u: a new page's extra does not start zeroed", key);
	/* the entry and SQLite's extra are the object's side-car (S36) */
	const struct vsq_page *p = (const struct vsq_page *)pg;
	CK(vr_obj_extra(p->obj) == p && (char *)pg->pExtra == (char *)p + VSQ_HDR &&
		   pg->pBuf == vr_obj_ptr(p->obj),
	   "page %u: not an object with its entry in the side-car", key);
	memset(pg->pBuf, (int)(key & 0xff), M_PS);
	memset(pg->pExtra, 0xa5, M_EX);
	pm.xUnpin(c, pg, 0);
}

/* page @key of @c if still cached (its bytes checked), released again */
static bool m_has(sqlite3_pcache *c, unsigned key)
{
	sqlite3_pcache_page *pg = pm.xFetch(c, key, 0);
	if (!pg)
		return false;
	for (size_t i = 0; i < M_PS; i++)
		CK(((unsigned char *)pg->pBuf)[i] == (key & 0xff), "page %u: byte %zu lost", key,
		   i);
	pm.xUnpin(c, pg, 0);
	return true;
}

static void *m_purge(void *ctx)
{
	CK(vr_ctx_purge(ctx, SIZE_MAX) >= 0);
	return NULL;
}

static int methods_mode(void)
{
	struct vr_ctx *ctx;
	CK(vr_ctx_new(0, &ctx) == 0);
	CK(vr_sqlite_pcache_install(ctx) == 0);
	CK(sqlite3_config(SQLITE_CONFIG_GETPCACHE2, &pm) == SQLITE_OK);
	CK(pm.xInit(pm.pArg) == SQLITE_OK);
	/* an application object, unpinned before every page: the oldest
	 * volatile bytes of the ctx */
	struct vr_obj *app;
	CK(vr_obj_new(ctx, M_PS, 0, &app) == 0);
	CK(vr_obj_unpin(app) == 0);
	sqlite3_pcache *a = pm.xCreate(M_PS, M_EX, 1), *b = pm.xCreate(M_PS, M_EX, 1);
	sqlite3_pcache *mem = pm.xCreate(M_PS, M_EX, 0);
	CK(a && b && mem);
	sqlite3_pcache *all[] = { a, b, mem };
	for (int i = 0; i < 3; i++) {
		pm.xCachesize(all[i], 200);
		CK(pm.xFetch(all[i], 1, 0) == NULL, "createFlag 0 made a page");
		for (unsigned k = 1; k <= M_N; k++)
			m_fill(all[i], k);
		CK(pm.xPagecount(all[i]) == M_N);
	}
	CK(vr_ctx_stat(ctx, VR_STAT_OBJECTS) == 3 * M_N + 1, "a page is not one object");

	/* xShrink purges a's pages only: not b's, not the older app object */
	uint64_t purges = vr_ctx_stat(ctx, VR_STAT_PURGES);
	pm.xShrink(a);
	CK(vr_ctx_stat(ctx, VR_STAT_PURGES) >= purges + M_N, "xShrink did not purge a's group");
	CK(pm.xPagecount(a) == 0, "a still counts %d pages after xShrink", pm.xPagecount(a));
	CK(vr_obj_status(app) >= 0 && !(vr_obj_status(app) & VR_STATE_PURGED),
	   "xShrink purged an object of another group");
	for (unsigned k = 1; k <= M_N; k++) {
		CK(!m_has(a, k), "page %u of a kept after xShrink", k);
		CK(m_has(b, k), "page %u of b lost to a's xShrink", k);
	}
	/* a purged page made again: its extra starts zeroed again */
	m_fill(a, 7);

	/* a purge by another thread: the handler drops b's purged pages,
	 * with no fetch in between; pinned (hot) ones and the in-memory
	 * cache's stay */
	pthread_t th;
	CK(pthread_create(&th, NULL, m_purge, ctx) == 0);
	CK(pthread_join(th, NULL) == 0);
	int left = pm.xPagecount(b);
	CK(left < M_N, "b counts all %d pages after a purge", M_N);
	int found = 0;
	for (unsigned k = 1; k <= M_N; k++)
		found += m_has(b, k);
	CK(found == left, "b counted %d pages, %d were there", left, found);
	for (unsigned k = 1; k <= M_N; k++)
		CK(m_has(mem, k), "page %u of an in-memory cache lost", k);

	/* xRekey: the page moves, an entry at the new key is dropped */
	m_fill(b, 500);
	sqlite3_pcache_page *pg = pm.xFetch(b, 400, 2);
	CK(pg);
	memset(pg->pBuf, 500 & 0xff, M_PS);
	pm.xRekey(b, pg, 400, 500);
	CK(pm.xFetch(b, 400, 0) == NULL && pm.xFetch(b, 500, 0) == pg);
	pm.xUnpin(b, pg, 0);
	/* xTruncate: keys >= 33 gone, pinned or not */
	pg = pm.xFetch(mem, 40, 0);
	CK(pg);
	pm.xTruncate(mem, 33);
	CK(pm.xPagecount(mem) == 32 && !m_has(mem, 33) && !m_has(mem, 40) && m_has(mem, 32));

	/* createFlag 1 refused when 90% of cache_size is pinned, 2 is not */
	sqlite3_pcache *t = pm.xCreate(M_PS, M_EX, 1);
	pm.xCachesize(t, 10);
	for (unsigned k = 1; k <= 9; k++)
		CK(pm.xFetch(t, k, 2));
	CK(pm.xFetch(t, 100, 1) == NULL && pm.xFetch(t, 100, 2) != NULL);

	/* the hot pages (vrange-sqlite.h): up to 64 pages released last stay
	 * pinned, at most 1/8 of cache_size; one more unpins the oldest until
	 * half of them are left */
	sqlite3_pcache *h = pm.xCreate(M_PS, M_EX, 1);
	CK(h);
	pm.xCachesize(h, 1000);
	struct vr_group *hg = ((struct vsq_cache *)h)->grp;
	for (unsigned k = 1; k <= 64; k++)
		m_fill(h, k);
	uint64_t vol =
		vr_group_stat(hg, VR_STAT_VOLATILE_BYTES) + vr_group_stat(hg, VR_STAT_PURGED_BYTES);
	CK(vol == 0, "%" PRIu64 " pages of 64 released unpinned", vol / M_PS);
	m_fill(h, 65);
	vol = vr_group_stat(hg, VR_STAT_VOLATILE_BYTES) + vr_group_stat(hg, VR_STAT_PURGED_BYTES);
	CK(vol == 33 * M_PS, "%" PRIu64 " pages of 65 released unpinned, not 33", vol / M_PS);
	pm.xCachesize(h, 80); /* 1/8 of it: 10 stay pinned */
	vol = vr_group_stat(hg, VR_STAT_VOLATILE_BYTES) + vr_group_stat(hg, VR_STAT_PURGED_BYTES);
	CK(vol == 55 * M_PS, "%" PRIu64 " pages of 65 released unpinned, not 55", vol / M_PS);
	pm.xDestroy(h);
	for (int i = 0; i < 3; i++)
		pm.xDestroy(all[i]);
	pm.xDestroy(t);
	pm.xShutdown(pm.pArg);
	vr_obj_free(app);
	CK(vr_ctx_stat(ctx, VR_STAT_OBJECTS) == 0, "pages left after xShutdown");
	vr_ctx_destroy(ctx);
	return 0;
}

/* ---- --lifetime: a caller's ctx may go once sqlite3_shutdown() returned
 * (vrange-sqlite.h): the next sqlite3_initialize() without a new install
 * must not touch it (ASan: no use after free), and fails clearly ---- */
static int lifetime_mode(void)
{
	struct vr_ctx *ctx;
	CK(vr_ctx_new(0, &ctx) == 0);
	CK(vr_sqlite_pcache_install(ctx) == 0);
	sqlite3 *db = vs_open(":memory:");
	vs_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1)");
	sqlite3_close(db);
	CK(sqlite3_shutdown() == SQLITE_OK);
	vr_ctx_destroy(ctx);
	/* no install since: SQLite must not run on the destroyed ctx */
	db = NULL;
	int rc = sqlite3_open(":memory:", &db);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1)", NULL, NULL,
				  NULL);
	sqlite3_close(db);
	CK(rc == SQLITE_MISUSE, "SQLite ran without a ctx installed: %d", rc);
	/* installed again: it runs */
	CK(vr_sqlite_pcache_install(NULL) == 0);
	db = vs_open(":memory:");
	vs_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1)");
	sqlite3_close(db);
	CK(sqlite3_shutdown() == SQLITE_OK);
	return 0;
}

/* the cgroup a child runs in: removed if the child fails */
static char cg_dir[PATH_MAX];

/* VT_SQLITE_TABLE=1 (cgroup mode): also the default cache in the cgroup,
 * which may be OOM-killed (reported, not a failure) */
static bool may_fail;

/* runs one mode in a child; its hashes in *out (malloc'd), their count */
static size_t run_mode(const char *mode, uint64_t **out, double *secs)
{
	int p[2];
	CK(pipe(p) == 0);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid_t pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		char fd[16];
		close(p[0]);
		snprintf(fd, sizeof(fd), "%d", p[1]);
		execl("/proc/self/exe", "vt-sqlite", "--child", mode, fd, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	size_t n = 0;
	FILE *f = fdopen(p[0], "r");
	CK(f);
	bool got = fread(&n, sizeof(n), 1, f) == 1;
	*out = got ? calloc(n ? n : 1, sizeof(**out)) : NULL;
	if (got)
		got = fread(*out, sizeof(**out), n, f) == n;
	fclose(f);
	int st;
	CK(waitpid(pid, &st, 0) == pid);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	*secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) && cg_dir[0]) {
		struct vt_cg cg;
		snprintf(cg.dir, sizeof(cg.dir), "%s", cg_dir);
		fprintf(stderr, "cgroup: OOM kills %" PRIu64 ", max usage %" PRIu64 " MiB\n",
			vt_cg_key(cg.dir, "memory.oom_control", "oom_kill"),
			vt_cg_read(cg.dir, "memory.max_usage_in_bytes") >> 20);
		if (!may_fail)
			vt_cg_remove(&cg);
	}
	if (may_fail && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
		fprintf(stderr, "%-12s %6.2f s  failed: child status 0x%x\n", mode, *secs, st);
		free(*out);
		*out = NULL;
		return 0;
	}
	CK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "mode %s: child status 0x%x", mode, st);
	CK(got, "mode %s: no results", mode);
	return n;
}

/* runs a mode and compares its hashes with @ref: 0 when identical */
static int compare(const char *mode, const uint64_t *ref, size_t nref)
{
	uint64_t *h = NULL;
	double secs;
	size_t n = run_mode(mode, &h, &secs);
	size_t diff = n == nref ? SIZE_MAX : 0;
	for (size_t i = 0; i < n && i < nref && diff == SIZE_MAX; i++)
		if (h[i] != ref[i])
			diff = i;
	fprintf(stderr, "%-12s %6.2f s  %zu queries  identical: %s", mode, secs, n,
		diff == SIZE_MAX ? "yes\n" : "NO");
	if (diff != SIZE_MAX)
		fprintf(stderr, " (first difference: query %zu)\n", diff);
	free(h);
	return diff == SIZE_MAX ? 0 : 1;
}

/* VT_SQLITE_TABLE: SQLite's default cache in the cgroup (VT_SQLITE_CG),
 * with a cache_size of @kib KiB (NULL: the workload's), which may be
 * OOM-killed; its time and whether its rows equal @ref's, reported */
static void default_in_cgroup(const uint64_t *ref, size_t nref, const char *kib)
{
	uint64_t *h = NULL;
	double secs;
	if (kib)
		CK(setenv("VT_BIG_CACHE_KIB", kib, 1) == 0);
	may_fail = true;
	size_t n = run_mode("big-default", &h, &secs);
	may_fail = false;
	if (kib)
		unsetenv("VT_BIG_CACHE_KIB");
	if (h)
		fprintf(stderr, "big-default in the cgroup%s%s%s: %6.2f s, identical: %s\n",
			kib ? ", cache_size " : "", kib ? kib : "", kib ? " KiB" : "", secs,
			n == nref && memcmp(h, ref, n * sizeof(*h)) == 0 ? "yes" : "NO");
	free(h);
}

/* the big database: default cache outside, this one inside a cgroup */
static int cgroup_mode(void)
{
	struct vt_cg cg;
	const char *why = NULL;
	if (vt_cg_create(&cg, BIG_LIMIT, &why) != 0) {
		fprintf(stderr, "cgroup: skipped: %s\n", why);
		return 77;
	}
	uint64_t *ref = NULL;
	double secs;
	size_t nref = run_mode("big-default", &ref, &secs);
	fprintf(stderr, "%-12s %6.2f s  %zu queries\n", "big-default", secs, nref);
	CK(setenv("VT_SQLITE_CG", cg.dir, 1) == 0);
	snprintf(cg_dir, sizeof(cg_dir), "%s", cg.dir);
	int fail = compare("big-vrange", ref, nref);
	if (getenv("VT_SQLITE_TABLE")) {
		default_in_cgroup(ref, nref, NULL);
		/* VT_BIG_FIT_KIB: again, with a cache_size tuned by hand to
		 * fit the limit */
		if (getenv("VT_BIG_FIT_KIB"))
			default_in_cgroup(ref, nref, getenv("VT_BIG_FIT_KIB"));
		unsetenv("VT_SQLITE_CG");
		fail += compare("big-vrange", ref, nref);
		fprintf(stderr, "(the last big-vrange: outside the cgroup)\n");
	}
	unsetenv("VT_SQLITE_CG");
	cg_dir[0] = '\0';
	fprintf(stderr,
		"cgroup %s: limit %llu MiB, max usage %" PRIu64 " MiB, OOM kills %" PRIu64 "\n",
		cg.dir, BIG_LIMIT >> 20, vt_cg_read(cg.dir, "memory.max_usage_in_bytes") >> 20,
		vt_cg_key(cg.dir, "memory.oom_control", "oom_kill"));
	CK(vt_cg_remove(&cg) == 0, "cgroup %s not removed", cg.dir);
	free(ref);
	return fail;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "--child") == 0)
		return child(argv[2], atoi(argv[3]));
	if (argc == 2 && strcmp(argv[1], "--cgroup") == 0)
		return cgroup_mode();
	if (argc == 2 && strcmp(argv[1], "--methods") == 0)
		return methods_mode();
	if (argc == 2 && strcmp(argv[1], "--lifetime") == 0)
		return lifetime_mode();
	const char *only = getenv("VT_SQLITE_ONLY");
	uint64_t *ref[2] = { NULL, NULL };
	size_t nref[2];
	double secs;
	for (int light = 0; light < 2; light++) {
		const char *m = light ? "light-default" : "default";
		nref[light] = run_mode(m, &ref[light], &secs);
		fprintf(stderr, "%-12s %6.2f s  %zu queries\n", m, secs, nref[light]);
		CK(nref[light] > 100, "the workload ran %zu queries", nref[light]);
	}
	int fails = 0;
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		if (only && strcmp(only, modes[m]) != 0)
			continue;
		char name[32];
		bool light = m >= LIGHT_FROM;
		snprintf(name, sizeof(name), "%s%s", light ? "light-" : "", modes[m]);
		fails += compare(name, ref[light], nref[light]);
	}
	free(ref[0]);
	free(ref[1]);
	return fails ? 1 : 0;
}
