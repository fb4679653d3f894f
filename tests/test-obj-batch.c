/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-obj-batch.c - batched discard of adjacent objects (issue 23; S21,
 * S22, S37): a purge that takes many objects whose pages follow each
 * other in a chunk discards them with one trap call and one fallocate per
 * batch, not one of each per object.  The calls are counted by the
 * library's own counters (vr_objs_trap_calls, internal), the data of the
 * pinned neighbours is checked byte by byte, the purge handler is counted
 * per object, and the stats must come out as S22/S35 say.  Runs under
 * every trap backend (the CI legs set VRANGE_TRAP).
 */
#include "tests.h"

#include "config.h"
#include "obj/obj.h"

static size_t P;

struct fixture {
	struct vr_ctx *c;
	struct vr_group *g;
	unsigned *reports; /* purge handler calls per object index */
	struct vr_obj **o;
	size_t n;
};

/* the object's index is in its side-car bytes (S36) */
static void on_purge(struct vr_obj *o, void *arg)
{
	struct fixture *f = arg;
	size_t i = *(size_t *)vr_obj_extra(o);
	if (i < f->n && f->o[i] == o)
		f->reports[i]++;
}

static uint64_t discards(struct vr_group *g)
{
	uint64_t d, r;
	vr_objs_trap_calls(vr_group_objs(g), &d, &r);
	return d;
}

static uint64_t restores(struct vr_group *g)
{
	uint64_t d, r;
	vr_objs_trap_calls(vr_group_objs(g), &d, &r);
	return r;
}

static void setup(struct fixture *f, size_t n, size_t size)
{
	*f = (struct fixture){ .n = n };
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &f->c), 0);
	assert_int_equal(vr_group_new(f->c, 2, &f->g), 0);
	f->o = calloc(n, sizeof(*f->o));
	f->reports = calloc(n, sizeof(*f->reports));
	assert_non_null(f->o);
	assert_non_null(f->reports);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(vr_obj_new_in(f->g, size, sizeof(size_t), 0, &f->o[i]), 0);
		*(size_t *)vr_obj_extra(f->o[i]) = i;
		vt_fill(vr_obj_ptr(f->o[i]), 0, size, i + 1);
	}
	assert_int_equal(vr_group_set_purge_handler(f->g, on_purge, f), 0);
}

/* setup, then every object unpinned in address order */
static void setup_unpinned(struct fixture *f, size_t n, size_t size)
{
	setup(f, n, size);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(vr_obj_unpin(f->o[i]), 0);
}

static void teardown(struct fixture *f)
{
	vr_ctx_destroy(f->c);
	free(f->o);
	free(f->reports);
}

/* object i of n objects, per pages of the chunk, stays pinned (a
 * neighbour whose bytes must survive) */
static bool kept(size_t i, size_t n, size_t per_page)
{
	size_t every = 97 * per_page;
	return i == 0 || i == n / 3 || i == n / 3 + 1 || i == n - 1 || i % every == every / 2;
}

/* do objects a and b share a page? (S21: a page with a pinned object on
 * it is not purged, nor are the other objects on it) */
static bool share_page(struct vr_obj *a, struct vr_obj *b)
{
	uintptr_t a0 = (uintptr_t)vr_obj_ptr(a) / P,
		  a1 = ((uintptr_t)vr_obj_ptr(a) + vr_obj_size(a) - 1) / P;
	uintptr_t b0 = (uintptr_t)vr_obj_ptr(b) / P,
		  b1 = ((uintptr_t)vr_obj_ptr(b) + vr_obj_size(b) - 1) / P;
	return a0 <= b1 && b0 <= a1;
}

/* Unpin every object but the kept ones, in address order, purge the
 * group wholly, and check: the calls, the handler, the stats, the data. */
