/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-rules.c - one small test per API rule (S1-S12, S15, S16)
 *
 * Every step checks the return value and the exact VR_STAT_* gauges and
 * counters.  Discarded pages are never touched (that traps: the fault path
 * is tested elsewhere, in scenario processes); data is read only on
 * non-volatile bytes, unpurged volatile bytes, bytes of purged ranges on
 * pages that were not discarded (S7), and after vr_unmark.
 */
#include "tests.h"

#include <dirent.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

static size_t P;

static struct vr_ctx *new_ctx(void)
{
	struct vr_ctx *c = NULL;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_non_null(c);
	return c;
}

static struct vr_region *new_region(struct vr_ctx *c, size_t size)
{
	struct vr_region *r = NULL;
	assert_int_equal(vr_region_new(c, "vt-rules", size, 0, &r), 0);
	assert_non_null(r);
	return r;
}

static uint64_t st(struct vr_ctx *c, enum vr_stat w)
{
	return vr_ctx_stat(c, w);
}

/* the five gauges/counters that every volatility step moves */
static void expect_stats(struct vr_ctx *c, int line, uint64_t ranges, uint64_t vol, uint64_t pur,
			 uint64_t recl, uint64_t purges)
{
	uint64_t g[5] = { st(c, VR_STAT_RANGES), st(c, VR_STAT_VOLATILE_BYTES),
			  st(c, VR_STAT_PURGED_BYTES), st(c, VR_STAT_RECLAIMED_BYTES),
			  st(c, VR_STAT_PURGES) };
	uint64_t e[5] = { ranges, vol, pur, recl, purges };
	if (memcmp(g, e, sizeof(g)) != 0)
		fail_msg("line %d: stats (ranges, volatile, purged, reclaimed, purges) = "
			 "(%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64
			 "), expected (%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64
			 ")",
			 line, g[0], g[1], g[2], g[3], g[4], e[0], e[1], e[2], e[3], e[4]);
	/* never touched here: no fault, no skipped purge */
	assert_int_equal(st(c, VR_STAT_FAULTS), 0);
	assert_int_equal(st(c, VR_STAT_SKIPPED), 0);
}
#define STATS(c, ranges, vol, pur, recl, purges)                                                   \
	expect_stats(c, __LINE__, ranges, vol, pur, recl, purges)

#define VP (VR_STATE_VOLATILE | VR_STATE_PURGED)
#define V VR_STATE_VOLATILE
#define INTACT(b, off, len, gen) assert_true(vt_check((b) + (off), (off), (len), (gen)) == SIZE_MAX)
#define ZERO(b, off, len) assert_true(vt_all_zero((b) + (off), (len)))

/* ------------------------------------------------------------------ S1 */

static void test_s1_new_region(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	const size_t sizes[] = { 1, P - 1, P, P + 1, 5 * P + 123 };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t sz = sizes[i];
		struct vr_region *r = new_region(c, sz);
		uint8_t *b = vr_region_base(r);
		assert_int_equal(st(c, VR_STAT_REGIONS), 1);
		assert_int_equal((uintptr_t)b % P, 0);
		assert_int_equal(vr_region_size(r), sz);
		/* wholly non-volatile, zero filled */
		assert_int_equal(vr_status(r, 0, sz), 0);
		STATS(c, 0, 0, 0, 0, 0);
		ZERO(b, 0, sz);
		/* MFD_CLOEXEC memfd of (at least) that size */
		int fd = vr_region_fd(r);
		assert_true(fd >= 0);
		int fl = fcntl(fd, F_GETFD);
		assert_true(fl >= 0 && (fl & FD_CLOEXEC));
		struct stat sb;
		assert_int_equal(fstat(fd, &sb), 0);
		assert_true(S_ISREG(sb.st_mode) && (size_t)sb.st_size >= sz);
		/* every byte up to size is addressable, none after */
		assert_ptr_equal(vr_region_of(b), r);
		assert_ptr_equal(vr_region_of(b + sz - 1), r);
		assert_ptr_not_equal(vr_region_of(b + sz), r);
		assert_int_equal(vr_mark(r, sz - 1, 1), VR_INTACT);
		assert_int_equal(vr_mark(r, sz, 1), -EINVAL);
		assert_int_equal(vr_unmark(r, 0, sz), VR_INTACT);
		/* read/write memory */
		vt_fill(b, 0, sz, 77);
		INTACT(b, 0, sz, 77);
		vr_region_destroy(r);
		assert_int_equal(st(c, VR_STAT_REGIONS), 0);
	}
	vr_ctx_destroy(c);
}

static void test_s1_bad_size(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r;
	assert_int_equal(vr_region_new(c, "vt-rules", 0, 0, &r), -EINVAL);
	assert_int_equal(vr_region_new(c, "vt-rules", SIZE_MAX, 0, &r), -EINVAL);
	assert_int_equal(vr_region_new(c, "vt-rules", SIZE_MAX - P + 2, 0, &r), -EINVAL);
	assert_int_equal(vr_region_new(c, "vt-rules", (size_t)INT64_MAX, 0, &r), -EINVAL);
	assert_int_equal(st(c, VR_STAT_REGIONS), 0);
	vr_ctx_destroy(c);
}

/* ------------------------------------------------------------------ S2 */

static void test_s2_nothing_changes(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r = new_region(c, 4 * P);
	assert_int_equal(vr_mark(r, 0, 2 * P), VR_INTACT);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)(2 * P));
	assert_int_equal(vr_mark(r, 3 * P, 10), VR_INTACT);
	STATS(c, 2, 10, 2 * P, 2 * P, 1);
	/* a span that is partly valid is wholly rejected */
	assert_int_equal(vr_mark(r, 3 * P, P + 1), -EINVAL);
	assert_int_equal(vr_unmark(r, P, 3 * P + 1), -EINVAL);
	assert_int_equal(vr_unmark(r, 0, 0), -EINVAL);
	assert_int_equal(vr_status(r, 4 * P, 1), -EINVAL);
	assert_int_equal(vr_mark(r, 2 * P, SIZE_MAX), -EINVAL);
	assert_int_equal(vr_ctx_notify_pressure(c, (enum vr_pressure)3), -EINVAL);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_PRESSURE_EVENTS), 0);
	STATS(c, 2, 10, 2 * P, 2 * P, 1);
	assert_int_equal(vr_status(r, 0, 2 * P), VP);
	assert_int_equal(vr_status(r, 2 * P, P), 0);
	assert_int_equal(vr_status(r, 3 * P, 10), V);
	assert_int_equal(vr_status(r, 3 * P + 10, P - 10), 0);
	/* a NULL fault handler removes it (and is no error) */
	assert_int_equal(vr_region_set_fault_handler(r, NULL, r), 0);
	vr_ctx_destroy(c);
}

/* ------------------------------------------------------------------ S3 */

static void test_s3_overlap_joins(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r = new_region(c, 8 * P);
	assert_int_equal(vr_mark(r, 10, 10), VR_INTACT);
	assert_int_equal(vr_mark(r, 30, 10), VR_INTACT);
	assert_int_equal(vr_mark(r, 50, 10), VR_INTACT);
	STATS(c, 3, 30, 0, 0, 0);
	assert_int_equal(vr_mark(r, 15, 40), VR_INTACT); /* [15, 55) */
	STATS(c, 1, 50, 0, 0, 0);
	assert_int_equal(vr_status(r, 9, 1), 0);
	assert_int_equal(vr_status(r, 10, 50), V);
	assert_int_equal(vr_status(r, 60, 1), 0);
	/* one range now: unmarking one byte in the middle gives two */
	assert_int_equal(vr_unmark(r, 40, 1), VR_INTACT);
	STATS(c, 2, 49, 0, 0, 0);
	/* overlap covering several ranges and more */
	assert_int_equal(vr_mark(r, 0, 100), VR_INTACT);
	STATS(c, 1, 100, 0, 0, 0);
	vr_ctx_destroy(c);
}

