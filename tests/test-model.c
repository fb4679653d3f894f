/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-model.c - the public API against an exact model (S3-S8, S10-S12)
 *
 * The model keeps, per region, the sorted list of volatile ranges (bounds,
 * purged state, age stamp) and the expected content of every byte.  From
 * it follow the discarded pages (the whole pages of purged ranges), every
 * VR_STAT_* value, every return value and the content of every page that
 * is not discarded.  Random operations: mark/unmark (offset and pointer
 * style), status, write, purge(n), pressure, set_limit, destroy/recreate a
 * region, invalid calls; after each one the stats, the state of every
 * range and gap, and (often) the content of all readable pages are
 * compared.
 *
 * LRU purges (purge, pressure, limit) are checked by observation: among
 * equally old pieces of one range any order is allowed (S8), so the test
 * reads which candidates the library purged and checks that this set is
 * a valid outcome: every candidate older than the youngest one taken was
 * taken, the goal was reached (or nothing purgeable is left), and it was
 * not reached before the last piece.  The model then adopts that set.
 *
 * Discarded pages are never touched.  Seeds are printed; replay with
 * VT_SEED=<seed> (it runs that seed first).  A failure prints MODEL
 * MISMATCH and the tail of the operation log.
 */
#include "tests.h"

#include <stdbool.h>

#define NREG 3
#define MAXPG 64
#define LOGN 48
#define VP ((int)(VR_STATE_VOLATILE | VR_STATE_PURGED))
#define V ((int)VR_STATE_VOLATILE)
#define NSTAT (VR_STAT_LIMIT_LATENCY_NS + 1)

static size_t P;
static bool in_scenario;

/* which kinds of region a run creates (bits of enum kind) */
enum kind { K_MEMFD, K_FROM_FD, K_ANON, K_ADOPTED, NKINDS };
static const char *const kind_name[NKINDS] = { "memfd", "from fd", "anon", "adopted" };
#define KINDS_MEMFD ((1u << K_MEMFD) | (1u << K_FROM_FD))
#define KINDS_ANON ((1u << K_ANON) | (1u << K_ADOPTED))
static unsigned kinds = KINDS_MEMFD;

struct mr {
	size_t s, e;
	uint64_t age;
	bool purged;
};

struct mreg {
	struct vr_region *r;
	uint8_t *base;
	const uint8_t *alias; /* a second, trap-free mapping of the memfd (S17);
				 NULL for anonymous memory */
	uint8_t *adopted;     /* the caller's mapping of an adopted region */
	enum kind kind;
	size_t size, npages;
	struct mr *g;
	int n, cap;
	uint8_t *shadow; /* expected content */
};

struct model {
	struct vr_ctx *c;
	struct mreg reg[NREG];
	uint64_t age, reclaimed, purges, events;
	size_t limit;
	uint64_t seed;
	long op;
	char log[LOGN][200];
	long nlog;
	long n_purged_unmarks, n_limit_purges, n_lru_purged, n_at_once;
};

static struct model M;
static struct vt_rng rng;

/* ---- reporting ---- */

__attribute__((format(printf, 1, 2))) static void logop(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = M.log[M.nlog % LOGN];
	int k = snprintf(s, sizeof(M.log[0]), "#%ld ", M.op);
	vsnprintf(s + k, sizeof(M.log[0]) - (size_t)k, fmt, ap);
	va_end(ap);
	M.nlog++;
}

/* append the result to the last log line */
__attribute__((format(printf, 1, 2))) static void logres(const char *fmt, ...)
{
	va_list ap;
	char *s = M.log[(M.nlog - 1 + LOGN) % LOGN];
	size_t k = strlen(s);
	va_start(ap, fmt);
	vsnprintf(s + k, sizeof(M.log[0]) - k, fmt, ap);
	va_end(ap);
}

__attribute__((noreturn, format(printf, 2, 3))) static void mismatch(int line, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "MODEL MISMATCH (test-model.c:%d) seed %" PRIu64 " op %ld: ", line, M.seed,
		M.op);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nlast operations (replay with VT_SEED=%" PRIu64 "):\n", M.seed);
	for (long i = M.nlog > LOGN ? M.nlog - LOGN : 0; i < M.nlog; i++)
		fprintf(stderr, "  %s\n", M.log[i % LOGN]);
	for (int k = 0; k < NREG; k++) {
		struct mreg *R = &M.reg[k];
		if (!R->r)
			continue;
		fprintf(stderr, "model region %d (size %zu):", k, R->size);
		for (int i = 0; i < R->n; i++)
			fprintf(stderr, " [%zu,%zu)%s@%" PRIu64, R->g[i].s, R->g[i].e,
				R->g[i].purged ? "P" : "", R->g[i].age);
		fputc('\n', stderr);
	}
	fflush(stderr);
	if (in_scenario)
		_exit(3);
	fail_msg("MODEL MISMATCH");
	abort();
}
#define MM(cond, ...)                                                                              \
	do {                                                                                       \
		if (!(cond))                                                                       \
			mismatch(__LINE__, __VA_ARGS__);                                           \
	} while (0)

