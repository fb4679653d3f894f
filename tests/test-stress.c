/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-stress.c - threads marking and unmarking while another thread
 * purges (suite stress)
 *
 * Worker threads own disjoint "chunks" (byte intervals of odd sizes, so
 * pages are shared between chunks, and between threads in the one-region
 * test).  Each worker keeps a model of its chunks: non-volatile with data
 * generation g, or volatile (and known purged or not).  It marks, unmarks
 * (one chunk or a run of adjacent chunks), marks runs, asks status, with
 * the file-offset and the pointer calls, and checks
 *   - S9: a non-volatile chunk never changes (checked before every mark and
 *     in periodic sweeps), and VR_INTACT is never returned after a loss:
 *     every unmark that says VR_INTACT sees exactly the data written;
 *   - an unmark that says VR_PURGED leaves every page-piece of the chunk
 *     either zero (discarded page) or intact (S5, S7);
 *   - the purged state only goes away through unmark (S4, S6, S12).
 * Meanwhile a purger calls vr_ctx_purge(random n), notify_pressure
 * MODERATE/CRITICAL and vr_ctx_set_limit with changing limits.  Workers
 * never touch volatile memory, so a purged page is never touched without
 * unmarking first (the fault path has its own stress test).
 *
 * At the end, with every thread stopped: the ctx gauges equal what the
 * workers believe (volatile + purged bytes per chunk status, the range
 * count within the bounds the coalescing rules allow), the pressure-event
 * counter equals the calls made, and unmarking everything leaves all
 * gauges at zero with the data of every unpurged chunk intact.
 *
 * Every body runs in a re-exec'd scenario process (a crash is a clean
 * failure, not a cmocka signal handler in the wrong thread), under both
 * trap backends, with a watchdog: no progress for 10 s fails.
 * VT_STRESS_SECONDS (default 5) sets the duration of each run; VT_SEED
 * replays a run.
 */
#include "tests.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define NWORKERS 4

struct chunk {
	struct vr_region *r;
	uint8_t *base; /* region base */
	size_t off, len;
	uint64_t gen;
	bool vol, known_purged;
};

/* a run of adjacent chunks of one region owned by one worker */
struct block {
	struct chunk *c;
	size_t n;
};

struct worker {
	pthread_t tid;
	int id;
	uint64_t seed;
	struct block *blocks;
	size_t nblocks;
	uint64_t next_gen;
	/* counters for the report */
	unsigned long marks, unmarks, intact, purged, statuses;
};

static struct vr_ctx *ctx;
static _Atomic bool stop;
static _Atomic unsigned long progress[NWORKERS + 1]; /* workers, then the purger */
static size_t P;

#define FAILF(...) vt_die(__FILE__, __LINE__, "", __VA_ARGS__)

static uint64_t new_gen(struct worker *w)
{
	return ((uint64_t)(w->id + 1) << 48) | ++w->next_gen;
}

static void fill_chunk(struct worker *w, struct chunk *c)
{
	c->gen = new_gen(w);
	vt_fill(c->base + c->off, c->off, c->len, c->gen);
}

static void check_nonvolatile(const struct chunk *c, const char *when)
{
	size_t bad = vt_check(c->base + c->off, c->off, c->len, c->gen);
	if (bad != SIZE_MAX)
		FAILF("S9: non-volatile chunk [%zu,+%zu) changed at byte %zu (%s)", c->off, c->len,
		      c->off + bad, when);
}

/* after VR_PURGED: each piece of the chunk on one page is zero or intact */
static void check_after_purged(const struct chunk *c)
{
	size_t a = c->off, e = c->off + c->len;
	while (a < e) {
		size_t pe = (a / P + 1) * P;
		if (pe > e)
			pe = e;
		const uint8_t *p = c->base + a;
		if (!vt_all_zero(p, pe - a) && vt_check(p, a, pe - a, c->gen) != SIZE_MAX)
			FAILF("after VR_PURGED, bytes [%zu,%zu) are neither zero nor the data", a,
			      pe);
		a = pe;
	}
}

static int do_mark(struct chunk *c, size_t len, bool ptr)
{
	return ptr ? vr_mark_ptr(c->base + c->off, len) : vr_mark(c->r, c->off, len);
}

