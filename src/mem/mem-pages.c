/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * mem-pages.c - discard and restore a region's pages: arm the trap, then
 * free the memory through the region's kind (mem-kind.h); restore takes
 * the trap off.  Trap generations.  (Cut from purge.c.)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/mman.h>

#include "base/inject.h"
#include "base/sys.h"

#include "vrange.h"
#include "mem/mem.h"
#include "mem/mem-kind.h"
#include "mem/mem-shared.h"

/* trap generations come from one process-wide sequence, so that a value
 * is never seen twice, even in a region created at a reused address (the
 * fault path's re-fault bound compares them) */
static _Atomic uint64_t trap_seq;

uint64_t vr_trap_gen_next(void)
{
	return atomic_fetch_add_explicit(&trap_seq, 1, memory_order_relaxed) + 1;
}

void vr_trap_gen_bump(struct vr_region *r)
{
	uint64_t g = atomic_fetch_add_explicit(&trap_seq, 1, memory_order_relaxed) + 1;
	atomic_store_explicit(&r->trap_gen, g, memory_order_relaxed);
	if (r->shm) /* other processes' fault paths see the change too */
		atomic_fetch_add_explicit(&r->shm->trap_epoch, 1, memory_order_relaxed);
}

/* Under the guard backend, a large range is trapped with one mprotect
 * instead: guard markers allocate page tables (8 bytes per page) for
 * memory that was never touched, which a purge of a sparse region would
 * pay in full and keep after the unmark, while an mprotect costs at most
 * two VMAs.  At the VMA limit it falls back to guard
 * markers.  A region that used mprotect once restores with both. */
#define PROT_MIN_BYTES ((uint64_t)2 << 20) /* one page-table page covers 2 MiB */

static int arm(struct vr_region *r, void *a, size_t len, bool *prot)
{
	/* (never for a shared file: other processes would not see it) */
	*prot = !r->shm && r->trap->id == VR_TRAP_GUARD && len >= PROT_MIN_BYTES;
	if (*prot) {
		int err = vr_trap_arm_prot(r, a, len);
		if (err == 0) {
			atomic_store_explicit(&r->used_prot, true, memory_order_relaxed);
			return 0;
		}
		/* a multi-VMA mprotect can fail half-way: undo, then guard */
		if (vr_trap_disarm_prot(r, a, len) < 0)
			return VR_DISCARD_STUCK;
		*prot = false;
	}
	return vr_trap_arm(r, a, len);
}

/* Private anonymous memory is freed by the call that fails here (a guard
 * install, or MADV_DONTNEED), and the kernel walks the span's VMAs in
 * order, stopping at the first that refuses (an mlock'ed piece): the ones
 * before it were freed already.  Did that happen?  The same call on the
 * first page alone tells: it fails as the whole did when the first VMA
 * refused (nothing was freed), and succeeds when the first VMA was freed
 * (doing it again changes nothing).  Memfd mappings lose nothing to
 * either call. */
static bool freed_part(struct vr_region *r, void *a, int advice)
{
	return r->fd < 0 && vr_madvise(a, vr_page_size(), advice) == 0;
}

int vr_discard_pages(struct vr_region *r, uint64_t p0, uint64_t p1)
{
	void *a = r->base + p0;
	size_t len = p1 - p0;
	bool prot;
	vr_trap_gen_bump(r);
	int err = arm(r, a, len, &prot);
	if (err == VR_DISCARD_STUCK || err == -EBUSY)
		return err; /* -EBUSY: the guard protocol undid its markers itself
			     * (STUCK when they would not come off) */
	if (err < 0) {
		/* a guard install that failed part-way on private memory freed
		 * pages: keep the markers it set, the range is purged */
		if (!prot && r->trap->frees_private && freed_part(r, a, MADV_GUARD_INSTALL))
			return VR_DISCARD_STUCK;
		/* arming may have failed part-way: take back what was armed;
		 * if even that fails, pages with data may stay trapped, and the
		 * range must be taken as purged (its data is never lost, but a
		 * touch must reach the fault path as a purged range) */
		return vr_trap_disarm(r, a, len) < 0 ? VR_DISCARD_STUCK : err;
	}
	/* the memory goes through the region's kind (kind.h): a hole in the
	 * memfd, or MADV_DONTNEED unless the guard markers freed it */
	bool trap_freed = !prot && r->trap->frees_private;
	err = r->kind->free_pages(r, p0, p1, trap_freed);
	if (err < 0) {
		/* MADV_DONTNEED failed part-way: pages were freed, and the trap
		 * stays on all of them (the range is purged) */
		if (!trap_freed && freed_part(r, a, MADV_DONTNEED))
			return VR_DISCARD_STUCK;
		int undo = prot ? vr_trap_disarm_prot(r, a, len) : vr_trap_disarm(r, a, len);
		return undo < 0 ? VR_DISCARD_STUCK : err;
	}
	/* a shared file: the punch may have taken guard markers off
	 * (mem-trap-coop.c) */
	if (r->shm)
		vr_trap_coop_after_punch(r, p0, len);
	return 0;
}

int vr_restore_pages(struct vr_region *r, uint64_t p0, uint64_t p1)
{
	void *a = r->base + p0;
	size_t len = p1 - p0;
	vr_trap_gen_bump(r);
	int err = vr_trap_disarm(r, a, len);
	if (!err && r->trap->id == VR_TRAP_GUARD &&
	    atomic_load_explicit(&r->used_prot, memory_order_relaxed))
		err = vr_trap_disarm_prot(r, a, len);
	return err;
}
