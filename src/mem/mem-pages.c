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

/* Ranges below PROT_MIN_BYTES trapped with mprotect because their memfd
 * is out (MARKERS LOST TO A PUNCH, below): each costs up to two VMAs, and
 * the process's VMAs are the application's too (vm.max_map_count, 65530
 * by default).  So at most PROT_OUT_MAX of them at a time in the process;
 * beyond that, markers.  Each holds a slot of a fixed table, (region,
 * first page), taken when its trap is placed and given back when a
 * restore covers that page or the region goes: a range on markers gives
 * back nothing, and one restore of many ranges gives back all of theirs.
 * What the table does not see: a restore of the middle of a range leaves
 * its right piece trapped without a slot, and the left piece's restore
 * gives the one slot back (so a few more VMAs than the table says, one
 * per such split).  A slot is written only by a holder of its region's
 * lock (taken with a compare-and-swap); nothing allocates (purges run
 * under memory pressure). */
#define PROT_OUT_MAX 4096
static struct {
	_Atomic(struct vr_region *) r;
	uint64_t p0;
} prot_out[PROT_OUT_MAX];

static bool prot_out_take(struct vr_region *r, uint64_t p0)
{
	for (size_t i = 0; i < PROT_OUT_MAX; i++) {
		struct vr_region *none = NULL;
		if (atomic_load_explicit(&prot_out[i].r, memory_order_relaxed) == NULL &&
		    atomic_compare_exchange_strong(&prot_out[i].r, &none, r)) {
			prot_out[i].p0 = p0;
			return true;
		}
	}
	return false;
}

/* the slots of r's ranges whose first page is in [p0, p1) go back (all of
 * r's for p1 == UINT64_MAX); region lock held, or the region going */
static void prot_out_give(struct vr_region *r, uint64_t p0, uint64_t p1)
{
	for (size_t i = 0; i < PROT_OUT_MAX; i++)
		if (atomic_load_explicit(&prot_out[i].r, memory_order_relaxed) == r &&
		    prot_out[i].p0 >= p0 && prot_out[i].p0 < p1)
			atomic_store(&prot_out[i].r, NULL);
}

void vr_pages_forget(struct vr_region *r)
{
	if (atomic_load_explicit(&r->fd_out, memory_order_relaxed))
		prot_out_give(r, 0, UINT64_MAX);
}

/* a fork child: its only thread; the parent's regions purge nothing here
 * (inherited handles may only be destroyed), so no slot is the child's */
void vr_pages_atfork_child(void)
{
	for (size_t i = 0; i < PROT_OUT_MAX; i++)
		atomic_store_explicit(&prot_out[i].r, NULL, memory_order_relaxed);
}

static int arm(struct vr_region *r, void *a, size_t len, bool *prot)
{
	/* (never for a shared file: other processes would not see it); a
	 * memfd the application has may be mapped elsewhere, where a fault
	 * racing the punch would drop the markers (MARKERS LOST TO A PUNCH,
	 * below), which mprotect, a property of this mapping, survives */
	bool guard = !r->shm && r->trap->id == VR_TRAP_GUARD;
	uint64_t p0 = (uint64_t)((uint8_t *)a - r->base);
	bool out = guard && len < PROT_MIN_BYTES &&
		   atomic_load_explicit(&r->fd_out, memory_order_relaxed);
	*prot = guard && (len >= PROT_MIN_BYTES || (out && prot_out_take(r, p0)));
	if (*prot) {
		int err = vr_trap_arm_prot(r, a, len);
		if (err == 0) {
			atomic_store_explicit(&r->used_prot, true, memory_order_relaxed);
			return 0;
		}
		/* a multi-VMA mprotect can fail half-way: undo, then guard */
		if (out)
			prot_out_give(r, p0, p0 + 1);
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

bool vr_pages_in_file(struct vr_region *r, uint64_t off, uint64_t len)
{
	size_t pg = vr_page_size();
	unsigned char vec[64];
	while (len) {
		size_t n = len / pg < sizeof(vec) ? len / pg : sizeof(vec);
		if (mincore(r->base + off, n * pg, vec) < 0)
			return true;
		for (size_t i = 0; i < n; i++)
			if (vec[i] & 1)
				return true;
		off += n * pg;
		len -= n * pg;
	}
	return false;
}

/* MARKERS LOST TO A PUNCH.  The punch unmaps the range from every mapping
 * of the file, then removes its pages; when another mapping faults a page
 * in between (a process that mapped vr_region_fd(), S17, or a userfaultfd
 * mapping of a shared file, whose trap is the hole itself), the kernel
 * unmaps that page a second time and that unmap drops the guard markers
 * every mapping holds on it (kernel 6.18: 26-17,000 of 200,000 punches
 * with a reader in a second mapping; none without one).  This mapping's
 * next touch would then read the hole as zeros, and allocate a zero page
 * every mapping reads as data.  Only a memfd the application has can be
 * mapped elsewhere (vr_region_fd, vr_region_from_fd; S33 refuses a second
 * region of a file this process maps): its ranges are trapped with
 * mprotect, which no punch undoes (arm, above).  Where mprotect fails
 * (the VMA limit) the markers are used, and after the punch placed again
 * (installing one where one is changes nothing), and a page found in the
 * file then (faulted in meanwhile) is punched again, a few times at most:
 * that narrows the loss to a thread of this process touching the page
 * between the punch and the markers again.  So do ranges beyond the
 * process's share of VMAs for this (PROT_OUT_MAX, above). */
static void rearm_after_punch(struct vr_region *r, void *a, uint64_t p0, size_t len)
{
	/* (it ends on markers placed, not on a punch: a review) */
	for (int tries = 0;; tries++) {
		if (vr_madvise(a, len, MADV_GUARD_INSTALL) < 0)
			return; /* the markers were placed once: as before */
		if (tries == 8 || !vr_pages_in_file(r, p0, len))
			return;
		if (vr_fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)p0,
				 (off_t)len) < 0)
			return;
	}
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
		if (prot && undo == 0 && len < PROT_MIN_BYTES)
			prot_out_give(r, p0, p0 + 1);
		return undo < 0 ? VR_DISCARD_STUCK : err;
	}
	/* the punch may have taken guard markers off (MARKERS LOST TO A
	 * PUNCH; a shared file's: mem-trap-coop.c) */
	if (r->shm)
		vr_trap_coop_after_punch(r, p0, len);
	else if (!prot && r->trap->id == VR_TRAP_GUARD &&
		 atomic_load_explicit(&r->fd_out, memory_order_relaxed))
		rearm_after_punch(r, a, p0, len);
	return 0;
}

int vr_restore_pages(struct vr_region *r, uint64_t p0, uint64_t p1)
{
	void *a = r->base + p0;
	size_t len = p1 - p0;
	vr_trap_gen_bump(r);
	int err = vr_trap_disarm(r, a, len);
	if (!err && r->trap->id == VR_TRAP_GUARD &&
	    atomic_load_explicit(&r->used_prot, memory_order_relaxed)) {
		err = vr_trap_disarm_prot(r, a, len);
		if (!err && atomic_load_explicit(&r->fd_out, memory_order_relaxed))
			prot_out_give(r, p0, p1);
	}
	return err;
}
