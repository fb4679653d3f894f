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

static struct vr_epoch ep;
/* sections this thread is in, per epoch parity (the shard index is
 * epoch.h's, shared with the registry) */
static __thread long mine[2] __attribute__((tls_model("initial-exec")));

unsigned long vr_cb_enter(void)
{
	unsigned long e = vr_epoch_enter(&ep);
	mine[e & 1]++;
	return e;
}

void vr_cb_leave(unsigned long e)
{
	mine[e & 1]--;
	vr_epoch_leave(&ep, e);
}

void vr_cb_synchronize(void)
{
	if (mine[0] || mine[1])
		return; /* called from a callback: see above */
	vr_epoch_synchronize(&ep);
}

void vr_cb_atfork_child(void)
{
	/* only the forking thread exists: its own sections stay counted */
	vr_epoch_reset(&ep, mine);
}
