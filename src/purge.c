/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * purge.c - the purge engine: merges the regions' and the objects' LRUs
 * by age and purges toward a goal; discarding a range's pages (trap, then
 * free through the region's kind) is mem-pages.c's vr_discard_pages.
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
 * LRU across regions: each region keeps its own list ordered by age; a
 * purge run merges them by age with a small heap of regions, re-reading a
 * region's candidate under its lock (ages in a region only grow, so a
 * stale heap key is never too young).  A region yields its candidates
 * through region_lru_peek/pop (range-lru.c: the log and the pieces' heap,
 * oldest first); skipped ranges are stepped over for one purge generation.
 *
 * Objects follow the same order of effects (claim = publish, arm, punch,
 * account), but a run claims them one by one in LRU order and discards
 * those whose pages follow each other in a chunk together: one trap call
 * and one fallocate per batch (obj-lru.c, BATCHED DISCARD).  The goal
 * counts a claimed object as purged; flush_level discards the batches
 * before the run stops, before a region step and at a level's end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/inject.h"
#include "mem/mem-kind.h"
#include "base/heap.h"
#include "private.h"
#include "mem/mem-shared.h"

/* purge generations (vr_purge_run): this process's pid (read at every
 * vr_ctx_new and in a fork child: no system call per purge, S16) and a
 * counter */
static _Atomic uint64_t gen_seq, gen_pid;

void vr_purge_init(void)
{
	atomic_store(&gen_pid, (uint64_t)getpid());
}

const struct vr_atfork vr_purge_atfork = { 0, NULL, NULL, vr_purge_init };

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

VR_AGE_HEAP(cand, struct vr_cand)

/* One purge run (S35): priority levels from 0 up, or one group's level.
 * Within a level the sources are merged by age: the regions (level
 * VR_RANGE_PRIORITY only) and the LRU logs of every group of the level in
 * the heap, the groups' requeue heaps beside it. */
struct run {
	struct vr_ctx *c;
	struct vr_objs *only; /* a group's own purge or limit */
	int prio;             /* the level running */
	enum vr_purge_goal goal;
	uint64_t n, reclaimed, gen;
	struct vr_cand *h;
	size_t nh;
	struct vr_notify_batch *b;
	bool pend; /* an object step ran since the last flush_level */
};

static bool goal_met(const struct run *u)
{
	if (u->goal == VR_PURGE_BYTES)
		return u->reclaimed >= u->n;
	uint64_t v = u->only ? vr_objs_stat(u->only, VR_STAT_VOLATILE_BYTES)
			     : vr_ctx_gauge(u->c, VR_G_VOLATILE);
	return v <= u->n;
}

/* the groups of the level: g = NULL starts; NULL when there is no next */
static struct vr_objs *level_next(const struct run *u, size_t *k)
{
	if (u->only)
		return (*k)++ == 0 ? u->only : NULL;
	while (*k < u->c->ngroups) {
		struct vr_objs *os = u->c->groups[(*k)++];
		if (vr_objs_priority(os) == u->prio)
			return os;
	}
	return NULL;
}

/* discard the objects the level's groups claimed and batched (obj-lru.c,
 * BATCHED DISCARD); what a failed discard gave back is not reclaimed */
static void flush_level(struct run *u)
{
	if (!u->pend)
		return;
	size_t k = 0;
	for (struct vr_objs *os; (os = level_next(u, &k));)
		u->reclaimed -= (uint64_t)vr_obj_src_flush(os, u->b);
	u->pend = false;
}

/* stop: goal met, or a full batch to report first (vr_ctx_purge_in runs
 * again after reporting).  Both count the batched objects as purged; the
 * batches are discarded before the run stops, and if that gave some
 * back, it goes on. */
static bool run_stop(struct run *u)
{
	if (u->b->n < VR_NOTIFY_BATCH && !goal_met(u))
		return false;
	flush_level(u);
	if (u->b->n >= VR_NOTIFY_BATCH) {
		u->b->full = true;
		return true;
	}
	return goal_met(u);
}

/* Object LRU sources (obj-lru.c).  The logs are entries with r == NULL
 * in the heap; a group's *vr_obj_src_mask has a bit per log present in
 * it.  A log's key is the age of its head entry, a lower bound of the
 * unit's age (the entry is lazy), and a log never gets an older head
 * while the purge lock is held (unpins append younger entries).  The
 * requeue heaps are not in the heap: a step that finds its entry's unit
 * younger than the entry moves the entry there with the unit's true age,
 * so a requeue heap's oldest can FALL during a purge, and a key in the
 * heap would then be too young: the unit would be passed over.  They are
 * compared with the heap's top at every step instead (rq_oldest, one
 * atomic load per group of the level). */
