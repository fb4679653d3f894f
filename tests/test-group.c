/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-group.c - groups of objects and side-car bytes (API S35, S36)
 *
 * order: a model of priorities and ages.  Units: 4 one-page ranges
 * (priority 4), and 3 one-page objects in each of 5 groups (the default
 * one and four with seeded priorities).  A seeded run unpins / marks
 * every unit once in a random order with rejuvenations in between; then
 * purges one page at a time, either of the whole ctx (vr_ctx_purge: the
 * unit with the lowest (priority, age)) or of one group (vr_group_purge:
 * that group's oldest), and checks that exactly that unit was purged.
 * VT_GROUP_SEEDS: the number of seeds (default 200).
 */
#include "tests.h"

#define NGROUP 5 /* [0] is the default group */
#define PERG 3
#define NRANGE 4
#define NOBJ (NGROUP * PERG)
#define NUNIT (NRANGE + NOBJ)

static size_t P;

struct grun {
	struct vr_ctx *c;
	struct vr_region *r;
	struct vr_group *g[NGROUP];
	int prio[NGROUP];
	struct vr_obj *o[NOBJ];
	uint64_t age[NUNIT], clock;
	bool done[NUNIT];
	uint64_t seed;
};

static int unit_prio(const struct grun *m, int u)
{
	return u < NRANGE ? 4 : m->prio[(u - NRANGE) / PERG];
}

static bool unit_purged(const struct grun *m, int u)
{
	int vp = VR_STATE_VOLATILE | VR_STATE_PURGED;
	if (u < NRANGE)
		return vr_status(m->r, 2 * (size_t)u * P, P) == vp;
	return vr_obj_status(m->o[u - NRANGE]) == vp;
}

/* make unit u volatile (again: a rejuvenation) */
static void touch(struct grun *m, int u)
{
	if (u < NRANGE) {
		if (m->age[u])
			assert_int_equal(vr_unmark(m->r, 2 * (size_t)u * P, P), VR_INTACT);
		assert_int_equal(vr_mark(m->r, 2 * (size_t)u * P, P), VR_INTACT);
	} else {
		assert_int_equal(vr_obj_pin(m->o[u - NRANGE]), VR_INTACT);
		assert_int_equal(vr_obj_unpin(m->o[u - NRANGE]), 0);
	}
	m->age[u] = ++m->clock;
}

/* the unit the next purge of group gi (-1: the whole ctx) must take */
static int expected(const struct grun *m, int gi)
{
	int want = -1;
	for (int u = 0; u < NUNIT; u++) {
		if (m->done[u] || (gi >= 0 && (u < NRANGE || (u - NRANGE) / PERG != gi)))
			continue;
		if (want < 0 || unit_prio(m, u) < unit_prio(m, want) ||
		    (unit_prio(m, u) == unit_prio(m, want) && m->age[u] < m->age[want]))
			want = u;
	}
	return want;
}

static void run_seed(uint64_t seed)
{
	struct grun m = { .seed = seed };
	struct vt_rng g;
	vt_seed(&g, seed);
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &m.c), 0);
	assert_int_equal(vr_region_new(m.c, "vt-group", 2 * NRANGE * P, 0, &m.r), 0);
	m.g[0] = vr_ctx_group(m.c);
	m.prio[0] = 4;
	for (int i = 1; i < NGROUP; i++) {
		m.prio[i] = (int)vt_below(&g, 8);
		assert_int_equal(vr_group_new(m.c, m.prio[i], &m.g[i]), 0);
	}
	for (int k = 0; k < NOBJ; k++) {
		struct vr_group *gr = m.g[k / PERG];
		if (k / PERG == 0)
			assert_int_equal(vr_obj_new(m.c, P, 0, &m.o[k]), 0);
		else
			assert_int_equal(vr_obj_new_in(gr, P, 0, 0, &m.o[k]), 0);
	}
	int order[NUNIT];
	for (int u = 0; u < NUNIT; u++)
		order[u] = u;
	for (int i = NUNIT - 1; i > 0; i--) {
		int j = (int)vt_below(&g, (uint64_t)i + 1), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	for (int t = 0; t < NUNIT; t++) {
		int u = order[t];
		if (u < NRANGE) {
			assert_int_equal(vr_mark(m.r, 2 * (size_t)u * P, P), VR_INTACT);
			m.age[u] = ++m.clock;
		} else {
			assert_int_equal(vr_obj_unpin(m.o[u - NRANGE]), 0);
			m.age[u] = ++m.clock;
		}
		while (vt_below(&g, 3) == 0) { /* rejuvenate a volatile unit */
			int v = order[vt_below(&g, (uint64_t)t + 1)];
			touch(&m, v);
		}
	}
	for (int step = 0; step < NUNIT; step++) {
		int gi = vt_below(&g, 3) == 0 ? (int)vt_below(&g, NGROUP) : -1;
		int want = expected(&m, gi);
		ssize_t got = gi < 0 ? vr_ctx_purge(m.c, P) : vr_group_purge(m.g[gi], P);
		int which = -1;
		for (int u = 0; u < NUNIT; u++) {
			if (m.done[u] || !unit_purged(&m, u))
				continue;
			if (which >= 0)
				fail_msg("seed %" PRIu64 " step %d: two units purged (%d, %d)",
					 seed, step, which, u);
			which = u;
		}
		if (which != want)
			fail_msg("seed %" PRIu64 " step %d (%s %d): purged unit %d, expected %d",
				 seed, step, gi < 0 ? "ctx" : "group", gi, which, want);
		assert_int_equal(got, want < 0 ? 0 : (ssize_t)P);
		if (which >= 0)
			m.done[which] = true;
	}
	vr_ctx_destroy(m.c); /* destroys the groups left */
}

