/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * mem.h - a region's memory: trap backends, discard/restore, trap
 * generations (mem-trap*.c, mem-pages.c); memory kinds (mem-kind.h) and
 * the shared file state (mem-shared.h) are the other parts of the module.
 *
 * The module's one mutual pair: the guard-protocol backend
 * (mem-trap-coop.c) takes a shared file's lock (mem-shared.c), and the
 * shared file's repair re-arms through that backend.  Both are inside
 * mem/, so no other module depends on the pair.
 */
#ifndef VR_MEM_H
#define VR_MEM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "vrange.h"
#include "base/acct.h"
#include "base/fork.h"
#include "base/macro.h"
#include "map/map.h"

/*
 * SEQLOCK (the fault path's read of a region's map)
 *
 *   The SIGSEGV handler (fault.c; and its SIGBUS entry under the
 *   userfaultfd backend, which shares the path) takes no lock in the
 *   common case.  It
 *   reads the region's map under a seqlock: region->seq is odd while a
 *   thread holds the region lock (vr_region_lock/unlock bump it), and a
 *   reader retries until it read the map with the same even seq before
 *   and after.  Map nodes and records live in the map's arenas until the
 *   region is destroyed, so a reader racing a writer follows stale but
 *   valid pointers, bounded and then discarded (the walk and its rules:
 *   vr_map_lookup_racy in map/map.h).  While a purge holds the lock
 *   (trap armed, hole being punched) a faulting thread waits for the seq
 *   to turn even: it then sees the range purged, or intact with the trap
 *   removed.  A reader that keeps colliding with writers (64 tries) takes
 *   the region lock instead, so a fault never starves behind a busy
 *   region; it never does so for a lock its own thread holds (vr_held):
 *   an asynchronous signal handler touching volatile memory while its
 *   thread holds that region's lock gets SIGBUS instead.
 */
struct vr_kind_ops;
struct vr_shm;
struct vr_shm_map;
struct vr_coop_member;
struct vr_ctx;

struct vr_region {
	pthread_mutex_t lock;
	struct vr_map *map; /* &own_map, or a shared state's (shared.h);
					  protected by the region lock */
	struct vr_map own_map;
	vr_fault_fn fault_fn;          /* protected by lock */
	void *fault_arg;               /* protected by lock */
	struct vr_region *prev, *next; /* ctx->regions, protected by ctx->lock */
	struct vr_ctx *ctx;            /* immutable */
	uint8_t *base;                 /* immutable */
	size_t size;                   /* immutable: bytes given at creation */
	size_t map_size;               /* immutable: page rounded */
	int fd;                        /* immutable; -1: anonymous */
	unsigned fork_gen;             /* immutable */
	_Atomic uint64_t oldest_age;   /* LRU head's age or UINT64_MAX (hint) */
	_Atomic uint64_t trap_gen;     /* new unique value at every arm/disarm in the
					  region (vr_trap_gen_bump) */
	_Atomic unsigned seq;          /* seqlock for the fault path: odd while locked */
	struct vr_shard *shard;        /* immutable: where this region's gauges go */
	uint64_t last_age;             /* protected by lock: youngest age handed out */
	bool lru_added;                /* protected by lock: a range joined the LRU */
	_Atomic bool used_prot;        /* guard backend: some range used mprotect */
	_Atomic bool fd_out;           /* a memfd the application has (vr_region_fd,
					* vr_region_from_fd): other mappings of the file
					* may exist (mem-pages.c, MARKERS LOST TO A PUNCH) */
	dev_t dev;                     /* immutable: the memfd's st_dev ... */
	ino_t ino;                     /* ... and st_ino (S33: one region per file) */
	uint64_t nranges, volatile_bytes, purged_bytes; /* protected by lock: this
					region's share of the gauges */
	/* immutable: memfd, anonymous or adopted memory (kind.h), and the
	 * protection of its accessible pages (PROT_READ|PROT_WRITE, or with
	 * PROT_EXEC for an adopted span that had it) */
	const struct vr_kind_ops *kind;
	int prot;
	int trap_fd;                    /* immutable after attach: the uffd backend's userfaultfd */
	const struct vr_trap_ops *trap; /* immutable: how this region's pages trap */

	/* VR_REGION_SHARED (shared.h); for other regions shm is NULL and
	 * lockp/seqp point at lock/seq above */
	struct vr_shm *shm;            /* immutable: the file's state, mapped */
	struct vr_shm_map *shm_map;    /* immutable: this process's mapping of it */
	pthread_mutex_t *lockp;        /* immutable: the region lock */
	_Atomic unsigned *seqp;        /* immutable: the region's seqlock */
	struct vr_coop_member *coop_m; /* immutable after attach: the guard protocol's
					  membership (trap-coop.c), or NULL */
	bool shm_primary;              /* protected by ctx->lock: the region of its file that
					counts the file in the ctx gauges (S29) */
	bool span_lost;                /* fork child, adopted: the span was not wholly
					  inherited (registry.c, atfork) */
} __attribute__((aligned(64)));        /* regions used by different threads share no line */

static inline bool vr_inherited_region(const struct vr_region *r)
{
	return vr_gen_inherited(r->fork_gen);
}

/* ---- mem-trap.c: backends ---- */
/* How discarded pages are made to fault.  One backend per process, chosen
 * at the first vr_ctx_new and immutable afterwards.  arm/disarm take a
 * page-aligned span of r and return 0 or -errno; they are called with the
 * region lock held (purge, unmark) or on a region nobody else may use
 * (destroy), never from a signal handler. */
