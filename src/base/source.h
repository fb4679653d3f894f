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

#endif