static void test_order(void **state)
{
	(void)state;
	const char *e = getenv("VT_GROUP_SEEDS");
	int n = e ? atoi(e) : getenv("VT_VALGRIND") ? 20 : 200;
	for (int s = 1; s <= n; s++)
		run_seed((uint64_t)s);
}

/* S35's example: priority before age also for the ctx limit */
static void test_ctx_limit_priority(void **state)
{
	(void)state;
	struct vr_ctx *c;
	struct vr_group *lo, *hi;
	struct vr_obj *a, *b1, *b2;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_group_new(c, 1, &lo), 0);
	assert_int_equal(vr_group_new(c, 6, &hi), 0);
	assert_int_equal(vr_obj_new_in(hi, P, 0, 0, &b1), 0);
	assert_int_equal(vr_obj_new_in(hi, P, 0, 0, &b2), 0);
	assert_int_equal(vr_obj_new_in(lo, P, 0, 0, &a), 0);
	assert_int_equal(vr_ctx_set_limit(c, 2 * P), 0);
	assert_int_equal(vr_obj_unpin(b1), 0);
	assert_int_equal(vr_obj_unpin(b2), 0);
	assert_int_equal(vr_obj_unpin(a), 0); /* the youngest, but priority 1 */
	int vp = VR_STATE_VOLATILE | VR_STATE_PURGED;
	assert_int_equal(vr_obj_status(a), vp);
	assert_int_equal(vr_obj_status(b1), VR_STATE_VOLATILE);
	assert_int_equal(vr_obj_status(b2), VR_STATE_VOLATILE);
	assert_int_equal(vr_group_stat(lo, VR_STAT_PURGES), 1);
	assert_int_equal(vr_group_stat(hi, VR_STAT_PURGES), 0);
	vr_ctx_destroy(c);
}

