/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-obj-order.c - one LRU for ranges and objects (API S8, S20, S22),
 * checked step by step against a model of ages
 *
 * Units: 5 one-page ranges (of one region, a page apart so that they
 * never merge), 5 one-page objects, and the 2 pages of 32 objects of 256
 * bytes.  A seeded run interleaves the calls that make every unit
 * volatile with calls that must rejuvenate (pin+unpin, unmark+mark, a pin
 * and a later unpin) and calls that must not (a mark inside a volatile
 * range, a second unpin, a pin of a pinned object).  The model's clock
 * ticks at every call that rejuvenates: a range is as old as its last
 * mark, a large object as its last unpin, a page of small objects as its
 * youngest unpin (S22), and a page is a unit only once all its objects
 * are unpinned (S21).  Then vr_ctx_purge(ctx, page) must purge exactly
 * the oldest unit, one page, at every step.
 *
 * VT_SEED=<seed> runs that seed first; VT_ORDER_SEEDS the number of seeds
 * (default 400).
 */
#include "tests.h"

#define NRANGE 5
#define NLARGE 5
#define NSMALL 32
#define NPAGES 2
#define NUNIT (NRANGE + NLARGE + NPAGES)
#define MAXOPS 400

static size_t P;

struct order_run {
	struct vr_ctx *c;
	struct vr_region *r;
	struct vr_obj *large[NLARGE], *small[NSMALL];
	int page_of[NSMALL]; /* 0 or 1 */
	bool marked[NRANGE], lpinned[NLARGE], spinned[NSMALL];
	uint64_t rage[NRANGE], lage[NLARGE], sage[NSMALL], clock;
	char log[MAXOPS][48]; /* the calls, printed on a failure */
	int nlog;
	uint64_t seed;
};

__attribute__((format(printf, 2, 3))) static void note(struct order_run *m, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (m->nlog < MAXOPS)
		vsnprintf(m->log[m->nlog++], sizeof(m->log[0]), fmt, ap);
	va_end(ap);
}

static uint64_t unit_age(const struct order_run *m, int u);
static bool unit_purged(const struct order_run *m, int u);
static void order_fail(struct order_run *m, const char *what, int step, int got,
				 int want)
{
	for (int k = 0; k < m->nlog; k++)
		fprintf(stderr, "  %s\n", m->log[k]);
	for (int u = 0; u < NUNIT; u++)
		fprintf(stderr, "unit %d: age %" PRIu64 "%s\n", u, unit_age(m, u),
			unit_purged(m, u) ? ", purged" : "");
	fail_msg("seed %" PRIu64 ": purge step %d: %s (purged unit %d, oldest unit %d; units "
		 "0-4 ranges, 5-9 objects, 10-11 pages)",
		 m->seed, step, what, got, want);
}

/* ---- the calls, each with its effect on the model ---- */
static void mark(struct order_run *m, int i)
{
	assert_int_equal(vr_mark(m->r, 2 * (size_t)i * P, P), VR_INTACT);
	m->marked[i] = true;
	m->rage[i] = ++m->clock;
	note(m, "mark range %d", i);
}

static void unmark(struct order_run *m, int i)
{
	assert_int_equal(vr_unmark(m->r, 2 * (size_t)i * P, P), VR_INTACT);
	m->marked[i] = false;
	note(m, "unmark range %d", i);
}

static void mark_inside(struct order_run *m, int i, struct vt_rng *g)
{
	size_t a = vt_below(g, P / 2), len = 1 + vt_below(g, P - a);
	assert_int_equal(vr_mark(m->r, 2 * (size_t)i * P + a, len), VR_INTACT);
	note(m, "mark inside range %d (no-op)", i);
}

static struct vr_obj *obj_at(struct order_run *m, int k, bool **pinned, uint64_t **age)
{
	if (k < NLARGE) {
		*pinned = &m->lpinned[k];
		*age = &m->lage[k];
		return m->large[k];
	}
	*pinned = &m->spinned[k - NLARGE];
	*age = &m->sage[k - NLARGE];
	return m->small[k - NLARGE];
}

