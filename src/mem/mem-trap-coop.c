/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * trap-coop.c - the trap backend of shared regions where userfaultfd is
 * refused: guard markers in every mapping, armed by each mapper itself
 * through the cooperative protocol of coop.c (S32)
 *
 * Each region of a shared file is a member of the file's coop block
 * (shm->coop), with a listener thread that arms and disarms guard markers
 * on this region's own mapping when another process asks.  What the
 * order below keeps is shared.h's TRAPPED HOLES: a hole is trapped in
 * every mapping.  Under the region lock (held by every caller of
 * arm/disarm, see LOCKING in base/lock.h):
 *   arm     (the record already published purged: region-source.c) own markers,
 *           then VR_COOP_ARM to every other mapper, waiting up to
 *           VR_COOP_TIMEOUT_MS; the caller punches only after 0.  One
 *           that does not answer (a stopped process) makes the purge skip
 *           the range: VR_COOP_DISARM posted without waiting, own markers
 *           off, -EBUSY, counted in VR_STAT_SKIPPED_BUSY (and
 *           VR_STAT_SKIPPED); own markers that would not come off make
 *           it VR_DISCARD_STUCK (purged with its data, still trapped);
 *   disarm  the pages made present (fallocate(0)) first, so no hole is
 *           left to uncover; own markers off; VR_COOP_DISARM to the
 *           others (a late one catches up: coop.h, CATCHING UP).  If the
 *           own markers would not come off, the others are not told and
 *           the own are put back: the range stays purged and trapped;
 *   rearm   (repair, shared.c) own markers and VR_COOP_ARM, taking
 *           nothing back on a timeout: markers on a purged range are what
 *           the map asks for;
 *   attach  join the coop under the region lock and arm the whole pages
 *           of every purged range of this mapping before the lock goes:
 *           a process that joins after a purge traps too (S28);
 *   detach  leave (a fork child: free only).
 * The listener's resync (it missed requests) takes the region lock with
 * trylock, giving up while a request waits for it (coop.h), and sets the
 * markers from the map: purged whole pages armed first, then the rest
 * disarmed, so no purged page is ever unarmed in between.
 * The fault path (fault.c) treats a trap on a page the map says is not
 * purged as a marker that is not caught up yet: it waits for
 * vr_coop_caught_up() and runs the access again.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "vrange.h"
#include "coop.h"
#include "base/inject.h"
#include "base/lock.h"
#include "base/sys.h"
#include "mem/mem.h"
#include "ctx.h" /* r->ctx counters: to move into base/acct.h (layering S15) */
#include "mem/mem-shared.h"

/* how long a purge waits for every mapper to arm */
#define VR_COOP_TIMEOUT_MS 100

static struct vr_coop *coop_of(struct vr_region *r)
{
	return (struct vr_coop *)r->shm->coop;
}

static int own(struct vr_region *r, uint64_t off, uint64_t len, int advice)
{
	return vr_madvise(r->base + off, len, advice) < 0 ? -errno : 0;
}

/* ---- the listener's operations on this mapping ---- */

static int op_arm(void *arg, uint64_t off, uint64_t len)
{
	return own(arg, off, len, MADV_GUARD_INSTALL);
}

static int op_disarm(void *arg, uint64_t off, uint64_t len)
{
	return own(arg, off, len, MADV_GUARD_REMOVE);
}

/* markers exactly on the whole pages of purged ranges (lock held):
 * purged runs armed first, then the gaps between them disarmed */
static int set_markers(struct vr_region *r)
{
	struct vr_map *m = r->map;
	int err = 0;
	for (int pass = 0; pass < 2; pass++) {
		uint64_t cur = 0;
		for (struct vr_range *x = vr_map_first_end_after(m, 0);; x = vr_map_next(m, x)) {
			uint64_t p0 = r->map_size, p1 = r->map_size;
			if (x && (!vr_range_purged(x) ||
				  !vr_whole_pages(x->start, x->end, m->page_shift, &p0, &p1)))
				continue;
			int e = 0;
			if (pass == 0 && p0 < p1)
				e = own(r, p0, p1 - p0, MADV_GUARD_INSTALL);
			if (pass == 1 && cur < p0)
				e = own(r, cur, p0 - cur, MADV_GUARD_REMOVE);
			if (e < 0)
				err = e;
			cur = p1;
			if (!x)
				break;
		}
	}
	return err;
}

/* The one op that may request (coop.h, REQUESTS): a trylock that finds
 * the holder dead repairs here, and repair arms every mapping before it
 * punches (shared.h, TRAPPED HOLES). */
