/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * callback.c - waiting for application callbacks in flight
 *
 * vr_region_set_fault_handler() and vr_set_log_fn() promise that once
 * they return, the function they replaced is not running and will not be
 * called again (so "set(r, NULL, NULL); free(arg)" is safe).  The fault
 * path reads the handler without a lock, so the setter must wait for the
 * calls that may have read the old one.  This is the registry's epoch
 * scheme (registry.c) with its own counters: a call site enters a section
 * (counter of the current epoch parity, sharded per thread), reads the
 * function pointer, calls it, leaves; the setter publishes the new pointer,
 * then flips the epoch twice and waits for the counters of the parity it
 * left to drain.
 *
 * The counters are process-wide, never in the region: a fault handler may
 * destroy its own region before it returns (S15), and leaving the section
 * must not touch freed memory.
 *
 * A setter called from inside a callback (this thread is in a section)
 * does not wait: two handlers replacing handlers in two threads would
 * otherwise wait for each other.  The header says so.
 *
 * Async-signal-safe: enter/leave are atomics and TLS; synchronize only
 * yields.
 */
#define _GNU_SOURCE
#include <sched.h>

#include "private.h"

#define NSHARDS 16
static _Atomic unsigned long epoch;
static struct {
	_Atomic long n[2];
} __attribute__((aligned(64))) readers[NSHARDS];
static _Atomic unsigned next_shard;
static __thread struct {
	unsigned shard; /* 1-based; 0 = not assigned yet */
	long mine[2];   /* sections this thread is in, per epoch parity */
} tls __attribute__((tls_model("initial-exec")));

static unsigned my_shard(void)
{
	if (!tls.shard)
		tls.shard = atomic_fetch_add(&next_shard, 1) % NSHARDS + 1;
	return tls.shard - 1;
}

unsigned long vr_cb_enter(void)
{
	unsigned long e = atomic_load(&epoch);
	atomic_fetch_add(&readers[my_shard()].n[e & 1], 1);
	tls.mine[e & 1]++;
	return e;
}

void vr_cb_leave(unsigned long e)
{
	tls.mine[e & 1]--;
	atomic_fetch_sub(&readers[my_shard()].n[e & 1], 1);
}

void vr_cb_synchronize(void)
{
	if (tls.mine[0] || tls.mine[1])
		return; /* called from a callback: see above */
	for (int i = 0; i < 2; i++) {
		unsigned long e = atomic_fetch_add(&epoch, 1);
		for (int s = 0; s < NSHARDS; s++)
			while (atomic_load(&readers[s].n[e & 1]) != 0)
				sched_yield();
	}
}

void vr_cb_atfork_child(void)
{
	/* only the forking thread exists: its own sections stay counted */
	for (int s = 0; s < NSHARDS; s++) {
		atomic_store(&readers[s].n[0], 0);
		atomic_store(&readers[s].n[1], 0);
	}
	if (tls.mine[0] || tls.mine[1]) {
		atomic_store(&readers[my_shard()].n[0], tls.mine[0]);
		atomic_store(&readers[my_shard()].n[1], tls.mine[1]);
	}
}