static int do_unmark(struct chunk *c, size_t len, bool ptr)
{
	return ptr ? vr_unmark_ptr(c->base + c->off, len) : vr_unmark(c->r, c->off, len);
}

/* mark chunks [i, j] of block b as one interval */
static void mark_run(struct worker *w, struct block *b, size_t i, size_t j, bool ptr)
{
	bool any_purged = false;
	for (size_t k = i; k <= j; k++) {
		if (!b->c[k].vol)
			check_nonvolatile(&b->c[k], "before mark");
		any_purged |= b->c[k].known_purged;
	}
	size_t len = b->c[j].off + b->c[j].len - b->c[i].off;
	int rc = do_mark(&b->c[i], len, ptr);
	if (rc != VR_INTACT && rc != VR_PURGED)
		FAILF("vr_mark(%zu, %zu) = %d", b->c[i].off, len, rc);
	if (any_purged && rc != VR_PURGED)
		FAILF("vr_mark over a purged chunk returned VR_INTACT");
	/* the interval now lies in one range: purged means all of it */
	for (size_t k = i; k <= j; k++) {
		b->c[k].vol = true;
		b->c[k].known_purged = rc == VR_PURGED;
	}
	w->marks++;
}

/* unmark chunks [i, j] of block b as one interval */
static void unmark_run(struct worker *w, struct block *b, size_t i, size_t j, bool ptr)
{
	bool any_known = false;
	for (size_t k = i; k <= j; k++)
		any_known |= b->c[k].vol && b->c[k].known_purged;
	size_t len = b->c[j].off + b->c[j].len - b->c[i].off;
	int rc = do_unmark(&b->c[i], len, ptr);
	if (rc != VR_INTACT && rc != VR_PURGED)
		FAILF("vr_unmark(%zu, %zu) = %d", b->c[i].off, len, rc);
	if (any_known && rc != VR_PURGED)
		FAILF("S5/S9: unmark of a known-purged chunk returned VR_INTACT");
	bool any_vol = false;
	for (size_t k = i; k <= j; k++) {
		struct chunk *c = &b->c[k];
		if (!c->vol) {
			check_nonvolatile(c, "after unmark of a run");
			continue;
		}
		any_vol = true;
		if (rc == VR_INTACT) {
			size_t bad = vt_check(c->base + c->off, c->off, c->len, c->gen);
			if (bad != SIZE_MAX)
				FAILF("S9: VR_INTACT but byte %zu of chunk [%zu,+%zu) lost "
				      "(read 0x%02x, want 0x%02x)",
				      c->off + bad, c->off, c->len, c->base[c->off + bad],
				      vt_pat(c->gen, c->off + bad));
		} else {
			check_after_purged(c);
		}
		c->vol = false;
		c->known_purged = false;
		fill_chunk(w, c);
	}
	if (!any_vol && rc != VR_INTACT)
		FAILF("unmark of non-volatile bytes returned %d", rc);
	if (rc == VR_INTACT)
		w->intact++;
	else
		w->purged++;
	w->unmarks++;
	/* now non-volatile: status must say so */
	int st = vr_status(b->c[i].r, b->c[i].off, len);
	if (st != 0)
		FAILF("status after unmark = %d", st);
}

