/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * source.h - the purge-source contract between the units (region/, obj/),
 * ctx and the purge engine: priorities (S35) and the notification batch
 */
#ifndef VR_SOURCE_H
#define VR_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vr_objs;

/* priorities (S35): ctx-wide purges take 0 first ... VR_NPRIO - 1 last;
 * the ranges of regions have VR_RANGE_PRIORITY */
#define VR_NPRIO 8
#define VR_RANGE_PRIORITY 4

/* Objects purged while their group had a purge handler (S37), collected
 * by a purge run under purge_lock and reported after it is released
 * (vr_obj_notify): one entry per purged unit (a large object or a page of
 * small ones), which holds a reference on its group.  A run stops when
 * the batch is full; vr_ctx_purge_in then reports and runs again. */
#define VR_NOTIFY_BATCH 64
struct vr_notify_batch {
	size_t n;
	bool full; /* the run stopped because the batch was full */
	struct {
		uintptr_t unit;
		struct vr_objs *os;
	} e[VR_NOTIFY_BATCH];
};

/*
 * A purge source: purgeable entries of one unit (a region, an object
 * group) ordered by age.  The engine (purge.c) merges every source of a
 * priority level by age through this table and names no unit; the units
 * implement it (region/region-source.c, obj/obj-source.c) and ctx hands
 * the tables to the engine (struct vr_ctx: region_src, group_src).  All
 * calls are made with the ctx's purge_lock held.
 *
 * A unit has nheap sources, 0 .. nheap - 1, kept in the engine's heap by
 * the age of their oldest entry: a key that may be too old (stale), never
 * too young, because such a source's oldest never falls while purge_lock
 * is held.  With side, source nheap is one whose oldest CAN fall during a
 * run (the objects' requeue heap): it stays out of the heap and the
 * engine compares it with the heap's top before every step.
 */
struct vr_purge_step {
	uint64_t gen; /* the run's purge generation */
	/* the engine's key for the stepped source: every entry the run has
	 * not tried yet is at least this old (a region's cursor reset by
	 * another generation shows it the younger ones again) */
	uint64_t key;
	struct vr_notify_batch *batch; /* objects purged under a purge handler */
	/* does another source hold an entry older than age? (the caller's
	 * key may be stale: purge only when this says no) */
	bool (*older)(const struct vr_purge_step *st, uint64_t age);
};

struct vr_source_ops {
	size_t nheap; /* sources per unit in the engine's heap (<= 32) */
	bool side;    /* source nheap exists and is compared at every step */
	/* the age of source i's oldest entry, UINT64_MAX: none (or a unit the
	 * engine must leave alone: a region whose lock this thread holds) */
	uint64_t (*oldest)(void *unit, size_t i);
	/* one step of source i: its oldest entry not tried by st->gen is
	 * purged unless st->older() says an older one is elsewhere; the bytes
	 * reclaimed (0: skipped, stale or nothing) and in *next the source's
	 * oldest age after the step (UINT64_MAX: none left) */
	int64_t (*step)(void *unit, size_t i, const struct vr_purge_step *st, uint64_t *next);
	/* bit i: source i is in the engine's heap.  NULL: the unit's sources
	 * enter the heap once per level; else they re-enter after each step
	 * of the unit when they got entries */
	uint32_t *(*mask)(void *unit);
	/* discard what the unit's steps claimed and left pending (objects
	 * whose pages follow each other are discarded in batches, obj-lru.c
	 * BATCHED DISCARD; a step counts its unit reclaimed at the claim):
	 * the bytes given back when that failed.  The engine calls it before
	 * the run stops, before a step of a unit of another table and before
	 * done.  NULL: every step discards at once. */
	int64_t (*flush)(void *unit, struct vr_notify_batch *b);
	void (*done)(void *unit);               /* end of a level; may be NULL */
	int (*priority)(const void *unit);      /* its level (S35) */
	uint64_t (*volatile_bytes)(void *unit); /* a unit's own goal (may be NULL) */
	/* the next unit of its owner's list (regions: ctx->lock held); NULL
	 * for units the engine gets another way (groups: ctx->groups) */
	void *(*next)(void *unit);
	/* does the unit hold an entry now?  Read under the locks its appends
	 * take, so that an append the engine does not see is followed by a
	 * read of anything the engine wrote before (purge.c, the "nothing
	 * purgeable" hint).  NULL: the engine does not ask */
	bool (*pending)(void *unit);
};

#endif
