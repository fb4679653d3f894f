/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * purge.c - the purge engine: merges purge sources (base/source.h) by
 * age and priority and purges toward a goal.  It names no unit: regions
 * and object groups are sources through the tables ctx gives it
 * (region/region-source.c, obj/obj-source.c); discarding pages is theirs.
 *
 * LRU across sources: each source keeps its entries ordered by age; a
 * purge run merges them by age with a small heap of sources, each step
 * re-reading the top source's oldest entry (under its region's lock for a
 * region): a key in the heap may be stale (too old), never too young.
 * The S35 order: priority levels from 0 up, the sources of one level
 * merged by age.
 *
 * A step may claim a unit and leave its discard pending (objects whose
 * pages follow each other in a chunk are discarded together, one trap
 * call and one fallocate per batch: obj/obj-lru.c, BATCHED DISCARD); the
 * goal counts a claimed unit as purged, and flush_level discards the
 * batches before the run stops, before a step of a region and at a
 * level's end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "vrange.h"
#include "base/inject.h"
#include "base/heap.h"
#include "purge.h"
#include "base/lock.h"
#include "base/log.h"
#include "ctx.h"

/* purge generations (vr_purge_run): this process's pid (read at every
 * vr_ctx_new and in a fork child: no system call per purge, S16) and a
 * counter */
static _Atomic uint64_t gen_seq, gen_pid;

void vr_purge_init(void)
{
	atomic_store(&gen_pid, (uint64_t)getpid());
}

const struct vr_atfork vr_purge_atfork = { 0, NULL, NULL, vr_purge_init };

VR_AGE_HEAP(cand, struct vr_cand)

/* One purge run (S35): priority levels from 0 up, or one group's level.
 * Within a level the sources are merged by age: the regions (their
 * level only) and the heap sources of every group of the level in the
 * heap, the groups' side sources (requeue heaps) beside it. */
struct run {
	struct vr_purge_step st;   /* first: older() finds the run from it */
	struct vr_purge_step side; /* st for a side source's step (never older) */
	struct vr_ctx *c;
	const struct vr_source_ops *gops; /* the groups' table */
	void *only;                       /* a group's own purge or limit */
	int prio;                         /* the level running */
	enum vr_purge_goal goal;
	uint64_t n, reclaimed;
	struct vr_cand *h;
	size_t nh;
	bool pend; /* a group step ran since the last flush_level */
};

static bool goal_met(const struct run *u)
{
	if (u->goal == VR_PURGE_BYTES)
		return u->reclaimed >= u->n;
	uint64_t v = u->only ? u->gops->volatile_bytes(u->only) : vr_ctx_gauge(u->c, VR_G_VOLATILE);
	return v <= u->n;
}

/* the groups of the level: *k = 0 starts; NULL when there is no next */
static void *level_next(const struct run *u, size_t *k)
{
	if (u->only)
		return (*k)++ == 0 ? u->only : NULL;
	while (*k < u->c->ngroups) {
		void *g = u->c->groups[(*k)++];
		if (u->gops->priority(g) == u->prio)
			return g;
	}
	return NULL;
}

/* discard what the level's groups claimed and batched (base/source.h:
 * flush); what a failed discard gave back is not reclaimed */
static void flush_level(struct run *u)
{
	if (!u->pend || !u->gops->flush)
		return;
	size_t k = 0;
	for (void *g; (g = level_next(u, &k));)
		u->reclaimed -= (uint64_t)u->gops->flush(g, u->st.batch);
	u->pend = false;
}

/* stop: goal met, or a full batch to report first (vr_ctx_purge_in runs
 * again after reporting).  Both count the batched objects as purged: the
 * batches are discarded before the run stops, and if that gave some
 * back, it goes on. */
static bool run_stop(struct run *u)
{
	if (u->st.batch->n < VR_NOTIFY_BATCH && !goal_met(u))
		return false;
	flush_level(u);
	if (u->st.batch->n >= VR_NOTIFY_BATCH) {
		u->st.batch->full = true;
		return true;
	}
	return goal_met(u);
}

/* The side sources (base/source.h: their oldest can FALL during a run,
 * so a key in the heap could be too young and the entry passed over) are
 * compared with the heap's top at every step instead: one atomic load
 * per group of the level. */
static uint64_t side_oldest(const struct run *u, void **from)
{
	uint64_t best = UINT64_MAX;
	size_t k = 0;
	for (void *g; (g = level_next(u, &k));) {
		uint64_t a = u->gops->oldest(g, u->gops->nheap);
		if (a < best) {
			best = a;
			*from = g;
		}
	}
	return best;
}

/* the unit's heap sources with entries that are not in the heap yet */
static void unit_fill(struct run *u, const struct vr_source_ops *ops, void *unit)
{
	uint32_t *in = ops->mask(unit);
	for (size_t i = 0; i < ops->nheap; i++) {
		uint64_t age;
		if ((*in >> i) & 1 || (age = ops->oldest(unit, i)) == UINT64_MAX)
			continue;
		u->h[u->nh] = (struct vr_cand){ age, ops, unit, i };
		cand_sift_up(u->h, u->nh++);
		*in |= 1u << i;
	}
}

static void groups_fill(struct run *u)
{
	size_t k = 0;
	for (void *g; (g = level_next(u, &k));)
		unit_fill(u, u->gops, g);
}

/* does a source other than the heap's top hold something older than age?
 * (the top's key may be stale: too old, never too young) */
static bool older_elsewhere(const struct vr_purge_step *st, uint64_t age)
{
	const struct run *u = (const struct run *)st;
	void *g;
	const struct vr_cand *h = u->h;
	size_t nh = u->nh;
	return (nh > 1 && age > h[1].age) || (nh > 2 && age > h[2].age) || age > side_oldest(u, &g);
}