/* objects are numbered 0-4 (large), 5-36 (small) */
static void unpin(struct order_run *m, int k)
{
	bool *pinned;
	uint64_t *age;
	struct vr_obj *o = obj_at(m, k, &pinned, &age);
	assert_int_equal(vr_obj_unpin(o), 0);
	if (*pinned)
		*age = ++m->clock;
	if (*pinned)
		note(m, "unpin object %d", k);
	else
		note(m, "unpin unpinned object %d (no-op)", k);
	*pinned = false;
}

static void pin(struct order_run *m, int k)
{
	bool *pinned;
	uint64_t *age;
	struct vr_obj *o = obj_at(m, k, &pinned, &age);
	assert_int_equal(vr_obj_pin(o), VR_INTACT);
	if (*pinned)
		note(m, "pin pinned object %d (no-op)", k);
	else
		note(m, "pin object %d", k);
	*pinned = true;
}

/* ---- the model's units ---- */
static bool unit_volatile(const struct order_run *m, int u)
{
	if (u < NRANGE)
		return m->marked[u];
	if (u < NRANGE + NLARGE)
		return !m->lpinned[u - NRANGE];
	for (int k = 0; k < NSMALL; k++)
		if (m->page_of[k] == u - NRANGE - NLARGE && m->spinned[k])
			return false;
	return true;
}

static uint64_t unit_age(const struct order_run *m, int u)
{
	if (u < NRANGE)
		return m->rage[u];
	if (u < NRANGE + NLARGE)
		return m->lage[u - NRANGE];
	uint64_t a = 0;
	for (int k = 0; k < NSMALL; k++)
		if (m->page_of[k] == u - NRANGE - NLARGE && m->sage[k] > a)
			a = m->sage[k];
	return a;
}

/* the library's view: is unit u purged? (every object of a page) */
static bool unit_purged(const struct order_run *m, int u)
{
	const int vp = VR_STATE_VOLATILE | VR_STATE_PURGED;
	if (u < NRANGE)
		return vr_status(m->r, 2 * (size_t)u * P, P) == vp;
	if (u < NRANGE + NLARGE)
		return vr_obj_status(m->large[u - NRANGE]) == vp;
	int n = 0, np = 0;
	for (int k = 0; k < NSMALL; k++) {
		if (m->page_of[k] != u - NRANGE - NLARGE)
			continue;
		n++;
		np += vr_obj_status(m->small[k]) == vp;
	}
	if (np != 0 && np != n)
		fail_msg("seed %" PRIu64 ": page unit %d half purged (%d of %d objects)", m->seed,
			 u, np, n);
	return np == n;
}

/* ---- one run ---- */
static void setup(struct order_run *m)
{
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &m->c), 0);
	assert_int_equal(vr_region_new(m->c, "vt-order", 2 * NRANGE * P, 0, &m->r), 0);
	/* the small objects first: a fresh ctx puts them on pages of their own */
	uintptr_t pg[NPAGES] = { 0 };
	for (int k = 0; k < NSMALL; k++) {
		assert_int_equal(vr_obj_new(m->c, 256, 0, &m->small[k]), 0);
		uintptr_t a = (uintptr_t)vr_obj_ptr(m->small[k]) / P;
		assert_int_equal(a, ((uintptr_t)vr_obj_ptr(m->small[k]) + 255) / P);
		int i = 0;
		while (i < NPAGES && pg[i] && pg[i] != a)
			i++;
		if (i == NPAGES)
			fail_msg("the 256-byte objects are on more than %d pages", NPAGES);
		pg[i] = a;
		m->page_of[k] = i;
		m->spinned[k] = true;
	}
	for (int k = 0; k < NLARGE; k++) {
		assert_int_equal(vr_obj_new(m->c, P, 0, &m->large[k]), 0);
		m->lpinned[k] = true;
	}
}

