/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ctx.h - what a context owns and enforces (ctx.c, ctx-group.c): struct
 * vr_ctx; what its purge_lock and lock protect is written in base/lock.h
 * (LOCKING)
 */
#ifndef VR_CTX_H
#define VR_CTX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "vrange.h"
#include "base/acct.h"
#include "base/callback.h"
#include "base/fork.h"
#include "base/macro.h"
#include "base/source.h"
#include "purge.h"

struct vr_monitor;
struct vr_objs;

struct vr_ctx {
	pthread_mutex_t purge_lock;
	pthread_mutex_t lock;
	struct vr_region *regions; /* protected by lock; doubly linked */
	size_t nregions;           /* protected by lock */
	struct vr_cand *heap;      /* protected by purge_lock: room for every region
				      and every group's logs */
	size_t heap_cap;           /* protected by purge_lock */
	/* object groups (S35): written under purge_lock and lock, read under
	 * either; groups[0] is the default group (created with the ctx) */
	struct vr_objs **groups;
	/* the purge sources' tables (base/source.h): a region, a group; immutable */
	const struct vr_source_ops *region_src, *group_src;
	size_t ngroups, groups_cap;
	_Atomic bool limit_stuck; /* the last purge could not reach its goal */
	_Atomic bool purging;     /* a ctx-wide purge run is under way ... */
	_Atomic uint64_t adds;    /* ... and marks added purgeable ranges meanwhile */
	unsigned fork_gen;        /* vr_fork_gen at creation; immutable */
	unsigned flags;           /* immutable */

	/* gauges: sharded atomics, updated under the region lock that
	 * changed them, read without locks (vr_ctx_gauge) */
	struct vr_shard shards[VR_NSHARDS];
	_Atomic unsigned next_shard;
	/* cumulative counters: slow paths only (purge, fault, pressure) */
	_Atomic uint64_t reclaimed_bytes, purges, faults, pressure_events, skipped;
	_Atomic uint64_t nregions_stat;
	_Atomic unsigned nshared;      /* shared regions (S29: gauges synced) */
	_Atomic uint64_t skipped_busy; /* S32: purges skipped, a mapper did not arm */
	_Atomic uint64_t repairs;      /* S30: shared states repaired after a death */
	_Atomic size_t limit;          /* 0 = none */

	struct vr_monitor *monitor;       /* owned by monitor.c; NULL if none */
	struct vr_objs *objs;             /* obj.c: the default group; immutable */
	struct vr_cb_slot obj_fault;      /* vr_obj_fault_fn of every group's objects (S24) */
	_Atomic int monitor_source;       /* enum vr_monitor_source: the pressure source */
	_Atomic unsigned monitor_sources; /* bit (1 << source) per source running */

	/* S34, written by the monitor's limit watcher (monitor-limit.c) */
	_Atomic size_t budget;          /* 0 = none; else keep volatile bytes <= it */
	_Atomic uint64_t memory_limit;  /* the limit watched, 0 = none */
	_Atomic int memory_limit_scope; /* enum vr_limit_scope of that limit */
	_Atomic uint64_t limit_events, limit_purges, limit_latency_ns;
	_Atomic uint64_t limit_usage, limit_file; /* A3: usage counted, cache left out */
};

/* S10 + S34: what vr_mark keeps the unpurged volatile bytes within: the
 * smaller of the application's limit and the monitor's budget, 0 = none.
 * Two relaxed loads, no system call. */
static inline size_t vr_ctx_effective_limit(struct vr_ctx *c)
{
	size_t a = atomic_load_explicit(&c->limit, memory_order_relaxed);
	size_t b = atomic_load_explicit(&c->budget, memory_order_relaxed);
	if (!a || (b && b < a))
		return b;
	return a;
}

/* something may be purgeable again: clear the "nothing purgeable" hint
 * so that the next limit check does not skip (written only when set, so
 * that calls on different units do not share a written cache line) */
