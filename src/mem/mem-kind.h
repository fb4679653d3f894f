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
 *                    vr_region_from_fd): the trapped pages are punched
 *                    out of the file.
 *   vr_kind_anon     private anonymous memory the library mapped
 *                    (VR_REGION_ANON, MADV_DONTFORK): a guard marker frees
 *                    the pages as it traps them, else (mprotect)
 *                    MADV_DONTNEED frees them.
 *   vr_kind_adopted  private anonymous memory the caller mapped
 *                    (vr_region_adopt): discarded as vr_kind_anon, but
 *                    never unmapped: destroy disarms the traps instead.
 *
 * The trap is not the kind's business: mem-pages.c arms it (guard markers,
 * or mprotect for large ranges and on the mprotect backend) and takes it
 * down on restore, and then every kind reads 0 where it freed pages.  In
 * between, free_pages frees the memory of the armed span: it is called
 * with the region lock held, never from a signal handler, and returns 0
 * or -errno having freed nothing (mem-pages.c then disarms and skips the
 * range, data kept).
 */
#ifndef VR_KIND_H
#define VR_KIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

struct vr_region;

struct vr_kind_ops {
	const char *name;
	/* free the pages [p0, p1) (page-aligned offsets) of r, trapped
	 * already; trap_freed: the trap (a guard marker) freed private
	 * anonymous pages itself */
	int (*free_pages)(struct vr_region *r, uint64_t p0, uint64_t p1, bool trap_freed);
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

/* a region's mapping, read/write and MADV_DONTFORK: the memfd fd
 * MAP_SHARED, or (fd < 0) fresh private anonymous memory */
int vr_kind_map(int fd, size_t map_size, void **out) _nonnull_() _must_check_;
/* 0 if [addr, addr + len) (page aligned) lies in one private anonymous
 * read/write mapping of this process (per /proc/self/smaps), its
 * protection in *prot; -EINVAL if not; or the -errno of reading
 * /proc/self/smaps */
int vr_adopt_check(const void *addr, size_t len, int *prot) _nonnull_(3) _must_check_;

#endif