static void test_s3_adjacent_equal_state_absorbed(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r = new_region(c, 8 * P);
	assert_int_equal(vr_mark(r, 0, 10), VR_INTACT);
	assert_int_equal(vr_mark(r, 20, 10), VR_INTACT);
	assert_int_equal(vr_mark(r, 10, 10), VR_INTACT); /* touches both */
	STATS(c, 1, 30, 0, 0, 0);
	assert_int_equal(vr_mark(r, 100, 10), VR_INTACT);
	assert_int_equal(vr_mark(r, 120, 10), VR_INTACT);
	assert_int_equal(vr_mark(r, 140, 10), VR_INTACT);
	STATS(c, 4, 60, 0, 0, 0);
	assert_int_equal(vr_mark(r, 110, 10), VR_INTACT);
	STATS(c, 3, 70, 0, 0, 0);
	assert_int_equal(vr_mark(r, 130, 10), VR_INTACT);
	STATS(c, 2, 80, 0, 0, 0);
	/* sub-page pieces that touch build one range that holds a whole page */
	assert_int_equal(vr_mark(r, 3 * P, P / 2), VR_INTACT);
	assert_int_equal(vr_mark(r, 3 * P + P / 2, P / 2), VR_INTACT);
	STATS(c, 3, 80 + P, 0, 0, 0);
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), (ssize_t)P);
	STATS(c, 3, 80, P, P, 1);
	assert_int_equal(vr_status(r, 3 * P, P), VP);
	vr_ctx_destroy(c);
}

static void test_s3_adjacent_other_state_separate(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r = new_region(c, 8 * P);
	assert_int_equal(vr_mark(r, 0, P), VR_INTACT);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)P);
	STATS(c, 1, 0, P, P, 1);
	/* unpurged, touching a purged range: stays apart, stays unpurged */
	assert_int_equal(vr_mark(r, P, P), VR_INTACT);
	STATS(c, 2, P, P, P, 1);
	assert_int_equal(vr_status(r, P, P), V);
	/* grows by overlap with the unpurged one only */
	assert_int_equal(vr_mark(r, 2 * P - 10, P + 10), VR_INTACT);
	STATS(c, 2, 2 * P, P, P, 1);
	assert_int_equal(vr_status(r, P, 2 * P), V);
	/* purged separately: two adjacent purged ranges stay two */
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)(2 * P));
	STATS(c, 2, 0, 3 * P, 3 * P, 2);
	/* and unmarking one of them leaves the other purged */
	assert_int_equal(vr_unmark(r, P, 2 * P), VR_PURGED);
	STATS(c, 1, 0, P, 3 * P, 2);
	assert_int_equal(vr_status(r, 0, P), VP);
	vr_ctx_destroy(c);
}

/* repeated absorption across a chain of separately purged adjacent ranges,
 * and the purge-at-once accounting of the coalesced range (S3 + S4) */
static void test_s3_chain_absorption(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r = new_region(c, 8 * P);
	uint8_t *b = vr_region_base(r);
	vt_fill(b, 0, 8 * P, 3);
	const size_t rg[5][2] = {
		{ 0, P }, { P, 2 * P }, { 2 * P, 3 * P }, { 3 * P + 10, 5 * P }, { 5 * P, 6 * P },
	};
	for (int i = 0; i < 5; i++) {
		assert_int_equal(vr_mark(r, rg[i][0], rg[i][1] - rg[i][0]), VR_INTACT);
		assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)P);
		assert_int_equal(vr_status(r, rg[i][0], rg[i][1] - rg[i][0]), VP);
	}
	STATS(c, 5, 0, 6 * P - 10, 5 * P, 5);
	/* page 3 is shared with 10 non-volatile bytes: not discarded (S7) */
	INTACT(b, 3 * P, P, 3);
	/* filling the gap by adjacency alone: unpurged, separate from both */
	assert_int_equal(vr_mark(r, 3 * P, 10), VR_INTACT);
	STATS(c, 6, 10, 6 * P - 10, 5 * P, 5);
	assert_int_equal(vr_status(r, 3 * P, 10), V);
	/* overlapping the purged [2P, 3P) and the unpurged gap: purged; then
	 * it absorbs every adjacent purged range, repeatedly, on both sides.
	 * Pages 0-2 and 4-5 were discarded; page 3 is discarded now. */
	assert_int_equal(vr_mark(r, 2 * P + 5, P + 5), VR_PURGED);
	STATS(c, 1, 0, 6 * P, 6 * P, 6);
	assert_int_equal(vr_status(r, 0, 6 * P), VP);
	assert_int_equal(vr_status(r, 6 * P, 2 * P), 0);
	/* next to it, unpurged, separate */
	assert_int_equal(vr_mark(r, 6 * P, P), VR_INTACT);
	STATS(c, 2, P, 6 * P, 6 * P, 6);
	INTACT(b, 6 * P, 2 * P, 3);
	assert_int_equal(vr_unmark(r, 0, 8 * P), VR_PURGED);
	STATS(c, 0, 0, 0, 6 * P, 6);
	ZERO(b, 0, 6 * P);
	INTACT(b, 6 * P, 2 * P, 3);
	vr_ctx_destroy(c);
}

/* a mark wholly inside one range (equal bounds included) changes nothing,
 * not even the LRU age (S3, S8) */
static void test_s3_inside_changes_nothing(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r1 = new_region(c, 8 * P), *r2 = new_region(c, 8 * P);
	assert_int_equal(vr_mark(r1, 0, 4 * P), VR_INTACT); /* A, oldest */
	assert_int_equal(vr_mark(r2, 0, P), VR_INTACT);     /* B */
	assert_int_equal(vr_mark(r1, P, P), VR_INTACT);
	assert_int_equal(vr_mark(r1, 0, 4 * P), VR_INTACT);
	assert_int_equal(vr_mark(r1, 4 * P - 1, 1), VR_INTACT);
	assert_int_equal(vr_mark(r1, 0, 1), VR_INTACT);
	STATS(c, 2, 5 * P, 0, 0, 0);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)(4 * P)); /* A, not B */
	assert_int_equal(vr_status(r1, 0, 4 * P), VP);
	assert_int_equal(vr_status(r2, 0, P), V);
	STATS(c, 2, P, 4 * P, 4 * P, 1);
	/* inside a purged range: VR_PURGED, and no new purge is counted */
	assert_int_equal(vr_mark(r1, P, 10), VR_PURGED);
	assert_int_equal(vr_mark(r1, 0, 4 * P), VR_PURGED);
	STATS(c, 2, P, 4 * P, 4 * P, 1);
	vr_ctx_destroy(c);
}

/* ------------------------------------------------------------------ S4 */