static inline void vr_ctx_unstick(struct vr_ctx *c)
{
	if (atomic_load_explicit(&c->limit_stuck, memory_order_relaxed))
		atomic_store_explicit(&c->limit_stuck, false, memory_order_relaxed);
}

/* vr_mark added a purgeable range.  A ctx-wide purge run may have passed
 * its region already (or snapshotted the regions before it), run dry and
 * be about to set the "nothing purgeable" hint after this thread read it:
 * then no later mark's limit check would take the range.  Dekker's way
 * against that, with purge.c (vr_purge_run): the range is published, the
 * fence, then purging is read; the run sets purging, the fence, then
 * reads the regions.  So either the run sees the range or this thread
 * sees purging and counts an add, and either the run, after setting the
 * hint, sees adds move and takes the hint back, or this thread sees the
 * hint and clears it.  Only on the adding path: an intact or inside mark
 * pays nothing.  (Sequentially consistent loads, not vr_ctx_unstick's
 * relaxed ones: the hint's read is one side of that pairing.) */
static inline void vr_ctx_added(struct vr_ctx *c)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load(&c->purging))
		atomic_fetch_add(&c->adds, 1);
	if (atomic_load(&c->limit_stuck))
		atomic_store(&c->limit_stuck, false);
}

/* a gauge: the sum of the shards (relaxed, no lock).  The sum is signed
 * and read as 0 when below: an object's bytes are added to the volatile
 * gauge after it became purgeable (obj.c; for a whole batch,
 * vr_obj_unpin_many), so a purge in another thread may take them out
 * first; a wrapped sum would read as about 2^64 and make a limit check
 * purge everything. */
static inline uint64_t vr_ctx_gauge(struct vr_ctx *c, enum vr_gauge g)
{
	uint64_t sum = 0;
	for (int i = 0; i < VR_NSHARDS; i++) {
		struct vr_shard *sh = &c->shards[i];
		sum += atomic_load_explicit(g == VR_G_RANGES     ? &sh->ranges
					    : g == VR_G_VOLATILE ? &sh->volatile_bytes
								 : &sh->purged_bytes,
					    memory_order_relaxed);
	}
	return (int64_t)sum > 0 ? sum : 0;
}

/* a fork child, an inherited ctx: were its two locks free at the fork?
 * The purge heap and the group array are changed under both; otherwise
 * they may be half-changed, and are left (base/fork.h) */
static inline bool vr_ctx_fork_whole(struct vr_ctx *c)
{
	return vr_fork_was_unlocked(&c->purge_lock) && vr_fork_was_unlocked(&c->lock);
}
/* a context without monitor, trap backend or handler (lib.c adds them) */
int vr_ctx_create(unsigned flags, struct vr_ctx **out) _nonnull_();
/* its regions, its object arena, its locks and memory (inherited: only
 * what a fork child may touch, see vr_inherited_region) */
void vr_ctx_free(struct vr_ctx *c, bool inherited) _nonnull_();
/* purge_lock taken (-EDEADLK if this thread holds it or c->lock), shared
 * gauges synced, then vr_purge_run, purge_lock released, then the purge
 * handlers called (vr_obj_notify), repeated while the notification batch
 * filled up: bytes reclaimed or -errno.  only: a group's own purge (its
 * objects, its gauge for VR_PURGE_VOLATILE), NULL: the whole ctx */
ssize_t vr_ctx_purge_in(struct vr_ctx *c, struct vr_objs *only, enum vr_purge_goal goal, uint64_t n)
	_nonnull_(1);
static inline ssize_t vr_ctx_purge_lru(struct vr_ctx *c, enum vr_purge_goal goal, uint64_t n)
{
	return vr_ctx_purge_in(c, NULL, goal, n);
}
void vr_ctx_sync_shared(struct vr_ctx *c) _nonnull_();

static inline bool vr_inherited_ctx(const struct vr_ctx *c)
{
	return vr_gen_inherited(c->fork_gen);
}

#endif