static int op_resync(void *arg, const struct vr_coop_member *m)
{
	struct vr_region *r = arg;
	for (;;) {
		int rc = vr_shared_trylock(r);
		if (rc == 0)
			break;
		if (vr_coop_pending(m))
			return -EAGAIN; /* a requester holding the lock waits for us */
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
	}
	if (vr_coop_pending(m)) {
		/* a request came in while we waited: the lock holder died
		 * after it posted (we repaired it above) or it was posted
		 * before we got the lock.  Markers set from the map now would
		 * be undone by that older request: apply it first (serve()),
		 * then resync again. */
		vr_shared_unlock(r, true);
		return -EAGAIN;
	}
	int err = set_markers(r);
	vr_shared_unlock(r, true);
	return err;
}

static const struct vr_coop_ops coop_ops = {
	.arm = op_arm,
	.disarm = op_disarm,
	.resync = op_resync,
};

/* ---- the trap backend ---- */

/* every other mapper arms [off, off + len) (self: the caller's
 * membership, or NULL); 0, or -EBUSY when one did not in time: the
 * others are told to disarm (not waited for) and the skip is counted */
static int request_arm(struct vr_region *r, struct vr_coop_member *self, uint64_t off, uint64_t len)
{
	struct vr_coop *c = coop_of(r);
	if (vr_coop_request(c, self, VR_COOP_ARM, off, len, VR_COOP_TIMEOUT_MS) == 0)
		return 0;
	vr_coop_request(c, self, VR_COOP_DISARM, off, len, 0);
	atomic_fetch_add_explicit(&r->ctx->skipped_busy, 1, memory_order_relaxed);
	return -EBUSY;
}

/* before this mapping's own markers change: its listener has applied
 * every request of the others posted so far (coop.h, vr_coop_sync_self) */
static int sync_self(struct vr_region *r)
{
	if (!r->coop_m || vr_coop_sync_self(r->coop_m, VR_COOP_TIMEOUT_MS) == 0)
		return 0;
	atomic_fetch_add_explicit(&r->ctx->skipped_busy, 1, memory_order_relaxed);
	return -EBUSY;
}

static int coop_arm(struct vr_region *r, void *addr, size_t len)
{
	uint64_t off = (uint64_t)((uint8_t *)addr - r->base);
	if (sync_self(r) < 0)
		return -EBUSY; /* the purge skips the range: nothing armed */
	int err = own(r, off, len, MADV_GUARD_INSTALL);
	if (err < 0)
		return err;
	err = request_arm(r, r->coop_m, off, len);
	/* a mapper did not arm in time: the purge skips the range, unless
	 * the own markers would not come off: then the range must be taken
	 * as purged (nothing punched, its data kept), or a touch of those
	 * non-volatile bytes would meet a marker the fault path does not
	 * claim and be forwarded as a foreign SIGSEGV */
	if (err < 0 && own(r, off, len, MADV_GUARD_REMOVE) < 0)
		return VR_DISCARD_STUCK;
	return err;
}

static int coop_disarm(struct vr_region *r, void *addr, size_t len)
{
	uint64_t off = (uint64_t)((uint8_t *)addr - r->base);
	if (vr_fallocate(r->fd, FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) < 0)
		return -errno;
	/* an unmark does not fail for a slow listener of its own: waited
	 * for longer, then done regardless (a late ARM may then leave a
	 * marker, which the next resync takes off) */
	if (r->coop_m)
		(void)vr_coop_sync_self(r->coop_m, 10 * VR_COOP_TIMEOUT_MS);
	int err = own(r, off, len, MADV_GUARD_REMOVE);
	if (err < 0) {
		/* the unmark fails and the range stays purged: every mapping
		 * keeps trapping it (own markers back, best effort; a marker
		 * that stays off uncovers zeros, never a hole: filled above) */
		own(r, off, len, MADV_GUARD_INSTALL);
		return err;
	}
	vr_coop_request(coop_of(r), r->coop_m, VR_COOP_DISARM, off, len, VR_COOP_TIMEOUT_MS);
	return 0;
}

static int coop_attach(struct vr_region *r)
{
	vr_shared_lock(r, true);
	int err = vr_coop_join(coop_of(r), &coop_ops, r, &r->coop_m);
	if (!err) {
		err = set_markers(r);
		if (err < 0) {
			vr_coop_leave(r->coop_m);
			r->coop_m = NULL;
		}
	}
	vr_shared_unlock(r, true);
	return err;
}

static void coop_detach(struct vr_region *r, bool inherited)
{
	if (inherited)
		vr_coop_leave_inherited(r->coop_m);
	else
		vr_coop_leave(r->coop_m);
	r->coop_m = NULL;
}

