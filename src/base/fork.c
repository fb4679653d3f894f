/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fork.c - keep the library usable in a child of fork() (API S18)
 *
 * Global locks are taken in prepare and released (parent) or re-created
 * (child), so a fork from any thread at any moment leaves them usable.
 * Per-object locks are never taken in the child for inherited objects:
 * vr_fork_gen changes in the child, which makes every object created
 * before the fork "inherited" (see private.h).
 */
#include "private.h"
#include "shared.h"

_Atomic unsigned vr_fork_gen;
pthread_mutex_t vr_global_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int once_err;

/* Every process-wide lock of the library, in rank order (lock.h):
 * vr_global_lock, shared.c's shm_lock, the registry's wlock, log_lock.  Per-ctx and per-region
 * locks are never taken in the child for inherited objects (private.h).
 * Once-flags: pthread_once (ctx.c's global init, setup() here) is safe:
 * glibc re-runs an initializer that a fork interrupted in another thread.
 * Lock-free state with counters (registry readers, callback sections) is
 * reset in the child, where only the forking thread exists. */
static void prepare(void)
{
	pthread_mutex_lock(&vr_global_lock);
	vr_shared_atfork_prepare();
	vr_registry_atfork_prepare();
	vr_log_atfork_prepare();
}

static void parent(void)
{
	vr_log_atfork_parent();
	vr_registry_atfork_parent();
	vr_shared_atfork_parent();
	pthread_mutex_unlock(&vr_global_lock);
}

static void child(void)
{
	vr_log_atfork_child();
	vr_registry_atfork_child();
	vr_shared_atfork_child();
	vr_purge_atfork_child();
	vr_cb_atfork_child();
	vr_fault_atfork_child();
	pthread_mutex_init(&vr_global_lock, NULL);
	atomic_fetch_add(&vr_fork_gen, 1);
}

static void setup(void)
{
	once_err = -pthread_atfork(prepare, parent, child);
}

int vr_fork_setup(void)
{
	pthread_once(&once, setup);
	return once_err;
}