static void status_one(struct worker *w, struct chunk *c)
{
	int st = vr_status(c->r, c->off, c->len);
	w->statuses++;
	if (!c->vol) {
		if (st != 0)
			FAILF("status of non-volatile chunk [%zu,+%zu) = %d", c->off, c->len, st);
		return;
	}
	if (st != VR_STATE_VOLATILE && st != (VR_STATE_VOLATILE | VR_STATE_PURGED))
		FAILF("status of volatile chunk = %d", st);
	if (c->known_purged && !(st & VR_STATE_PURGED))
		FAILF("S6: purged state vanished without unmark (chunk [%zu,+%zu))", c->off,
		      c->len);
	if (st & VR_STATE_PURGED)
		c->known_purged = true;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct vt_rng rng;
	vt_seed(&rng, w->seed);
	for (size_t bi = 0; bi < w->nblocks; bi++)
		for (size_t k = 0; k < w->blocks[bi].n; k++)
			fill_chunk(w, &w->blocks[bi].c[k]);
	unsigned long ops = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		struct block *b = &w->blocks[vt_below(&rng, w->nblocks)];
		size_t i = vt_below(&rng, b->n);
		struct chunk *c = &b->c[i];
		bool ptr = vt_below(&rng, 2);
		unsigned op = (unsigned)vt_below(&rng, 100);
		if (op < 55) {
			/* toggle one chunk */
			if (c->vol)
				unmark_run(w, b, i, i, ptr);
			else
				mark_run(w, b, i, i, ptr);
		} else if (op < 70) {
			size_t j = i + vt_below(&rng, b->n - i < 4 ? b->n - i : 4);
			mark_run(w, b, i, j, ptr);
		} else if (op < 85) {
			size_t j = i + vt_below(&rng, b->n - i < 6 ? b->n - i : 6);
			unmark_run(w, b, i, j, ptr);
		} else {
			status_one(w, c);
		}
		if (++ops % 4096 == 0) {
			/* sweep: every non-volatile chunk still holds its data */
			for (size_t bi = 0; bi < w->nblocks; bi++)
				for (size_t k = 0; k < w->blocks[bi].n; k++)
					if (!w->blocks[bi].c[k].vol)
						check_nonvolatile(&w->blocks[bi].c[k], "sweep");
		}
		atomic_fetch_add_explicit(&progress[w->id], 1, memory_order_relaxed);
	}
	return NULL;
}

/* ---- purger ---- */
struct purger {
	pthread_t tid;
	uint64_t seed;
	size_t total; /* bytes of all regions */
	unsigned long purges, pressure, limits;
	uint64_t reclaimed;
};

static void *purger_main(void *arg)
{
	struct purger *p = arg;
	struct vt_rng rng;
	vt_seed(&rng, p->seed);
	uint64_t last_reclaimed = 0, last_purges = 0, last_skipped = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		unsigned op = (unsigned)vt_below(&rng, 100);
		ssize_t n = 0;
		if (op < 40) {
			n = vr_ctx_purge(ctx, 1 + vt_below(&rng, 32 * P));
			p->purges++;
		} else if (op < 43) {
			n = vr_ctx_purge(ctx, SIZE_MAX);
			p->purges++;
		} else if (op < 65) {
			n = vr_ctx_notify_pressure(ctx, VR_PRESSURE_MODERATE);
			p->pressure++;
		} else if (op < 68) {
			n = vr_ctx_notify_pressure(ctx, VR_PRESSURE_CRITICAL);
			p->pressure++;
		} else if (op < 75) {
			CK_EQ(vr_ctx_notify_pressure(ctx, VR_PRESSURE_NONE), 0);
		} else if (op < 90) {
			size_t lim = vt_below(&rng, 3) ? 0 : 1 + vt_below(&rng, p->total / 2);
			CK_EQ(vr_ctx_set_limit(ctx, lim), 0);
			p->limits++;
		} else {
			usleep((useconds_t)vt_below(&rng, 500));
		}
		CK(n >= 0, "(purge/pressure returned %zd)", n);
		CK(n % (ssize_t)P == 0, "(reclaimed %zd is not a page multiple)", n);
		p->reclaimed += (uint64_t)n;
		/* cumulative counters never go back */
		uint64_t rc = vr_ctx_stat(ctx, VR_STAT_RECLAIMED_BYTES);
		uint64_t pu = vr_ctx_stat(ctx, VR_STAT_PURGES);
		uint64_t sk = vr_ctx_stat(ctx, VR_STAT_SKIPPED);
		CK(rc >= last_reclaimed && pu >= last_purges && sk >= last_skipped);
		CK(rc % P == 0);
		last_reclaimed = rc, last_purges = pu, last_skipped = sk;
		atomic_fetch_add_explicit(&progress[NWORKERS], 1, memory_order_relaxed);
	}
	return NULL;
}

