/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * s-markpair.c - scenario 1: the cost of using an intact object.
 *
 * libvrange: a region holds N volatile 64 KiB ranges (each followed by a
 * one-page gap so that they stay N ranges); one "pair" is vr_unmark of a
 * random range (must return VR_INTACT) then vr_mark of it again (must
 * return VR_INTACT).  The memfd is sparse: no page is ever touched.
 * Random ranges make the tree walk pay for cache misses as a real cache
 * would; "hot" repeats one range (the best case); "ptr" is the random
 * pair through vr_unmark_ptr / vr_mark_ptr (adds the address lookup).
 *
 * madvfree-canary: lock (CAS back 16 words) + unlock (save 16 words,
 * write cookies, madvise(MADV_FREE)) of a random 64 KiB object out of 64.
 *
 * Floor: two uncontended mutex lock+unlock (a pair takes the region lock
 * twice).
 *
 * Each sample is the mean over a batch of BATCH pairs; median and p99 are
 * over samples.  Per size also: the cost of building the map (ns per new
 * range, ascending marks); the heap it holds per range, after the build
 * and again after the random pairs (the LRU log's stale entries
 * included); the anonymous RSS it grew by per range ("vr-rss-per-range":
 * the whole cost, since a large map's arenas are mapped outside malloc);
 * and how much of the map the kernel put on 2 MiB pages ("vr-huge-mib").
 * 10^7 ranges run in full mode only (about 0.7 GB of heap).
 */
#include "bench.h"
#include "baselines.h"

#include <pthread.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <vrange.h>

#define SCEN "markpair"
#define OBJ (64 * KiB)
#define BATCH 64

enum pair_kind { PAIR_RANDOM, PAIR_HOT, PAIR_PTR };

static void pair_batch(struct vr_region *r, size_t n, size_t stride, uint64_t *rng,
		       enum pair_kind kind)
{
	char *base = vr_region_base(r);
	for (size_t j = 0; j < BATCH; j++) {
		size_t off = (kind == PAIR_HOT ? n / 2 : rng_below(rng, n)) * stride;
		int a, b;
		if (kind == PAIR_PTR) {
			a = vr_unmark_ptr(base + off, OBJ);
			b = vr_mark_ptr(base + off, OBJ);
		} else {
			a = vr_unmark(r, off, OBJ);
			b = vr_mark(r, off, OBJ);
		}
		if (a != VR_INTACT || b != VR_INTACT)
			die("pair at %zu: unmark %d mark %d (expected intact)", off, a, b);
	}
}

/* also used by s-wall.c, which reports under its own scenario name */
void bench_range_pairs(const char *scen, struct vr_ctx *ctx, size_t n, const char *tag)
{
	size_t stride = OBJ + page_size, nsamp = BY_MODE(100, 800, 3000);
	struct vr_region *r;
	char name[48];
	VRCHECK(vr_region_new(ctx, "vrbench-markpair", n * stride, 0, &r));
	VRCHECK(vr_mark(r, 0, OBJ)); /* what a region allocates once is not per range */

	malloc_trim(0); /* freed heap pages reused would not show as growth */
	size_t h0 = heap_in_use();
	uint64_t anon0 = proc_status_kib("RssAnon");
	uint64_t hp0 = smaps_rollup_kib("AnonHugePages");
	uint64_t t0 = now_ns();
	for (size_t i = 1; i < n; i++)
		if (VRCHECK(vr_mark(r, i * stride, OBJ)) != VR_INTACT)
			die("fresh mark purged");
	double build = (double)(now_ns() - t0) / (double)(n - 1);
	double per = ((double)heap_in_use() - (double)h0) / (double)(n - 1);
	CHECK(vr_ctx_stat(ctx, VR_STAT_RANGES) == n);
	snprintf(name, sizeof(name), "vr-mark-build-%s", tag);
	emit_row(scen, name, build, NAN, "ns/range", (long)n);
	snprintf(name, sizeof(name), "vr-heap-per-range-%s", tag);
	emit_row(scen, name, per, NAN, "B", (long)n);
	/* the metadata's memory: a large map's arenas are mapped whole
	 * 2 MiB pages (map/map.c), outside malloc's accounting */
	snprintf(name, sizeof(name), "vr-rss-per-range-%s", tag);
	emit_row(scen, name,
		 (double)(proc_status_kib("RssAnon") - anon0) * 1024.0 / (double)(n - 1), NAN, "B",
		 (long)n);
	/* how much of it the kernel gave on 2 MiB pages (the library asks
	 * for them on its large arenas; VRANGE_HUGEPAGES=0 says no) */
	snprintf(name, sizeof(name), "vr-huge-mib-%s", tag);
	emit_row(scen, name, (double)(smaps_rollup_kib("AnonHugePages") - hp0) / 1024.0, NAN, "MiB",
		 (long)n);

	uint64_t rng = 0x1234567 + n;
	static const char *const suffix[] = { "", "-hot", "-ptr" };
	for (int kind = PAIR_RANDOM; kind <= PAIR_PTR; kind++) {
		struct samples s = { 0 };
		pair_batch(r, n, stride, &rng, kind); /* warm-up */
		for (size_t i = 0; i < nsamp; i++) {
			uint64_t t = now_ns();
			pair_batch(r, n, stride, &rng, kind);
			samples_add(&s, (double)(now_ns() - t) / BATCH);
		}
		snprintf(name, sizeof(name), "vr-pair-%s%s", tag, suffix[kind]);
		emit_samples(scen, name, &s, "ns");
		samples_free(&s);
	}
	CHECK(vr_ctx_stat(ctx, VR_STAT_RANGES) == n);
	CHECK(vr_ctx_stat(ctx, VR_STAT_PURGES) == 0);
	snprintf(name, sizeof(name), "vr-heap-per-range-%s-after-pairs", tag);
	emit_row(scen, name, ((double)heap_in_use() - (double)h0) / (double)(n - 1), NAN, "B",
		 (long)n);
	vr_region_destroy(r);
}

/* also used by s-objpair.c, which reports under its own scenario name */
void bench_canary_pair(const char *scen)
{
	size_t nobj = 64, nsamp = BY_MODE(50, 300, 1500);
	char *arena = map_anon(nobj * OBJ);
	uint64_t *saved = calloc(nobj * (OBJ / page_size), sizeof(uint64_t));
	CHECK(saved);
	populate(arena, nobj * OBJ);
	for (size_t i = 0; i < nobj; i++) {
		for (size_t p = 0; p < OBJ; p += page_size)
			*(uint64_t *)(arena + i * OBJ + p) = i * 1000 + p;
		canary_unlock(arena + i * OBJ, OBJ, saved + i * (OBJ / page_size));
	}
	struct samples s = { 0 };
	uint64_t rng = 42, purged = 0;
	for (size_t i = 0; i <= nsamp; i++) {
		uint64_t t = now_ns();
		for (size_t j = 0; j < BATCH; j++) {
			size_t o = rng_below(&rng, nobj);
			uint64_t *sv = saved + o * (OBJ / page_size);
			if (!canary_lock(arena + o * OBJ, OBJ, sv))
				purged++; /* the kernel reclaimed it: legal, just counted */
			canary_unlock(arena + o * OBJ, OBJ, sv);
		}
		if (i) /* the first batch warms up */
			samples_add(&s, (double)(now_ns() - t) / BATCH);
	}
	emit_samples(scen, "canary-pair", &s, "ns");
	if (purged)
		emit_note("madvfree-canary: %llu objects reclaimed by the kernel during the run",
			  (unsigned long long)purged);
	samples_free(&s);
	free(saved);
	munmap(arena, nobj * OBJ);
}

void bench_mutex_pair(const char *scen)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	struct samples s = { 0 };
	size_t nsamp = BY_MODE(100, 800, 3000);
	for (size_t i = 0; i < nsamp; i++) {
		uint64_t t = now_ns();
		for (size_t j = 0; j < BATCH; j++) {
			pthread_mutex_lock(&m);
			__asm__ volatile("" ::: "memory");
			pthread_mutex_unlock(&m);
			pthread_mutex_lock(&m);
			__asm__ volatile("" ::: "memory");
			pthread_mutex_unlock(&m);
		}
		samples_add(&s, (double)(now_ns() - t) / BATCH);
	}
	emit_samples(scen, "mutex-2x-lock-unlock", &s, "ns");
	samples_free(&s);
}

int run_markpair(void)
{
	struct vr_ctx *ctx;
	VRCHECK(vr_ctx_new(VR_CTX_NO_MONITOR, &ctx));
	bench_mutex_pair(SCEN);
	bench_canary_pair(SCEN);
	bench_range_pairs(SCEN, ctx, 1000, "1e3");
	if (bopt.mode == MODE_SMOKE) {
		bench_range_pairs(SCEN, ctx, 10000, "1e4");
	} else {
		bench_range_pairs(SCEN, ctx, 100000, "1e5");
		bench_range_pairs(SCEN, ctx, 1000000, "1e6");
		if (bopt.mode == MODE_FULL)
			bench_range_pairs(SCEN, ctx, 10000000, "1e7");
	}
	vr_ctx_destroy(ctx);
	return 0;
}
