/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fork.h - keep the library usable in a child of fork() (API S18)
 *
 * FORK rules.  vr_fork_gen is bumped in the child; an object whose
 * fork_gen differs from it is "inherited" (vr_gen_inherited): in the child
 * it may only be destroyed, without taking its locks, unmapping its memory
 * or joining its threads.  Process-wide locks survive a fork because every
 * module that owns one registers a hook here: prepare takes the lock,
 * parent releases it, child re-creates it.  Lock-free state with counters
 * is reset by a child-only hook (rank 0), where only the forking thread
 * exists.  fork.c knows no module above base: lib.c registers their hooks.
 *
 * Inherited objects: their locks may be held by threads that do not exist
 * in the child, so the child never takes them; destroy frees memory and
 * closes fds without locking, unmapping (MADV_DONTFORK: nothing is
 * mapped) or joining.  A structure whose lock was held when the process
 * forked may be half-changed in the child (a list with a stale back
 * link, an array freed but its new pointer not yet stored): destroy
 * walks lists by their forward links only (ctx.c region_free: a stale
 * back link of a region list made a child free a region twice, test-fork's
 * fork_hammer 1 run in 30-90, tests/test-fork-list.c), and frees arrays
 * and maps only when vr_fork_was_unlocked() says their lock was free,
 * leaking them otherwise.
 */
#ifndef VR_FORK_H
#define VR_FORK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct vr_atfork {
	unsigned rank; /* its lock's enum vr_lock_rank; 0: child-only hook */
	void (*prepare)(void), (*parent)(void), (*child)(void); /* each may be NULL */
};

#define VR_ATFORK_MAX 16

/* lib.c's one-time init only, before vr_fork_setup; h must outlive the
 * process (a static const).  prepare: vr_global_lock, then the hooks by
 * ascending rank; parent and child: by descending rank (hooks of one rank
 * in the order added), then the global lock, then (child) ++vr_fork_gen. */
void vr_atfork_add(const struct vr_atfork *h);
/* adds base's own hooks (registry, log, callback) and registers the
 * handlers with pthread_atfork, once; 0 or -errno */
int vr_fork_setup(void);

extern _Atomic unsigned vr_fork_gen;
/* one-time setup; inherited lists in a fork child (rank VR_RANK_GLOBAL) */
extern pthread_mutex_t vr_global_lock;

/* in a fork child, for an inherited object's lock: true when nobody held
 * it at the fork (what it guards is whole), false when a thread of the
 * parent did (what it guards may be half-changed: leak it).  The child
 * takes and drops the lock; only the forking thread exists. */
static inline bool vr_fork_was_unlocked(pthread_mutex_t *m)
{
	if (pthread_mutex_trylock(m) != 0)
		return false;
	pthread_mutex_unlock(m);
	return true;
}

static inline bool vr_gen_inherited(unsigned gen)
{
	return gen != atomic_load_explicit(&vr_fork_gen, memory_order_relaxed);
}

#endif