/* ---- watchdog: no progress for 10 s is a failure, not a CI timeout ---- */
static void *watchdog_main(void *arg)
{
	(void)arg;
	unsigned long last[NWORKERS + 1];
	int idle[NWORKERS + 1] = { 0 };
	for (int i = 0; i <= NWORKERS; i++)
		last[i] = atomic_load(&progress[i]);
	while (!atomic_load(&stop)) {
		sleep(1);
		for (int i = 0; i <= NWORKERS; i++) {
			unsigned long now = atomic_load(&progress[i]);
			idle[i] = now == last[i] ? idle[i] + 1 : 0;
			last[i] = now;
			if (idle[i] >= 10) {
				fprintf(stderr, "watchdog: %s %d made no progress for 10 s\n",
					i < NWORKERS ? "worker" : "purger", i);
				_exit(4);
			}
		}
	}
	return NULL;
}

static unsigned stress_seconds(void)
{
	const char *e = getenv("VT_STRESS_SECONDS");
	unsigned s = e ? (unsigned)strtoul(e, NULL, 0) : 5;
	return s ? s : 1;
}

/* cut [0, size) into chunks of 1 byte .. 3 pages */
static size_t make_chunks(struct vt_rng *rng, struct vr_region *r, struct chunk *out, size_t max)
{
	size_t n = 0, off = 0, size = vr_region_size(r);
	uint8_t *base = vr_region_base(r);
	while (off < size && n < max) {
		size_t len;
		switch (vt_below(rng, 4)) {
		case 0:
			len = 1 + vt_below(rng, 64);
			break;
		case 1:
			len = 1 + vt_below(rng, P);
			break;
		default:
			len = P / 2 + vt_below(rng, 3 * P);
			break;
		}
		if (len > size - off || n == max - 1)
			len = size - off;
		out[n++] = (struct chunk){ .r = r, .base = base, .off = off, .len = len };
		off += len;
	}
	return n;
}

/*
 * Final checks with everything stopped.  Every chunk lies wholly in one
 * range (all calls cover whole chunks), so per-chunk status is exact:
 * VOLATILE_BYTES and PURGED_BYTES must equal the sums.  Ranges: adjacent
 * volatile chunks are one range when both are unpurged (an unpurged range
 * absorbs its unpurged neighbours and purging does not split), may be two
 * when both are purged, and are two when their states differ.
 */
static void final_checks(struct worker *ws, size_t nw, struct purger *pg, struct chunk **all,
			 size_t *nall, size_t nregions)
{
	CK_EQ(vr_ctx_set_limit(ctx, 0), 0);
	uint64_t vol = 0, pur = 0, lo = 0, hi = 0;
	for (size_t ri = 0; ri < nregions; ri++) {
		int prev = -1; /* -1 none, 0 unpurged, 1 purged */
		for (size_t k = 0; k < nall[ri]; k++) {
			struct chunk *c = &all[ri][k];
			int st = vr_status(c->r, c->off, c->len);
			CK(st >= 0);
			CK(!!(st & VR_STATE_VOLATILE) == c->vol,
			   "(chunk [%zu,+%zu) status %d, model vol %d)", c->off, c->len, st,
			   c->vol);
			if (c->known_purged)
				CK(st & VR_STATE_PURGED, "(S6: purged state lost)");
			int cur = !c->vol ? -1 : (st & VR_STATE_PURGED) ? 1 : 0;
			c->known_purged = cur == 1;
			if (cur == 0)
				vol += c->len;
			if (cur == 1)
				pur += c->len;
			if (cur >= 0) {
				if (prev != cur) {
					lo++;
					hi++;
				} else if (cur == 1) {
					hi++;
				}
			}
			prev = cur;
		}
	}
	uint64_t s_vol = vr_ctx_stat(ctx, VR_STAT_VOLATILE_BYTES);
	uint64_t s_pur = vr_ctx_stat(ctx, VR_STAT_PURGED_BYTES);
	uint64_t s_rng = vr_ctx_stat(ctx, VR_STAT_RANGES);
	fprintf(stderr,
		"final: volatile %" PRIu64 "/%" PRIu64 " purged %" PRIu64 "/%" PRIu64
		" ranges %" PRIu64 " in [%" PRIu64 ", %" PRIu64 "]\n",
		s_vol, vol, s_pur, pur, s_rng, lo, hi);
	CK_EQ(s_vol, vol);
	CK_EQ(s_pur, pur);
	CK(s_rng >= lo && s_rng <= hi, "(ranges %" PRIu64 " not in [%" PRIu64 ", %" PRIu64 "])",
	   s_rng, lo, hi);
	CK_EQ(vr_ctx_stat(ctx, VR_STAT_REGIONS), nregions);
	CK_EQ(vr_ctx_stat(ctx, VR_STAT_PRESSURE_EVENTS), pg->pressure);
	CK(vr_ctx_stat(ctx, VR_STAT_RECLAIMED_BYTES) >= pg->reclaimed);

	/* unmark everything chunk by chunk: unpurged chunks keep their data */
	for (size_t w = 0; w < nw; w++)
		for (size_t bi = 0; bi < ws[w].nblocks; bi++) {
			struct block *b = &ws[w].blocks[bi];
			for (size_t k = 0; k < b->n; k++) {
				struct chunk *c = &b->c[k];
				int rc = vr_unmark(c->r, c->off, c->len);
				if (!c->vol) {
					CK_EQ(rc, VR_INTACT);
					check_nonvolatile(c, "final");
				} else if (c->known_purged) {
					CK_EQ(rc, VR_PURGED);
					check_after_purged(c);
				} else {
					CK_EQ(rc, VR_INTACT);
					size_t bad =
						vt_check(c->base + c->off, c->off, c->len, c->gen);
					CK(bad == SIZE_MAX, "(final: unpurged chunk lost byte %zu)",
					   c->off + bad);
				}
			}
		}
	CK_EQ(vr_ctx_stat(ctx, VR_STAT_RANGES), 0);
	CK_EQ(vr_ctx_stat(ctx, VR_STAT_VOLATILE_BYTES), 0);
	CK_EQ(vr_ctx_stat(ctx, VR_STAT_PURGED_BYTES), 0);
}