static void run_batch(size_t n, size_t size, size_t unit_bytes)
{
	struct fixture f;
	setup(&f, n, size);
	size_t per_page = size < P ? P / size : 1;
	size_t unpinned = 0, bytes = 0, left = 0; /* left: unpinned, not purgeable */
	bool *gone = calloc(n, sizeof(*gone));    /* expected purged */
	assert_non_null(gone);
	for (size_t i = 0; i < n; i++) {
		if (kept(i, n, per_page))
			continue;
		assert_int_equal(vr_obj_unpin(f.o[i]), 0);
		gone[i] = true;
		for (size_t k = i >= per_page ? i - per_page : 0; k <= i + per_page && k < n; k++)
			if (kept(k, n, per_page) && share_page(f.o[i], f.o[k]))
				gone[i] = false;
		unpinned += gone[i];
		bytes += gone[i] ? size : 0;
		left += gone[i] ? 0 : size;
	}
	uint64_t d0 = discards(f.g);
	ssize_t got = vr_group_purge(f.g, SIZE_MAX);
	uint64_t calls = discards(f.g) - d0;
	assert_true(got > 0);
	uint64_t units = (uint64_t)got / unit_bytes;
	/* one trap call + one fallocate per batch: the kept objects split the
	 * runs (at most 2 per kept object) and a batch takes up to 64 units */
	size_t nkept = 0;
	for (size_t i = 0; i < n; i++)
		nkept += kept(i, n, per_page);
	fprintf(stderr, "%zu objects of %zu bytes: %llu units purged with %llu discards\n",
		unpinned, size, (unsigned long long)units, (unsigned long long)calls);
	assert_true(calls >= 1);
	assert_true(calls <= 2 * nkept + units / 64 + 2);
	assert_true(calls * 8 <= units);

	/* S37: exactly once per purged object; S22/S35: the stats */
	for (size_t i = 0; i < n; i++)
		assert_int_equal(f.reports[i], gone[i] ? 1 : 0);
	assert_int_equal(vr_group_stat(f.g, VR_STAT_PURGES), unpinned);
	assert_int_equal(vr_group_stat(f.g, VR_STAT_VOLATILE_BYTES), left);
	assert_int_equal(vr_group_stat(f.g, VR_STAT_PURGED_BYTES), bytes);
	assert_int_equal(vr_group_stat(f.g, VR_STAT_RECLAIMED_BYTES), (uint64_t)got);

	/* the pinned neighbours kept every byte; the purged read 0 */
	for (size_t i = 0; i < n; i++) {
		uint8_t *p = vr_obj_ptr(f.o[i]);
		if (!gone[i]) { /* pinned, or unpinned on a pinned one's page */
			assert_int_equal(vr_obj_status(f.o[i]),
					 kept(i, n, per_page) ? 0 : VR_STATE_VOLATILE);
			assert_int_equal(vt_check(p, 0, size, i + 1), SIZE_MAX);
			continue;
		}
		assert_int_equal(vr_obj_status(f.o[i]), VR_STATE_VOLATILE | VR_STATE_PURGED);
		assert_int_equal(vr_obj_pin(f.o[i]), VR_PURGED);
		assert_true(vt_all_zero(p, size));
	}
	free(gone);
	teardown(&f);
}

/* objects of exactly a page: each its own unit, bump-allocated side by side */
static void test_large(void **state)
{
	(void)state;
	run_batch(1024, P, P);
}

/* objects of several pages */
static void test_multi_page(void **state)
{
	(void)state;
	run_batch(300, 3 * P, 3 * P);
}

/* 256-byte objects: the units are pages of slabs, 16 objects a page */
static void test_small(void **state)
{
	(void)state;
	run_batch(8192, 256, P);
}

/* objects that straddle page boundaries (S21: a page with an unpinned
 * object on it is purged with every object on it; an object on two pages
 * of one batch is purged, counted and reported once) */
