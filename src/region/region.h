/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * region.h - the volatility of one region (region.c): mark, span lookup,
 * locks, the purge engine's accessors, create and close.  The layout of
 * struct vr_region and its seqlock rules are in mem/mem.h.
 */
#ifndef VR_REGION_H
#define VR_REGION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vrange.h"
#include "base/macro.h"
#include "base/source.h"
#include "mem/mem.h"

struct vr_ctx;

/* vr_mark without the limit (ctx.c's vr_mark enforces it): *added says a
 * purgeable range was added.  VR_INTACT/VR_PURGED or -errno. */
int vr_region_mark(struct vr_region *r, size_t off, size_t len, bool *added) _nonnull_(4);
/* is anything in [off, off + len) purged?  Takes the region lock. */
bool vr_region_purged_in(struct vr_region *r, size_t off, size_t len) _nonnull_();
/* the live region containing [addr, addr + len) and the offset; -EINVAL */
int vr_region_span_of(void *addr, size_t len, struct vr_region **rp, size_t *off) _nonnull_(3, 4);
void vr_region_lock(struct vr_region *r) _nonnull_();
void vr_region_unlock(struct vr_region *r) _nonnull_();
void vr_region_lock_raw(struct vr_region *r) _nonnull_();
void vr_region_unlock_raw(struct vr_region *r) _nonnull_();
/* len bytes of the region's volatile ranges were purged (lock held) */
void vr_region_account_purge(struct vr_region *r, uint64_t len) _nonnull_();
/* the region's LRU oldest age (a hint: purge.c re-reads under the lock) */
uint64_t vr_region_oldest(const struct vr_region *r) _nonnull_();
void vr_region_publish_oldest(struct vr_region *r) _nonnull_(); /* lock held */
/* ends the ranges of r, freeing nodes and subtracting the ctx gauges */
void vr_region_release(struct vr_region *r, bool inherited) _nonnull_();
/* the public create calls (arguments checked as documented) up to a
 * region that owns its fd and mapping, trap attached, neither registered
 * nor linked: ctx.c registers and links it, or closes it */
int vr_region_create(struct vr_ctx *ctx, const char *name, size_t size, unsigned flags,
		     struct vr_region **out);
int vr_region_create_adopt(struct vr_ctx *ctx, void *addr, size_t len, unsigned flags,
			   struct vr_region **out);
int vr_region_create_from_fd(struct vr_ctx *ctx, int fd, unsigned flags, struct vr_region **out);
/* releases a region that is not (or no longer) registered nor linked */
void vr_region_close(struct vr_region *r, bool inherited) _nonnull_();
/* vr_unmark of [a, b) with the region lock held (a shared file's repair) */
int vr_region_unmark_locked(struct vr_region *r, uint64_t a, uint64_t b) _nonnull_();

/* region-source.c: a region (unit) as a purge source (base/source.h) */
extern const struct vr_source_ops vr_region_source;

#endif