static void test_s4_purge_at_once(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r = new_region(c, 8 * P);
	uint8_t *b = vr_region_base(r);
	vt_fill(b, 0, 8 * P, 4);
	assert_int_equal(vr_mark(r, 0, 2 * P), VR_INTACT);
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), (ssize_t)(2 * P));
	STATS(c, 1, 0, 2 * P, 2 * P, 1);
	/* [P, 3P + 100) overlaps the purged range: [0, 3P + 100) purged at
	 * once; only page 2 is new; page 3 is shared with non-volatile bytes */
	assert_int_equal(vr_mark(r, P, 2 * P + 100), VR_PURGED);
	STATS(c, 1, 0, 3 * P + 100, 3 * P, 2);
	INTACT(b, 3 * P, P, 4);
	/* an unpurged range joined with the purged one is purged too */
	assert_int_equal(vr_mark(r, 5 * P, P), VR_INTACT);
	STATS(c, 2, P, 3 * P + 100, 3 * P, 2);
	assert_int_equal(vr_mark(r, 3 * P + 50, 2 * P), VR_PURGED); /* to 5P + 50 */
	STATS(c, 1, 0, 6 * P, 6 * P, 3);
	assert_int_equal(vr_status(r, 0, 6 * P), VP);
	INTACT(b, 6 * P, 2 * P, 4);
	assert_int_equal(vr_unmark(r, 0, 6 * P), VR_PURGED);
	ZERO(b, 0, 6 * P);
	STATS(c, 0, 0, 0, 6 * P, 3);
	vr_ctx_destroy(c);
}

/* a purged range without a whole page still counts once in PURGES */
static void test_s4_no_whole_page_counts(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r = new_region(c, 4 * P);
	uint8_t *b = vr_region_base(r);
	vt_fill(b, 0, 4 * P, 5);
	assert_int_equal(vr_mark(r, 0, 2 * P), VR_INTACT);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)(2 * P));
	/* keep only the purged piece [P - 10, P + 10) */
	assert_int_equal(vr_unmark(r, 0, P - 10), VR_PURGED);
	assert_int_equal(vr_unmark(r, P + 10, P - 10), VR_PURGED);
	STATS(c, 1, 0, 20, 2 * P, 1);
	assert_int_equal(vr_status(r, P - 10, 20), VP);
	assert_int_equal(vr_status(r, 0, P - 10), 0);
	/* its pages were restored by those unmarks: zeros, ordinary memory */
	ZERO(b, 0, 2 * P);
	INTACT(b, 2 * P, 2 * P, 5);
	/* overlap: [P - 10, P + 25) purged at once, no whole page */
	assert_int_equal(vr_mark(r, P + 5, 20), VR_PURGED);
	STATS(c, 1, 0, 35, 2 * P, 2);
	assert_int_equal(vr_status(r, P - 10, 35), VP);
	/* not chosen by an LRU purge, not unpurged by it either */
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), 0);
	STATS(c, 1, 0, 35, 2 * P, 2);
	assert_int_equal(vr_unmark(r, 0, 4 * P), VR_PURGED);
	STATS(c, 0, 0, 0, 2 * P, 2);
	vr_ctx_destroy(c);
}

/* ------------------------------------------------------------------ S5 */

static void test_s5_unmark_across_many(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r = new_region(c, 16 * P);
	uint8_t *b = vr_region_base(r);
	vt_fill(b, 0, 16 * P, 6);
	for (size_t i = 0; i < 8; i++)
		assert_int_equal(vr_mark(r, 2 * i * P, P), VR_INTACT);
	assert_int_equal(vr_ctx_purge(c, 3 * P), (ssize_t)(3 * P)); /* ranges 0, 1, 2 */
	STATS(c, 8, 5 * P, 3 * P, 3 * P, 3);
	/* purged ranges first in the interval, unpurged after: all of it is
	 * unmarked (the 2012 prototype stopped at the first purged range) */
	assert_int_equal(vr_unmark(r, P / 2, 15 * P + 7 - P / 2), VR_PURGED);
	STATS(c, 1, 0, P / 2, 3 * P, 3);
	assert_int_equal(vr_status(r, P / 2, 16 * P - P / 2), 0);
	assert_int_equal(vr_status(r, 0, P / 2), VP);
	ZERO(b, P / 2, P / 2); /* interval bytes on discarded page 0 */
	ZERO(b, 2 * P, P);     /* range 1 */
	ZERO(b, 4 * P, P);     /* range 2 */
	INTACT(b, P, P, 6);    /* never volatile */
	INTACT(b, 3 * P, P, 6);
	INTACT(b, 5 * P, 11 * P, 6); /* ranges 3..7 were intact */
	/* readable, writable, and never purged */
	vt_fill(b + P / 2, P / 2, 16 * P - P / 2, 7);
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), 0);
	assert_int_equal(vr_ctx_notify_pressure(c, VR_PRESSURE_CRITICAL), 0);
	INTACT(b, P / 2, 16 * P - P / 2, 7);
	vr_ctx_destroy(c);
}

static void test_s5_byte_granular_ends(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r = new_region(c, 10 * P);
	assert_int_equal(vr_mark(r, 0, 10 * P), VR_INTACT);
	assert_int_equal(vr_unmark(r, 100, 5 * P + 7 - 100), VR_INTACT);
	STATS(c, 2, 100 + 5 * P - 7, 0, 0, 0);
	assert_int_equal(vr_status(r, 99, 1), V);
	assert_int_equal(vr_status(r, 100, 1), 0);
	assert_int_equal(vr_status(r, 5 * P + 6, 1), 0);
	assert_int_equal(vr_status(r, 5 * P + 7, 1), V);
	assert_int_equal(vr_status(r, 100, 5 * P + 7 - 100), 0);
	/* the right piece keeps pages 6..9 purgeable, the left has none */
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), (ssize_t)(4 * P));
	STATS(c, 2, 100, 5 * P - 7, 4 * P, 1);
	assert_int_equal(vr_status(r, 0, 100), V);
	vr_ctx_destroy(c);
}

static void test_s5_aggregated_result(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r = new_region(c, 8 * P);
	assert_int_equal(vr_mark(r, 2 * P, P), VR_INTACT);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)P);  /* B purged */
	assert_int_equal(vr_mark(r, 0, P), VR_INTACT);     /* A */
	assert_int_equal(vr_mark(r, 4 * P, P), VR_INTACT); /* C */
	/* unmarking bytes that are not volatile is no error */
	assert_int_equal(vr_unmark(r, 6 * P, 2 * P), VR_INTACT);
	assert_int_equal(vr_unmark(r, P, P), VR_INTACT);
	STATS(c, 3, 2 * P, P, P, 1);
	assert_int_equal(vr_unmark(r, 0, P), VR_INTACT);
	assert_int_equal(vr_unmark(r, 4 * P, P), VR_INTACT);
	assert_int_equal(vr_mark(r, 0, P), VR_INTACT);
	assert_int_equal(vr_mark(r, 4 * P, P), VR_INTACT);
	/* one purged byte anywhere makes the whole result VR_PURGED */
	assert_int_equal(vr_unmark(r, 0, 5 * P), VR_PURGED);
	STATS(c, 0, 0, 0, P, 1);
	assert_int_equal(vr_status(r, 0, 8 * P), 0);
	/* consumed: a second unmark reports nothing */
	assert_int_equal(vr_unmark(r, 0, 5 * P), VR_INTACT);
	vr_ctx_destroy(c);
}