static uint64_t rq_oldest(const struct run *u, struct vr_objs **from)
{
	uint64_t best = UINT64_MAX;
	size_t k = 0;
	for (struct vr_objs *os; (os = level_next(u, &k));) {
		uint64_t a = vr_obj_src_oldest(os, VR_OBJ_NLOG);
		if (a < best) {
			best = a;
			*from = os;
		}
	}
	return best;
}

static void obj_fill(struct run *u, struct vr_objs *os)
{
	uint32_t *in = vr_obj_src_mask(os);
	for (size_t i = 0; i < VR_OBJ_NLOG; i++) {
		uint64_t age;
		if ((*in >> i) & 1 || (age = vr_obj_src_oldest(os, i)) == UINT64_MAX)
			continue;
		u->h[u->nh] = (struct vr_cand){ age, NULL, os, i };
		cand_sift_up(u->h, u->nh++);
		*in |= 1u << i;
	}
}

static void obj_fill_level(struct run *u)
{
	size_t k = 0;
	for (struct vr_objs *os; (os = level_next(u, &k));)
		obj_fill(u, os);
}

/* does a source other than the heap's top hold something older than age?
 * (the top's key may be stale: too old, never too young) */
static bool older_elsewhere(const struct run *u, uint64_t age)
{
	struct vr_objs *os;
	const struct vr_cand *h = u->h;
	size_t nh = u->nh;
	return (nh > 1 && age > h[1].age) || (nh > 2 && age > h[2].age) || age > rq_oldest(u, &os);
}

static void heap_pop_top(struct run *u)
{
	u->h[0] = u->h[--u->nh];
	cand_sift_down(u->h, u->nh, 0);
}

/* one step of the log at the heap's top: purge its head if it is the
 * oldest entry of all, else just correct its key */
static void obj_step(struct run *u)
{
	struct vr_objs *os = u->h[0].os;
	size_t src = u->h[0].src;
	uint64_t age = vr_obj_src_oldest(os, src);
	if (age != UINT64_MAX && !older_elsewhere(u, age)) {
		u->reclaimed += (uint64_t)vr_obj_src_purge(os, src, u->b);
		u->pend = true;
		age = vr_obj_src_oldest(os, src);
	}
	u->h[0].age = age;
	if (age == UINT64_MAX) {
		*vr_obj_src_mask(os) &= ~(1u << src);
		heap_pop_top(u);
	} else {
		cand_sift_down(u->h, u->nh, 0);
	}
	obj_fill(u, os);
}

/* the region's oldest candidate not yet tried by purge generation gen
 * (NULL if none); lock held */
static struct vr_range *region_lru_peek(struct vr_region *r, uint64_t gen)
{
	return vr_lru_peek(r->map, gen);
}

/* step past the candidate region_lru_peek() returned, after the purge
 * attempt: purged it is gone, skipped it keeps its place for the next
 * generation; lock held */
static void region_lru_pop(struct vr_region *r)
{
	vr_lru_pop(r->map);
}

/* one step of the region at the heap's top */
static void region_step(struct run *u)
{
	struct vr_region *r = u->h[0].r;
	flush_level(u); /* no object claim is held under a region lock */
	vr_region_lock(r);
	struct vr_range *rg = region_lru_peek(r, u->gen);
	if (!rg) {
		vr_region_unlock(r);
		heap_pop_top(u);
		return;
	}
	uint64_t age = vr_range_age(rg);
	if (older_elsewhere(u, age)) {
		/* stale key: another source holds an older unit */
		vr_region_unlock(r);
		u->h[0].age = age;
		cand_sift_down(u->h, u->nh, 0);
		return;
	}
	int64_t got = purge_range(r, rg);
	region_lru_pop(r);
	if (got >= 0) {
		u->reclaimed += (uint64_t)got;
		vr_region_publish_oldest(r);
	}
	/* the next candidate's age is read under the lock: once it is
	 * dropped the range may be freed or reused */
	rg = region_lru_peek(r, u->gen);
	u->h[0].age = rg ? vr_range_age(rg) : UINT64_MAX;
	vr_region_unlock(r);
	if (!rg)
		heap_pop_top(u);
	else
		cand_sift_down(u->h, u->nh, 0);
}

