/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * shared.h - the volatility state of a VR_REGION_SHARED memfd (S27-S33)
 *
 * LAYOUT.  The file is [data][state], sealed against resizing at creation
 * (F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL), so the layout never
 * changes:
 *   data   [0, map_size): the bytes vr_region_size() reports, page-rounded;
 *   state  [map_size, map_size + state_size): struct vr_shm, whose last
 *          member is the range map with fixed storage (map/map.h:
 *          FIXED STORAGE, POSITION INDEPENDENCE: offsets, never pointers,
 *          since every process maps the state at its own address);
 *   tail   the last 64 bytes of the file (inside the state's last page):
 *          struct vr_shm_tail, which vr_region_from_fd reads with pread
 *          to recognise a shared file (together with the seals) before
 *          mapping anything.
 * Capacity (S31): max(512, data pages / 16) ranges, fixed at creation.
 *
 * LOCK AND SEQLOCK.  The region lock of a shared region is shm->lock, a
 * PTHREAD_PROCESS_SHARED | PTHREAD_MUTEX_ROBUST mutex taken through
 * vr_held_push/pop with the region rank like any region lock (lock.h);
 * shm->seq is the fault path's seqlock (SEQLOCK in mem.h), odd while a holder in
 * any process may be changing the map.  Every process maps the state of a
 * file once (one struct vr_shm_map per file, shared by the regions of
 * that file in the process), so vr_held() recognises the lock whichever
 * region of the file a call came through.
 *
 * TRAPPED HOLES: the one invariant of a shared file's data, kept at every
 * instant, whoever is killed where (every rule about the order of arming,
 * punching, filling and publishing cites it):
 *   (H) a hole lies in whole pages of a record that is purged (or PENDING
 *       purged): non-volatile bytes are never holes;
 *   (T) a hole is trapped in every mapping of the file: a userfaultfd
 *       mapping traps holes by itself, every member of the guard protocol
 *       (coop.h) holds a marker on it.
 * So no mapping ever reads a hole as data.  The paths that keep it:
 *   purge    publish "purged" in the record, arm every mapping (own
 *            markers, then an ARM every live member acknowledged), punch
 *            (region-source.c purge_range; region.c's mark over a purged range
 *            writes the merged record PENDING, with its final bounds,
 *            before purge_at_once arms and punches its gaps): killed
 *            anywhere, the record is purged and its pages are data or
 *            holes armed everywhere;
 *   unmark   fill the holes (fallocate(0)), then take the markers off
 *            (own, then DISARM to the others), then trim the records
 *            (region.c unmark_locked, vr_restore_pages): killed anywhere,
 *            no hole is left, and a purged record may hold zero pages some
 *            mappings no longer trap (repair arms them again, below);
 *   join     makes no page present and no hole (S33), and arms the purged
 *            ranges before it releases the lock (trap-coop.c attach);
 *   repair   punches a page again only once every mapping is known to
 *            trap it (shared.c rearm_and_repunch): own markers and an ARM
 *            acknowledged by every live member first; a member that does
 *            not answer leaves the rest as it is (data, or holes trapped
 *            by (T)) and the records purged;
 *   nothing else punches, and nothing fills a hole without the lock.
 * The reverse holds only for members caught up (vr_coop_caught_up): their
 * markers lie on whole pages of purged records, except on pages the lock
 * holder is changing.  A holder killed may leave markers on bytes it had
 * not published (an ARM it had not taken back yet): repair posts
 * VR_COOP_RESYNC after it re-punched, and each member sets its markers
 * from the map again (a member's fault path waits for that: fault.c).
 *
 * DEATH (S30).  A locker that gets EOWNERDEAD holds the lock and repairs
 * before anything else (vr_shared_lock -> repair): the seq stays odd (the
 * dead holder may have left it odd; it is made odd if not) until the
 * repairer unlocks; the map's tree and LRU are rebuilt from its records
 * (vr_map_rebuild: a change cut short leaves overlapping records, joined,
 * PURGED if any part was); the file's gauges are recounted; every purged
 * range's whole pages are armed in every mapping and punched again, as
 * TRAPPED HOLES says (a purger killed between publish and punch leaves
 * the range wholly purged, never half); an unmarker killed once it began
 * to fill holes (shm->unmark_lo/hi set) is completed first, by the
 * repairer, before the re-punch: its fills are zeros that other mappings
 * read without a trap from the instant they are made (userfaultfd: the
 * hole was the trap; the guard protocol: DISARM may be out), so the
 * bytes must end non-volatile (reading 0 after an unmark is S5), never
 * purged again; an unmarker killed before that leaves them purged, as
 * if it had not been called; the markers
 * are resynced; pthread_mutex_consistent() last.  A repairer that dies in
 * turn leaves EOWNERDEAD to the next locker, which repairs again.  Repair
 * allocates nothing and may run in the fault path (it sorts in place)
 * and on a listener thread (its resync's trylock; coop.h allows that
 * requester).  It waits for the protocol's answers: up to its timeout
 * (100 ms) once if a member is stopped.
 *
 * LOST WAKEUPS.  A robust mutex of glibc passes FUTEX_WAITERS on through
 * the waiter an unlock wakes: that waiter takes the lock with the bit set
 * again, so its own unlock wakes the next.  A woken waiter killed before
 * it took the lock, while another thread took the free lock without the
 * bit (it never slept), leaves the other sleepers with nobody to wake
 * them: the kernel wakes one at the dead waiter's exit only if the lock
 * is still free then (handle_futex_death).  Seen in test-shared-kill
 * race_kill: the lock free, every racer asleep on it, for good.  So
 * vr_shared_lock waits at most VR_SHM_REWAIT_NS at a time and looks again
 * (s->rewaits counts the waits that ran out; test-shm lost_wakeup makes
 * the state by hand).  A holder's own lock hold is unbounded (a purge of
 * many ranges), so the timeout only ever means "look again".
 *
 * FORK.  The state mapping is MADV_DONTFORK like the data: a child has
 * neither, and only destroys its inherited regions (S18), which frees
 * the child's copy of the struct vr_shm_map without unmapping or locking.
 */
#ifndef VR_SHARED_H
#define VR_SHARED_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "map/map.h"

#define VR_SHM_MAGIC 0x31766d6873727675ull /* "uvrshmv1" */
#define VR_SHM_MIN_CAP 512
#define VR_SHM_REWAIT_NS 100000000 /* the longest wait for the lock (LOST WAKEUPS) */

struct vr_shm_tail {
	uint64_t magic;
	uint64_t layout;     /* sizeof(struct vr_shm) and sizeof(struct vr_map) */
	uint64_t data_size;  /* vr_region_size() */
	uint64_t map_size;   /* data_size page-rounded: where the state starts */
	uint64_t state_size; /* bytes of the state, tail included */
	uint64_t page_size;
	uint64_t cap;   /* ranges the state holds (S31) */
	uint64_t check; /* a hash of the fields above */
};

struct vr_shm {
	uint64_t magic; /* VR_SHM_MAGIC once initialised */
	uint64_t layout;
	pthread_mutex_t lock;            /* robust, process-shared: the region lock */
	_Atomic unsigned seq;            /* the fault path's seqlock: odd while locked */
	_Atomic uint64_t oldest_age;     /* the LRU's oldest age (hint for purges) */
	_Atomic uint64_t trap_epoch;     /* bumped at every discard and restore */
	uint64_t last_age;               /* youngest age handed out (S29), under lock */
	_Atomic uint64_t nranges;        /* the file's gauges, under lock ... */
	_Atomic uint64_t volatile_bytes; /* ... read without it by vr_shared_sync */
	_Atomic uint64_t purged_bytes;
	_Atomic uint64_t repairs; /* lock holders found dead and repaired after */
	_Atomic uint64_t rewaits; /* waits for the lock that ran out (LOST WAKEUPS) */
	/* an unmark that fills holes, under lock: [unmark_lo, unmark_hi)
	 * from before the first fill until the records are trimmed; a
	 * repair completes it (DEATH) */
	_Atomic uint64_t unmark_lo, unmark_hi;
	/* the cooperative guard protocol's block (S32, where userfaultfd is
	 * refused): all zero in a new file */
	uint8_t coop[4096] __attribute__((aligned(64)));
	struct vr_map map __attribute__((aligned(64)));
	/* the map's fixed storage follows */
};

/* one per file and process: the state mapping, shared by the regions of
 * that file in this process (process-wide list under vr_global_lock) */
struct vr_shm_map {
	struct vr_shm_map *next;
	struct vr_shm *shm;
	size_t state_size;
	dev_t dev;
	ino_t ino;
	unsigned refs;
	unsigned fork_gen;
};

struct vr_region;

/* the layout a file of data_size bytes gets (vr_region_new) */
void vr_shared_layout(uint64_t data_size, struct vr_shm_tail *t);
/* is fd a shared memfd?  1 (and *t filled), 0, or -errno */
int vr_shared_probe(int fd, const struct stat *st, struct vr_shm_tail *t);
/* a new shared memfd for size data bytes: created, sized, its state
 * initialised, every data page present (uffd traps holes), sealed.
 * Returns the fd or -errno. */
int vr_shared_create(const char *name, size_t size, struct vr_shm_tail *t);
/* this process's mapping of the state of fd (mapped now, or the one a
 * region of the same file already has); 0 or -errno */
int vr_shared_get(int fd, const struct stat *st, const struct vr_shm_tail *t,
		  struct vr_shm_map **out);
void vr_shared_put(struct vr_shm_map *sm, bool inherited);
/* shm_lock (VR_RANK_SHM) across fork, registered by lib.c */
extern const struct vr_atfork vr_shared_atfork;

/* the region lock of a shared region (vr_region_lock without the seq
 * bump when raw): repairs after a dead holder */
void vr_shared_lock(struct vr_region *r, bool raw);
void vr_shared_unlock(struct vr_region *r, bool raw);
/* the lock taken raw if free (repairing as vr_shared_lock), else -EBUSY */
int vr_shared_trylock(struct vr_region *r);
/* brings this region's share of the ctx gauges up to the file's (lock
 * held) */
void vr_shared_sync(struct vr_region *r);
/* the unmark of [a, b) under the lock (region.c sets it when it joins a
 * shared file: repair completes an unmark cut short with it) */
extern int (*vr_shared_unmark_fn)(struct vr_region *r, uint64_t a, uint64_t b);
/* what the process's memory cgroup can still charge, UINT64_MAX for no
 * limit (lib.c sets it from the monitor's limit discovery; unset: no
 * check): vr_shared_create commits every page, and a charge beyond a
 * cgroup's limit runs its OOM killer instead of failing */
extern uint64_t (*vr_shared_headroom_fn)(void);

#endif
