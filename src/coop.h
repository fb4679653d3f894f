/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * coop.h - the cooperative trap protocol of shared regions (S32 fallback)
 *
 * Where userfaultfd is refused, a hole punched in a shared memfd must
 * still trap in every process that maps it, and a process can only arm
 * guard markers on its own mapping.  So before a purge punches, the
 * purger asks every other mapper to arm its markers on the range and
 * waits for each to acknowledge; one that does not answer in time makes
 * the purge skip the range.  This module is that protocol only: it knows
 * nothing of regions, maps or locks.  The caller supplies the shared
 * memory (struct vr_coop) and, per process, the three operations on its
 * own mapping (struct vr_coop_ops).
 *
 * SHARED STATE
 *
 *   struct vr_coop lives in memory shared by every mapper (a MAP_SHARED
 *   mapping of the memfd, at a different address in each process: it
 *   holds no pointer).  All-zero bytes are a valid empty state: the
 *   creator zero-fills it before it publishes the file; there is no init
 *   call.  It holds VR_COOP_MAX mapper slots and a ring of the last
 *   VR_COOP_RING requests.  Futexes on it are shared futexes (keyed by
 *   the file page), so the memory must be a MAP_SHARED file mapping or
 *   shared anonymous memory, never private.
 *
 * MEMBERS AND LISTENERS
 *
 *   vr_coop_join registers the calling process as a mapper (one slot:
 *   pid, the listener thread's tid and that thread's start time, so that
 *   a reused pid or tid is never mistaken for a live mapper) and starts
 *   one listener thread per membership ("vrange-coop").  The listener
 *   blocks every signal but SIGSEGV, SIGBUS, SIGILL and SIGFPE, allocates
 *   nothing once started, takes no lock of the caller (it must never need
 *   the region lock: the requester holds it while it waits for the
 *   listener) and serves requests by calling ops->arm / ops->disarm on
 *   this process's own mapping, then acknowledging.  One membership per
 *   process per coop is the intended use (several work, each with its own
 *   thread).  All mappers must see each other's pids in /proc (one pid
 *   namespace): a mapper whose listener thread is not found there is
 *   taken for dead.
 *
 * REQUESTS
 *
 *   vr_coop_request is called by one process at a time per coop (the
 *   caller holds the region's process-shared lock, so requests never
 *   overlap; nothing here checks it).  A listener's op never requests,
 *   with one exception: ops->resync once it holds that lock (trap-coop.c
 *   takes it with trylock; finding its holder dead, it repairs, and the
 *   repair requests).  No other request can be in flight then, and the
 *   listener's own membership skips the request (the caller applies it
 *   to its own mapping itself).  It writes the request into the
 *   ring, publishes its sequence number (the futex word every listener
 *   sleeps on), wakes every listener, and waits on a second futex until
 *   each live mapper other than the caller acknowledged it, failed it, is
 *   found dead, or the timeout passed.  Dead: its listener thread is gone
 *   from /proc, a zombie, or has another start time; the slot is then
 *   dropped (freed).  Liveness is checked only for mappers that have not
 *   answered, 1 ms after the post and then at doubling intervals, so a
 *   dead mapper costs the first request after its death about 1 ms.  The
 *   caller applies the operation to its own mapping itself.
 *
 * CATCHING UP
 *
 *   Each listener applies the requests in sequence order.  A listener
 *   that was stopped (SIGSTOP, or just descheduled past the timeout)
 *   finds requests it has not applied when it runs again:
 *   - up to VR_COOP_RING of them, still in the ring: it applies each in
 *     order, late (its late acknowledgements are ignored: each requester
 *     waits for its own sequence number only);
 *   - more, or one overwritten while it read it: it applies the newest
 *     request, acknowledges it, then calls ops->resync, which must set
 *     this mapping's markers from the shared state (purged bytes armed,
 *     all other bytes disarmed), and then applies, in order, whatever
 *     was posted since.
 *   Why the result is right: a range is punched only after every live
 *   mapper acknowledged that very ARM, so a mapper that missed an ARM
 *   never misses a purge; the skipped purge's DISARM follows in the ring,
 *   and a missed DISARM of an unmark leaves markers on bytes that are
 *   present again.  So a stopped-then-resumed mapper may, until it caught
 *   up, hold markers on bytes that are no longer purged, but it never
 *   lacks a marker on a purged byte.  Its fault path treats a trap on a
 *   page the shared state says is not purged as possibly stale: it waits
 *   for vr_coop_caught_up and runs the access again, and never disarms
 *   the page itself.  While a mapper is stopped, every purge of the file
 *   is skipped (each costs the timeout); it sees nothing of it, being
 *   stopped, and on resuming catches up as above before its threads
 *   can trust a trap.
 *
 * DEATH
 *
 *   A requester killed at any instant leaves at worst a half-written ring
 *   entry that no sequence number points to (the next requester rewrites
 *   it) or a published request nobody was woken for (the next request's
 *   wake-up makes every listener apply both; listeners also wake once a
 *   second on their own).  What a requester killed between its requests
 *   leaves in the mappings (markers armed for a purge it did not finish,
 *   or taken off for an unmark it did not publish) is the caller's to
 *   repair: src/mem/mem-shared.h, TRAPPED HOLES, is the one invariant and how the
 *   repair keeps it (an ARM every live mapper acknowledged before it
 *   punches again, then VR_COOP_RESYNC).  Listeners never wait
 *   for a requester.  A listener (or its process) killed mid-request is
 *   found dead by the requester's liveness check; the wait is bounded by
 *   the timeout in any case.  A slot dropped while its owner lives (a pid namespace
 *   mismatch) is re-claimed by the listener, which then resyncs.
 *
 * FORK
 *
 *   A fork child does not inherit membership (the listener is not
 *   copied): it calls vr_coop_leave_inherited, which frees memory only;
 *   to map the file it joins anew.
 */
