/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-obj.c - purgeable objects, one test (or more) per rule S19-S25
 *
 * Fault-path and fork cases run as scenarios in a re-exec'd process
 * (tests.h), since cmocka replaces the SIGSEGV handler around each test.
 */
#include "tests.h"

#include <pthread.h>

#define VT_ARRAY(a) (sizeof(a) / sizeof((a)[0]))

static struct vr_ctx *ctx_new(void)
{
	struct vr_ctx *c = NULL;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	return c;
}

static struct vr_obj *obj_new(struct vr_ctx *c, size_t size)
{
	struct vr_obj *o = NULL;
	assert_int_equal(vr_obj_new(c, size, 0, &o), 0);
	assert_non_null(o);
	return o;
}

static uint64_t st(struct vr_ctx *c, enum vr_stat w)
{
	return vr_ctx_stat(c, w);
}

/* ---- S19, S20: bad input, exact errno ---- */
static void test_bad_input(void **state)
{
	(void)state;
	struct vr_ctx *c = ctx_new();
	struct vr_obj *o = (struct vr_obj *)0x1;
	assert_int_equal(vr_obj_new(NULL, 16, 0, &o), -EINVAL);
	assert_ptr_equal(o, (struct vr_obj *)0x1); /* untouched on failure */
	assert_int_equal(vr_obj_new(c, 16, 0, NULL), -EINVAL);
	assert_int_equal(vr_obj_new(c, 0, 0, &o), -EINVAL);
	assert_int_equal(vr_obj_new(c, 16, 1, &o), -EINVAL);
	assert_int_equal(vr_obj_new(c, 16, 0x80000000u, &o), -EINVAL);
	assert_int_equal(vr_obj_new(c, SIZE_MAX, 0, &o), -EINVAL);
	assert_int_equal(vr_obj_new(c, SIZE_MAX - vt_pg() + 2, 0, &o), -EINVAL);
	assert_int_equal(vr_obj_new(c, (size_t)1 << 60, 0, &o), -ENOMEM);
	assert_int_equal(vr_obj_pin(NULL), -EINVAL);
	assert_int_equal(vr_obj_unpin(NULL), -EINVAL);
	assert_int_equal(vr_obj_status(NULL), -EINVAL);
	assert_null(vr_obj_ptr(NULL));
	assert_int_equal(vr_obj_size(NULL), 0);
	assert_null(vr_obj_of(NULL));
	assert_int_equal(vr_ctx_set_obj_fault_handler(NULL, NULL, NULL), -EINVAL);
	vr_obj_free(NULL);
	assert_int_equal(st(c, VR_STAT_OBJECTS), 0);
	vr_ctx_destroy(c);
}

/* ---- S19: new objects ---- */
static void test_new_zero_aligned(void **state)
{
	(void)state;
	struct vr_ctx *c = ctx_new();
	size_t sizes[] = { 1, 15, 16, 17, 200, 256, 1000, 3000, 4095, 4096, 4097, 65536, 300000 };
	struct vr_obj *o[VT_ARRAY(sizes)];
	for (size_t i = 0; i < VT_ARRAY(sizes); i++) {
		o[i] = obj_new(c, sizes[i]);
		uint8_t *p = vr_obj_ptr(o[i]);
		assert_non_null(p);
		assert_int_equal(vr_obj_size(o[i]), sizes[i]);
		assert_int_equal((uintptr_t)p % 16, 0);
		if (sizes[i] >= vt_pg())
			assert_int_equal((uintptr_t)p % vt_pg(), 0);
		assert_true(vt_all_zero(p, sizes[i]));
		assert_int_equal(vr_obj_status(o[i]), 0); /* pinned */
		memset(p, 0xa5, sizes[i]);                /* writable */
		assert_ptr_equal(vr_obj_of(p), o[i]);
		assert_ptr_equal(vr_obj_of(p + sizes[i] - 1), o[i]);
		assert_null(vr_region_of(p)); /* belongs to no region */
		assert_int_equal(vr_mark_ptr(p, 1), -EINVAL);
		assert_int_equal(vr_unmark_ptr(p, 1), -EINVAL);
	}
	/* objects never overlap */
	for (size_t i = 0; i < VT_ARRAY(sizes); i++)
		for (size_t j = 0; j < VT_ARRAY(sizes); j++) {
			uint8_t *a = vr_obj_ptr(o[i]), *b = vr_obj_ptr(o[j]);
			if (i != j)
				assert_true(a + sizes[i] <= b || b + sizes[j] <= a);
		}
	assert_int_equal(st(c, VR_STAT_OBJECTS), VT_ARRAY(sizes));
	assert_int_equal(st(c, VR_STAT_REGIONS), 0);
	assert_int_equal(st(c, VR_STAT_RANGES), 0);
	/* a freed slot reads as zero again when reused */
	uint8_t *p200 = vr_obj_ptr(o[4]);
	vr_obj_free(o[4]);
	assert_null(vr_obj_of(p200));
	struct vr_obj *again = obj_new(c, 200);
	assert_true(vt_all_zero(vr_obj_ptr(again), 200));
	vr_ctx_destroy(c); /* frees what is left */
}

/* padding after a small object and free slots give NULL */
static void test_obj_of_padding(void **state)
{
	(void)state;
	struct vr_ctx *c = ctx_new();
	struct vr_obj *a = obj_new(c, 200); /* class 208: 8 bytes of padding */
	uint8_t *p = vr_obj_ptr(a);
	assert_ptr_equal(vr_obj_of(p + 199), a);
	assert_null(vr_obj_of(p + 200));
	assert_null(vr_obj_of(p + 207));
	struct vr_obj *b = obj_new(c, 5000);
	uint8_t *q = vr_obj_ptr(b);
	assert_null(vr_obj_of(q + 5000)); /* rest of its last page */
	int on_stack;
	assert_null(vr_obj_of(&on_stack));
	vr_obj_free(a);
	assert_null(vr_obj_of(p));
	vr_ctx_destroy(c);
}

