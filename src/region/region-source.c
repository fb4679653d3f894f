/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * region-source.c - a region as a purge source (base/source.h): its LRU,
 * oldest first, purged one range per step under the region lock (moved
 * here from purge.c, which now merges sources without naming a unit).
 *
 * Purging a range, in this order, all under the region lock:
 *   1. publish "purged" in the record (purge_range);
 *   2. arm the trap on the whole pages, in every mapping (a thread
 *      touching them from now on faults and waits on the region lock in
 *      the fault path; a shared region's other mappers acknowledge);
 *   3. free the memory (punch the memfd hole, or MADV_DONTNEED / the guard
 *      install itself for anonymous memory): the data is gone, but nobody
 *      can read zeros as data since every access traps;
 *   4. account the purge (gauges, LRU).
 * Why this order: for a shared file it is what keeps shared.h's TRAPPED
 * HOLES through a SIGKILL at any step (the rule is written there once);
 * for the others the lock hides it, but arming before punching is the
 * rule for every region.  vr_unmark, vr_status and the fault path see
 * either the intact range or the purged one.  If the trap cannot be
 * armed (ENOMEM at the VMA limit, a mapper that does not answer) nothing
 * is punched, "purged" is taken back, and the range is skipped, keeping
 * its data and its LRU place.
 *
 * A region yields its candidates through its LRU (map/map-lru.c: the log
 * and the pieces' heap, oldest first); ages in a region only grow, so
 * the engine's key for it is never too young; skipped ranges are stepped
 * over for one purge generation.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "vrange.h"
#include "base/lock.h"
#include "base/log.h"
#include "base/source.h"
#include "region/region.h"
#include "ctx.h" /* r->ctx counters: to move into base/acct.h (layering S15) */

/* purge one LRU range, region lock held: the bytes reclaimed, or -errno
 * when it was skipped (it keeps its data and its LRU place) */
static int64_t purge_range(struct vr_region *r, struct vr_range *rg)
{
	struct vr_ctx *c = r->ctx;
	uint64_t p0, p1;
	if (!vr_whole_pages(rg->start, rg->end, r->map->page_shift, &p0, &p1))
		return -EINVAL; /* never on the LRU */
	/* publish, arm, punch (shared.h, TRAPPED HOLES): a process killed
	 * in between leaves a purged record, which repair arms everywhere,
	 * then punches */
	rg->age_flags |= VR_RANGE_PURGED;
	int err = vr_discard_pages(r, p0, p1);
	if (err == VR_DISCARD_STUCK) {
		/* trapped but not punched, and the trap would not come off:
		 * purged with its data, nothing reclaimed */
		atomic_fetch_add_explicit(&c->skipped, 1, memory_order_relaxed);
		p1 = p0;
	} else if (err < 0) {
		rg->age_flags &= ~(uint64_t)VR_RANGE_PURGED; /* nothing was punched */
		atomic_fetch_add_explicit(&c->skipped, 1, memory_order_relaxed);
		vr_dbg("purge skipped: region %p range [%llu, %llu): %s", (void *)r,
		       (unsigned long long)rg->start, (unsigned long long)rg->end, strerror(-err));
		return err;
	}
	uint64_t len = rg->end - rg->start;
	vr_lru_remove(r->map, rg);
	vr_region_account_purge(r, len);
	atomic_fetch_add_explicit(&c->purges, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->reclaimed_bytes, p1 - p0, memory_order_relaxed);
	vr_dbg("purged region %p range [%llu, %llu): %llu bytes reclaimed", (void *)r,
	       (unsigned long long)rg->start, (unsigned long long)rg->end,
	       (unsigned long long)(p1 - p0));
	return (int64_t)(p1 - p0);
}

/* the oldest age of the region's LRU; UINT64_MAX also when this thread
 * holds the region's lock (a purge from a signal handler leaves it out) */
static uint64_t region_oldest(void *unit, size_t i)
{
	struct vr_region *r = unit;
	uint64_t age = vr_region_oldest(r);
	return age != UINT64_MAX && !vr_held(r->lockp) ? age : UINT64_MAX;
}

/* one step: the oldest range not yet tried by st->gen, purged unless an
 * older entry is elsewhere; all under the region lock, and the next
 * candidate's age is read under it too (once it is dropped the range may
 * be freed or reused) */
static int64_t region_step(void *unit, size_t i, const struct vr_purge_step *st, uint64_t *next)
{
	struct vr_region *r = unit;
	vr_region_lock(r);
	struct vr_range *rg = vr_lru_peek(r->map, st->gen);
	/* Entries older than the key were tried by this run already: the
	 * map keeps one cursor, and another generation (a purge of another
	 * process or thread) took it back to the LRU's head.  Tried again,
	 * a range skipped because a mapper does not answer costs the
	 * protocol's timeout each time, and two purges that take turns
	 * reset each other for as long as that mapper is stopped. */
	while (rg && vr_range_age(rg) < st->key) {
		vr_lru_pop(r->map);
		rg = vr_lru_peek(r->map, st->gen);
	}
	if (!rg) {
		vr_region_unlock(r);
		*next = UINT64_MAX;
		return 0;
	}
	uint64_t age = vr_range_age(rg);
	if (st->older(st, age)) {
		/* stale key: another source holds an older unit */
		vr_region_unlock(r);
		*next = age;
		return 0;
	}
	int64_t got = purge_range(r, rg);
	/* past the candidate: purged it is gone, skipped it keeps its place
	 * for the next generation */
	vr_lru_pop(r->map);
	if (got >= 0)
		vr_region_publish_oldest(r);
	rg = vr_lru_peek(r->map, st->gen);
	*next = rg ? vr_range_age(rg) : UINT64_MAX;
	vr_region_unlock(r);
	return got > 0 ? got : 0;
}

static int region_priority(const void *unit)
{
	return VR_RANGE_PRIORITY;
}

/* ctx->regions, ctx->lock held */
static void *region_next(void *unit)
{
	return ((struct vr_region *)unit)->next;
}

const struct vr_source_ops vr_region_source = {
	.nheap = 1,
	.oldest = region_oldest,
	.step = region_step,
	.priority = region_priority,
	.next = region_next,
};
