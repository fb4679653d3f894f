/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * kind.h - memory kinds: how a region's pages are discarded, restored,
 * counted and given back
 *
 * The range map, the LRU, the limit, the monitor and the fault path do not
 * care what memory a region is made of; only these operations do.  Every
 * region points at one immutable struct vr_kind_ops:
 *
 *   vr_kind_memfd    a memfd mapped MAP_SHARED (vr_region_new,
 *                    vr_region_from_fd): arm the trap, then punch a hole.
 *   vr_kind_anon     private anonymous memory the library mapped
 *                    (VR_REGION_ANON, MADV_DONTFORK): arm the trap, which
 *                    with guard markers frees the pages too, else
 *                    MADV_DONTNEED after mprotect(PROT_NONE).
 *   vr_kind_adopted  private anonymous memory the caller mapped
 *                    (vr_region_adopt): discarded as vr_kind_anon, but
 *                    never unmapped: destroy disarms the traps instead.
 *
 * discard/restore take page-aligned offsets [p0, p1) into the region and
 * are called with the region lock held (purge.c, region.c), never from a
 * signal handler; discard either discards every page or leaves them all
 * as they were (trap disarmed, data kept) and returns -errno.  restore
 * makes the span readable and writable; the pages read 0.
 */
#ifndef VR_KIND_H
#define VR_KIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

struct vr_region;

struct vr_kind_ops {
	const char *name;
	int (*discard)(struct vr_region *r, uint64_t p0, uint64_t p1);
	int (*restore)(struct vr_region *r, uint64_t p0, uint64_t p1);
	/* bytes of memory the region holds in the kernel now: the memfd's
	 * blocks, or the resident pages of this process's anonymous mapping
	 * (a page a fork child still shares is not counted here once this
	 * process discarded it).  System calls; no lock needed. */
	uint64_t (*footprint)(struct vr_region *r);
	/* give the memory back at destroy, after the region left the
	 * registry.  Live: the caller has exclusive use of the region (destroy
	 * must not race with other calls), the map still holds its ranges.
	 * Inherited (in a fork child): no lock, the map may be torn. */
	void (*release)(struct vr_region *r, bool inherited);
};

extern const struct vr_kind_ops vr_kind_memfd, vr_kind_anon, vr_kind_adopted;

/* a fresh private anonymous mapping of map_size bytes, MADV_DONTFORK */
int vr_anon_map(size_t map_size, void **out) _nonnull_() _must_check_;
/* 0 if [addr, addr + len) (page aligned) lies in one private anonymous
 * read/write mapping of this process (per /proc/self/smaps), its
 * protection in *prot; -EINVAL if not; or the -errno of reading
 * /proc/self/smaps */
int vr_adopt_check(const void *addr, size_t len, int *prot) _nonnull_(3) _must_check_;

#endif