static void test_straddling(void **state)
{
	(void)state;
	struct fixture f;
	size_t size = P - P / 4 - 16, n = 2000;
	setup_unpinned(&f, n, size);
	uint64_t d0 = discards(f.g);
	ssize_t got = vr_group_purge(f.g, SIZE_MAX);
	uint64_t calls = discards(f.g) - d0;
	assert_true(got > 0);
	assert_true(calls * 8 <= (uint64_t)got / P);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(f.reports[i], 1);
	assert_int_equal(vr_group_stat(f.g, VR_STAT_PURGES), n);
	assert_int_equal(vr_group_stat(f.g, VR_STAT_VOLATILE_BYTES), 0);
	assert_int_equal(vr_group_stat(f.g, VR_STAT_PURGED_BYTES), n * size);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(vr_obj_pin(f.o[i]), VR_PURGED);
		assert_true(vt_all_zero(vr_obj_ptr(f.o[i]), size));
	}
	teardown(&f);
}

/* a purge of k pages takes exactly the k oldest objects although they are
 * batched (S8: never more than it needs), the younger keep their data */
static void test_partial(void **state)
{
	(void)state;
	struct fixture f;
	size_t n = 200;
	setup_unpinned(&f, n, P);
	size_t k = 37;
	assert_int_equal(vr_group_purge(f.g, k * P), (ssize_t)(k * P));
	assert_int_equal(vr_group_stat(f.g, VR_STAT_PURGES), k);
	assert_int_equal(vr_group_stat(f.g, VR_STAT_VOLATILE_BYTES), (n - k) * P);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(f.reports[i], i < k ? 1 : 0);
		assert_int_equal(vr_obj_pin(f.o[i]), i < k ? VR_PURGED : VR_INTACT);
		uint8_t *p = vr_obj_ptr(f.o[i]);
		if (i < k)
			assert_true(vt_all_zero(p, P));
		else
			assert_int_equal(vt_check(p, 0, P, i + 1), SIZE_MAX);
	}
	teardown(&f);
}

/* re-pin: one trap call per purged object that is pinned again, none for
 * an intact one */
static void test_repin_calls(void **state)
{
	(void)state;
	struct fixture f;
	size_t n = 64;
	setup_unpinned(&f, n, P);
	assert_int_equal(vr_group_purge(f.g, (n / 2) * P), (ssize_t)((n / 2) * P));
	uint64_t r0 = restores(f.g);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(vr_obj_pin(f.o[i]), i < n / 2 ? VR_PURGED : VR_INTACT);
	assert_int_equal(restores(f.g) - r0, n / 2);
	teardown(&f);
}

/* A batch whose discard fails (fault injection: its trap call or its
 * punch, ENOMEM / EIO) is given back whole: its objects keep their data,
 * are not reported, not counted, keep their place, and the next purge
 * takes them.  VRANGE_FAULT_INJECT is read at the first vr_ctx_new: a
 * fresh process per case (scenario). */
static void failed_batch_body(void)
{
	P = vt_pg();
	struct fixture f;
	size_t n = 300;
	setup_unpinned(&f, n, P);
	/* one run (fewer units than a notification batch): the first batch
	 * fails and is given back, the next 40 units are purged instead */
	size_t k = 40;
	ssize_t got = vr_group_purge(f.g, k * P);
	size_t purged = 0;
	for (size_t i = 0; i < n; i++)
		purged += vr_obj_status(f.o[i]) == (VR_STATE_VOLATILE | VR_STATE_PURGED);
	CK_EQ(purged, k);
	CK_EQ(got, (ssize_t)(k * P));
	for (size_t i = 0; i < 2 * k; i++) /* the oldest are the given back */
		CK_EQ(vr_obj_status(f.o[i]), VR_STATE_VOLATILE | (i >= k ? VR_STATE_PURGED : 0));
	CK_EQ(vr_group_stat(f.g, VR_STAT_PURGES), purged);
	CK_EQ(vr_group_stat(f.g, VR_STAT_RECLAIMED_BYTES), purged * P);
	CK_EQ(vr_group_stat(f.g, VR_STAT_PURGED_BYTES), purged * P);
	CK_EQ(vr_group_stat(f.g, VR_STAT_VOLATILE_BYTES), (n - purged) * P);
	for (size_t i = 0; i < n; i++) {
		bool p = vr_obj_status(f.o[i]) & VR_STATE_PURGED;
		CK_EQ(f.reports[i], p);
		if (!p) /* intact under its trap-free pages: its data */
			CK(vt_check(vr_obj_ptr(f.o[i]), 0, P, i + 1) == SIZE_MAX, "object %zu", i);
	}
	/* the given-back objects kept their place: the next purge takes all */
	CK_EQ(vr_group_purge(f.g, SIZE_MAX), (ssize_t)((n - purged) * P));
	for (size_t i = 0; i < n; i++) {
		CK_EQ(f.reports[i], 1);
		CK_EQ(vr_obj_pin(f.o[i]), VR_PURGED);
		CK(vt_all_zero(vr_obj_ptr(f.o[i]), P), "object %zu", i);
	}
	CK_EQ(vr_group_stat(f.g, VR_STAT_PURGES), n);
	teardown(&f);
}