static void test_s5_split_pieces_keep_state(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r = new_region(c, 10 * P);
	uint8_t *b = vr_region_base(r);
	vt_fill(b, 0, 10 * P, 8);
	assert_int_equal(vr_mark(r, 0, 4 * P), VR_INTACT);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)(4 * P));
	assert_int_equal(vr_mark(r, 5 * P, 4 * P), VR_INTACT);
	STATS(c, 2, 4 * P, 4 * P, 4 * P, 1);
	/* split a purged range */
	assert_int_equal(vr_unmark(r, P + 10, P + 10), VR_PURGED);
	STATS(c, 3, 4 * P, 3 * P - 10, 4 * P, 1);
	assert_int_equal(vr_status(r, 0, P + 10), VP);
	assert_int_equal(vr_status(r, 2 * P + 20, 2 * P - 20), VP);
	assert_int_equal(vr_status(r, P + 10, P + 10), 0);
	ZERO(b, P + 10, P + 10);
	vt_fill(b + P + 10, P + 10, P + 10, 9);
	/* split an unpurged range: the pieces stay unpurged and purgeable */
	assert_int_equal(vr_unmark(r, 6 * P + 1, P - 1), VR_INTACT);
	STATS(c, 4, 3 * P + 1, 3 * P - 10, 4 * P, 1);
	assert_int_equal(vr_status(r, 5 * P, P + 1), V);
	assert_int_equal(vr_status(r, 7 * P, 2 * P), V);
	INTACT(b, 5 * P, 4 * P, 8);
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), (ssize_t)(3 * P));
	STATS(c, 4, 0, 6 * P - 9, 7 * P, 3);
	/* the unmarked bytes were never touched by all this */
	INTACT(b, P + 10, P + 10, 9);
	INTACT(b, 6 * P + 1, P - 1, 8);
	vr_ctx_destroy(c);
}

/* ------------------------------------------------------------------ S6 */

static void test_s6_purged_state_consumed(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r = new_region(c, 8 * P);
	uint8_t *b = vr_region_base(r);
	assert_int_equal(vr_mark(r, 0, 2 * P), VR_INTACT);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)(2 * P));
	assert_int_equal(vr_unmark(r, 0, 2 * P), VR_PURGED);
	assert_int_equal(vr_unmark(r, 0, 2 * P), VR_INTACT);
	vt_fill(b, 0, 2 * P, 10);
	/* marked again: a fresh, unpurged range */
	assert_int_equal(vr_mark(r, 0, 2 * P), VR_INTACT);
	STATS(c, 1, 2 * P, 0, 2 * P, 1);
	assert_int_equal(vr_status(r, 0, 2 * P), V);
	assert_int_equal(vr_unmark(r, 0, 2 * P), VR_INTACT);
	INTACT(b, 0, 2 * P, 10);
	/* adjacency to a purged range does not purge; overlap does */
	assert_int_equal(vr_mark(r, 4 * P, P), VR_INTACT);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)P);
	assert_int_equal(vr_mark(r, 3 * P, P), VR_INTACT);
	assert_int_equal(vr_mark(r, 5 * P, P), VR_INTACT);
	STATS(c, 3, 2 * P, P, 3 * P, 2);
	assert_int_equal(vr_mark(r, 5 * P - 1, 2), VR_PURGED); /* joins [4P,5P) and [5P,6P) */
	STATS(c, 2, P, 2 * P, 4 * P, 3);
	assert_int_equal(vr_status(r, 3 * P, P), V);
	assert_int_equal(vr_status(r, 4 * P, 2 * P), VP);
	vr_ctx_destroy(c);
}

/* ------------------------------------------------------------------ S7 */

static void test_s7_partial_pages(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r = new_region(c, 4 * P);
	uint8_t *b = vr_region_base(r);
	vt_fill(b, 0, 4 * P, 11);
	assert_int_equal(vr_mark(r, P / 2, 3 * P), VR_INTACT); /* whole pages 1, 2 */
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)(2 * P));
	STATS(c, 1, 0, 3 * P, 2 * P, 1);
	/* the shared pages 0 and 3 are neither discarded nor trapped; their
	 * volatile bytes are still reported PURGED */
	INTACT(b, 0, P, 11);
	INTACT(b, 3 * P, P, 11);
	assert_int_equal(vr_status(r, P / 2, 1), VP);
	assert_int_equal(vr_status(r, 3 * P + P / 2 - 1, 1), VP);
	assert_int_equal(vr_unmark(r, 0, 4 * P), VR_PURGED);
	ZERO(b, P, 2 * P);
	INTACT(b, 0, P, 11);
	INTACT(b, 3 * P, P, 11);
	vr_ctx_destroy(c);
}

static void test_s7_no_whole_page_never_chosen(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r = new_region(c, 3 * P + 100);
	uint8_t *b = vr_region_base(r);
	vt_fill(b, 0, 3 * P + 100, 12);
	assert_int_equal(vr_mark(r, 10, P), VR_INTACT);            /* straddles 0/1 */
	assert_int_equal(vr_mark(r, 2 * P + 1, P - 2), VR_INTACT); /* inside page 2 */
	assert_int_equal(vr_mark(r, 3 * P, 100), VR_INTACT);       /* partial last page */
	STATS(c, 3, 2 * P + 98, 0, 0, 0);
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), 0);
	assert_int_equal(vr_ctx_notify_pressure(c, VR_PRESSURE_CRITICAL), 0);
	assert_int_equal(vr_ctx_notify_pressure(c, VR_PRESSURE_MODERATE), 0);
	assert_int_equal(vr_ctx_set_limit(c, 1), 0);
	STATS(c, 3, 2 * P + 98, 0, 0, 0);
	assert_int_equal(vr_status(r, 0, 3 * P + 100), V);
	INTACT(b, 0, 3 * P + 100, 12);
	/* filling the gap makes one range with whole page 1: the limit purges
	 * it before vr_mark returns (S10) */
	assert_int_equal(vr_mark(r, P + 10, P - 9), VR_PURGED); /* [10, 3P - 1) */
	STATS(c, 2, 100, 3 * P - 11, P, 1);
	INTACT(b, 0, P, 12);
	INTACT(b, 2 * P, P + 100, 12);
	assert_int_equal(vr_ctx_set_limit(c, 0), 0);
	/* the partial last page stays unpurged whatever happens */
	assert_int_equal(vr_mark(r, 2 * P, P + 100), VR_PURGED);
	assert_int_equal(vr_status(r, 3 * P, 100), VP);
	vr_ctx_destroy(c);
}

static void test_s7_partial_last_page(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r = new_region(c, 2 * P + 100);
	uint8_t *b = vr_region_base(r);
	vt_fill(b, 0, 2 * P + 100, 13);
	assert_int_equal(vr_mark(r, P, P + 100), VR_INTACT); /* to the last byte */
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), (ssize_t)P);
	STATS(c, 1, 0, P + 100, P, 1);
	INTACT(b, 2 * P, 100, 13);
	assert_int_equal(vr_unmark(r, P, P + 100), VR_PURGED);
	ZERO(b, P, P);
	INTACT(b, 2 * P, 100, 13);
	vr_ctx_destroy(c);
}

/* ------------------------------------------------------------------ S8 */

static void test_s8_lru_across_regions(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r1 = new_region(c, 8 * P), *r2 = new_region(c, 8 * P);
	struct {
		struct vr_region *r;
		size_t off, len;
	} rg[] = { { r1, 0, P },
		   { r2, 0, 2 * P },
		   { r1, 2 * P, P },
		   { r2, 4 * P, 3 * P },
		   { r1, 4 * P, P } };
	const int n = 5;
	for (int i = 0; i < n; i++)
		assert_int_equal(vr_mark(rg[i].r, rg[i].off, rg[i].len), VR_INTACT);
	for (int i = 0; i < n; i++) {
		assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)rg[i].len);
		for (int j = 0; j < n; j++)
			assert_int_equal(vr_status(rg[j].r, rg[j].off, rg[j].len), j <= i ? VP : V);
	}
	assert_int_equal(vr_ctx_purge(c, 1), 0);
	STATS(c, 5, 0, 8 * P, 8 * P, 5);
	vr_ctx_destroy(c);
}