#ifndef VR_COOP_H
#define VR_COOP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/macro.h"

#define VR_COOP_MAX 64  /* mapper slots per coop */
#define VR_COOP_RING 16 /* requests a late listener can still replay */

enum vr_coop_op {
	VR_COOP_ARM = 1, /* install guard markers on [off, off + len) */
	VR_COOP_DISARM,  /* remove them */
	VR_COOP_RESYNC,  /* run ops->resync (off, len unused): after a repair */
};

struct vr_coop_member; /* this process's membership: private memory */

/* Operations on this process's own mapping, called on the listener
 * thread with no lock of this module held.  arg is vr_coop_join's.
 *   arm, disarm: [off, off + len) as posted (the requester's offsets in
 *     the file); 0 or -errno.  A failure is reported to the requester
 *     at once (it counts as "did not answer"); a failed disarm also
 *     makes the listener resync.
 *   resync: set the markers of the whole mapping from the shared state
 *     (armed exactly on purged pages); m is the member, for
 *     vr_coop_pending(m).  0; -EAGAIN when it gave up because
 *     vr_coop_pending() turned true (the listener serves the request,
 *     then calls it again); another -errno: called again after 10 ms or
 *     the next request.  It may read the shared state
 *     lock-free but must not wait for the region lock or for an even
 *     seqlock without polling vr_coop_pending(): a requester may hold
 *     that lock while it waits for this very listener. */
struct vr_coop_ops {
	int (*arm)(void *arg, uint64_t off, uint64_t len);
	int (*disarm)(void *arg, uint64_t off, uint64_t len);
	int (*resync)(void *arg, const struct vr_coop_member *m);
};

/* ---- the shared layout: private to coop.c (a test writes the states a
 * killed requester leaves); every field is an atomic, no pointer ---- */