/* ---- S20: pin and unpin ---- */
static void test_unpin_pin_intact(void **state)
{
	(void)state;
	struct vr_ctx *c = ctx_new();
	size_t sizes[] = { 100, 3000, 20000 };
	for (size_t i = 0; i < VT_ARRAY(sizes); i++) {
		struct vr_obj *o = obj_new(c, sizes[i]);
		uint8_t *p = vr_obj_ptr(o);
		vt_fill(p, 0, sizes[i], i + 1);
		assert_int_equal(vr_obj_unpin(o), 0);
		assert_int_equal(vr_obj_status(o), VR_STATE_VOLATILE);
		assert_int_equal(st(c, VR_STAT_VOLATILE_BYTES), sizes[i]);
		assert_int_equal(vr_obj_unpin(o), 0); /* double unpin: nothing */
		assert_int_equal(st(c, VR_STAT_VOLATILE_BYTES), sizes[i]);
		assert_int_equal(vt_check(p, 0, sizes[i], i + 1), SIZE_MAX); /* readable */
		assert_int_equal(vr_obj_pin(o), VR_INTACT);
		assert_int_equal(vr_obj_pin(o), VR_INTACT); /* double pin */
		assert_int_equal(vr_obj_status(o), 0);
		assert_int_equal(vt_check(p, 0, sizes[i], i + 1), SIZE_MAX);
		assert_int_equal(st(c, VR_STAT_VOLATILE_BYTES), 0);
		vr_obj_free(o);
	}
	vr_ctx_destroy(c);
}

static void test_purged_reads_zero(void **state)
{
	(void)state;
	struct vr_ctx *c = ctx_new();
	size_t sizes[] = { 64, 1000, 3000, 4096, 10000, 65536 };
	for (size_t i = 0; i < VT_ARRAY(sizes); i++) {
		struct vr_obj *o = obj_new(c, sizes[i]);
		uint8_t *p = vr_obj_ptr(o);
		vt_fill(p, 0, sizes[i], 7);
		uint64_t rec0 = st(c, VR_STAT_RECLAIMED_BYTES), pur0 = st(c, VR_STAT_PURGES);
		assert_int_equal(vr_obj_unpin(o), 0);
		ssize_t got = vr_ctx_purge(c, SIZE_MAX);
		size_t pages = (sizes[i] + vt_pg() - 1) / vt_pg();
		if (sizes[i] >= vt_pg())
			assert_int_equal(got, (ssize_t)(pages * vt_pg()));
		else
			assert_true(got >=
				    (ssize_t)vt_pg()); /* one page per page of small objects */
		assert_int_equal(st(c, VR_STAT_RECLAIMED_BYTES) - rec0, (uint64_t)got);
		assert_int_equal(st(c, VR_STAT_PURGES) - pur0, 1);
		assert_int_equal(vr_obj_status(o), VR_STATE_VOLATILE | VR_STATE_PURGED);
		assert_int_equal(st(c, VR_STAT_PURGED_BYTES), sizes[i]);
		assert_int_equal(st(c, VR_STAT_VOLATILE_BYTES), 0);
		assert_int_equal(vr_obj_pin(o), VR_PURGED);
		assert_int_equal(vr_obj_status(o), 0);
		assert_int_equal(st(c, VR_STAT_PURGED_BYTES), 0);
		assert_true(vt_all_zero(p, sizes[i]));
		vt_fill(p, 0, sizes[i], 8); /* usable */
		assert_int_equal(vt_check(p, 0, sizes[i], 8), SIZE_MAX);
		assert_int_equal(vr_obj_pin(o), VR_INTACT); /* consumed */
		assert_int_equal(vr_obj_unpin(o), 0);
		assert_int_equal(vr_obj_pin(o), VR_INTACT);
		assert_int_equal(vt_check(p, 0, sizes[i], 8), SIZE_MAX);
		vr_obj_free(o);
	}
	vr_ctx_destroy(c);
}

/* ---- S21: objects are separate ---- */
static void test_separate_objects(void **state)
{
	(void)state;
	struct vr_ctx *c = ctx_new();
	enum { N = 6 };
	struct vr_obj *o[N];
	for (int i = 0; i < N; i++) {
		o[i] = obj_new(c, vt_pg() * (size_t)(1 + i % 2));
		vt_fill(vr_obj_ptr(o[i]), 0, vr_obj_size(o[i]), (uint64_t)i);
		assert_int_equal(vr_obj_unpin(o[i]), 0);
	}
	/* adjacent objects unpinned one after the other never coalesce:
	 * one page purges exactly the oldest object */
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)vt_pg());
	assert_int_equal(vr_obj_status(o[0]), VR_STATE_VOLATILE | VR_STATE_PURGED);
	for (int i = 1; i < N; i++) {
		assert_int_equal(vr_obj_status(o[i]), VR_STATE_VOLATILE);
		assert_int_equal(vt_check(vr_obj_ptr(o[i]), 0, vr_obj_size(o[i]), (uint64_t)i),
				 SIZE_MAX);
	}
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)(2 * vt_pg()));
	assert_int_equal(vr_obj_status(o[1]), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(vr_obj_status(o[2]), VR_STATE_VOLATILE);
	for (int i = 2; i < N; i++)
		assert_int_equal(vr_obj_pin(o[i]), VR_INTACT);
	vr_ctx_destroy(c);
}

/* two small objects on one page: purgeable only when both are unpinned,
 * and then purged together */