static void test_s8_pieces_keep_age(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r1 = new_region(c, 8 * P), *r2 = new_region(c, 8 * P);
	assert_int_equal(vr_mark(r1, 0, 4 * P), VR_INTACT); /* A */
	assert_int_equal(vr_mark(r2, 0, P), VR_INTACT);     /* B */
	assert_int_equal(vr_unmark(r1, P, P), VR_INTACT);   /* A: [0,P) [2P,4P) */
	STATS(c, 3, 4 * P, 0, 0, 0);
	/* one piece of A (either), never both, never B */
	ssize_t n = vr_ctx_purge(c, 1);
	int s0 = vr_status(r1, 0, P), s1 = vr_status(r1, 2 * P, 2 * P);
	assert_true((n == (ssize_t)P && s0 == VP && s1 == V) ||
		    (n == (ssize_t)(2 * P) && s0 == V && s1 == VP));
	assert_int_equal(vr_status(r2, 0, P), V);
	/* then the other piece */
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)(3 * P) - n);
	assert_int_equal(vr_status(r1, 0, 4 * P), VP);
	assert_int_equal(vr_status(r2, 0, P), V);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)P);
	STATS(c, 3, 0, 4 * P, 4 * P, 3);
	vr_ctx_destroy(c);
}

static void test_s8_growth_rejuvenates(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r1 = new_region(c, 8 * P), *r2 = new_region(c, 8 * P);
	/* by overlap */
	assert_int_equal(vr_mark(r1, 0, P), VR_INTACT);
	assert_int_equal(vr_mark(r2, 0, P), VR_INTACT);
	assert_int_equal(vr_mark(r1, P / 2, P + P / 2), VR_INTACT); /* [0, 2P) */
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)P);
	assert_int_equal(vr_status(r2, 0, P), VP);
	assert_int_equal(vr_status(r1, 0, 2 * P), V);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)(2 * P));
	/* by adjacency */
	assert_int_equal(vr_mark(r1, 4 * P, P), VR_INTACT);
	assert_int_equal(vr_mark(r2, 4 * P, P), VR_INTACT);
	assert_int_equal(vr_mark(r1, 5 * P, 1), VR_INTACT); /* [4P, 5P + 1) */
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)P);
	assert_int_equal(vr_status(r2, 4 * P, P), VP);
	assert_int_equal(vr_status(r1, 4 * P, P + 1), V);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)P);
	STATS(c, 4, 0, 5 * P + 1, 5 * P, 4);
	vr_ctx_destroy(c);
}

static void test_s8_purge_n_stops(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r = new_region(c, 16 * P);
	const size_t off[4] = { 0, 2 * P, 5 * P, 7 * P }, len[4] = { P, 2 * P, P, 3 * P };
	for (int i = 0; i < 4; i++)
		assert_int_equal(vr_mark(r, off[i], len[i]), VR_INTACT);
	assert_int_equal(vr_ctx_purge(c, 0), 0);
	STATS(c, 4, 7 * P, 0, 0, 0);
	/* P + 1: the first range is not enough, the second is */
	assert_int_equal(vr_ctx_purge(c, P + 1), (ssize_t)(3 * P));
	assert_int_equal(vr_status(r, 0, 4 * P), VP);
	assert_int_equal(vr_status(r, 5 * P, P), V);
	STATS(c, 4, 4 * P, 3 * P, 3 * P, 2);
	/* exactly one range's worth */
	assert_int_equal(vr_ctx_purge(c, P), (ssize_t)P);
	assert_int_equal(vr_status(r, 7 * P, 3 * P), V);
	assert_int_equal(vr_ctx_purge(c, 0), 0);
	STATS(c, 4, 3 * P, 4 * P, 4 * P, 3);
	/* more than is left: all of it */
	assert_int_equal(vr_ctx_purge(c, 100 * P), (ssize_t)(3 * P));
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), 0);
	STATS(c, 4, 0, 7 * P, 7 * P, 4);
	vr_ctx_destroy(c);
}

/* reclaimed bytes are whole pages, resident or not */
static void test_s8_reclaimed_not_resident(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r = new_region(c, 64 * P);
	assert_int_equal(vr_mark(r, 3, 40 * P), VR_INTACT); /* never touched */
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), (ssize_t)(39 * P));
	STATS(c, 1, 0, 40 * P, 39 * P, 1);
	vr_ctx_destroy(c);
}

/* ------------------------------------------------------------------ S9 */

static void test_s9_nonvolatile_survives(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	const size_t sz = 24 * P + 123;
	struct vr_region *r = new_region(c, sz);
	uint8_t *b = vr_region_base(r);
	vt_fill(b, 0, sz, 14);
	/* 8 ranges [3kP + 100, 3kP + 2P + 50), each with one whole page;
	 * non-volatile bytes share pages with them on both sides */
	for (size_t k = 0; k < 8; k++)
		assert_int_equal(vr_mark(r, 3 * k * P + 100, 2 * P - 50), VR_INTACT);
	assert_int_equal(vr_ctx_notify_pressure(c, VR_PRESSURE_MODERATE), (ssize_t)(4 * P));
	assert_int_equal(vr_ctx_set_limit(c, 1), 0);
	assert_int_equal(vr_ctx_notify_pressure(c, VR_PRESSURE_CRITICAL), 0);
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), 0);
	STATS(c, 8, 0, 8 * (2 * P - 50), 8 * P, 8);
	for (size_t k = 0; k < 8; k++) {
		size_t s = 3 * k * P + 100, e = s + 2 * P - 50;
		INTACT(b, 3 * k * P, 100, 14);         /* non-volatile, page 3k */
		INTACT(b, e, (k + 1) * 3 * P - e, 14); /* non-volatile, pages 3k+1, 3k+2 */
		INTACT(b, s, P - 100, 14);             /* purged, page not discarded */
		INTACT(b, 3 * k * P + 2 * P, 50, 14);
	}
	INTACT(b, 24 * P, 123, 14);
	for (size_t k = 0; k < 8; k++)
		assert_int_equal(vr_unmark(r, 3 * k * P + 100, 2 * P - 50), VR_PURGED);
	for (size_t k = 0; k < 8; k++) {
		INTACT(b, 3 * k * P, P, 14);
		ZERO(b, 3 * k * P + P, P);
		INTACT(b, 3 * k * P + 2 * P, P, 14);
	}
	vr_ctx_destroy(c);
}

/* ----------------------------------------------------------------- S10 */

static void test_s10_limit_at_set_time(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r = new_region(c, 8 * P);
	for (int i = 0; i < 3; i++)
		assert_int_equal(vr_mark(r, (size_t)i * 3 * P, 2 * P), VR_INTACT);
	STATS(c, 3, 6 * P, 0, 0, 0);
	assert_int_equal(vr_ctx_set_limit(c, 3 * P), 0);
	STATS(c, 3, 2 * P, 4 * P, 4 * P, 2);
	assert_int_equal(vr_status(r, 0, 2 * P), VP);
	assert_int_equal(vr_status(r, 3 * P, 2 * P), VP);
	assert_int_equal(vr_status(r, 6 * P, 2 * P), V);
	/* exactly at the limit: nothing more */
	assert_int_equal(vr_ctx_set_limit(c, 2 * P), 0);
	STATS(c, 3, 2 * P, 4 * P, 4 * P, 2);
	assert_int_equal(vr_ctx_set_limit(c, 2 * P - 1), 0);
	STATS(c, 3, 0, 6 * P, 6 * P, 3);
	vr_ctx_destroy(c);
}