struct vr_coop_req {
	_Atomic uint32_t seq; /* the request's sequence number; seq - 1 while written */
	_Atomic uint32_t op;
	_Atomic uint32_t from; /* 1 + the requester's slot (its listener skips it), or 0 */
	uint32_t pad_;
	_Atomic uint64_t off, len;
};
struct vr_coop_slot {
	/* pid << 32 | generation << 2 | state (0 free, 1 claiming, 2 live) */
	_Atomic uint64_t word;
	/* last sequence number applied | 1 << 32 if it failed | the slot's
	 * generation << 33 (an ack left by a former owner never counts) */
	_Atomic uint64_t ack;
	_Atomic uint64_t start; /* the listener thread's start time (ticks) */
	_Atomic int32_t tid;    /* the listener thread */
	uint32_t pad_;
};
struct vr_coop {
	_Atomic uint32_t seq; /* futex: the newest request posted */
	uint8_t pad0_[60];
	_Atomic uint32_t ackseq;  /* futex: bumped by every acknowledgement */
	_Atomic uint32_t waiting; /* a requester sleeps on ackseq */
	uint8_t pad1_[56];
	struct vr_coop_req ring[VR_COOP_RING]; /* request seq in ring[seq % VR_COOP_RING] */
	struct vr_coop_slot slot[VR_COOP_MAX];
};
_Static_assert(sizeof(struct vr_coop) <= 4096, "struct vr_coop must fit one page");

/*
 * vr_coop_join - register this process as a mapper of c
 * @c: the shared state (zero-filled by the file's creator)
 * @ops: operations on this process's mapping; must outlive the member
 * @arg: passed to each op
 * @out: the membership, for vr_coop_request and vr_coop_leave
 *
 * Claims a slot and starts the listener; returns once the slot is live.
 * The member starts caught up with the newest request posted: call it
 * with the region lock held (so that no request is in flight) and arm
 * the purged ranges from the shared state before releasing the lock.
 * On a full table, first drops the slots of dead mappers.
 *
 * Returns: 0; -ENOSPC when VR_COOP_MAX live mappers hold every slot;
 *   -ENOMEM; -errno of pthread_create; -errno of reading the listener's
 *   /proc/self/task/TID/stat (no /proc).
 * Since: 0.2
 * Context: blocks briefly (thread start, /proc reads on a full table);
 *   allocates; not from a signal handler.
 */
int vr_coop_join(struct vr_coop *c, const struct vr_coop_ops *ops, void *arg,
		 struct vr_coop_member **out) _nonnull_(1, 2, 4) _must_check_;

/*
 * vr_coop_leave - stop the listener, free the slot and the member
 * @m: a member of this process (not inherited); NULL is a no-op
 *
 * Call it before the shared memory is unmapped.  Requests posted after
 * it returns do not wait for this process.
 *
 * Returns: nothing.
 * Since: 0.2
 * Context: joins the listener (waits for a request it is serving);
 *   not from a signal handler, not from an op of this member.
 */
void vr_coop_leave(struct vr_coop_member *m);

/*
 * vr_coop_leave_inherited - a fork child's copy of a parent's member
 * @m: the member as inherited (its listener is the parent's); NULL ok
 *
 * Frees the memory only: no thread is joined, the slot (the parent's)
 * is left alone.
 *
 * Returns: nothing.
 * Since: 0.2
 * Context: any thread of the child; no lock taken.
 */
void vr_coop_leave_inherited(struct vr_coop_member *m);