static void test_shared_small_page(void **state)
{
	(void)state;
	struct vr_ctx *c = ctx_new();
	struct vr_obj *a = obj_new(c, 256), *b = obj_new(c, 256);
	uint8_t *pa = vr_obj_ptr(a), *pb = vr_obj_ptr(b);
	assert_true((uintptr_t)pa / vt_pg() == (uintptr_t)pb / vt_pg());
	vt_fill(pa, 0, 256, 1);
	vt_fill(pb, 0, 256, 2);
	assert_int_equal(vr_obj_unpin(a), 0);
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), 0); /* b pinned */
	assert_int_equal(vr_obj_status(a), VR_STATE_VOLATILE);
	assert_int_equal(vt_check(pa, 0, 256, 1), SIZE_MAX);
	assert_int_equal(vr_obj_unpin(b), 0);
	uint64_t pur0 = st(c, VR_STAT_PURGES);
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), (ssize_t)vt_pg());
	assert_int_equal(st(c, VR_STAT_PURGES) - pur0, 2); /* one per object */
	assert_int_equal(vr_obj_status(a), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(vr_obj_status(b), VR_STATE_VOLATILE | VR_STATE_PURGED);
	/* pinning one restores the page; the other stays purged */
	assert_int_equal(vr_obj_pin(a), VR_PURGED);
	assert_true(vt_all_zero(pa, 256));
	assert_int_equal(vr_obj_status(b), VR_STATE_VOLATILE | VR_STATE_PURGED);
	vt_fill(pa, 0, 256, 3);
	/* b purged and unpinned, a unpinned: the page is a unit again */
	assert_int_equal(vr_obj_unpin(a), 0);
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), (ssize_t)vt_pg());
	assert_int_equal(vr_obj_pin(a), VR_PURGED);
	assert_int_equal(vr_obj_pin(b), VR_PURGED);
	assert_true(vt_all_zero(pb, 256));
	/* a page whose objects are all purged is no unit */
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), 0);
	vr_ctx_destroy(c);
}

/* objects of one class laid edge to edge may straddle a page: purging
 * either page purges the straddling object, and pin gives it zeros */
static void test_straddling(void **state)
{
	(void)state;
	struct vr_ctx *c = ctx_new();
	enum { N = 12 };
	struct vr_obj *o[N];
	for (int i = 0; i < N; i++) {
		o[i] = obj_new(c, 1500);
		vt_fill(vr_obj_ptr(o[i]), 0, 1500, (uint64_t)i + 10);
	}
	int straddler = -1;
	for (int i = 0; i < N; i++) {
		uintptr_t p = (uintptr_t)vr_obj_ptr(o[i]);
		if (p / vt_pg() != (p + 1499) / vt_pg())
			straddler = i;
	}
	assert_true(straddler >= 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(vr_obj_unpin(o[i]), 0);
	assert_true(vr_ctx_purge(c, SIZE_MAX) > 0);
	for (int i = 0; i < N; i++) {
		assert_int_equal(vr_obj_pin(o[i]), VR_PURGED);
		assert_true(vt_all_zero(vr_obj_ptr(o[i]), 1500));
	}
	/* only the straddler's first page purged: pin gives zeros anyway */
	for (int i = 0; i < N; i++)
		vt_fill(vr_obj_ptr(o[i]), 0, 1500, (uint64_t)i + 20);
	assert_int_equal(vr_obj_unpin(o[straddler]), 0);
	uintptr_t sp = (uintptr_t)vr_obj_ptr(o[straddler]);
	for (int i = 0; i < N; i++) { /* unpin the page of its first byte */
		uintptr_t p = (uintptr_t)vr_obj_ptr(o[i]);
		if (i != straddler &&
		    (p / vt_pg() == sp / vt_pg() || (p + 1499) / vt_pg() == sp / vt_pg()))
			assert_int_equal(vr_obj_unpin(o[i]), 0);
	}
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), (ssize_t)vt_pg());
	assert_int_equal(vr_obj_pin(o[straddler]), VR_PURGED);
	assert_true(vt_all_zero(vr_obj_ptr(o[straddler]), 1500));
	vr_ctx_destroy(c);
}

/* ---- S22: one LRU with ranges ---- */
static void test_one_lru_with_ranges(void **state)
{
	(void)state;
	struct vr_ctx *c = ctx_new();
	size_t pg = vt_pg();
	struct vr_region *r;
	assert_int_equal(vr_region_new(c, "t", 8 * pg, 0, &r), 0);
	struct vr_obj *o1 = obj_new(c, pg), *o2 = obj_new(c, 2 * pg);
	struct vr_obj *s1 = obj_new(c, 100), *s2 = obj_new(c, 100);
	/* order: range A, o1, s1 (its page), range B, o2 */
	assert_int_equal(vr_mark(r, 0, pg), VR_INTACT);
	assert_int_equal(vr_obj_unpin(o1), 0);
	assert_int_equal(vr_obj_unpin(s1), 0);
	assert_int_equal(vr_obj_unpin(s2), 0); /* same page: page age = s2's */
	assert_int_equal(vr_mark(r, 2 * pg, pg), VR_INTACT);
	assert_int_equal(vr_obj_unpin(o2), 0);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)pg);
	assert_int_equal(vr_status(r, 0, pg), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(vr_obj_status(o1), VR_STATE_VOLATILE);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)pg);
	assert_int_equal(vr_obj_status(o1), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(vr_obj_status(s1), VR_STATE_VOLATILE);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)pg);
	assert_int_equal(vr_obj_status(s1), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(vr_obj_status(s2), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(vr_status(r, 2 * pg, pg), VR_STATE_VOLATILE);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)pg);
	assert_int_equal(vr_status(r, 2 * pg, pg), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(vr_obj_status(o2), VR_STATE_VOLATILE);
	/* re-unpinning makes an object young again; a second unpin does not */
	assert_int_equal(vr_obj_pin(o1), VR_PURGED);
	assert_int_equal(vr_obj_unpin(o1), 0);
	assert_int_equal(vr_obj_unpin(o2), 0);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)(2 * pg));
	assert_int_equal(vr_obj_status(o2), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(vr_obj_status(o1), VR_STATE_VOLATILE);
	vr_ctx_destroy(c);
}

