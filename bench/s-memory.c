/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * s-memory.c - scenario 5: what a range costs in memory.
 *
 * A fresh process creates a ctx and an 8 GiB region (sparse: no page is
 * touched), then marks 10^6 one-page ranges separated by one-page gaps.
 * Heap growth is read with mallinfo2() (uordblks + hblkhd: what malloc
 * holds) and VmRSS growth from /proc/self/status.  VmRSS is the goal's
 * measure: once a map passes 16 MiB its arenas are mapped whole 2 MiB
 * pages (map/map.c), outside malloc's accounting.  Then one vr_unmark over
 * the whole region ends every range, and what the heap still holds is
 * reported (node slabs are kept for reuse).
 *
 * For comparison: heap-lru's bookkeeping per object (heap growth minus
 * the payload, measured the same way) and madvfree-canary's saved words.
 */
#include "bench.h"
#include "baselines.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include <vrange.h>

#define SCEN "memory"

int run_memory(void)
{
	size_t n = BY_MODE(10000, 1000000, 1000000);
	struct vr_ctx *ctx;
	struct vr_region *r;
	VRCHECK(vr_ctx_new(VR_CTX_NO_MONITOR, &ctx));
	VRCHECK(vr_region_new(ctx, "vrbench-memory", 2 * n * page_size, 0, &r));
	/* one range first: whatever is allocated once per region is not per range */
	VRCHECK(vr_mark(r, 0, page_size));

	malloc_trim(0); /* freed heap pages reused would not show as growth */
	size_t h0 = heap_in_use();
	uint64_t rss0 = proc_status_kib("VmRSS");
	uint64_t t0 = now_ns();
	for (size_t i = 1; i < n; i++)
		if (VRCHECK(vr_mark(r, 2 * i * page_size, page_size)) != VR_INTACT)
			die("fresh mark purged");
	double ns = (double)(now_ns() - t0) / (double)(n - 1);
	size_t h1 = heap_in_use();
	uint64_t rss1 = proc_status_kib("VmRSS");
	CHECK(vr_ctx_stat(ctx, VR_STAT_RANGES) == n);
	CHECK(vr_ctx_stat(ctx, VR_STAT_VOLATILE_BYTES) == n * page_size);
	CHECK(proc_status_kib("RssShmem") < 1024); /* the region stayed sparse */

	double per = (double)(h1 - h0) / (double)(n - 1);
	double rss_per = (double)(rss1 - rss0) * 1024.0 / (double)(n - 1);
	emit_row(SCEN, "vr-heap-per-range", per, NAN, "B", (long)n);
	emit_row(SCEN, "vr-rss-per-range", rss_per, NAN, "B", (long)n);
	emit_row(SCEN, "vr-mark-new-range", ns, NAN, "ns", (long)n);

	VRCHECK(vr_unmark(r, 0, 2 * n * page_size));
	CHECK(vr_ctx_stat(ctx, VR_STAT_RANGES) == 0);
	size_t h2 = heap_in_use();
	emit_row(SCEN, "vr-heap-kept-after-unmark", (double)(h2 - h0) / (double)(n - 1), NAN,
		 "B/range", (long)n);
	vr_region_destroy(r);
	size_t h3 = heap_in_use();
	emit_row(SCEN, "vr-heap-kept-after-destroy", (double)h3 - (double)h0 + 0.0, NAN, "B", 1);
	vr_ctx_destroy(ctx);

	/* heap-lru: bookkeeping per one-page object */
	size_t m = n / 10;
	size_t *lens = malloc(m * sizeof(size_t));
	CHECK(lens);
	for (size_t i = 0; i < m; i++)
		lens[i] = page_size;
	size_t g0 = heap_in_use();
	struct hlru h;
	CHECK(hlru_init(&h, m, lens, 0) == 0);
	for (size_t i = 0; i < m; i++) {
		bool purged;
		hlru_lock(&h, i, &purged);
		hlru_unlock(&h, i);
	}
	size_t g1 = heap_in_use();
	emit_row(SCEN, "heaplru-meta-per-object",
		 ((double)(g1 - g0) - (double)(m * page_size)) / (double)m, NAN, "B", (long)m);
	hlru_fini(&h);
	free(lens);
	emit_row(SCEN, "canary-meta-per-page", (double)sizeof(uint64_t), NAN, "B", 0);
	return 0;
}