/* regions cannot go away while purge_lock is held.  The heap has room
 * for every region and every group's logs (vr_purge_reserve), so a purge
 * never allocates: it must work when memory is short.  Regions whose
 * lock this thread holds (a purge from a signal handler) are left out. */
static void fill_regions(struct run *u)
{
	struct vr_ctx *c = u->c;
	vr_lock(&c->lock, VR_RANK_CTX);
	for (struct vr_region *r = c->regions; r && u->nh < c->heap_cap; r = r->next) {
		uint64_t age = vr_region_oldest(r);
		if (age != UINT64_MAX && !vr_held(r->lockp))
			u->h[u->nh++] = (struct vr_cand){ age, r, NULL, 0 };
	}
	vr_unlock(&c->lock);
	for (size_t i = u->nh / 2; i-- > 0;)
		cand_sift_down(u->h, u->nh, i);
}

/* one level; true when it ran dry (nothing purgeable left in it) */
static bool run_level(struct run *u)
{
	size_t k = 0;
	for (struct vr_objs *os; (os = level_next(u, &k));)
		*vr_obj_src_mask(os) = 0;
	u->nh = 0;
	if (!u->only && u->prio == VR_RANGE_PRIORITY)
		fill_regions(u);
	obj_fill_level(u);
	bool dry = false;
	for (;;) {
		struct vr_objs *from = NULL;
		uint64_t rq = rq_oldest(u, &from);
		if (u->nh == 0 && rq == UINT64_MAX) {
			/* entries appended by unpins during the run */
			obj_fill_level(u);
			if (u->nh == 0) {
				dry = true;
				break;
			}
		}
		if (run_stop(u))
			break;
		if (rq != UINT64_MAX && (u->nh == 0 || rq <= u->h[0].age)) {
			/* a requeue heap holds the oldest entry */
			u->reclaimed += (uint64_t)vr_obj_src_purge(from, VR_OBJ_NLOG, u->b);
			u->pend = true;
			obj_fill(u, from);
		} else if (u->h[0].r) {
			region_step(u);
		} else {
			obj_step(u);
		}
	}
	flush_level(u);
	k = 0;
	for (struct vr_objs *os; (os = level_next(u, &k));)
		vr_obj_purge_done(os);
	return dry;
}

int vr_purge_reserve(struct vr_ctx *c, size_t n)
{
	n += c->ngroups * VR_OBJ_NLOG; /* and room for the groups' logs */
	if (c->heap_cap >= n)
		return 0;
	size_t cap = c->heap_cap ? c->heap_cap * 2 : 32;
	if (cap < n)
		cap = n;
	struct vr_cand *h = vr_malloc(cap * sizeof(*h));
	if (!h)
		return -ENOMEM;
	free(c->heap);
	c->heap = h;
	c->heap_cap = cap;
	return 0;
}

ssize_t vr_purge_run(struct vr_ctx *c, struct vr_objs *only, enum vr_purge_goal goal, uint64_t n,
		     struct vr_notify_batch *b)
{
	struct run u = { .c = c, .only = only, .goal = goal, .n = n, .h = c->heap, .b = b };
	if (goal_met(&u))
		return 0;
	/* generations are unique across processes too: a shared file's
	 * purge cursor (range-lru.c) is in its state, and a purge by another
	 * process must not continue this one's pass */
	uint64_t pid = atomic_load_explicit(&gen_pid, memory_order_relaxed);
	u.gen = pid << 40 ^ (atomic_fetch_add_explicit(&gen_seq, 1, memory_order_relaxed) + 1);
	bool dry = true;
	for (int p = only ? vr_objs_priority(only) : 0; p < VR_NPRIO; p++) {
		u.prio = p;
		if (!run_level(&u)) {
			dry = false;
			break;
		}
		if (only)
			break;
	}
	/* nothing purgeable is left in the ctx (every level ran dry):
	 * remember it, so that limit checks of marks that add nothing
	 * purgeable skip the walk over every region (vr_mark clears it when
	 * it adds a purgeable range) */
	if (!only && dry)
		atomic_store_explicit(&c->limit_stuck, true, memory_order_relaxed);
	return (ssize_t)u.reclaimed;
}