static bool never_older(const struct vr_purge_step *st, uint64_t age)
{
	return false;
}

static void heap_pop_top(struct run *u)
{
	u->h[0] = u->h[--u->nh];
	cand_sift_down(u->h, u->nh, 0);
}

/* one step of the source at the heap's top: it purges its oldest entry
 * if that is the oldest of all, and the key takes the age it reports */
static void top_step(struct run *u)
{
	const struct vr_source_ops *ops = u->h[0].ops;
	void *unit = u->h[0].unit;
	size_t src = u->h[0].src;
	uint64_t next;
	if (ops != u->gops)
		flush_level(u); /* no object claim is held under a region lock */
	else
		u->pend = true;
	u->st.key = u->h[0].age;
	u->reclaimed += (uint64_t)ops->step(unit, src, &u->st, &next);
	u->h[0].age = next;
	if (next == UINT64_MAX) {
		if (ops->mask)
			*ops->mask(unit) &= ~(1u << src);
		heap_pop_top(u);
	} else {
		cand_sift_down(u->h, u->nh, 0);
	}
	if (ops->mask)
		unit_fill(u, ops, unit);
}

/* regions cannot go away while purge_lock is held.  The heap has room
 * for every region and every group's sources (vr_purge_reserve), so a
 * purge never allocates: it must work when memory is short. */
static void fill_regions(struct run *u)
{
	struct vr_ctx *c = u->c;
	const struct vr_source_ops *ops = c->region_src;
	vr_lock(&c->lock, VR_RANK_CTX);
	for (void *r = c->regions; r && u->nh < c->heap_cap; r = ops->next(r)) {
		uint64_t age = ops->oldest(r, 0);
		if (age != UINT64_MAX)
			u->h[u->nh++] = (struct vr_cand){ age, ops, r, 0 };
	}
	vr_unlock(&c->lock);
	for (size_t i = u->nh / 2; i-- > 0;)
		cand_sift_down(u->h, u->nh, i);
}

/* a level starts: no source in the heap, then every source with entries */
static void level_begin(struct run *u)
{
	size_t k = 0;
	for (void *g; (g = level_next(u, &k));)
		*u->gops->mask(g) = 0;
	u->nh = 0;
	if (!u->only && u->prio == VR_RANGE_PRIORITY)
		fill_regions(u);
	groups_fill(u);
}

/* the step of the oldest source: a side source's when it holds the
 * oldest entry, else the heap's top */
static void level_step(struct run *u, void *from, uint64_t side)
{
	const struct vr_source_ops *gops = u->gops;
	if (side != UINT64_MAX && (u->nh == 0 || side <= u->h[0].age)) {
		uint64_t next;
		u->pend = true;
		u->reclaimed += (uint64_t)gops->step(from, gops->nheap, &u->side, &next);
		unit_fill(u, gops, from);
	} else {
		top_step(u);
	}
}

/* one level; true when it ran dry (nothing purgeable left in it) */
static bool run_level(struct run *u)
{
	level_begin(u);
	bool dry = false;
	for (;;) {
		void *from = NULL;
		uint64_t side = side_oldest(u, &from);
		if (u->nh == 0 && side == UINT64_MAX) {
			/* entries appended by unpins during the run */
			groups_fill(u);
			if (u->nh == 0) {
				dry = true;
				break;
			}
		}
		if (run_stop(u))
			break;
		level_step(u, from, side);
	}
	flush_level(u);
	size_t k = 0;
	for (void *g; (g = level_next(u, &k));)
		u->gops->done(g);
	return dry;
}

int vr_purge_reserve(struct vr_ctx *c, size_t n)
{
	n += c->ngroups * c->group_src->nheap; /* and room for the groups' sources */
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
	struct run u = { .st = { .batch = b, .older = older_elsewhere },
			 .c = c,
			 .gops = c->group_src,
			 .only = only,
			 .goal = goal,
			 .n = n,
			 .h = c->heap };
	if (goal_met(&u))
		return 0;
	/* generations are unique across processes too: a shared file's
	 * purge cursor (map/map-lru.c) is in its state, and a purge by another
	 * process must not continue this one's pass */
	uint64_t pid = atomic_load_explicit(&gen_pid, memory_order_relaxed);
	u.st.gen = pid << 40 ^ (atomic_fetch_add_explicit(&gen_seq, 1, memory_order_relaxed) + 1);
	u.side = (struct vr_purge_step){ .gen = u.st.gen, .batch = b, .older = never_older };
	/* marks that add a purgeable range while the run looks for one
	 * (vr_ctx_added): set before any region is read */
	uint64_t adds = 0;
	if (!only) {
		atomic_store(&c->purging, true);
		atomic_thread_fence(memory_order_seq_cst);
		adds = atomic_load(&c->adds);
	}
	bool dry = true;
	for (int p = only ? u.gops->priority(only) : 0; p < VR_NPRIO; p++) {
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
	if (!only && dry) {
		atomic_store(&c->limit_stuck, true);
		/* unless a mark added a purgeable range meanwhile, which the run
		 * may have passed over: then the hint would be false.  Likewise
		 * an unpin into a level the run has left: a group holding an
		 * entry now, read under its log locks, takes the hint back; an
		 * unpin that appends after that takes a lock released after the
		 * hint was set, so its own check (enforce_limit) sees the hint
		 * and clears it */
		bool back = atomic_load(&c->adds) != adds;
		for (size_t k = 0; !back && k < c->ngroups; k++)
			back = u.gops->pending && u.gops->pending(c->groups[k]);
		if (back)
			atomic_store(&c->limit_stuck, false);
	}
	if (!only)
		atomic_store(&c->purging, false);
	return (ssize_t)u.reclaimed;
}
