/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fork.c - keep the library usable in a child of fork() (API S18)
 *
 * Global locks are taken in prepare and released (parent) or re-created
 * (child), so a fork from any thread at any moment leaves them usable.
 * Per-object locks are never taken in the child for inherited objects:
 * vr_fork_gen changes in the child, which makes every object created
 * before the fork "inherited" (fork.h).  The modules' hooks come from
 * lib.c (vr_atfork_add): this file names none of them.
 */
#include <stdlib.h>

#include "vrange.h"
#include "base/fork.h"
#include "base/lock.h"
#include "base/log.h"
#include "base/callback.h"
#include "base/registry.h"

_Atomic unsigned vr_fork_gen;
pthread_mutex_t vr_global_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int once_err;

/* the hooks, sorted by rank (stable: one rank in the order added) */
static const struct vr_atfork *hooks[VR_ATFORK_MAX];
static unsigned nhooks;

void vr_atfork_add(const struct vr_atfork *h)
{
	if (nhooks == VR_ATFORK_MAX) {
		vr_log_raw("libvrange: too many fork hooks\n");
		abort();
	}
	unsigned i = nhooks++;
	for (; i > 0 && hooks[i - 1]->rank > h->rank; i--)
		hooks[i] = hooks[i - 1];
	hooks[i] = h;
}

/* parent and child: ranks descending, each rank's hooks in order added */
static void run_down(bool child)
{
	for (unsigned hi = nhooks; hi > 0;) {
		unsigned lo = hi;
		while (lo > 0 && hooks[lo - 1]->rank == hooks[hi - 1]->rank)
			lo--;
		for (unsigned i = lo; i < hi; i++) {
			void (*fn)(void) = child ? hooks[i]->child : hooks[i]->parent;
			if (fn)
				fn();
		}
		hi = lo;
	}
}

/* Every process-wide lock of the library, in rank order (lock.h):
 * vr_global_lock, then the hooks' locks (shared files' shm_lock, the
 * registry's wlock, log_lock).  Per-ctx and per-region locks are never
 * taken in the child for inherited objects (fork.h).
 * Once-flags: pthread_once (lib.c's global init, setup() here) is safe:
 * glibc re-runs an initializer that a fork interrupted in another thread.
 * Lock-free state with counters (registry readers, callback sections) is
 * reset in the child, where only the forking thread exists.
 * Locks of libc that fork does not reset: glibc makes malloc and stdio
 * usable in the child, not the dynamic loader, whose lock a child inherits
 * held if any parent thread was in dl_iterate_phdr, dladdr or dlopen at
 * the fork.  So no code a child may run calls those (the monitor finds its
 * code segment from __ehdr_start; only the VRANGE_DEBUG backtrace before
 * a SIGBUS unwinds through the loader). */
static void prepare(void)
{
	pthread_mutex_lock(&vr_global_lock);
	for (unsigned i = 0; i < nhooks; i++)
		if (hooks[i]->prepare)
			hooks[i]->prepare();
}

static void parent(void)
{
	run_down(false);
	pthread_mutex_unlock(&vr_global_lock);
}

static void child(void)
{
	run_down(true);
	pthread_mutex_init(&vr_global_lock, NULL);
	atomic_fetch_add(&vr_fork_gen, 1);
}

static const struct vr_atfork registry_hook = { VR_RANK_REGISTRY, vr_registry_atfork_prepare,
						vr_registry_atfork_parent,
						vr_registry_atfork_child };
static const struct vr_atfork log_hook = { VR_RANK_LOG, vr_log_atfork_prepare, vr_log_atfork_parent,
					   vr_log_atfork_child };
static const struct vr_atfork callback_hook = { 0, NULL, NULL, vr_cb_atfork_child };

static void setup(void)
{
	vr_atfork_add(&registry_hook);
	vr_atfork_add(&log_hook);
	vr_atfork_add(&callback_hook);
	once_err = -pthread_atfork(prepare, parent, child);
}

int vr_fork_setup(void)
{
	pthread_once(&once, setup);
	return once_err;
}