/* a group's limit takes its own objects, oldest first, and nothing else */
static void test_group_limit(void **state)
{
	(void)state;
	struct vr_ctx *c;
	struct vr_group *g;
	struct vr_obj *o[6], *other;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_group_new(c, 0, &g), 0);
	assert_int_equal(vr_obj_new(c, P, 0, &other), 0);
	assert_int_equal(vr_obj_unpin(other), 0); /* older than all of g's */
	for (int i = 0; i < 6; i++)
		assert_int_equal(vr_obj_new_in(g, P, 0, 0, &o[i]), 0);
	assert_int_equal(vr_group_set_limit(g, 3 * P), 0);
	for (int i = 0; i < 6; i++) {
		assert_int_equal(vr_obj_unpin(o[i]), 0);
		assert_true(vr_group_stat(g, VR_STAT_VOLATILE_BYTES) <= 3 * P);
	}
	for (int i = 0; i < 6; i++)
		assert_int_equal(vr_obj_status(o[i]) & VR_STATE_PURGED,
				 i < 3 ? VR_STATE_PURGED : 0);
	assert_int_equal(vr_obj_status(other), VR_STATE_VOLATILE);
	assert_int_equal(vr_group_stat(g, VR_STAT_PURGES), 3);
	assert_int_equal(vr_group_stat(g, VR_STAT_RECLAIMED_BYTES), 3 * P);
	assert_int_equal(vr_group_stat(g, VR_STAT_PURGED_BYTES), 3 * P);
	assert_int_equal(vr_group_stat(g, VR_STAT_OBJECTS), 6);
	assert_int_equal(vr_group_stat(vr_ctx_group(c), VR_STAT_OBJECTS), 1);
	/* lowering the limit purges when it returns */
	assert_int_equal(vr_group_set_limit(g, P), 0);
	assert_int_equal(vr_group_stat(g, VR_STAT_VOLATILE_BYTES), P);
	assert_int_equal(vr_obj_status(o[5]), VR_STATE_VOLATILE);
	/* SIZE_MAX purges all of the group, none of the default group */
	assert_int_equal(vr_group_purge(g, SIZE_MAX), (ssize_t)P);
	assert_int_equal(vr_obj_status(other), VR_STATE_VOLATILE);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_OBJECTS), 7);
	vr_group_destroy(g); /* frees its objects: they leave the ctx's stats */
	assert_int_equal(vr_ctx_stat(c, VR_STAT_OBJECTS), 1);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_PURGED_BYTES), 0);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES), P);
	/* the default group: objects freed, the group stays */
	vr_group_destroy(vr_ctx_group(c));
	assert_int_equal(vr_ctx_stat(c, VR_STAT_OBJECTS), 0);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES), 0);
	assert_int_equal(vr_obj_new(c, 100, 0, &other), 0);
	assert_int_equal(vr_group_stat(vr_ctx_group(c), VR_STAT_OBJECTS), 1);
	vr_ctx_destroy(c);
}

/* small objects of different groups never share a page */
static void test_no_shared_page(void **state)
{
	(void)state;
	struct vr_ctx *c;
	struct vr_group *g;
	enum { N = 600 };
	struct vr_obj *a[N], *b[N];
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_group_new(c, 4, &g), 0);
	for (int i = 0; i < N; i++) {
		assert_int_equal(vr_obj_new(c, 48, 0, &a[i]), 0);
		assert_int_equal(vr_obj_new_in(g, 48, 0, 0, &b[i]), 0);
	}
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++) {
			uintptr_t pa = (uintptr_t)vr_obj_ptr(a[i]) / P;
			uintptr_t pb = (uintptr_t)vr_obj_ptr(b[j]) / P;
			uintptr_t pb2 = ((uintptr_t)vr_obj_ptr(b[j]) + 47) / P;
			uintptr_t pa2 = ((uintptr_t)vr_obj_ptr(a[i]) + 47) / P;
			if (pa == pb || pa == pb2 || pa2 == pb || pa2 == pb2)
				fail_msg("objects %d and %d of two groups share a page", i, j);
		}
	/* the group's purge of everything leaves the default group's intact */
	for (int i = 0; i < N; i++) {
		memset(vr_obj_ptr(a[i]), 0x5a, 48);
		assert_int_equal(vr_obj_unpin(a[i]), 0);
		assert_int_equal(vr_obj_unpin(b[i]), 0);
	}
	assert_true(vr_group_purge(g, SIZE_MAX) > 0);
	for (int i = 0; i < N; i++) {
		assert_int_equal(vr_obj_status(b[i]), VR_STATE_VOLATILE | VR_STATE_PURGED);
		assert_int_equal(vr_obj_pin(a[i]), VR_INTACT);
		uint8_t *p = vr_obj_ptr(a[i]);
		for (int k = 0; k < 48; k++)
			assert_int_equal(p[k], 0x5a);
	}
	vr_ctx_destroy(c);
}