/* a page's age follows its youngest unpinned object, also after a free */
static void test_page_age_after_free(void **state)
{
	(void)state;
	struct vr_ctx *c = ctx_new();
	size_t pg = vt_pg();
	struct vr_obj *a = obj_new(c, 512), *b = obj_new(c, 512);
	struct vr_obj *big = obj_new(c, pg);
	assert_int_equal(vr_obj_unpin(a), 0);   /* page P: a unpinned, b pinned */
	assert_int_equal(vr_obj_unpin(big), 0); /* younger than a */
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)pg);
	assert_int_equal(vr_obj_status(big), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(vr_obj_pin(big), VR_PURGED);
	assert_int_equal(vr_obj_unpin(big), 0);
	/* freeing the pinned b makes P a unit with a's (older) age */
	vr_obj_free(b);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)pg);
	assert_int_equal(vr_obj_status(a), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(vr_obj_status(big), VR_STATE_VOLATILE);
	/* free of the youngest object on a page: the page takes the age of
	 * the next youngest */
	struct vr_obj *x = obj_new(c, 512), *y = obj_new(c, 512);
	struct vr_obj *mid = obj_new(c, pg);
	assert_int_equal(vr_obj_pin(big), VR_INTACT);
	assert_int_equal(vr_obj_unpin(x), 0);
	assert_int_equal(vr_obj_unpin(mid), 0);
	assert_int_equal(vr_obj_unpin(y), 0);
	vr_obj_free(y);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)pg);
	assert_int_equal(vr_obj_status(x), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(vr_obj_status(mid), VR_STATE_VOLATILE);
	vr_ctx_destroy(c);
}