/* ---- model helpers ---- */

static size_t whole_bytes(size_t s, size_t e)
{
	size_t a = (s + P - 1) / P * P, b = e / P * P;
	return b > a ? b - a : 0;
}

static void ins(struct mreg *R, int i, struct mr x)
{
	if (R->n == R->cap) {
		R->cap = R->cap ? 2 * R->cap : 64;
		R->g = realloc(R->g, (size_t)R->cap * sizeof(*R->g));
		assert_non_null(R->g);
	}
	memmove(&R->g[i + 1], &R->g[i], (size_t)(R->n - i) * sizeof(*R->g));
	R->g[i] = x;
	R->n++;
}

static void del(struct mreg *R, int i)
{
	memmove(&R->g[i], &R->g[i + 1], (size_t)(R->n - i - 1) * sizeof(*R->g));
	R->n--;
}

/* first range with e > off */
static int first_after(const struct mreg *R, size_t off)
{
	int lo = 0, hi = R->n;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (R->g[mid].e <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* discarded pages: the whole pages of purged ranges */
static void discarded(const struct mreg *R, uint8_t *d)
{
	memset(d, 0, R->npages);
	for (int i = 0; i < R->n; i++) {
		if (!R->g[i].purged)
			continue;
		for (size_t p = (R->g[i].s + P - 1) / P; (p + 1) * P <= R->g[i].e; p++)
			d[p] = 1;
	}
}

static int model_status(const struct mreg *R, size_t a, size_t b)
{
	int st = 0;
	for (int i = first_after(R, a); i < R->n && R->g[i].s < b; i++)
		st |= R->g[i].purged ? VP : V;
	return st;
}

static void model_stats(uint64_t *st)
{
	memset(st, 0, NSTAT * sizeof(*st));
	for (int k = 0; k < NREG; k++) {
		struct mreg *R = &M.reg[k];
		if (!R->r)
			continue;
		st[VR_STAT_REGIONS]++;
		for (int i = 0; i < R->n; i++) {
			st[VR_STAT_RANGES]++;
			st[R->g[i].purged ? VR_STAT_PURGED_BYTES : VR_STAT_VOLATILE_BYTES] +=
				R->g[i].e - R->g[i].s;
		}
	}
	st[VR_STAT_RECLAIMED_BYTES] = M.reclaimed;
	st[VR_STAT_PURGES] = M.purges;
	st[VR_STAT_PRESSURE_EVENTS] = M.events;
}

static uint64_t model_volatile(void)
{
	uint64_t st[NSTAT];
	model_stats(st);
	return st[VR_STAT_VOLATILE_BYTES];
}

/* ---- comparisons ---- */

static const char *const stat_name[NSTAT] = { "REGIONS",      "RANGES",          "VOLATILE_BYTES",
					      "PURGED_BYTES", "RECLAIMED_BYTES", "PURGES",
					      "FAULTS",       "PRESSURE_EVENTS", "SKIPPED" };

static void check_stats(void)
{
	uint64_t st[NSTAT];
	model_stats(st);
	for (int i = 0; i < NSTAT; i++) {
		uint64_t got = vr_ctx_stat(M.c, (enum vr_stat)i);
		MM(got == st[i], "VR_STAT_%s = %" PRIu64 ", model %" PRIu64, stat_name[i], got,
		   st[i]);
	}
}

/* every range and every gap between ranges, and the ends of the region */
static void check_structure(void)
{
	for (int k = 0; k < NREG; k++) {
		struct mreg *R = &M.reg[k];
		if (!R->r)
			continue;
		size_t prev = 0;
		for (int i = 0; i <= R->n; i++) {
			size_t gs = prev, ge = i < R->n ? R->g[i].s : R->size;
			if (ge > gs) {
				int s = vr_status(R->r, gs, ge - gs);
				MM(s == 0, "region %d gap [%zu, %zu): status %d, model 0", k, gs,
				   ge, s);
			}
			if (i == R->n)
				break;
			struct mr *x = &R->g[i];
			int s = vr_status(R->r, x->s, x->e - x->s);
			MM(s == (x->purged ? VP : V),
			   "region %d range [%zu, %zu): status %d, model %d", k, x->s, x->e, s,
			   x->purged ? VP : V);
			prev = x->e;
		}
	}
}

/* whether the kernel can read [p, p + n): a trapped page gives EFAULT
 * (S14) instead of a crash of the test */
static int probe_pipe[2] = { -1, -1 };

static bool readable(const uint8_t *p, size_t n)
{
	if (probe_pipe[0] < 0)
		assert_int_equal(pipe2(probe_pipe, O_CLOEXEC | O_NONBLOCK), 0);
	static uint8_t sink[65536];
	while (n) {
		size_t k = n < P ? n : P;
		ssize_t w = write(probe_pipe[1], p, k);
		if (w < 0 && errno == EFAULT)
			return false;
		assert_true(w == (ssize_t)k);
		assert_true(read(probe_pipe[0], sink, k) == (ssize_t)k);
		p += k;
		n -= k;
	}
	return true;
}

static void check_bytes(int k, size_t a, size_t b, const char *what)
{
	struct mreg *R = &M.reg[k];
	for (size_t x = a; x < b;) {
		size_t e = (x / P + 1) * P < b ? (x / P + 1) * P : b;
		MM(readable(R->base + x, e - x),
		   "%s: region %d [%zu, %zu) (page %zu) is not accessible (EFAULT)", what, k, x, e,
		   x / P);
		x = e;
	}
	if (memcmp(R->base + a, R->shadow + a, b - a) == 0)
		return;
	size_t i = a;
	while (R->base[i] == R->shadow[i])
		i++;
	int st = model_status(R, i, i + 1);
	MM(0, "%s: region %d byte %zu (page %zu) reads %#x, model %#x (model state %d)", what, k, i,
	   i / P, R->base[i], R->shadow[i], st);
}

/* the content of every page that is not discarded */
static void check_content(void)
{
	uint8_t d[MAXPG];
	for (int k = 0; k < NREG; k++) {
		struct mreg *R = &M.reg[k];
		if (!R->r)
			continue;
		discarded(R, d);
		for (size_t p = 0; p < R->npages; p++) {
			if (d[p]) {
				/* punched: other mappings read zeros (S17); anonymous
				 * memory: trapped and no longer in this process */
				size_t e = (p + 1) * P < R->size ? (p + 1) * P : R->size;
				if (R->alias)
					MM(vt_all_zero(R->alias + p * P, e - p * P),
					   "region %d page %zu is discarded in the model but its "
					   "data is still in the memfd",
					   k, p);
				else
					MM(!readable(R->base + p * P, P) &&
						   vt_pages_present(R->base + p * P, P) == 0,
					   "region %d page %zu is discarded in the model but is "
					   "readable or present",
					   k, p);
				continue;
			}
			size_t e = (p + 1) * P < R->size ? (p + 1) * P : R->size;
			check_bytes(k, p * P, e, "readable page");
			MM(!R->alias || memcmp(R->alias + p * P, R->shadow + p * P, e - p * P) == 0,
			   "region %d page %zu: the second mapping differs", k, p);
		}
	}
}

/* ---- purge by the library, observed ---- */

enum goal { G_NONE, G_BYTES, G_VOLATILE };

struct cand {
	int k, i; /* region, index at observation time */
	size_t s, e;
	uint64_t age, pages;
	bool taken;
};

static bool goal_met(enum goal g, uint64_t n, uint64_t v0, uint64_t pages, uint64_t len)
{
	if (g == G_NONE)
		return true;
	if (g == G_BYTES)
		return pages >= n;
	return v0 - len <= n;
}

static int collect(struct cand *cs)
{
	int nc = 0;
	for (int k = 0; k < NREG; k++) {
		struct mreg *R = &M.reg[k];
		if (!R->r)
			continue;
		for (int i = 0; i < R->n; i++) {
			struct mr *x = &R->g[i];
			uint64_t w = whole_bytes(x->s, x->e);
			if (!x->purged && w)
				cs[nc++] = (struct cand){ k, i, x->s, x->e, x->age, w, false };
		}
	}
	return nc;
}

/* after the library call: which candidates were purged; validate, adopt;
 * returns the bytes reclaimed */
static uint64_t observe(struct cand *cs, int nc, enum goal g, uint64_t n, uint64_t v0,
			const char *what)
{
	uint64_t pages = 0, len = 0, maxage = 0;
	int ntaken = 0;
	for (int j = 0; j < nc; j++) {
		struct cand *x = &cs[j];
		int s = vr_status(M.reg[x->k].r, x->s, x->e - x->s);
		MM(s == V || s == VP, "%s: candidate region %d [%zu, %zu): status %d", what, x->k,
		   x->s, x->e, s);
		if (s == VP) {
			x->taken = true;
			ntaken++;
			pages += x->pages;
			len += x->e - x->s;
			if (x->age > maxage)
				maxage = x->age;
		}
	}
	if (goal_met(g, n, v0, 0, 0)) {
		MM(ntaken == 0, "%s: purged %d ranges although nothing was to be purged", what,
		   ntaken);
		return 0;
	}
	if (ntaken == 0) {
		MM(nc == 0, "%s: purged nothing while %d ranges were purgeable", what, nc);
		return 0;
	}
	for (int j = 0; j < nc; j++)
		MM(cs[j].taken || cs[j].age >= maxage,
		   "%s: region %d [%zu, %zu) (age %" PRIu64 ") skipped while a younger one "
		   "(age %" PRIu64 ") was purged",
		   what, cs[j].k, cs[j].s, cs[j].e, cs[j].age, maxage);
	MM(goal_met(g, n, v0, pages, len) || ntaken == nc,
	   "%s: stopped before the goal with purgeable ranges left", what);
	bool needed = false;
	for (int j = 0; j < nc; j++)
		if (cs[j].taken && cs[j].age == maxage &&
		    !goal_met(g, n, v0, pages - cs[j].pages, len - (cs[j].e - cs[j].s)))
			needed = true;
	MM(needed, "%s: purged more ranges than needed (%d)", what, ntaken);
	/* adopt */
	for (int j = 0; j < nc; j++) {
		if (!cs[j].taken)
			continue;
		struct mreg *R = &M.reg[cs[j].k];
		struct mr *x = &R->g[cs[j].i];
		x->purged = true;
		for (size_t p = (x->s + P - 1) / P; (p + 1) * P <= x->e; p++)
			memset(R->shadow + p * P, 0, P);
		M.reclaimed += cs[j].pages;
		M.purges++;
		M.n_lru_purged++;
	}
	return pages;
}

/* ---- region life ---- */

static void region_create(int k)
{
	struct mreg *R = &M.reg[k];
	size_t np = 1 + vt_below(&rng, MAXPG);
	size_t size = np * P;
	if (vt_below(&rng, 3) == 0)
		size -= vt_below(&rng, P); /* not a page multiple */
	if (size == 0)
		size = 1;
	free(R->shadow);
	R->shadow = calloc(1, size);
	assert_non_null(R->shadow);
	enum kind kd;
	do
		kd = (enum kind)vt_below(&rng, NKINDS);
	while (!(kinds & (1u << kd)));
	if (kd == K_MEMFD && vt_below(&rng, 2))
		kd = (kinds & (1u << K_FROM_FD)) ? K_FROM_FD : K_MEMFD;
	R->adopted = NULL;
	R->alias = NULL;
	if (kd == K_FROM_FD) {
		/* an existing memfd with data: fresh, non-volatile state (S17) */
		int fd = memfd_create("vt-model-fd", MFD_CLOEXEC);
		assert_true(fd >= 0);
		assert_int_equal(ftruncate(fd, (off_t)size), 0);
		vt_fill(R->shadow, 0, size, (uint64_t)M.op * 131 + 5);
		assert_int_equal(pwrite(fd, R->shadow, size, 0), (ssize_t)size);
		MM(vr_region_from_fd(M.c, fd, 0, &R->r) == 0, "vr_region_from_fd(%zu) failed",
		   size);
		close(fd);
	} else if (kd == K_ADOPTED) {
		/* the caller's memory with data, a whole number of pages */
		size = np * P;
		free(R->shadow);
		R->shadow = calloc(1, size);
		assert_non_null(R->shadow);
		R->adopted = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				  -1, 0);
		assert_true(R->adopted != MAP_FAILED);
		vt_fill(R->shadow, 0, size, (uint64_t)M.op * 131 + 7);
		memcpy(R->adopted, R->shadow, size);
		MM(vr_region_adopt(M.c, R->adopted, size, 0, &R->r) == 0,
		   "vr_region_adopt(%zu) failed", size);
	} else {
		unsigned fl = kd == K_ANON ? VR_REGION_ANON : 0;
		MM(vr_region_new(M.c, "vt-model", size, fl, &R->r) == 0,
		   "vr_region_new(%zu, %#x) failed", size, fl);
	}
	R->kind = kd;
	R->base = vr_region_base(R->r);
	R->size = size;
	R->npages = (size + P - 1) / P;
	R->n = 0;
	if (kd == K_MEMFD || kd == K_FROM_FD) {
		void *al = mmap(NULL, R->npages * P, PROT_READ, MAP_SHARED, vr_region_fd(R->r), 0);
		assert_true(al != MAP_FAILED);
		R->alias = al;
	} else {
		MM(vr_region_fd(R->r) == -EBADF, "vr_region_fd of anonymous memory");
	}
	logop("create region %d size %zu (%s)", k, size, kind_name[kd]);
}

/* the caller's memory outlives its adopted region: mapped, readable,
 * writable, discarded pages reading 0, other bytes as they were (S26) */
static void adopted_gone(struct mreg *R)
{
	uint8_t d[MAXPG];
	discarded(R, d);
	for (size_t p = 0; p < R->npages; p++) {
		MM(readable(R->adopted + p * P, P),
		   "page %zu of a destroyed adopted region is not accessible", p);
		if (d[p])
			memset(R->shadow + p * P, 0, P);
	}
	MM(memcmp(R->adopted, R->shadow, R->size) == 0,
	   "a destroyed adopted region's memory differs from the model");
	memset(R->adopted, 0xa5, R->size);
	munmap(R->adopted, R->size);
	R->adopted = NULL;
}

static void region_destroy(int k)
{
	struct mreg *R = &M.reg[k];
	logop("destroy region %d", k);
	vr_region_destroy(R->r);
	if (R->alias)
		munmap((void *)R->alias, R->npages * P);
	if (R->adopted)
		adopted_gone(R);
	R->alias = NULL;
	R->r = NULL;
	R->n = 0;
}

/* ---- choosing intervals ---- */

static size_t pick_point(const struct mreg *R)
{
	size_t x;
	switch (vt_below(&rng, 5)) {
	case 0:
	case 1:
		x = vt_below(&rng, R->size + 1);
		break;
	case 2:
		x = vt_below(&rng, R->npages + 1) * P;
		break;
	default:
		if (R->n) {
			const struct mr *g = &R->g[vt_below(&rng, (uint64_t)R->n)];
			x = vt_below(&rng, 2) ? g->s : g->e;
		} else {
			x = vt_below(&rng, R->size + 1);
		}
		break;
	}
	switch (vt_below(&rng, 6)) {
	case 0:
		x = x ? x - 1 : 0;
		break;
	case 1:
		x++;
		break;
	default:
		break;
	}
	return x > R->size ? R->size : x;
}

static void pick_interval(const struct mreg *R, size_t *a, size_t *b)
{
	size_t x = pick_point(R), len;
	switch (vt_below(&rng, 6)) {
	case 0:
		len = 1 + vt_below(&rng, 64);
		break;
	case 1:
		len = 1 + vt_below(&rng, 2 * P);
		break;
	case 2:
		len = (1 + vt_below(&rng, 8)) * P;
		break;
	case 3:
		len = 1 + vt_below(&rng, R->size);
		break;
	default: {
		size_t y = pick_point(R);
		if (y < x) {
			size_t t = x;
			x = y;
			y = t;
		}
		len = y > x ? y - x : 1 + vt_below(&rng, 3 * P);
		break;
	}
	}
	if (x >= R->size)
		x = R->size - 1 - vt_below(&rng, R->size < 16 ? R->size : 16);
	*a = x;
	*b = R->size - x < len ? R->size : x + len;
}

static int pick_region(void)
{
	for (;;) {
		int k = (int)vt_below(&rng, NREG);
		if (M.reg[k].r)
			return k;
	}
}

/* ---- operations ---- */

/* S10 after a mark: purge while over the limit */
static void limit_after(struct cand *cs, int nc, uint64_t v0, const char *what)
{
	bool over = M.limit && v0 > M.limit;
	uint64_t got = observe(cs, nc, over ? G_VOLATILE : G_NONE, M.limit, v0, what);
	if (got)
		M.n_limit_purges++;
}

static void op_mark(void)
{
	int k = pick_region();
	struct mreg *R = &M.reg[k];
	size_t a, b;
	pick_interval(R, &a, &b);
	bool ptr = vt_below(&rng, 4) == 0;
	logop("mark%s r%d [%zu, %zu)", ptr ? "_ptr" : "", k, a, b);

	/* the model */
	int expect = -1;
	for (int i = first_after(R, a); i < R->n && R->g[i].s <= a; i++)
		if (R->g[i].e >= b)
			expect = R->g[i].purged ? VR_PURGED : VR_INTACT; /* inside: no change */
	if (expect < 0) {
		size_t s = a, e = b;
		bool purged = false;
		int i = first_after(R, a);
		while (i < R->n && R->g[i].s < b) { /* step 1: join overlaps */
			s = R->g[i].s < s ? R->g[i].s : s;
			e = R->g[i].e > e ? R->g[i].e : e;
			purged |= R->g[i].purged;
			i++;
		}
		/* step 2: absorb adjacent ranges of the same state */
		int lo = first_after(R, a), hi = i; /* constituents [lo, hi) */
		while (lo > 0 && R->g[lo - 1].e == s && R->g[lo - 1].purged == purged)
			s = R->g[--lo].s;
		while (hi < R->n && R->g[hi].s == e && R->g[hi].purged == purged)
			e = R->g[hi++].e;
		if (purged) { /* S4: purge the coalesced range at once */
			uint8_t d[MAXPG];
			discarded(R, d);
			for (size_t p = (s + P - 1) / P; (p + 1) * P <= e; p++) {
				if (d[p])
					continue;
				memset(R->shadow + p * P, 0, P);
				M.reclaimed += P;
			}
			M.purges++;
			M.n_at_once++;
		}
		for (int j = lo; j < hi; j++)
			del(R, lo);
		ins(R, lo, (struct mr){ s, e, ++M.age, purged });
	}
	struct cand cs[NREG * MAXPG * 4];
	int nc = collect(cs);
	uint64_t v0 = model_volatile();

	int rc = ptr ? vr_mark_ptr(R->base + a, b - a) : vr_mark(R->r, a, b - a);
	logres(" -> %d", rc);
	limit_after(cs, nc, v0, "vr_mark limit");
	int i = first_after(R, a);
	MM(i < R->n && R->g[i].s <= a && R->g[i].e >= b, "model: marked interval not in a range");
	expect = R->g[i].purged ? VR_PURGED : VR_INTACT;
	MM(rc == expect, "vr_mark(r%d, %zu, %zu) = %d, model %d", k, a, b - a, rc, expect);
}

static void op_unmark(void)
{
	int k = pick_region();
	struct mreg *R = &M.reg[k];
	size_t a, b;
	pick_interval(R, &a, &b);
	bool ptr = vt_below(&rng, 4) == 0;
	logop("unmark%s r%d [%zu, %zu)", ptr ? "_ptr" : "", k, a, b);
	int expect = VR_INTACT;
	int i = first_after(R, a);
	while (i < R->n && R->g[i].s < b) {
		struct mr x = R->g[i];
		if (x.purged)
			expect = VR_PURGED;
		del(R, i);
		if (x.s < a)
			ins(R, i++, (struct mr){ x.s, a, x.age, x.purged });
		if (x.e > b)
			ins(R, i++, (struct mr){ b, x.e, x.age, x.purged });
	}
	int rc = ptr ? vr_unmark_ptr(R->base + a, b - a) : vr_unmark(R->r, a, b - a);
	logres(" -> %d", rc);
	MM(rc == expect, "vr_unmark(r%d, %zu, %zu) = %d, model %d", k, a, b - a, rc, expect);
	if (rc == VR_PURGED)
		M.n_purged_unmarks++;
	/* readable now; exact: discarded pages read zero, the rest kept (S5) */
	check_bytes(k, a, b,
		    rc == VR_PURGED ? "after a VR_PURGED unmark" : "after a VR_INTACT unmark");
}

static void op_status(void)
{
	for (int n = 0; n < 4; n++) {
		int k = pick_region();
		struct mreg *R = &M.reg[k];
		size_t a, b;
		pick_interval(R, &a, &b);
		int s = vr_status(R->r, a, b - a), e = model_status(R, a, b);
		MM(s == e, "vr_status(r%d, %zu, %zu) = %d, model %d", k, a, b - a, s, e);
	}
}

/* write to the bytes that may be written: non-volatile and unpurged */
static void op_write(void)
{
	int k = pick_region();
	struct mreg *R = &M.reg[k];
	size_t a, b;
	pick_interval(R, &a, &b);
	logop("write r%d [%zu, %zu)", k, a, b);
	uint64_t gen = (uint64_t)M.op * 31 + 7;
	size_t x = a;
	int i = first_after(R, a);
	while (x < b) {
		size_t e = b;
		bool ok = true;
		if (i < R->n && R->g[i].s <= x) {
			e = R->g[i].e < b ? R->g[i].e : b;
			ok = !R->g[i].purged;
			i++;
		} else if (i < R->n && R->g[i].s < b) {
			e = R->g[i].s;
		}
		if (ok) {
			vt_fill(R->base + x, x, e - x, gen);
			vt_fill(R->shadow + x, x, e - x, gen);
		}
		x = e;
	}
}

static void op_purge(void)
{
	size_t n;
	switch (vt_below(&rng, 5)) {
	case 0:
		n = 0;
		break;
	case 1:
		n = 1;
		break;
	case 2:
		n = 1 + vt_below(&rng, 10 * P);
		break;
	case 3:
		n = (1 + vt_below(&rng, 4)) * P;
		break;
	default:
		n = SIZE_MAX;
		break;
	}
	logop("purge %zu", n);
	struct cand cs[NREG * MAXPG * 4];
	int nc = collect(cs);
	uint64_t v0 = model_volatile();
	ssize_t rc = vr_ctx_purge(M.c, n);
	logres(" -> %zd", rc);
	uint64_t got = observe(cs, nc, n ? G_BYTES : G_NONE, n, v0, "vr_ctx_purge");
	MM(rc == (ssize_t)got, "vr_ctx_purge(%zu) = %zd, model %" PRIu64, n, rc, got);
}

static void op_pressure(void)
{
	int lv;
	switch (vt_below(&rng, 10)) {
	case 0:
	case 1:
		lv = VR_PRESSURE_NONE;
		break;
	case 2:
	case 3:
		lv = VR_PRESSURE_CRITICAL;
		break;
	case 4:
		lv = vt_below(&rng, 2) ? 3 : -1;
		break;
	default:
		lv = VR_PRESSURE_MODERATE;
		break;
	}
	logop("pressure %d", lv);
	struct cand cs[NREG * MAXPG * 4];
	int nc = collect(cs);
	uint64_t v0 = model_volatile();
	ssize_t rc = vr_ctx_notify_pressure(M.c, (enum vr_pressure)lv);
	logres(" -> %zd", rc);
	if (lv < 0 || lv > VR_PRESSURE_CRITICAL) {
		MM(rc == -EINVAL, "vr_ctx_notify_pressure(%d) = %zd, expected -EINVAL", lv, rc);
		observe(cs, nc, G_NONE, 0, v0, "invalid pressure");
		return;
	}
	uint64_t got;
	if (lv == VR_PRESSURE_NONE) {
		got = observe(cs, nc, G_NONE, 0, v0, "pressure NONE");
	} else {
		M.events++;
		if (lv == VR_PRESSURE_CRITICAL)
			got = observe(cs, nc, G_BYTES, UINT64_MAX, v0, "pressure CRITICAL");
		else
			got = observe(cs, nc, G_VOLATILE, v0 / 2, v0, "pressure MODERATE");
	}
	MM(rc == (ssize_t)got, "vr_ctx_notify_pressure(%d) = %zd, model %" PRIu64, lv, rc, got);
}

static void op_limit(void)
{
	size_t n = vt_below(&rng, 5) < 2 ? 0 : 1 + vt_below(&rng, 30 * P);
	logop("set_limit %zu", n);
	struct cand cs[NREG * MAXPG * 4];
	int nc = collect(cs);
	uint64_t v0 = model_volatile();
	int rc = vr_ctx_set_limit(M.c, n);
	logres(" -> %d", rc);
	MM(rc == 0, "vr_ctx_set_limit(%zu) = %d", n, rc);
	M.limit = n;
	limit_after(cs, nc, v0, "vr_ctx_set_limit");
}

static void op_invalid(void)
{
	int k = pick_region();
	struct mreg *R = &M.reg[k];
	/* pointer calls start inside the region: at its end another region
	 * may follow in memory, and that call would be valid */
	size_t a = vt_below(&rng, R->size), len;
	switch (vt_below(&rng, 3)) {
	case 0:
		len = 0;
		break;
	case 1:
		len = R->size - a + 1 + vt_below(&rng, 2 * P);
		break;
	default:
		len = SIZE_MAX - vt_below(&rng, 4);
		break;
	}
	int fn = (int)vt_below(&rng, 5);
	if (fn < 3 && vt_below(&rng, 2))
		a = R->size + vt_below(&rng, 2); /* offset calls: at or past the end too */
	logop("invalid %d r%d (%zu, %zu)", fn, k, a, len);
	int rc;
	switch (fn) {
	case 0:
		rc = vr_mark(R->r, a, len);
		break;
	case 1:
		rc = vr_unmark(R->r, a, len);
		break;
	case 2:
		rc = vr_status(R->r, a, len);
		break;
	case 3:
		rc = vr_mark_ptr(R->base + a, len);
		break;
	default:
		rc = vr_unmark_ptr(R->base + a, len);
		break;
	}
	logres(" -> %d", rc);
	MM(rc == -EINVAL, "invalid call %d (r%d, %zu, %zu) returned %d", fn, k, a, len, rc);
}

static void op_recreate(void)
{
	int k = (int)vt_below(&rng, NREG);
	int live = 0;
	for (int i = 0; i < NREG; i++)
		live += M.reg[i].r != NULL;
	if (M.reg[k].r && live > 1)
		region_destroy(k);
	else if (M.reg[k].r)
		return;
	if (vt_below(&rng, 4))
		region_create(k);
}

static void run_seed(uint64_t seed, long ops)
{
	memset(&M, 0, sizeof(M));
	M.seed = seed;
	vt_seed(&rng, seed);
	MM(vr_ctx_new(VR_CTX_NO_MONITOR, &M.c) == 0, "vr_ctx_new failed");
	int nreg = 2 + (int)vt_below(&rng, 2);
	for (int k = 0; k < nreg; k++)
		region_create(k);
	check_stats();
	for (M.op = 1; M.op <= ops; M.op++) {
		unsigned w = (unsigned)vt_below(&rng, 1000);
		if (w < 300)
			op_mark();
		else if (w < 520)
			op_unmark();
		else if (w < 620)
			op_status();
		else if (w < 760)
			op_write();
		else if (w < 840)
			op_purge();
		else if (w < 890)
			op_pressure();
		else if (w < 920)
			op_limit();
		else if (w < 950)
			op_invalid();
		else if (w < 965)
			op_recreate();
		else
			check_content();
		check_stats();
		check_structure();
		if (M.op % 32 == 0)
			check_content();
	}
	check_content();
	/* everything unmarked at the end: all readable, exact */
	for (int k = 0; k < NREG; k++) {
		struct mreg *R = &M.reg[k];
		if (!R->r)
			continue;
		logop("unmark all r%d", k);
		int expect = model_status(R, 0, R->size) & VR_STATE_PURGED ? VR_PURGED : VR_INTACT;
		R->n = 0;
		int rc = vr_unmark(R->r, 0, R->size);
		MM(rc == expect, "final vr_unmark = %d, model %d", rc, expect);
		check_bytes(k, 0, R->size, "after the final unmark");
	}
	check_stats();
	fprintf(stderr,
		"seed %" PRIu64 ": %ld ops, %" PRIu64 " purges (%ld by LRU, %ld at once, %ld limit "
		"runs), %ld VR_PURGED unmarks, %" PRIu64 " bytes reclaimed\n",
		seed, ops, M.purges, M.n_lru_purged, M.n_at_once, M.n_limit_purges,
		M.n_purged_unmarks, M.reclaimed);
	MM(M.n_lru_purged > 0 && M.n_at_once > 0 && M.n_purged_unmarks > 0,
	   "the run exercised too little");
	vr_ctx_destroy(M.c);
	for (int k = 0; k < NREG; k++) {
		if (M.reg[k].r && M.reg[k].alias)
			munmap((void *)M.reg[k].alias, M.reg[k].npages * P);
		if (M.reg[k].r && M.reg[k].adopted)
			adopted_gone(&M.reg[k]);
		free(M.reg[k].g);
		free(M.reg[k].shadow);
	}
	memset(&M, 0, sizeof(M));
}

static void run_seeds(const char *what, int nseeds, long ops)
{
	uint64_t base = vt_get_seed(what);
	for (int i = 0; i < nseeds; i++)
		run_seed(base + (uint64_t)i, ops);
}

static void test_model_default_backend(void **state)
{
	(void)state;
	run_seeds("test-model", 6, 6000);
}

/* the same model over anonymous memory: VR_REGION_ANON and adopted */
static void test_model_anon(void **state)
{
	(void)state;
	kinds = KINDS_ANON;
	run_seeds("test-model (anonymous)", 4, 6000);
	kinds = KINDS_MEMFD;
}

/* every kind of region in one ctx */
static void scenario_mprotect(void)
{
	in_scenario = true;
	kinds = KINDS_MEMFD | KINDS_ANON;
	run_seeds("test-model (VRANGE_TRAP=mprotect, all kinds)", 4, 6000);
	CK_EQ(vr_trap_backend(), VR_TRAP_MPROTECT);
}

static void test_model_mprotect_backend(void **state)
{
	(void)state;
	setenv("VRANGE_TRAP", "mprotect", 1);
	int st = vt_run_scenario("mprotect");
	unsetenv("VRANGE_TRAP");
	vt_assert_exit_ok(st);
}

int main(int argc, char **argv)
{
	P = vt_pg();
	static const struct vt_scenario sc[] = { { "mprotect", scenario_mprotect } };
	int rc = vt_scenario_dispatch(argc, argv, sc, 1, 120);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_model_default_backend),
		cmocka_unit_test(test_model_anon),
		cmocka_unit_test(test_model_mprotect_backend),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