/* S36: side-car bytes */
static void check_extra(struct vr_obj *o, size_t size, size_t extra)
{
	uint8_t *x = vr_obj_extra(o);
	assert_non_null(x);
	assert_int_equal((uintptr_t)x % 16, 0);
	assert_true(vt_all_zero(x, extra));
	/* outside the object's memory and its page rounding */
	uintptr_t lo = (uintptr_t)vr_obj_ptr(o) / P * P;
	uintptr_t hi = ((uintptr_t)vr_obj_ptr(o) + size + P - 1) / P * P;
	assert_true((uintptr_t)x + extra <= lo || (uintptr_t)x >= hi);
	assert_null(vr_obj_of(x));
}

static void test_extra(void **state)
{
	(void)state;
	struct vr_ctx *c;
	struct vr_group *g;
	enum { N = 300 };
	struct vr_obj *o[N], *none;
	size_t size[N], extra[N];
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_group_new(c, 2, &g), 0);
	assert_int_equal(vr_obj_new_in(g, 64, 4097, 0, &none), -EINVAL);
	assert_int_equal(vr_obj_new_in(g, 64, 0, 0, &none), 0);
	assert_null(vr_obj_extra(none));
	struct vt_rng r;
	vt_seed(&r, 7);
	for (int i = 0; i < N; i++) {
		size[i] = i % 3 == 0 ? P * (1 + vt_below(&r, 3)) : 1 + vt_below(&r, P - 1);
		extra[i] = i % 5 == 0 ? 4096 : 1 + vt_below(&r, 300);
		assert_int_equal(vr_obj_new_in(g, size[i], extra[i], 0, &o[i]), 0);
		check_extra(o[i], size[i], extra[i]);
		vt_fill(vr_obj_extra(o[i]), 0, extra[i], (uint64_t)i);
		memset(vr_obj_ptr(o[i]), 0xa5, size[i]);
	}
	/* page rounding does not grow by the side-car: a one-page object with
	 * 4096 side-car bytes reclaims one page */
	struct vr_obj *one;
	assert_int_equal(vr_obj_new_in(g, P, 4096, 0, &one), 0);
	assert_int_equal(vr_obj_unpin(one), 0);
	assert_int_equal(vr_group_purge(g, 1), (ssize_t)P);
	/* purged and restored: the side-cars keep their bytes */
	for (int i = 0; i < N; i++)
		assert_int_equal(vr_obj_unpin(o[i]), 0);
	assert_true(vr_group_purge(g, SIZE_MAX) > 0);
	for (int i = 0; i < N; i++) {
		assert_int_equal(vr_obj_status(o[i]), VR_STATE_VOLATILE | VR_STATE_PURGED);
		assert_int_equal(vt_check(vr_obj_extra(o[i]), 0, extra[i], (uint64_t)i), SIZE_MAX);
		memset(vr_obj_extra(o[i]), 0x11, extra[i]); /* writable while purged */
		assert_int_equal(vr_obj_pin(o[i]), VR_PURGED);
		assert_true(vt_all_zero(vr_obj_ptr(o[i]), size[i]));
		for (size_t k = 0; k < extra[i]; k++)
			assert_int_equal(((uint8_t *)vr_obj_extra(o[i]))[k], 0x11);
	}
	/* a freed slot's side-car is zeroed for the next object */
	vr_obj_free(o[1]);
	struct vr_obj *again;
	assert_int_equal(vr_obj_new_in(g, size[1], extra[1], 0, &again), 0);
	check_extra(again, size[1], extra[1]);
	vr_ctx_destroy(c);
}

/* S36 with S25: in a fork child an inherited object has no side-car; the
 * parent's stay as they were */
