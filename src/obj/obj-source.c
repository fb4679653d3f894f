/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * obj-source.c - an object group as a purge source (base/source.h): its
 * VR_OBJ_NLOG lazy LRU logs in the engine's heap, its requeue heap as the
 * side source (obj-lru.c: a log's oldest never falls while purge_lock is
 * held; the requeue heap's can, when a step moves a stale log entry there
 * with its unit's true age).
 */
#include "vrange.h"
#include "base/source.h"
#include "obj/obj.h"

_Static_assert(VR_OBJ_NLOG <= 32, "a group's logs are bits of a uint32_t mask");

static uint64_t objs_oldest(void *unit, size_t i)
{
	return vr_obj_src_oldest(unit, i);
}

/* purge the source's head if no older entry is elsewhere (a log's head is
 * a lower bound of its unit's age: a younger unit is moved to the requeue
 * heap by vr_obj_src_purge, which then returns 0) */
static int64_t objs_step(void *unit, size_t i, const struct vr_purge_step *st, uint64_t *next)
{
	struct vr_objs *os = unit;
	int64_t got = 0;
	uint64_t age = vr_obj_src_oldest(os, i);
	if (age != UINT64_MAX && !st->older(st, age)) {
		got = vr_obj_src_purge(os, i, st->batch);
		age = vr_obj_src_oldest(os, i);
	}
	*next = age;
	return got;
}

static bool objs_pending(void *unit)
{
	return vr_obj_src_pending(unit);
}

static uint32_t *objs_mask(void *unit)
{
	return vr_obj_src_mask(unit);
}

static int64_t objs_flush(void *unit, struct vr_notify_batch *b)
{
	return vr_obj_src_flush(unit, b);
}

static void objs_done(void *unit)
{
	vr_obj_purge_done(unit);
}

static int objs_priority(const void *unit)
{
	return vr_objs_priority(unit);
}

static uint64_t objs_volatile(void *unit)
{
	return vr_objs_stat(unit, VR_STAT_VOLATILE_BYTES);
}

const struct vr_source_ops vr_objs_source = {
	.nheap = VR_OBJ_NLOG,
	.side = true,
	.oldest = objs_oldest,
	.step = objs_step,
	.mask = objs_mask,
	.flush = objs_flush,
	.done = objs_done,
	.priority = objs_priority,
	.volatile_bytes = objs_volatile,
	.pending = objs_pending,
};