static void run(bool one_region)
{
	P = vt_pg();
	uint64_t seed = vt_get_seed(one_region ? "stress_one_region" : "stress_own_regions");
	struct vt_rng rng;
	vt_seed(&rng, seed);
	int err = vr_ctx_new(VR_CTX_NO_MONITOR, &ctx);
	if (err == -EOPNOTSUPP) {
		fprintf(stderr, "skip: trap backend %s not available here\n",
			getenv("VRANGE_TRAP"));
		exit(77);
	}
	CK_EQ(err, 0);
	fprintf(stderr, "trap backend: %s\n",
		vr_trap_backend() == VR_TRAP_GUARD  ? "guard"
		: vr_trap_backend() == VR_TRAP_UFFD ? "uffd"
						    : "mprotect");

	enum { MAXCH = 4096, BLK = 8 };
	size_t nregions = one_region ? 1 : NWORKERS * 2;
	struct chunk *all[NWORKERS * 2];
	size_t nall[NWORKERS * 2];
	size_t total = 0;
	for (size_t ri = 0; ri < nregions; ri++) {
		struct vr_region *r;
		size_t sz = one_region ? 512 * P + 77 : 48 * P + vt_below(&rng, 16 * P) + 1;
		/* own regions: every other one is anonymous memory (S26) */
		unsigned fl = !one_region && (ri & 1) ? VR_REGION_ANON : 0;
		CK_EQ(vr_region_new(ctx, "vt-stress", sz, fl, &r), 0);
		all[ri] = calloc(MAXCH, sizeof(struct chunk));
		CK(all[ri]);
		nall[ri] = make_chunks(&rng, r, all[ri], MAXCH);
		total += sz;
	}
	/* blocks of BLK adjacent chunks; one region: blocks interleaved over
	 * the workers; own regions: worker w owns regions 2w and 2w+1 */
	struct worker ws[NWORKERS];
	memset(ws, 0, sizeof(ws));
	for (int w = 0; w < NWORKERS; w++) {
		ws[w].id = w;
		ws[w].seed = vt_next(&rng);
		ws[w].blocks = calloc(MAXCH, sizeof(struct block));
		CK(ws[w].blocks);
	}
	size_t bcount = 0;
	for (size_t ri = 0; ri < nregions; ri++)
		for (size_t k = 0; k < nall[ri]; k += BLK, bcount++) {
			int w = one_region ? (int)(bcount % NWORKERS) : (int)(ri / 2);
			struct block *b = &ws[w].blocks[ws[w].nblocks++];
			b->c = &all[ri][k];
			b->n = nall[ri] - k < BLK ? nall[ri] - k : BLK;
		}

	struct purger pg = { .seed = vt_next(&rng), .total = total };
	pthread_t wd;
	CK_EQ(pthread_create(&wd, NULL, watchdog_main, NULL), 0);
	for (int w = 0; w < NWORKERS; w++)
		CK_EQ(pthread_create(&ws[w].tid, NULL, worker_main, &ws[w]), 0);
	CK_EQ(pthread_create(&pg.tid, NULL, purger_main, &pg), 0);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	sleep(stress_seconds());
	atomic_store(&stop, true);
	for (int w = 0; w < NWORKERS; w++)
		pthread_join(ws[w].tid, NULL);
	pthread_join(pg.tid, NULL);
	pthread_join(wd, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);

	unsigned long marks = 0, unmarks = 0, intact = 0, purged = 0, st = 0;
	for (int w = 0; w < NWORKERS; w++) {
		marks += ws[w].marks, unmarks += ws[w].unmarks, intact += ws[w].intact;
		purged += ws[w].purged, st += ws[w].statuses;
	}
	size_t nch = 0;
	for (size_t ri = 0; ri < nregions; ri++)
		nch += nall[ri];
	fprintf(stderr,
		"%.1f s, %d workers, %zu regions, %zu chunks, %zu bytes: %lu marks, %lu unmarks "
		"(%lu intact, %lu purged), %lu status; purger: %lu purges, %lu pressure, %lu "
		"limits; stats: purges %" PRIu64 " reclaimed %" PRIu64 " skipped %" PRIu64 "\n",
		(double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, NWORKERS,
		nregions, nch, total, marks, unmarks, intact, purged, st, pg.purges, pg.pressure,
		pg.limits, vr_ctx_stat(ctx, VR_STAT_PURGES),
		vr_ctx_stat(ctx, VR_STAT_RECLAIMED_BYTES), vr_ctx_stat(ctx, VR_STAT_SKIPPED));
	CK(intact > 0 && purged > 0, "(the run exercised too little: %lu intact, %lu purged)",
	   intact, purged);

	final_checks(ws, NWORKERS, &pg, all, nall, nregions);
	vr_ctx_destroy(ctx);
	for (size_t ri = 0; ri < nregions; ri++)
		free(all[ri]);
	for (int w = 0; w < NWORKERS; w++)
		free(ws[w].blocks);
	exit(0);
}

static void sc_own_regions(void)
{
	run(false);
}

static void sc_one_region(void)
{
	run(true);
}

static const struct vt_scenario scenarios[] = {
	{ "own_regions", sc_own_regions },
	{ "one_region", sc_one_region },
};

static void run_scenario(const char *name, const char *trap)
{
	setenv("VRANGE_TRAP", trap, 1);
	int st = vt_run_scenario(name);
	unsetenv("VRANGE_TRAP");
	if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 77)
		skip();
	vt_assert_exit_ok(st);
}

static void test_own_regions_guard(void **state)
{
	(void)state;
	run_scenario("own_regions", "guard");
}

static void test_own_regions_mprotect(void **state)
{
	(void)state;
	run_scenario("own_regions", "mprotect");
}

static void test_one_region_guard(void **state)
{
	(void)state;
	run_scenario("one_region", "guard");
}

static void test_one_region_mprotect(void **state)
{
	(void)state;
	run_scenario("one_region", "mprotect");
}

static void test_own_regions_uffd(void **state)
{
	(void)state;
	run_scenario("own_regions", "uffd");
}

static void test_one_region_uffd(void **state)
{
	(void)state;
	run_scenario("one_region", "uffd");
}

int main(int argc, char **argv)
{
	int rc = vt_scenario_dispatch(argc, argv, scenarios,
				      sizeof(scenarios) / sizeof(scenarios[0]),
				      stress_seconds() + 60);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_regions_guard),
		cmocka_unit_test(test_own_regions_mprotect),
		cmocka_unit_test(test_one_region_guard),
		cmocka_unit_test(test_one_region_mprotect),
		cmocka_unit_test(test_own_regions_uffd),
		cmocka_unit_test(test_one_region_uffd),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