const struct vr_trap_ops vr_trap_coop = {
	.id = VR_TRAP_GUARD,
	.name = "guard-protocol",
	.arm = coop_arm,
	.disarm = coop_disarm,
	.attach = coop_attach,
	.detach = coop_detach,
};

/* after a repair (shared.c): every mapper sets its markers from the map
 * again (shared.h, TRAPPED HOLES: a holder killed may have left markers
 * on bytes it had not published); this one now, under the lock */
void vr_trap_coop_resync_all(struct vr_region *r)
{
	if (!r->coop_m && vr_coop_count(coop_of(r)) == 0)
		return;
	vr_coop_request(coop_of(r), r->coop_m, VR_COOP_RESYNC, 0, 0, 0);
	if (r->coop_m && sync_self(r) == 0)
		set_markers(r); /* else its listener resyncs, after the unlock */
}

int vr_trap_coop_rearm(struct vr_region *r, uint64_t off, uint64_t len)
{
	struct vr_coop *c = coop_of(r);
	if (r->coop_m) {
		int err = sync_self(r);
		if (!err)
			err = own(r, off, len, MADV_GUARD_INSTALL);
		if (err < 0)
			return err;
	}
	if (vr_coop_count(c) == 0)
		return 0; /* userfaultfd mappings only: the hole is the trap */
	return vr_coop_request(c, r->coop_m, VR_COOP_ARM, off, len, VR_COOP_TIMEOUT_MS) ? -EBUSY
											: 0;
}

/* A file may have mappers of both kinds: a process whose userfaultfd
 * works and one behind a seccomp filter that uses the guard protocol.
 * The userfaultfd backend's purges and restores of a shared region tell
 * the protocol's members (if any) as coop_arm/coop_disarm do, as a
 * requester that is not a member; 0, or -EBUSY (ARM not taken by all:
 * the purge skips the range). */
int vr_trap_coop_notify(struct vr_region *r, int op, uint64_t off, uint64_t len)
{
	struct vr_coop *c = coop_of(r);
	if (vr_coop_count(c) == 0)
		return 0;
	if (op == VR_COOP_ARM)
		return request_arm(r, NULL, off, len);
	vr_coop_request(c, NULL, op, off, len, VR_COOP_TIMEOUT_MS);
	return 0;
}

/* After the punch of [off, off + len), armed in every mapping before it.
 * The punch unmaps its pages from every mapping that maps them, and when
 * a mapping faults a page in while the punch runs (a userfaultfd mapping
 * keeps its page tables, so a thread of its process reading the volatile
 * bytes at that instant), the kernel's second unmap of that page also
 * drops the guard markers other mappings hold on it: their next access
 * then reads the hole as zeros and allocates a zero page, which every
 * mapping, userfaultfd ones too, reads as data (TRAPPED HOLES broken).
 * So every guard-protocol mapping arms again, and a page faulted in
 * meanwhile is punched again, until the range is holes with every marker
 * on.  This narrows the loss to a thread of a guard-protocol process that
 * touches the page between the punch and its re-arm (it reads zeros
 * then); it does not close it.  A file without guard-protocol mappers
 * pays nothing. */
void vr_trap_coop_after_punch(struct vr_region *r, uint64_t off, uint64_t len)
{
	struct vr_coop *c = coop_of(r);
	for (int tries = 0;; tries++) { /* ends on an arm, not on a punch */
		int others = vr_coop_count(c) - (r->coop_m ? 1 : 0);
		if (!r->coop_m && others <= 0)
			return; /* userfaultfd mappings only: the hole is the trap */
		if (r->coop_m)
			(void)own(r, off, len, MADV_GUARD_INSTALL);
		/* a member that does not answer now is stopped: it applies the
		 * ARM late, before its fault path trusts a trap (coop.h) */
		if (others > 0)
			(void)vr_coop_request(c, r->coop_m, VR_COOP_ARM, off, len,
					      VR_COOP_TIMEOUT_MS);
		if (tries == 8 || !vr_pages_in_file(r, off, len))
			return;
		if (vr_fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
				 (off_t)len) < 0)
			return;
	}
}

/* for the fault path: wait (bounded, about a second) until this mapping's
 * markers follow every request posted; async-signal-safe */
void vr_trap_coop_wait(struct vr_region *r)
{
	/* nanosleep is a cancellation point: a cancel pending in the
	 * faulting thread acts after its access, not in here (vrange.h; as
	 * fault.c wait_range) */
	vr_nocancel_enter();
	for (int i = 0; i < 10000 && r->coop_m && !vr_coop_caught_up(r->coop_m); i++) {
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
	}
	vr_nocancel_leave();
}
