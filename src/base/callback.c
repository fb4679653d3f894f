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
#include "vrange.h"
#include "base/epoch.h"
#include "base/callback.h"

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

static unsigned long enter(int k)
{
	unsigned long e = vr_epoch_enter(&ep[k]);
	mine[k][e & 1]++;
	return e;
}

static void leave(int k, unsigned long e)
{
	mine[k][e & 1]--;
	vr_epoch_leave(&ep[k], e);
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