/* S10 at vr_obj_unpin */
static void test_limit_at_unpin(void **state)
{
	(void)state;
	struct vr_ctx *c = ctx_new();
	size_t pg = vt_pg();
	assert_int_equal(vr_ctx_set_limit(c, 2 * pg), 0);
	struct vr_obj *o[4];
	for (int i = 0; i < 4; i++)
		o[i] = obj_new(c, pg);
	assert_int_equal(vr_obj_unpin(o[0]), 0);
	assert_int_equal(vr_obj_unpin(o[1]), 0);
	assert_int_equal(vr_obj_status(o[0]), VR_STATE_VOLATILE);
	assert_int_equal(vr_obj_unpin(o[2]), 0); /* over the limit: the oldest goes */
	assert_true(st(c, VR_STAT_VOLATILE_BYTES) <= 2 * pg);
	assert_int_equal(vr_obj_status(o[0]), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(vr_obj_status(o[1]), VR_STATE_VOLATILE);
	assert_int_equal(vr_obj_status(o[2]), VR_STATE_VOLATILE);
	/* the limit counts ranges and objects together */
	struct vr_region *r;
	assert_int_equal(vr_region_new(c, "t", 4 * pg, 0, &r), 0);
	assert_int_equal(vr_mark(r, 0, pg), VR_INTACT);
	assert_int_equal(vr_obj_status(o[1]), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(vr_obj_unpin(o[3]), 0);
	assert_int_equal(vr_obj_status(o[2]), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_true(st(c, VR_STAT_VOLATILE_BYTES) <= 2 * pg);
	vr_ctx_destroy(c);
}

/* vr_obj_unpin_many: each unpinned, as at one instant in the LRU, the
 * gauges of each group, the ctx's limit, errors per object */
static void test_unpin_many(void **state)
{
	(void)state;
	struct vr_ctx *c = ctx_new();
	size_t pg = vt_pg();
	assert_int_equal(vr_obj_unpin_many(NULL, 0), 0);
	assert_int_equal(vr_obj_unpin_many(NULL, 1), -EINVAL);
	struct vr_group *g;
	assert_int_equal(vr_group_new(c, 4, &g), 0);
	struct vr_obj *o[6];
	for (int i = 0; i < 6; i++) {
		if (i % 2)
			assert_int_equal(vr_obj_new_in(g, pg, 0, 0, &o[i]), 0);
		else
			o[i] = obj_new(c, pg);
		memset(vr_obj_ptr(o[i]), 'a' + i, pg);
	}
	/* order: o0, then {o1 o2 o3} at once (a NULL among them), then o4 */
	assert_int_equal(vr_obj_unpin(o[0]), 0);
	struct vr_obj *batch[] = { o[1], o[2], NULL, o[3], o[0] /* unpinned: unchanged */ };
	assert_int_equal(vr_obj_unpin_many(batch, VT_ARRAY(batch)), -EINVAL);
	assert_int_equal(vr_obj_unpin(o[4]), 0);
	for (int i = 0; i < 5; i++)
		assert_int_equal(vr_obj_status(o[i]), VR_STATE_VOLATILE);
	assert_int_equal(vr_obj_status(o[5]), 0);
	assert_int_equal(st(c, VR_STAT_VOLATILE_BYTES), 5 * pg);
	assert_int_equal(vr_group_stat(g, VR_STAT_VOLATILE_BYTES), 2 * pg);
	assert_int_equal(vr_group_stat(vr_ctx_group(c), VR_STAT_VOLATILE_BYTES), 3 * pg);
	/* o0 (not rejuvenated by the batch) first, the batch next, o4 last */
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)pg);
	assert_int_equal(vr_obj_status(o[0]), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(vr_ctx_purge(c, 3 * pg), (ssize_t)(3 * pg));
	for (int i = 1; i <= 3; i++)
		assert_int_equal(vr_obj_status(o[i]), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(vr_obj_status(o[4]), VR_STATE_VOLATILE);
	assert_int_equal(vr_obj_pin(o[4]), VR_INTACT);
	for (size_t k = 0; k < pg; k++)
		assert_int_equal(((unsigned char *)vr_obj_ptr(o[4]))[k], 'e');
	/* the ctx's limit holds when the call returns */
	for (int i = 0; i < 4; i++)
		assert_int_equal(vr_obj_pin(o[i]), VR_PURGED);
	assert_int_equal(vr_ctx_set_limit(c, 2 * pg), 0);
	assert_int_equal(vr_obj_unpin_many(o, 6), 0);
	assert_true(st(c, VR_STAT_VOLATILE_BYTES) <= 2 * pg);
	int purged = 0;
	for (int i = 0; i < 6; i++) {
		int stt = vr_obj_status(o[i]);
		assert_true(stt & VR_STATE_VOLATILE);
		purged += !!(stt & VR_STATE_PURGED);
	}
	assert_int_equal(purged, 4);
	vr_ctx_destroy(c);
}

/* pressure and the pressure call take objects too */
static void test_pressure(void **state)
{
	(void)state;
	struct vr_ctx *c = ctx_new();
	enum { N = 8 };
	struct vr_obj *o[N];
	for (int i = 0; i < N; i++) {
		o[i] = obj_new(c, vt_pg());
		assert_int_equal(vr_obj_unpin(o[i]), 0);
	}
	assert_true(vr_ctx_notify_pressure(c, VR_PRESSURE_MODERATE) >= (ssize_t)(N / 2 * vt_pg()));
	assert_int_equal(vr_obj_status(o[0]), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(vr_obj_status(o[N - 1]), VR_STATE_VOLATILE);
	assert_true(vr_ctx_notify_pressure(c, VR_PRESSURE_CRITICAL) > 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(vr_obj_status(o[i]), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(st(c, VR_STAT_VOLATILE_BYTES), 0);
	vr_ctx_destroy(c);
}

/* ---- stats and footprint (S22, S23) ---- */
static void test_stats(void **state)
{
	(void)state;
	struct vr_ctx *c = ctx_new();
	struct vr_obj *a = obj_new(c, 100), *b = obj_new(c, 70000);
	assert_int_equal(st(c, VR_STAT_OBJECTS), 2);
	assert_int_equal(vr_obj_unpin(a), 0);
	assert_int_equal(vr_obj_unpin(b), 0);
	assert_int_equal(st(c, VR_STAT_VOLATILE_BYTES), 70100);
	assert_int_equal(st(c, VR_STAT_RANGES), 0);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)vt_pg()); /* a's page is older */
	assert_int_equal(st(c, VR_STAT_VOLATILE_BYTES), 70000);
	assert_int_equal(st(c, VR_STAT_PURGED_BYTES), 100);
	vr_obj_free(a); /* purged and unpinned */
	vr_obj_free(b); /* unpinned */
	assert_int_equal(st(c, VR_STAT_VOLATILE_BYTES), 0);
	assert_int_equal(st(c, VR_STAT_PURGED_BYTES), 0);
	assert_int_equal(st(c, VR_STAT_OBJECTS), 0);
	vr_ctx_destroy(c);
}

static void test_footprint(void **state)
{
	(void)state;
	struct vr_ctx *c = ctx_new();
	size_t pg = vt_pg();
	uint64_t f0 = st(c, VR_STAT_FOOTPRINT);
	struct vr_obj *o = obj_new(c, 64 * pg);
	assert_int_equal(st(c, VR_STAT_FOOTPRINT), f0); /* nothing written yet */
	memset(vr_obj_ptr(o), 1, 64 * pg);
	uint64_t f1 = st(c, VR_STAT_FOOTPRINT);
	assert_true(f1 >= f0 + 64 * pg);
	struct vr_region *r;
	assert_int_equal(vr_region_new(c, "t", 16 * pg, 0, &r), 0);
	memset(vr_region_base(r), 1, 16 * pg);
	uint64_t f2 = st(c, VR_STAT_FOOTPRINT);
	assert_true(f2 >= f1 + 16 * pg); /* regions count too */
	assert_int_equal(vr_obj_unpin(o), 0);
	ssize_t got = vr_ctx_purge(c, SIZE_MAX);
	assert_int_equal(got, (ssize_t)(64 * pg));
	assert_true(st(c, VR_STAT_FOOTPRINT) <= f2 - (uint64_t)got);
	vr_obj_free(o);
	vr_ctx_destroy(c);
}

/* S23: small objects of a size-class mix waste at most 1/8 of the pages
 * that hold them (footprint against the bytes asked for) */
static void test_waste_mix(void **state)
{
	(void)state;
	struct vr_ctx *c = ctx_new();
	struct vt_rng rng;
	vt_seed(&rng, vt_get_seed("waste_mix"));
	enum { N = 20000 };
	struct vr_obj **o = calloc(N, sizeof(*o));
	uint64_t asked = 0;
	for (int i = 0; i < N; i++) {
		/* sizes spread over the classes: an octave 16-31 ... 2048-4095
		 * chosen uniformly, then a size uniform within it */
		unsigned k = 4 + (unsigned)vt_below(&rng, 8);
		size_t size = ((size_t)1 << k) + vt_below(&rng, (uint64_t)1 << k);
		o[i] = obj_new(c, size);
		memset(vr_obj_ptr(o[i]), 1, size);
		asked += size;
	}
	uint64_t fp = st(c, VR_STAT_FOOTPRINT);
	print_message("waste mix: %" PRIu64 " bytes asked, footprint %" PRIu64 " (waste %.1f%%)\n",
		      asked, fp, 100.0 * (double)(fp - asked) / (double)fp);
	assert_true(fp >= asked);
	assert_true((fp - asked) * 8 <= fp);
	/* freeing every other object and allocating again reuses the slots */
	for (int i = 0; i < N; i += 2)
		vr_obj_free(o[i]);
	for (int i = 0; i < N; i += 2)
		o[i] = obj_new(c, vr_obj_size(o[i + 1]));
	assert_true(st(c, VR_STAT_FOOTPRINT) <= fp + fp / 8);
	free(o);
	vr_ctx_destroy(c);
}

/* spans of freed large objects are reused and coalesced */
static void test_span_reuse(void **state)
{
	(void)state;
	struct vr_ctx *c = ctx_new();
	size_t pg = vt_pg();
	struct vr_obj *a = obj_new(c, 3 * pg), *b = obj_new(c, 5 * pg), *d = obj_new(c, pg);
	uint8_t *pa = vr_obj_ptr(a);
	memset(pa, 1, 3 * pg);
	memset(vr_obj_ptr(b), 2, 5 * pg);
	vr_obj_free(a);
	vr_obj_free(b);
	struct vr_obj *e = obj_new(c, 8 * pg); /* fits in a + b coalesced */
	assert_ptr_equal(vr_obj_ptr(e), pa);
	assert_true(vt_all_zero(vr_obj_ptr(e), 8 * pg));
	vr_obj_free(d);
	vr_obj_free(e);
	assert_int_equal(st(c, VR_STAT_FOOTPRINT), 0); /* freed memory went back */
	vr_ctx_destroy(c);
}

/* free in every state */
static void test_free_states(void **state)
{
	(void)state;
	struct vr_ctx *c = ctx_new();
	for (int k = 0; k < 2; k++) {
		size_t size = k ? 3 * vt_pg() : 300;
		/* p pinned, in another class (a small one would pin the page) */
		struct vr_obj *p = obj_new(c, size + 700), *u = obj_new(c, size),
			      *g = obj_new(c, size);
		assert_int_equal(vr_obj_unpin(u), 0);
		assert_int_equal(vr_obj_unpin(g), 0);
		assert_true(vr_ctx_purge(c, SIZE_MAX) > 0);
		assert_int_equal(vr_obj_status(g), VR_STATE_VOLATILE | VR_STATE_PURGED);
		vr_obj_free(p);
		vr_obj_free(g);
		struct vr_obj *n = obj_new(c, size); /* may reuse g's memory */
		assert_true(vt_all_zero(vr_obj_ptr(n), size));
		memset(vr_obj_ptr(n), 3, size);
		vr_obj_free(n);
	}
	assert_int_equal(st(c, VR_STAT_OBJECTS), 2);
	vr_ctx_destroy(c);
}

/* S25: calls on different objects from many threads */
struct thr_arg {
	struct vr_ctx *c;
	int id;
	int bad;
};

static void *thr_main(void *p)
{
	struct thr_arg *a = p;
	struct vr_obj *o[64];
	for (int i = 0; i < 64; i++)
		if (vr_obj_new(a->c, (size_t)(16 + 97 * i), 0, &o[i]) < 0)
			a->bad++;
	for (int round = 0; round < 200; round++)
		for (int i = 0; i < 64; i++) {
			uint8_t *q = vr_obj_ptr(o[i]);
			int rc = vr_obj_pin(o[i]);
			if (rc == VR_INTACT && q[0] != (uint8_t)(a->id + round - 1) && round > 0)
				a->bad++;
			q[0] = (uint8_t)(a->id + round);
			if (rc == VR_PURGED &&
			    (round == 0 || !vt_all_zero(q + 1, vr_obj_size(o[i]) - 1)))
				a->bad++;
			vr_obj_unpin(o[i]);
		}
	for (int i = 0; i < 64; i++)
		vr_obj_free(o[i]);
	return NULL;
}

static void test_threads(void **state)
{
	(void)state;
	struct vr_ctx *c = ctx_new();
	enum { T = 4 };
	pthread_t t[T];
	struct thr_arg a[T];
	for (int i = 0; i < T; i++) {
		a[i] = (struct thr_arg){ c, i * 50, 0 };
		pthread_create(&t[i], NULL, thr_main, &a[i]);
	}
	for (int i = 0; i < 50; i++)
		vr_ctx_purge(c, 8 * vt_pg());
	for (int i = 0; i < T; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(a[i].bad, 0);
	}
	assert_int_equal(st(c, VR_STAT_OBJECTS), 0);
	assert_int_equal(st(c, VR_STAT_VOLATILE_BYTES), 0);
	assert_int_equal(st(c, VR_STAT_PURGED_BYTES), 0);
	vr_ctx_destroy(c);
}

/* ------------------------------------------------------------------ */
/* scenarios: the fault path (S24) and fork (S25)                       */

static struct {
	struct vr_obj *o;
	void *addr;
	int calls, pin_rc, ret;
} H;

static int obj_handler(struct vr_obj *o, void *addr, void *arg)
{
	CK(arg == &H);
	H.calls++;
	H.o = o;
	H.addr = addr;
	if (H.ret == VR_FAULT_RETRY) {
		H.pin_rc = vr_obj_pin(o);
		memset(vr_obj_ptr(o), 0x5a, vr_obj_size(o)); /* refill */
	}
	return H.ret;
}

static struct vr_ctx *sc_ctx(void)
{
	struct vr_ctx *c = NULL;
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	return c;
}

static void fault_one(size_t size, size_t at)
{
	struct vr_ctx *c = sc_ctx();
	struct vr_obj *o, *other;
	CK_EQ(vr_obj_new(c, size, 0, &o), 0);
	CK_EQ(vr_obj_new(c, size + 1000, 0, &other), 0); /* another class: another page */
	memset(vr_obj_ptr(other), 7, size);
	CK_EQ(vr_ctx_set_obj_fault_handler(c, obj_handler, &H), 0);
	volatile uint8_t *p = vr_obj_ptr(o);
	memset((void *)p, 1, size);
	CK_EQ(vr_obj_unpin(o), 0);
	CK(vr_ctx_purge(c, SIZE_MAX) > 0);
	H.ret = VR_FAULT_RETRY;
	uint64_t f0 = vr_ctx_stat(c, VR_STAT_FAULTS);
	uint8_t v = p[at]; /* faults, handler pins and refills */
	CK_EQ(v, 0x5a);
	CK_EQ(H.calls, 1);
	CK(H.o == o);
	CK(H.addr == (void *)(p + at));
	CK_EQ(H.pin_rc, VR_PURGED);
	CK_EQ(vr_ctx_stat(c, VR_STAT_FAULTS) - f0, 1);
	CK_EQ(vr_obj_status(o), 0);
	p[0] = 3; /* pinned: no more faults */
	CK_EQ(H.calls, 1);
	uint8_t *q = vr_obj_ptr(other);
	for (size_t i = 0; i < size; i++)
		CK_EQ(q[i], 7); /* the other object kept its pinned data */
	vr_ctx_destroy(c);
}

static void sc_fault_large(void)
{
	fault_one(3 * vt_pg(), 2 * vt_pg() + 17);
}

static void sc_fault_small(void)
{
	fault_one(256, 100);
}

static sigjmp_buf jb;
static volatile void *bus_addr;
static volatile int bus_code;
static void on_bus(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	bus_addr = si->si_addr;
	bus_code = si->si_code;
	siglongjmp(jb, 1);
}

static void sc_sigbus(void)
{
	struct vr_ctx *c = sc_ctx();
	struct vr_obj *o;
	CK_EQ(vr_obj_new(c, 2 * vt_pg(), 0, &o), 0);
	CK_EQ(vr_obj_unpin(o), 0);
	CK(vr_ctx_purge(c, SIZE_MAX) > 0);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_bus;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGBUS, &sa, NULL);
	volatile uint8_t *p = vr_obj_ptr(o);
	uint64_t f0 = vr_ctx_stat(c, VR_STAT_FAULTS);
	if (sigsetjmp(jb, 1) == 0) {
		(void)p[vt_pg() + 5]; /* no handler: SIGBUS */
		CK(0, "no SIGBUS");
	}
	CK(bus_addr == (void *)(p + vt_pg() + 5));
	CK_EQ(bus_code, BUS_ADRERR);
	CK_EQ(vr_ctx_stat(c, VR_STAT_FAULTS) - f0, 1);
	/* a handler that says SIGBUS */
	CK_EQ(vr_ctx_set_obj_fault_handler(c, obj_handler, &H), 0);
	H.ret = VR_FAULT_SIGBUS;
	if (sigsetjmp(jb, 1) == 0) {
		(void)p[1];
		CK(0, "no SIGBUS");
	}
	CK_EQ(H.calls, 1);
	CK(bus_addr == (void *)(p + 1));
	/* removing the handler */
	CK_EQ(vr_ctx_set_obj_fault_handler(c, NULL, &H), 0);
	if (sigsetjmp(jb, 1) == 0) {
		(void)p[2];
		CK(0, "no SIGBUS");
	}
	CK_EQ(H.calls, 1);
	CK_EQ(vr_obj_pin(o), VR_PURGED);
	CK(vt_all_zero((const uint8_t *)p, 2 * vt_pg()));
	vr_ctx_destroy(c);
}

/* a handler that returns RETRY without fixing anything: SIGBUS after 8 */
static int lazy_handler(struct vr_obj *o, void *addr, void *arg)
{
	(void)o;
	(void)addr;
	(*(int *)arg)++;
	return VR_FAULT_RETRY;
}

static void sc_retry_bound(void)
{
	struct vr_ctx *c = sc_ctx();
	struct vr_obj *o;
	int calls = 0;
	CK_EQ(vr_obj_new(c, vt_pg(), 0, &o), 0);
	CK_EQ(vr_obj_unpin(o), 0);
	CK(vr_ctx_purge(c, SIZE_MAX) > 0);
	CK_EQ(vr_ctx_set_obj_fault_handler(c, lazy_handler, &calls), 0);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_bus;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGBUS, &sa, NULL);
	volatile uint8_t *p = vr_obj_ptr(o);
	if (sigsetjmp(jb, 1) == 0) {
		(void)p[9];
		CK(0, "no SIGBUS");
	}
	CK_EQ(calls, 8);
	vr_ctx_destroy(c);
}

/* S24 / S14: system calls on discarded object pages fail with EFAULT */
static void sc_efault(void)
{
	struct vr_ctx *c = sc_ctx();
	struct vr_obj *o;
	int pfd[2];
	CK_EQ(pipe(pfd), 0);
	CK_EQ(vr_obj_new(c, vt_pg(), 0, &o), 0);
	CK_EQ(vr_obj_unpin(o), 0);
	CK(vr_ctx_purge(c, SIZE_MAX) > 0);
	CK_EQ(write(pfd[1], "abcd", 4), 4);
	CK(read(pfd[0], vr_obj_ptr(o), 4) < 0 && errno == EFAULT);
	CK_EQ(vr_obj_pin(o), VR_PURGED);
	CK_EQ(write(pfd[1], "abcd", 4), 4);
	CK_EQ(read(pfd[0], vr_obj_ptr(o), 4), 4);
	vr_ctx_destroy(c);
}

/* a touch of object memory that is not discarded (a free page of a
 * chunk... or any foreign fault) goes to the previous handler */
static void sc_foreign(void)
{
	struct vr_ctx *c = sc_ctx();
	struct vr_obj *o;
	CK_EQ(vr_obj_new(c, vt_pg(), 0, &o), 0);
	volatile uint8_t *p = mmap(NULL, vt_pg(), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CK(p != MAP_FAILED);
	(void)*p; /* not ours: the default action, SIGSEGV */
	vr_ctx_destroy(c);
}

/* S25: fork */
static void sc_fork(void)
{
	struct vr_ctx *c = sc_ctx();
	struct vr_obj *small, *large;
	CK_EQ(vr_obj_new(c, 100, 0, &small), 0);
	CK_EQ(vr_obj_new(c, 3 * vt_pg(), 0, &large), 0);
	memset(vr_obj_ptr(small), 1, 100);
	memset(vr_obj_ptr(large), 2, 3 * vt_pg());
	CK_EQ(vr_obj_unpin(large), 0);
	uint8_t *ps = vr_obj_ptr(small), *pl = vr_obj_ptr(large);
	pid_t pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		CK_EQ(vr_obj_pin(small), -EINVAL);
		CK_EQ(vr_obj_unpin(small), -EINVAL);
		CK_EQ(vr_obj_status(large), -EINVAL);
		CK(vr_obj_ptr(small) == NULL);
		CK_EQ(vr_obj_size(large), 0);
		CK(vr_obj_of(ps) == NULL);
		CK(vr_obj_of(pl) == NULL);
		struct vr_obj *n;
		CK_EQ(vr_obj_new(c, 10, 0, &n), -EINVAL);
		vr_obj_free(small);
		vr_obj_free(large);
		/* a new ctx in the child works */
		struct vr_ctx *c2 = sc_ctx();
		CK_EQ(vr_obj_new(c2, 10, 0, &n), 0);
		CK_EQ(vr_obj_unpin(n), 0);
		CK_EQ(vr_obj_pin(n), VR_INTACT);
		vr_ctx_destroy(c2);
		vr_ctx_destroy(c);
		/* not mapped in the child */
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = SIG_DFL;
		sigaction(SIGSEGV, &sa, NULL);
		volatile uint8_t *q = pl;
		(void)*q;
		_exit(4); /* must not get here */
	}
	int stt;
	CK(waitpid(pid, &stt, 0) == pid);
	CK(WIFSIGNALED(stt) && WTERMSIG(stt) == SIGSEGV);
	/* the parent's objects are untouched */
	CK_EQ(vr_obj_pin(large), VR_INTACT);
	for (size_t i = 0; i < 3 * vt_pg(); i++)
		CK_EQ(pl[i], 2);
	for (size_t i = 0; i < 100; i++)
		CK_EQ(ps[i], 1);
	CK(vr_obj_of(ps) == small);
	vr_ctx_destroy(c);
}

static const struct vt_scenario scenarios[] = {
	{ "fault_large", sc_fault_large },
	{ "fault_small", sc_fault_small },
	{ "sigbus", sc_sigbus },
	{ "retry_bound", sc_retry_bound },
	{ "efault", sc_efault },
	{ "foreign", sc_foreign },
	{ "fork", sc_fork },
};

static void run_ok(const char *name)
{
	vt_assert_exit_ok(vt_run_scenario(name));
}

static void test_fault_large(void **state)
{
	(void)state;
	run_ok("fault_large");
}
static void test_fault_small(void **state)
{
	(void)state;
	run_ok("fault_small");
}
static void test_fault_sigbus(void **state)
{
	(void)state;
	run_ok("sigbus");
}
static void test_fault_retry_bound(void **state)
{
	(void)state;
	run_ok("retry_bound");
}
static void test_fault_efault(void **state)
{
	(void)state;
	run_ok("efault");
}
static void test_fault_foreign(void **state)
{
	(void)state;
	vt_assert_killed_by(vt_run_scenario("foreign"), SIGSEGV);
}
static void test_fork(void **state)
{
	(void)state;
	if (getenv("VT_NO_FORK")) {
		skip();
		return;
	}
	run_ok("fork");
}

int main(int argc, char **argv)
{
	int rc = vt_scenario_dispatch(argc, argv, scenarios, VT_ARRAY(scenarios), 30);
	if (rc >= 0)
		return rc;
	/* VT_OBJ_PART=core: the in-process tests (valgrind, TSan);
	 * VT_OBJ_PART=fault: the scenarios (signals, fork); unset: both */
	const char *part = getenv("VT_OBJ_PART");
	const struct CMUnitTest core[] = {
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_new_zero_aligned),
		cmocka_unit_test(test_obj_of_padding),
		cmocka_unit_test(test_unpin_pin_intact),
		cmocka_unit_test(test_purged_reads_zero),
		cmocka_unit_test(test_separate_objects),
		cmocka_unit_test(test_shared_small_page),
		cmocka_unit_test(test_straddling),
		cmocka_unit_test(test_one_lru_with_ranges),
		cmocka_unit_test(test_page_age_after_free),
		cmocka_unit_test(test_limit_at_unpin),
		cmocka_unit_test(test_unpin_many),
		cmocka_unit_test(test_pressure),
		cmocka_unit_test(test_stats),
		cmocka_unit_test(test_footprint),
		cmocka_unit_test(test_waste_mix),
		cmocka_unit_test(test_span_reuse),
		cmocka_unit_test(test_free_states),
		cmocka_unit_test(test_threads),
	};
	const struct CMUnitTest fault[] = {
		cmocka_unit_test(test_fault_large),  cmocka_unit_test(test_fault_small),
		cmocka_unit_test(test_fault_sigbus), cmocka_unit_test(test_fault_retry_bound),
		cmocka_unit_test(test_fault_efault), cmocka_unit_test(test_fault_foreign),
		cmocka_unit_test(test_fork),
	};
	rc = 0;
	if (!part || strcmp(part, "fault") != 0)
		rc |= cmocka_run_group_tests_name("objects", core, NULL, NULL);
	if (!part || strcmp(part, "core") != 0)
		rc |= cmocka_run_group_tests_name("object faults", fault, NULL, NULL);
	return rc;
}