static void test_s10_limit_at_mark_time(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r1 = new_region(c, 16 * P), *r2 = new_region(c, 16 * P);
	assert_int_equal(vr_ctx_set_limit(c, 3 * P), 0);
	assert_int_equal(vr_mark(r1, 0, 2 * P), VR_INTACT); /* A */
	STATS(c, 1, 2 * P, 0, 0, 0);
	assert_int_equal(vr_mark(r2, 0, 2 * P), VR_INTACT); /* B: A goes */
	STATS(c, 2, 2 * P, 2 * P, 2 * P, 1);
	assert_int_equal(vr_status(r1, 0, 2 * P), VP);
	/* C alone is over the limit: B goes first, then C itself */
	assert_int_equal(vr_mark(r1, 4 * P, 4 * P), VR_PURGED);
	STATS(c, 3, 0, 8 * P, 8 * P, 3);
	assert_int_equal(vr_status(r2, 0, 2 * P), VP);
	/* D then E: D goes, E (the youngest) stays */
	assert_int_equal(vr_mark(r2, 4 * P, P), VR_INTACT);
	assert_int_equal(vr_mark(r1, 10 * P, 3 * P), VR_INTACT);
	STATS(c, 5, 3 * P, 9 * P, 9 * P, 4);
	assert_int_equal(vr_status(r2, 4 * P, P), VP);
	assert_int_equal(vr_status(r1, 10 * P, 3 * P), V);
	/* growing E past the limit purges E: nothing older is left */
	assert_int_equal(vr_mark(r1, 13 * P, 1), VR_PURGED);
	STATS(c, 5, 0, 12 * P + 1, 12 * P, 5);
	/* no limit: nothing is purged any more */
	assert_int_equal(vr_ctx_set_limit(c, 0), 0);
	assert_int_equal(vr_mark(r2, 8 * P, 8 * P), VR_INTACT);
	STATS(c, 6, 8 * P, 12 * P + 1, 12 * P, 5);
	vr_ctx_destroy(c);
}

/* A ctx-wide purge that runs dry sets a "nothing purgeable" hint that
 * lets later marks which add nothing purgeable skip the limit.  A range
 * another thread marks while the purge runs, in a region the purge has
 * already passed over (or never saw), must not be left behind that hint:
 * the next mark still keeps the limit.  The purge is held in the middle
 * by the log function (called on each purged range) while a second
 * thread marks. */
static struct {
	sem_t go, done;
	struct vr_region *r; /* the second thread marks a page of it */
	struct vr_obj *o;    /* or unpins it */
	bool posted;
	int rc;
} dry;

static void dry_log(int prio, const char *msg, void *arg)
{
	(void)prio;
	(void)arg;
	if (!dry.posted && strstr(msg, "purged region")) {
		dry.posted = true;
		sem_post(&dry.go);
		sem_wait(&dry.done);
	}
}

static void *dry_marker(void *arg)
{
	(void)arg;
	sem_wait(&dry.go);
	/* within the limit: no purge of its own */
	dry.rc = dry.o ? vr_obj_unpin(dry.o) : vr_mark(dry.r, 0, P);
	sem_post(&dry.done);
	return NULL;
}

/* unpin: an object of priority 0, unpinned while the run is at level 4
 * (the level of its group is behind it) */
static void limit_after_dry_purge(bool unpin)
{
	struct vr_ctx *c = new_ctx();
	struct vr_region *rx = new_region(c, 4 * P), *rz = new_region(c, 4 * P);
	struct vr_group *g;
	memset(&dry, 0, sizeof(dry));
	dry.r = new_region(c, 4 * P);
	if (unpin) {
		assert_int_equal(vr_group_new(c, 0, &g), 0);
		assert_int_equal(vr_obj_new_in(g, P, 0, 0, &dry.o), 0);
	}
	assert_int_equal(sem_init(&dry.go, 0, 0), 0);
	assert_int_equal(sem_init(&dry.done, 0, 0), 0);
	assert_int_equal(vr_ctx_set_limit(c, P + P / 2), 0);
	assert_int_equal(vr_mark(rx, 0, P), VR_INTACT);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, dry_marker, NULL), 0);
	vr_set_log_fn(dry_log, NULL);
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), (ssize_t)P); /* X; Y comes meanwhile */
	vr_set_log_fn(NULL, NULL);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(dry.posted);
	assert_int_equal(dry.rc, unpin ? 0 : VR_INTACT);
	if (unpin)
		assert_int_equal(vr_obj_status(dry.o), V);
	else
		assert_int_equal(vr_status(dry.r, 0, P), V);
	/* P bytes with no whole page: over the limit, and Y is purgeable */
	int rc = vr_mark(rz, P / 2, P);
	assert_int_equal(rc, VR_INTACT);
	if (unpin)
		assert_int_equal(vr_obj_status(dry.o), VP);
	else
		assert_int_equal(vr_status(dry.r, 0, P), VP);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES), P);
	sem_destroy(&dry.go);
	sem_destroy(&dry.done);
	vr_ctx_destroy(c);
}

static void test_s10_limit_after_dry_purge(void **state)
{
	(void)state;
	limit_after_dry_purge(false);
}

static void test_s10_limit_after_dry_purge_unpin(void **state)
{
	(void)state;
	limit_after_dry_purge(true);
}

/* ----------------------------------------------------------------- S11 */

static void test_s11_moderate_halves_floor(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r = new_region(c, 16 * P);
	/* V = 2P + 1, half rounded down = P: after B (P) the remaining P + 1
	 * is still above it, so A goes too (half rounded up would stop) */
	assert_int_equal(vr_mark(r, 4 * P, P), VR_INTACT); /* B, older */
	assert_int_equal(vr_mark(r, 0, P + 1), VR_INTACT); /* A */
	assert_int_equal(vr_ctx_notify_pressure(c, VR_PRESSURE_MODERATE), (ssize_t)(2 * P));
	STATS(c, 2, 0, 2 * P + 1, 2 * P, 2);
	assert_int_equal(st(c, VR_STAT_PRESSURE_EVENTS), 1);
	assert_int_equal(vr_unmark(r, 0, 16 * P), VR_PURGED);
	/* V = 5P + 1, target 2.5P: A (2P) leaves 3P + 1, B (P + 1) leaves 2P */
	assert_int_equal(vr_mark(r, 0, 2 * P), VR_INTACT);
	assert_int_equal(vr_mark(r, 3 * P, P + 1), VR_INTACT);
	assert_int_equal(vr_mark(r, 6 * P, 2 * P), VR_INTACT);
	assert_int_equal(vr_ctx_notify_pressure(c, VR_PRESSURE_MODERATE), (ssize_t)(3 * P));
	STATS(c, 3, 2 * P, 3 * P + 1, 5 * P, 4);
	assert_int_equal(vr_status(r, 6 * P, 2 * P), V);
	assert_int_equal(st(c, VR_STAT_PRESSURE_EVENTS), 2);
	/* again: 2P -> at most P: C goes */
	assert_int_equal(vr_ctx_notify_pressure(c, VR_PRESSURE_MODERATE), (ssize_t)(2 * P));
	assert_int_equal(st(c, VR_STAT_PRESSURE_EVENTS), 3);
	vr_ctx_destroy(c);
}

