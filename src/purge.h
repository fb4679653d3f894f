/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * purge.h - the purge engine (purge.c)
 */
#ifndef VR_PURGE_H
#define VR_PURGE_H

#include <stdint.h>
#include <sys/types.h>

#include "base/fork.h"
#include "base/macro.h"
#include "base/source.h"

struct vr_ctx;
struct vr_objs;

/* one entry of the purge engine's heap: source src of unit (a region or
 * an object group, through its table ops) and its key */
struct vr_cand {
	uint64_t age;
	const struct vr_source_ops *ops;
	void *unit;
	size_t src;
};

enum vr_purge_goal {
	VR_PURGE_BYTES,    /* reclaim at least n bytes */
	VR_PURGE_VOLATILE, /* until unpurged volatile bytes <= n */
};

/* purges in S35 order (priority, then S8 age) until the goal is met, the
 * objects' purges it made collected in *b; bytes reclaimed.  only: the
 * objects of that group alone.  purge_lock held and shared gauges synced
 * (vr_ctx_purge_in does both).  Never allocates. */
ssize_t vr_purge_run(struct vr_ctx *ctx, struct vr_objs *only, enum vr_purge_goal goal, uint64_t n,
		     struct vr_notify_batch *b) _nonnull_(1, 5);
/* room in the purge heap for n regions and the ctx's groups' sources; called
 * with purge_lock held */
int vr_purge_reserve(struct vr_ctx *ctx, size_t n) _nonnull_();
void vr_purge_init(void);                      /* at every vr_ctx_new */
extern const struct vr_atfork vr_purge_atfork; /* child: new purge generations */

#endif