/*
 * vr_coop_request - have every other live mapper apply op, and wait
 * @c: the shared state
 * @self: the caller's own membership: its slot is not waited for and its
 *   listener skips the request (the caller applies op to its own mapping
 *   itself); NULL when the caller is not a member (a listener of the
 *   caller's process then applies op like any other)
 * @op: VR_COOP_ARM, VR_COOP_DISARM or VR_COOP_RESYNC
 * @off, @len: passed to the mappers' ops as they are
 * @timeout_ms: how long to wait for answers; 0: post, wake, return
 *
 * One caller at a time per coop (see REQUESTS).  Each live mapper
 * applies the requests in the order posted, so a DISARM posted with a
 * timeout of 0 is applied by every mapper before any later request.
 * Mappers found dead are dropped from the table.  VR_COOP_RESYNC is
 * acknowledged when the listener has taken it: its resync runs after,
 * once no request is pending (so after the caller drops the region lock,
 * if resync waits for an even seqlock).
 *
 * Returns: 0 when every other live mapper applied op; else the number
 *   that did not (timed out, or their op failed): for VR_COOP_ARM the
 *   caller must then skip the purge and post VR_COOP_DISARM for the same
 *   range; -EINVAL for another op or a negative timeout.
 * Since: 0.2
 * Context: blocks up to timeout_ms (futex waits); allocates nothing;
 *   never from a listener's op, except a resync holding the region lock
 *   (REQUESTS); async-signal-safe but for the snprintf of a /proc path
 *   (the fault path's repair and purges call it).
 */
int vr_coop_request(struct vr_coop *c, struct vr_coop_member *self, int op, uint64_t off,
		    uint64_t len, int timeout_ms) _nonnull_(1);

/*
 * vr_coop_pending - for ops->resync: a request waits for this listener
 * @m: the member whose listener is running resync
 *
 * Returns: true when a request was posted since the listener last
 *   applied one, or the member is leaving: resync should return -EAGAIN.
 * Since: 0.2
 * Context: the member's listener thread only; lock-free.
 */
bool vr_coop_pending(const struct vr_coop_member *m) _nonnull_();

/*
 * vr_coop_sync_self - wait until this process's listener applied every
 *   request posted so far
 * @m: the caller's own membership
 * @timeout_ms: how long to wait
 *
 * For a requester, before it changes its own mapping: the listener skips
 * the requests of its own process (their caller applied them itself), so
 * an older request of another process that it applies late would undo
 * the caller's own change (a late DISARM taking off the markers of a
 * range the caller then punched; a late ARM leaving a marker on a range
 * the caller unmarked, which its fault path, caught up, would forward as
 * a SIGSEGV).  Called first, no request of another process is left to
 * apply after the caller's own change.  The listener needs no lock to
 * apply requests (a resync waiting for the caller's lock runs only once
 * caught up), so the wait is short.
 *
 * Returns: 0; -ETIMEDOUT after timeout_ms.
 * Since: 0.3
 * Context: the region lock held; not from a signal handler of the
 *   listener's thread (the listener itself returns 0 at once).
 */
int vr_coop_sync_self(const struct vr_coop_member *m, int timeout_ms) _nonnull_();

/*
 * vr_coop_caught_up - this member's markers follow every request posted
 * @m: a member of this process
 *
 * For the fault path: a trap on a page the shared state says is not
 * purged may be a stale marker of a listener that is catching up (see
 * CATCHING UP).  The faulting thread must not disarm it itself (a
 * request to arm that page may be in flight); it waits, without the
 * region lock (the listener's resync may wait for an even seqlock),
 * until this returns true, then runs the access again: a member caught
 * up holds markers exactly on purged pages (or on pages of a purge in
 * progress, which the seqlock already makes it wait for).
 *
 * Returns: true when the listener applied the newest request posted and
 *   has no resync outstanding.
 * Since: 0.2
 * Context: any thread; async-signal-safe (three atomic loads).
 */
bool vr_coop_caught_up(const struct vr_coop_member *m) _nonnull_();

/*
 * vr_coop_count - live mapper slots
 * @c: the shared state
 *
 * Returns: slots claimed and live (the dead are counted until a request
 *   or a join drops them).
 * Since: 0.2
 * Context: lock-free, anywhere.
 */
int vr_coop_count(const struct vr_coop *c) _nonnull_();

#endif