static void test_s11_critical_and_none(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r1 = new_region(c, 8 * P), *r2 = new_region(c, 8 * P + 1);
	assert_int_equal(vr_mark(r1, 0, 3 * P), VR_INTACT);
	assert_int_equal(vr_mark(r2, 10, 5 * P), VR_INTACT);    /* 4 whole pages */
	assert_int_equal(vr_mark(r2, 8 * P, 1), VR_INTACT);     /* none */
	assert_int_equal(vr_mark(r1, 5 * P + 1, P), VR_INTACT); /* none */
	STATS(c, 4, 9 * P + 1, 0, 0, 0);
	assert_int_equal(vr_ctx_notify_pressure(c, VR_PRESSURE_NONE), 0);
	STATS(c, 4, 9 * P + 1, 0, 0, 0);
	assert_int_equal(st(c, VR_STAT_PRESSURE_EVENTS), 0);
	assert_int_equal(vr_ctx_notify_pressure(c, VR_PRESSURE_CRITICAL), (ssize_t)(7 * P));
	STATS(c, 4, P + 1, 8 * P, 7 * P, 2);
	assert_int_equal(st(c, VR_STAT_PRESSURE_EVENTS), 1);
	/* nothing purgeable: still counted as an event */
	assert_int_equal(vr_ctx_notify_pressure(c, VR_PRESSURE_CRITICAL), 0);
	assert_int_equal(vr_ctx_notify_pressure(c, VR_PRESSURE_MODERATE), 0);
	assert_int_equal(st(c, VR_STAT_PRESSURE_EVENTS), 3);
	assert_int_equal(vr_ctx_notify_pressure(c, VR_PRESSURE_NONE), 0);
	assert_int_equal(st(c, VR_STAT_PRESSURE_EVENTS), 3);
	STATS(c, 4, P + 1, 8 * P, 7 * P, 2);
	vr_ctx_destroy(c);
}

/* ----------------------------------------------------------------- S12 */

static void test_s12_status_bits(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r = new_region(c, 8 * P);
	assert_int_equal(vr_status(r, 0, 8 * P), 0);
	assert_int_equal(vr_mark(r, P, 2 * P), VR_INTACT);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)(2 * P));
	assert_int_equal(vr_mark(r, 4 * P + 1, P - 1), VR_INTACT);
	assert_int_equal(vr_status(r, 0, P), 0);
	assert_int_equal(vr_status(r, 0, P + 1), VP);
	assert_int_equal(vr_status(r, P, 1), VP);
	assert_int_equal(vr_status(r, 3 * P - 1, 1), VP);
	assert_int_equal(vr_status(r, 3 * P, P + 1), 0);
	assert_int_equal(vr_status(r, 3 * P, P + 2), V);
	assert_int_equal(vr_status(r, 4 * P + 1, P - 1), V);
	assert_int_equal(vr_status(r, 5 * P - 1, 1), V);
	assert_int_equal(vr_status(r, 5 * P, 3 * P), 0);
	assert_int_equal(vr_status(r, 2 * P, 3 * P), VP);
	assert_int_equal(vr_status(r, 0, 8 * P), VP);
	/* PURGED never comes alone, whatever the interval */
	for (size_t o = 0; o < 8 * P; o += P / 4)
		for (size_t l = 1; o + l <= 8 * P; l += P / 2 + 1) {
			int s = vr_status(r, o, l);
			assert_true(s == 0 || s == V || s == VP);
		}
	vr_ctx_destroy(c);
}

/* ----------------------------------------------------------------- S15 */

/* mappings of memfds called name, counted once per file: the mprotect
 * trap backend splits a purged region's mapping into several lines */
static int count_maps(const char *name)
{
	char line[4096], pat[256];
	unsigned long inodes[256];
	int n = 0;
	snprintf(pat, sizeof(pat), "/memfd:%s ", name);
	FILE *f = fopen("/proc/self/maps", "re");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long ino = 0;
		if (!strstr(line, pat) || sscanf(line, "%*s %*s %*s %*s %lu", &ino) != 1)
			continue;
		int seen = 0;
		for (int i = 0; i < n; i++)
			seen |= inodes[i] == ino;
		if (!seen && n < 256)
			inodes[n++] = ino;
	}
	fclose(f);
	return n;
}

static void test_s15_destroy_releases(void **state)
{
	(void)state;
	int fds = vt_count_dir("/proc/self/fd"), tasks = vt_count_dir("/proc/self/task");
	for (int round = 0; round < 3; round++) {
		struct vr_ctx *c = NULL;
		struct vr_region *r[40];
		assert_int_equal(vr_ctx_new(round == 1 ? VR_CTX_NO_MONITOR : 0, &c), 0);
		for (int i = 0; i < 40; i++) {
			assert_int_equal(
				vr_region_new(c, "vt-s15", (size_t)(i % 4 + 1) * P + 7, 0, &r[i]),
				0);
			assert_int_equal(vr_mark(r[i], 0, P), VR_INTACT);
			assert_int_equal(vr_mark(r[i], P / 2 + 5, 3), VR_INTACT);
		}
		assert_int_equal(vr_ctx_purge(c, 10 * P), (ssize_t)(10 * P));
		assert_int_equal(count_maps("vt-s15"), 40);
		for (int i = 0; i < 40; i += 2)
			vr_region_destroy(r[i]);
		assert_int_equal(count_maps("vt-s15"), 20);
		assert_int_equal(st(c, VR_STAT_REGIONS), 20);
		/* ranges of destroyed regions leave the gauges */
		assert_int_equal(st(c, VR_STAT_RANGES), 20);
		/* regions 0..9 were purged (oldest first); 1, 3, 5, 7, 9 remain */
		assert_int_equal(st(c, VR_STAT_VOLATILE_BYTES), 15 * P);
		assert_int_equal(st(c, VR_STAT_PURGED_BYTES), 5 * P);
		assert_int_equal(st(c, VR_STAT_RECLAIMED_BYTES), 10 * P);
		assert_int_equal(st(c, VR_STAT_PURGES), 10);
		vr_ctx_destroy(c);
		assert_int_equal(count_maps("vt-s15"), 0);
		assert_int_equal(vt_count_dir("/proc/self/fd"), fds);
		/* no monitor thread is left; a sanitizer may have started a
		 * thread of its own (TSan) since the baseline */
		assert_int_equal(vt_count_monitor_threads(), 0);
		int now = vt_count_dir("/proc/self/task");
		assert_true(now == tasks || (round == 0 && now == tasks + 1));
		tasks = now;
	}
}

/* ----------------------------------------------------------------- S16 */

/* child: intact mark/unmark/status loops between getppid() markers, then
 * a purge (which must make system calls) before the last marker:
 *   phase 1: page-sized ranges, splits and joins, a limit far away
 *   phase 2: ranges without a whole page, over a limit of 1 byte (the
 *            limit check finds nothing purgeable: still intact)
 *   phase 3: the control */
enum { S16_N = 32 };

static void s16_loop_pages(struct vr_ctx *c, struct vr_region *r)
{
	for (int it = 0; it < 50; it++) {
		for (size_t i = 0; i < S16_N; i++) {
			size_t o = 2 * i * P;
			CK_EQ(vr_mark(r, o, P), VR_INTACT);
			CK_EQ(vr_mark(r, o + 10, 100), VR_INTACT);   /* inside */
			CK_EQ(vr_unmark(r, o + 100, 50), VR_INTACT); /* split */
			CK_EQ(vr_status(r, o, P), V);
			CK_EQ(vr_mark(r, o + 90, 70), VR_INTACT); /* join */
			CK_EQ(vr_mark_ptr((uint8_t *)vr_region_base(r) + o + P, 5), VR_INTACT);
			CK_EQ(vr_unmark_ptr((uint8_t *)vr_region_base(r) + o + P, 5), VR_INTACT);
		}
		CK_EQ(vr_ctx_stat(c, VR_STAT_RANGES), S16_N);
		for (size_t i = 0; i < S16_N; i++)
			CK_EQ(vr_unmark(r, 2 * i * P, P), VR_INTACT);
		CK_EQ(vr_ctx_stat(c, VR_STAT_RANGES), 0);
	}
}

