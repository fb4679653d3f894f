/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * callback.c - waiting for application callbacks in flight
 *
 * vr_region_set_fault_handler() and vr_set_log_fn() promise that once
 * they return, the function they replaced is not running and will not be
 * called again (so "set(r, NULL, NULL); free(arg)" is safe).  The fault
 * path reads the handler without a lock, so the setter must wait for the
 * calls that may have read the old one.  The reader-epoch scheme of
 * epoch.h, with its own epoch: a call site enters a section, reads the
 * function pointer, calls it, leaves; the setter publishes the new
 * pointer, then synchronizes.
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

#include "vrange.h"
#include "base/epoch.h"
#include "base/callback.h"
#include "base/lock.h"

/* Log functions have an epoch of their own.  With one epoch for every
 * kind, a purge handler that called vr_set_log_fn (or a setter of a
 * fault handler) did not wait for another thread's call of the function
 * it replaced, as vr_set_log_fn promises it does.  A log function calls
 * no vr_* function, so a thread never waits for one that waits for it. */
enum { CB_HANDLER, CB_LOG };
static struct vr_epoch ep[2];
/* sections this thread is in, per kind and epoch parity (the shard index
 * is epoch.h's, shared with the registry) */
static __thread long mine[2][2] __attribute__((tls_model("initial-exec")));

/* no cancellation inside a section (base/lock.h, NO CANCELLATION): a
 * thread cancelled in a handler's own code never left its section */
static unsigned long enter(int k)
{
	vr_nocancel_enter();
	unsigned long e = vr_epoch_enter(&ep[k]);
	mine[k][e & 1]++;
	return e;
}

static void leave(int k, unsigned long e)
{
	mine[k][e & 1]--;
	vr_epoch_leave(&ep[k], e);
	vr_nocancel_leave();
}

static void synchronize(int k)
{
	if (mine[k][0] || mine[k][1])
		return; /* called from a callback of this kind: see above */
	vr_epoch_synchronize(&ep[k]);
}

unsigned long vr_cb_enter(void)
{
	return enter(CB_HANDLER);
}

void vr_cb_leave(unsigned long e)
{
	leave(CB_HANDLER, e);
}

void vr_cb_synchronize(void)
{
	synchronize(CB_HANDLER);
}

unsigned long vr_cb_log_enter(void)
{
	return enter(CB_LOG);
}

void vr_cb_log_leave(unsigned long e)
{
	leave(CB_LOG, e);
}

void vr_cb_log_synchronize(void)
{
	synchronize(CB_LOG);
}

void vr_cb_atfork_child(void)
{
	/* only the forking thread exists: its own sections stay counted */
	vr_epoch_reset(&ep[CB_HANDLER], mine[CB_HANDLER]);
	vr_epoch_reset(&ep[CB_LOG], mine[CB_LOG]);
}

/* a reader's turns while a slot is odd: a set takes three stores, so
 * only a setter's thread gone in a fork child keeps it odd this long */
#define SLOT_TRIES 100000

/* the slot this thread is writing (see CALLBACK SLOTS in callback.h) */
static __thread struct vr_cb_slot *setting __attribute__((tls_model("initial-exec")));

void vr_cb_slot_set(struct vr_cb_slot *s, vr_cb_any fn, void *arg)
{
	uint64_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
	for (;;) {
		if (!(q & 1) &&
		    atomic_compare_exchange_weak_explicit(&s->seq, &q, q + 1, memory_order_acquire,
							  memory_order_relaxed))
			break;
		if (q & 1) {
			sched_yield(); /* another setter writes */
			q = atomic_load_explicit(&s->seq, memory_order_relaxed);
		}
	}
	setting = s;
	atomic_thread_fence(memory_order_release); /* odd before the writes */
	atomic_store_explicit(&s->fn, fn, memory_order_relaxed);
	atomic_store_explicit(&s->arg, fn ? arg : NULL, memory_order_relaxed);
	atomic_store_explicit(&s->seq, q + 2, memory_order_release);
	setting = NULL;
}

vr_cb_any vr_cb_slot_get(struct vr_cb_slot *s, void **arg)
{
	for (unsigned i = 0;; i++) {
		uint64_t q = atomic_load_explicit(&s->seq, memory_order_acquire);
		if (q & 1) {
			/* interrupted our own set, or a set that never ends (its
			 * thread did not survive a fork): no function */
			if (setting == s || i > SLOT_TRIES)
				break;
			if (i >= 64)
				sched_yield();
			continue;
		}
		vr_cb_any fn = atomic_load_explicit(&s->fn, memory_order_relaxed);
		void *a = atomic_load_explicit(&s->arg, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&s->seq, memory_order_relaxed) == q) {
			*arg = a;
			return fn;
		}
	}
	*arg = NULL;
	return NULL;
}