struct vr_trap_ops {
	int id;             /* enum vr_trap */
	const char *name;   /* VRANGE_TRAP value */
	int (*probe)(void); /* works here: 1, 0 or -errno (mem-trap.c: PROBES); NULL: always */
	int (*arm)(struct vr_region *r, void *addr, size_t len);
	int (*disarm)(struct vr_region *r, void *addr, size_t len);
	/* arming private anonymous memory also frees its pages (guard
	 * markers): the anonymous kind then needs no MADV_DONTNEED */
	bool frees_private;
	/* optional, NULL when there is nothing to do: a new region's mapping
	 * is ready (0 or -errno, the region is then not created), and the
	 * region goes away (inherited: in a fork child, no lock, see fork) */
	int (*attach)(struct vr_region *r);
	void (*detach)(struct vr_region *r, bool inherited);
};
int vr_trap_init(void); /* chooses the backend once; 0 or -errno */
/* the chosen backend; NULL before vr_trap_init */
const struct vr_trap_ops *vr_trap_ops(void);
int vr_trap_arm(struct vr_region *r, void *addr, size_t len) _nonnull_(1);
int vr_trap_disarm(struct vr_region *r, void *addr, size_t len) _nonnull_(1);
int vr_trap_attach(struct vr_region *r) _nonnull_();
void vr_trap_detach(struct vr_region *r, bool inherited) _nonnull_();
/* mprotect whatever the backend (large ranges under guard, mem-pages.c) */
int vr_trap_arm_prot(struct vr_region *r, void *addr, size_t len) _nonnull_(1);
int vr_trap_disarm_prot(struct vr_region *r, void *addr, size_t len) _nonnull_(1);
int vr_trap_current(void);
/* the backend of shared regions (S32): userfaultfd where it works, else
 * NULL (vr_region_new/from_fd then fail with -EOPNOTSUPP) */
const struct vr_trap_ops *vr_trap_shared_ops(void);
/* the ops a new region uses: shared (S27) -> vr_trap_shared_ops(); else
 * the process's backend, or under uffd the guard or mprotect one (mem-trap.c:
 * a hole may only trap a state every mapping of the file shares) */
const struct vr_trap_ops *vr_trap_region_ops(bool shared);
bool vr_trap_uffd_works(void);
/* mem-trap-coop.c: shared regions where userfaultfd is refused (S32) */
extern const struct vr_trap_ops vr_trap_coop;
void vr_trap_coop_resync_all(struct vr_region *r) _nonnull_(); /* lock held */
/* repair: every mapping traps [off, off + len) of a purged range (lock
 * held); 0, or not known trapped everywhere: do not punch */
int vr_trap_coop_rearm(struct vr_region *r, uint64_t off, uint64_t len) _nonnull_();
void vr_trap_coop_wait(struct vr_region *r) _nonnull_(); /* async-signal-safe */
/* the region goes: its share of the mprotect-trapped ranges of memfds
 * that are out (mem-pages.c) is given back */
void vr_pages_forget(struct vr_region *r) _nonnull_();
void vr_pages_atfork_child(void); /* (mem-shared.c's fork hook calls it) */
/* some page of [off, off + len) of a memfd region is in its file (a
 * mapping of a shared memfd shows the page cache, mapped here or not);
 * true also when that is not known */
bool vr_pages_in_file(struct vr_region *r, uint64_t off, uint64_t len) _nonnull_();
/* after a punch: every guard-protocol mapping arms again, pages faulted
 * in meanwhile are punched again (lock held) */
void vr_trap_coop_after_punch(struct vr_region *r, uint64_t off, uint64_t len) _nonnull_();
/* the uffd backend on a shared file: tell its guard-protocol mappers */
int vr_trap_coop_notify(struct vr_region *r, int op, uint64_t off, uint64_t len) _nonnull_();
/* mem-trap-uffd.c: the userfaultfd backend's entries */
int vr_uffd_probe(void);
int vr_probe_err(int err); /* -err for a resource shortage, else 0 */
int vr_uffd_arm(struct vr_region *r, void *addr, size_t len) _nonnull_(1);
int vr_uffd_disarm(struct vr_region *r, void *addr, size_t len) _nonnull_(1);
int vr_uffd_attach(struct vr_region *r) _nonnull_();
void vr_uffd_detach(struct vr_region *r, bool inherited) _nonnull_();

/* ---- mem-pages.c: discard and restore (the only place that arms traps
 * to free a region's pages; objects and shared-file repair punch their own) ---- */
/* discard [p0, p1) (page aligned) now: arm + punch.  0; or -errno, with
 * nothing changed (the trap undone); or VR_DISCARD_STUCK: the pages keep
 * their data but stay trapped (an undo failed), so the caller must treat
 * them as purged.  Region lock held. */
#define VR_DISCARD_STUCK 1
int vr_discard_pages(struct vr_region *r, uint64_t p0, uint64_t p1) _nonnull_();
int vr_restore_pages(struct vr_region *r, uint64_t p0, uint64_t p1) _nonnull_();
void vr_trap_gen_bump(struct vr_region *r) _nonnull_();
uint64_t vr_trap_gen_next(void); /* a process-wide unique trap generation */

#endif