static void s16_loop_subpage(struct vr_ctx *c, struct vr_region *r)
{
	for (int it = 0; it < 50; it++) {
		for (size_t i = 0; i < S16_N; i++) {
			size_t o = 2 * i * P + 1;
			CK_EQ(vr_mark(r, o, P - 2), VR_INTACT);
			CK_EQ(vr_mark(r, o + P - 2, 1), VR_INTACT); /* grows, still no page */
			CK_EQ(vr_status(r, o, P), V);
		}
		CK_EQ(vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES), S16_N * (P - 1));
		for (size_t i = 0; i < S16_N; i++)
			CK_EQ(vr_unmark(r, 2 * i * P, P), VR_INTACT);
	}
}

static void s16_child(void)
{
	struct vr_ctx *c;
	struct vr_region *r;
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	CK_EQ(vr_region_new(c, "vt-s16", 2 * S16_N * P, 0, &r), 0);
	CK_EQ(vr_ctx_set_limit(c, 1000 * P), 0);
	s16_loop_pages(c, r); /* warm-up: node slabs, lazy binding */
	syscall(SYS_getppid);
	s16_loop_pages(c, r);
	CK_EQ(vr_ctx_set_limit(c, 1), 0);
	s16_loop_subpage(c, r);
	syscall(SYS_getppid);
	s16_loop_subpage(c, r);
	syscall(SYS_getppid);
	CK_EQ(vr_mark(r, 0, P), VR_PURGED); /* the limit purges it at once */
	CK_EQ(vr_unmark(r, 0, P), VR_PURGED);
	syscall(SYS_getppid);
	vr_ctx_destroy(c);
	_exit(0);
}

static void test_s16_no_syscall_when_intact(void **state)
{
	(void)state;
	/* valgrind runs the code on its own JIT, with system calls of its own
	 * (and clock_gettime without the vDSO) */
	if (RUNNING_ON_VALGRIND || getenv("VT_VALGRIND")) {
		print_message("under valgrind: system calls cannot be counted, skipped\n");
		skip();
	}
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		vt_default_signals();
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0)
			_exit(77);
		raise(SIGSTOP);
		s16_child();
	}
	int ws;
	assert_int_equal(waitpid(pid, &ws, 0), pid);
	if (WIFEXITED(ws) && WEXITSTATUS(ws) == 77) {
		print_message("ptrace not permitted: skipped\n");
		skip();
	}
	assert_true(WIFSTOPPED(ws) && WSTOPSIG(ws) == SIGSTOP);
	assert_int_equal(ptrace(PTRACE_SETOPTIONS, pid, NULL,
				(void *)(long)(PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL)),
			 0);
	long count[5] = { 0 }, other[5][4] = { { 0 } };
	int phase = 0, sig = 0;
	for (;;) {
		assert_int_equal(ptrace(PTRACE_SYSCALL, pid, NULL, (void *)(long)sig), 0);
		sig = 0;
		assert_int_equal(waitpid(pid, &ws, 0), pid);
		if (WIFEXITED(ws) || WIFSIGNALED(ws))
			break;
		assert_true(WIFSTOPPED(ws));
		if (WSTOPSIG(ws) != (SIGTRAP | 0x80)) {
			sig = WSTOPSIG(ws);
			continue;
		}
		struct __ptrace_syscall_info si;
		memset(&si, 0, sizeof(si));
		assert_true(ptrace(PTRACE_GET_SYSCALL_INFO, pid, (void *)sizeof(si), &si) > 0);
		if (si.op != PTRACE_SYSCALL_INFO_ENTRY)
			continue;
		if (si.entry.nr == SYS_getppid) {
			phase++;
			assert_true(phase <= 4);
			continue;
		}
		if (count[phase] < 4)
			other[phase][count[phase]] = (long)si.entry.nr;
		count[phase]++;
	}
	assert_true(WIFEXITED(ws));
	assert_int_equal(WEXITSTATUS(ws), 0);
	assert_int_equal(phase, 4);
	for (int k = 1; k <= 2; k++)
		if (count[k] != 0)
			fail_msg("%ld system calls in intact loop %d (first: %ld %ld %ld %ld)",
				 count[k], k, other[k][0], other[k][1], other[k][2], other[k][3]);
	/* the method sees system calls when there are some */
	assert_true(count[3] > 0);
}

struct s16_thread {
	struct vr_ctx *c;
	struct vr_region *r;
	int bad;
};

static void *s16_worker(void *arg)
{
	struct s16_thread *t = arg;
	uint8_t *b = vr_region_base(t->r);
	for (int it = 0; it < 3000 && !t->bad; it++) {
		size_t o = (size_t)(it % 7) * P + (size_t)(it % 13);
		b[o] = (uint8_t)it;
		if (vr_mark(t->r, o, P) != VR_INTACT || vr_status(t->r, o, P) != V ||
		    vr_unmark(t->r, o, P) != VR_INTACT || b[o] != (uint8_t)it)
			t->bad = 1;
	}
	return NULL;
}

/* calls on different regions from several threads: each sees its own
 * results, the shared gauges add up */
static void test_s16_threads_own_regions(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	enum { T = 4 };
	struct s16_thread t[T];
	pthread_t th[T];
	for (int i = 0; i < T; i++) {
		t[i] = (struct s16_thread){ c, new_region(c, 8 * P), 0 };
		assert_int_equal(pthread_create(&th[i], NULL, s16_worker, &t[i]), 0);
	}
	for (int i = 0; i < T; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(t[i].bad, 0);
	}
	STATS(c, 0, 0, 0, 0, 0);
	vr_ctx_destroy(c);
}

int main(void)
{
	P = vt_pg();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_s1_new_region),
		cmocka_unit_test(test_s1_bad_size),
		cmocka_unit_test(test_s2_nothing_changes),
		cmocka_unit_test(test_s3_overlap_joins),
		cmocka_unit_test(test_s3_adjacent_equal_state_absorbed),
		cmocka_unit_test(test_s3_adjacent_other_state_separate),
		cmocka_unit_test(test_s3_chain_absorption),
		cmocka_unit_test(test_s3_inside_changes_nothing),
		cmocka_unit_test(test_s4_purge_at_once),
		cmocka_unit_test(test_s4_no_whole_page_counts),
		cmocka_unit_test(test_s5_unmark_across_many),
		cmocka_unit_test(test_s5_byte_granular_ends),
		cmocka_unit_test(test_s5_aggregated_result),
		cmocka_unit_test(test_s5_split_pieces_keep_state),
		cmocka_unit_test(test_s6_purged_state_consumed),
		cmocka_unit_test(test_s7_partial_pages),
		cmocka_unit_test(test_s7_no_whole_page_never_chosen),
		cmocka_unit_test(test_s7_partial_last_page),
		cmocka_unit_test(test_s8_lru_across_regions),
		cmocka_unit_test(test_s8_pieces_keep_age),
		cmocka_unit_test(test_s8_growth_rejuvenates),
		cmocka_unit_test(test_s8_purge_n_stops),
		cmocka_unit_test(test_s8_reclaimed_not_resident),
		cmocka_unit_test(test_s9_nonvolatile_survives),
		cmocka_unit_test(test_s10_limit_at_set_time),
		cmocka_unit_test(test_s10_limit_at_mark_time),
		cmocka_unit_test(test_s10_limit_after_dry_purge),
		cmocka_unit_test(test_s10_limit_after_dry_purge_unpin),
		cmocka_unit_test(test_s11_moderate_halves_floor),
		cmocka_unit_test(test_s11_critical_and_none),
		cmocka_unit_test(test_s12_status_bits),
		cmocka_unit_test(test_s15_destroy_releases),
		cmocka_unit_test(test_s16_no_syscall_when_intact),
		cmocka_unit_test(test_s16_threads_own_regions),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