static const struct vt_scenario scenarios[] = {
	{ "failed-batch", failed_batch_body },
};

static void test_failed_batch(void **state)
{
	(void)state;
	if (!VR_FAULT_INJECTION)
		skip(); /* the -Dfault-injection=true builds (the ASan leg) */
	/* the arm fails (mprotect), the punch fails (then the trap comes off) */
	const char *cases[][2] = { { "mprotect", "mprotect:1:12" },
				   { "mprotect", "fallocate:1:5" } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		setenv("VRANGE_FAULT_INJECT", cases[i][1], 1);
		int st = vt_run_scenario_trap("failed-batch", cases[i][0], NULL);
		unsetenv("VRANGE_FAULT_INJECT");
		vt_assert_exit_ok(st);
	}
}

/* An unpin adds the object's bytes to the volatile gauge after the object
 * became purgeable (vr_obj_unpin_many: after the whole batch), so a purge
 * in another thread can take them out first and the gauges' sum go below
 * zero for a moment.  Made here by hand in one shard: the ctx's volatile
 * bytes must read 0, not about 2^64, and an unpin under a limit of two
 * pages must not then purge what is within it (the sum wrapped, it did). */
static void test_gauge_below_zero(void **state)
{
	(void)state;
	struct vr_ctx *c;
	struct vr_obj *o[3];
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(vr_obj_new(c, P, 0, &o[i]), 0);
	assert_int_equal(vr_ctx_set_limit(c, 2 * P), 0);
	assert_int_equal(vr_obj_unpin(o[0]), 0);
	atomic_fetch_sub(&c->shards[0].volatile_bytes, 8 * P); /* taken out first */
	assert_int_equal(vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES), 0);
	assert_int_equal(vr_obj_unpin(o[1]), 0);
	assert_int_equal(vr_obj_status(o[0]), VR_STATE_VOLATILE);
	assert_int_equal(vr_obj_status(o[1]), VR_STATE_VOLATILE);
	atomic_fetch_add(&c->shards[0].volatile_bytes, 8 * P); /* added late */
	assert_int_equal(vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES), 2 * P);
	/* and the limit still holds once the sum is whole */
	assert_int_equal(vr_obj_unpin(o[2]), 0);
	assert_true(vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES) <= 2 * P);
	assert_int_equal(vr_obj_status(o[0]), VR_STATE_VOLATILE | VR_STATE_PURGED);
	vr_ctx_destroy(c);
}

int main(int argc, char **argv)
{
	int rc = vt_scenario_dispatch(argc, argv, scenarios, 1, 60);
	if (rc >= 0)
		return rc;
	P = vt_pg();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_large),        cmocka_unit_test(test_multi_page),
		cmocka_unit_test(test_small),        cmocka_unit_test(test_straddling),
		cmocka_unit_test(test_partial),      cmocka_unit_test(test_repin_calls),
		cmocka_unit_test(test_failed_batch), cmocka_unit_test(test_gauge_below_zero),
	};
	return cmocka_run_group_tests_name("obj-batch", tests, NULL, NULL);
}