/* one call that does not make a unit volatile the first time */
static void noise(struct order_run *m, struct vt_rng *g)
{
	int i = (int)vt_below(g, NRANGE), k = (int)vt_below(g, NLARGE + NSMALL);
	bool *pinned;
	uint64_t *age;
	obj_at(m, k, &pinned, &age);
	switch (vt_below(g, 5)) {
	case 0: /* no-op or rejuvenation of a range */
		if (!m->marked[i])
			return;
		if (vt_below(g, 2)) {
			mark_inside(m, i, g);
		} else {
			unmark(m, i);
			mark(m, i);
		}
		return;
	case 1: /* no-op: pin a pinned object, unpin an unpinned one */
		if (*pinned)
			pin(m, k);
		else
			unpin(m, k);
		return;
	case 2: /* rejuvenation: pin + unpin */
		if (!*pinned) {
			pin(m, k);
			unpin(m, k);
		}
		return;
	case 3: /* pin now, unpin later (at the next noise call that finds it) */
		if (*pinned)
			unpin(m, k);
		else
			pin(m, k);
		return;
	default: /* unmark now, mark later */
		if (m->marked[i])
			unmark(m, i);
		else
			mark(m, i);
		return;
	}
}

static void run_order(uint64_t seed)
{
	struct order_run *m = calloc(1, sizeof(*m));
	assert_non_null(m);
	m->seed = seed;
	struct vt_rng g;
	vt_seed(&g, seed);
	setup(m);
	/* every unit made volatile once, in a random order, with noise between */
	int todo[NRANGE + NLARGE + NSMALL], n = 0;
	for (int i = 0; i < NRANGE + NLARGE + NSMALL; i++)
		todo[n++] = i;
	for (int i = n - 1; i > 0; i--) {
		int j = (int)vt_below(&g, (uint64_t)i + 1), t = todo[i];
		todo[i] = todo[j];
		todo[j] = t;
	}
	for (int t = 0; t < n; t++) {
		while (vt_below(&g, 3) == 0)
			noise(m, &g);
		if (todo[t] < NRANGE) {
			if (!m->marked[todo[t]])
				mark(m, todo[t]);
		} else if (*(todo[t] < NRANGE + NLARGE ? &m->lpinned[todo[t] - NRANGE]
						       : &m->spinned[todo[t] - NRANGE - NLARGE])) {
			unpin(m, todo[t] - NRANGE);
		}
	}
	/* noise left some units pinned or unmarked: finish them */
	for (int i = 0; i < NRANGE; i++)
		if (!m->marked[i])
			mark(m, i);
	for (int k = 0; k < NLARGE + NSMALL; k++) {
		bool *pinned;
		uint64_t *age;
		obj_at(m, k, &pinned, &age);
		if (*pinned)
			unpin(m, k);
	}
	/* purge one page at a time: exactly the oldest unit each time */
	bool done[NUNIT] = { false };
	for (int step = 0; step < NUNIT; step++) {
		int want = -1;
		for (int u = 0; u < NUNIT; u++) {
			assert_true(unit_volatile(m, u));
			if (!done[u] && (want < 0 || unit_age(m, u) < unit_age(m, want)))
				want = u;
		}
		ssize_t got = vr_ctx_purge(m->c, P);
		int which = -1;
		for (int u = 0; u < NUNIT; u++) {
			if (done[u] || !unit_purged(m, u))
				continue;
			if (which >= 0)
				order_fail(m, "two units purged", step, u, want);
			which = u;
		}
		if (which != want)
			order_fail(m, "not the oldest unit", step, which, want);
		if (got != (ssize_t)P)
			order_fail(m, "reclaimed bytes != one page", step, which, want);
		if (which >= 0)
			done[which] = true;
	}
	assert_int_equal(vr_ctx_purge(m->c, P), 0);
	vr_ctx_destroy(m->c);
	free(m);
}

static void test_order(void **state)
{
	(void)state;
	const char *e = getenv("VT_ORDER_SEEDS");
	int nseeds = e ? atoi(e) : 400;
	if (getenv("VT_SEED"))
		run_order(vt_get_seed("obj-order"));
	for (int s = 1; s <= nseeds; s++)
		run_order((uint64_t)s);
}

int main(void)
{
	P = vt_pg();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order),
	};
	return cmocka_run_group_tests_name("object order", tests, NULL, NULL);
}