static void test_extra_fork(void **state)
{
	(void)state;
	if (getenv("VT_VALGRIND")) {
		/* valgrind does not follow MADV_DONTFORK: the child's leak
		 * check at _exit scans the parent's 1 GiB object chunk page
		 * by page, each read a fault (minutes); with --leak-check=no
		 * the child exits at once and the case passes (README,
		 * "Running under valgrind").  Natively, ASan, TSan: run. */
		fprintf(stderr, "skip: fork child under valgrind\n");
		skip();
	}
	struct vr_ctx *c;
	struct vr_group *g;
	struct vr_obj *small, *large;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_group_new(c, 3, &g), 0);
	assert_int_equal(vr_obj_new_in(g, 100, 208, 0, &small), 0);
	assert_int_equal(vr_obj_new_in(g, 3 * P, 64, 0, &large), 0);
	memset(vr_obj_extra(small), 0x42, 208);
	memset(vr_obj_extra(large), 0x43, 64);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int bad = vr_obj_extra(small) != NULL || vr_obj_extra(large) != NULL ||
			  vr_obj_new_in(g, 10, 10, 0, &small) != -EINVAL ||
			  vr_group_purge(g, 1) != -EINVAL || vr_ctx_group(c) != NULL ||
			  vr_group_stat(g, VR_STAT_OBJECTS) != 0;
		vr_obj_free(small);
		vr_group_destroy(g);
		vr_ctx_destroy(c);
		_exit(bad ? 3 : 0);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	for (int k = 0; k < 208; k++)
		assert_int_equal(((uint8_t *)vr_obj_extra(small))[k], 0x42);
	for (int k = 0; k < 64; k++)
		assert_int_equal(((uint8_t *)vr_obj_extra(large))[k], 0x43);
	assert_int_equal(vr_group_stat(g, VR_STAT_OBJECTS), 2);
	vr_ctx_destroy(c);
}

static void test_args(void **state)
{
	(void)state;
	struct vr_ctx *c;
	struct vr_group *g;
	struct vr_obj *o;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_group_new(NULL, 1, &g), -EINVAL);
	assert_int_equal(vr_group_new(c, 1, NULL), -EINVAL);
	assert_int_equal(vr_group_new(c, -1, &g), -EINVAL);
	assert_int_equal(vr_group_new(c, 8, &g), -EINVAL);
	assert_null(vr_ctx_group(NULL));
	assert_int_equal(vr_obj_new_in(NULL, 10, 0, 0, &o), -EINVAL);
	assert_int_equal(vr_obj_new_in(vr_ctx_group(c), 10, 0, 0, NULL), -EINVAL);
	assert_int_equal(vr_obj_new_in(vr_ctx_group(c), 0, 0, 0, &o), -EINVAL);
	assert_int_equal(vr_obj_new_in(vr_ctx_group(c), 10, 0, 1, &o), -EINVAL);
	assert_int_equal(vr_group_purge(NULL, 1), -EINVAL);
	assert_int_equal(vr_group_set_limit(NULL, 1), -EINVAL);
	assert_int_equal(vr_group_set_purge_handler(NULL, NULL, NULL), -EINVAL);
	assert_int_equal(vr_group_stat(NULL, VR_STAT_OBJECTS), 0);
	assert_null(vr_obj_extra(NULL));
	vr_group_destroy(NULL);
	assert_int_equal(vr_group_new(c, 0, &g), 0);
	assert_int_equal(vr_group_purge(g, 0), 0);
	assert_int_equal(vr_group_stat(g, VR_STAT_RANGES), 0);
	assert_int_equal(vr_group_stat(g, VR_STAT_REGIONS), 0);
	vr_group_destroy(g);
	vr_ctx_destroy(c);
}

int main(void)
{
	P = vt_pg();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_args),
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_ctx_limit_priority),
		cmocka_unit_test(test_group_limit),
		cmocka_unit_test(test_no_shared_page),
		cmocka_unit_test(test_extra),
		cmocka_unit_test(test_extra_fork),
	};
	return cmocka_run_group_tests_name("groups", tests, NULL, NULL);
}
