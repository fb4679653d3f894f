/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* lib.c - assembling the library: one-time init, fork hooks, trap backend
 * choice, the monitor and the fault handler around vr_ctx_create/free.
 * The top of the module graph: it may call every module, none calls it. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "vrange.h"
#include "base/inject.h"
#include "base/lock.h"
#include "base/sys.h"
#include "base/age.h"
#include "base/log.h"
#include "mem/mem.h"
#include "fault.h"
#include "monitor/monitor.h"
#include "mem/mem-shared.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void global_init(void)
{
	vr_log_init();
	vr_age_init();
	vr_huge_init();
	vr_fi_init();
	vr_pg_shift = (unsigned)__builtin_ctzl((unsigned long)sysconf(_SC_PAGESIZE));
	/* before vr_fork_setup (which adds base's own) */
	vr_atfork_add(&vr_shared_atfork);
	vr_atfork_add(&vr_purge_atfork);
	vr_atfork_add(&vr_fault_atfork);
	/* a shared region's commit checks the cgroup limit first (mem
	 * cannot call the monitor, which sits above it) */
	__atomic_store_n(&vr_shared_headroom_fn, mon_limit_headroom, __ATOMIC_RELAXED);
}

/* ---- the live contexts ----
 * A second vr_ctx_destroy of one ctx used to hang on its freed locks.
 * Every ctx that vr_ctx_new returned is listed here until vr_ctx_destroy
 * takes it out, first thing, so a destroy of anything else (twice, never
 * made, or made in a parent and destroyed twice in a fork child, which
 * inherits the list) aborts with a message instead of touching freed
 * memory.  vr_global_lock held; the list is copied into fork children
 * with the rest of the heap. */
static struct vr_ctx **live_ctxs;
static size_t nlive, cap_live;

static int live_add(struct vr_ctx *c)
{
	if (nlive == cap_live) {
		size_t cap = cap_live ? 2 * cap_live : 16;
		struct vr_ctx **a = realloc(live_ctxs, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		live_ctxs = a;
		cap_live = cap;
	}
	live_ctxs[nlive++] = c;
	return 0;
}

static bool live_remove(struct vr_ctx *c)
{
	for (size_t i = nlive; i-- > 0;)
		if (live_ctxs[i] == c) {
			live_ctxs[i] = live_ctxs[--nlive];
			if (nlive == 0) { /* no block left behind (S15) */
				free(live_ctxs);
				live_ctxs = NULL;
				cap_live = 0;
			}
			return true;
		}
	return false;
}

static void live_forget(struct vr_ctx *c)
{
	vr_lock(&vr_global_lock, VR_RANK_GLOBAL);
	bool ok = live_remove(c);
	vr_unlock(&vr_global_lock);
	if (!ok) {
		char msg[160];
		snprintf(msg, sizeof(msg),
			 "libvrange: vr_ctx_destroy(%p): not a live ctx (destroyed twice?)\n",
			 (void *)c);
		vr_log_raw(msg);
		abort();
	}
}

_export_ int vr_ctx_new(unsigned flags, struct vr_ctx **out)
{
	VR_API_ENTRY;
	VR_API_NOCANCEL; /* the monitor's files, the trap probe */
	if (!out || (flags & ~VR_CTX_NO_MONITOR))
		return -EINVAL;
	pthread_once(&init_once, global_init);
	int err = vr_fork_setup();
	if (err < 0)
		return err;
	vr_lock(&vr_global_lock, VR_RANK_GLOBAL);
	err = vr_trap_init();
	vr_unlock(&vr_global_lock);
	if (err < 0)
		return err;

	struct vr_ctx *c;
	err = vr_ctx_create(flags, &c);
	if (err < 0)
		return err;
	vr_lock(&vr_global_lock, VR_RANK_GLOBAL);
	err = live_add(c);
	vr_unlock(&vr_global_lock);
	if (err < 0)
		goto fail_live;
	if (!(flags & VR_CTX_NO_MONITOR)) {
		err = vr_monitor_start(c);
		if (err < 0)
			goto fail;
	}
	/* last: a failing vr_ctx_new installs nothing (S13) */
	vr_purge_init();
	err = vr_fault_install();
	if (err < 0) {
		vr_monitor_stop(c, false);
		goto fail;
	}
	*out = c;
	return 0;
fail:
	vr_lock(&vr_global_lock, VR_RANK_GLOBAL);
	live_remove(c);
	vr_unlock(&vr_global_lock);
fail_live:
	vr_ctx_free(c, false);
	return err;
}

_export_ void vr_ctx_destroy(struct vr_ctx *c)
{
	VR_API_ENTRY;
	VR_API_NOCANCEL; /* the monitor's wake-up and join */
	if (!c)
		return;
	live_forget(c); /* aborts unless c is live: nothing of it is read before */
	bool inherited = vr_inherited_ctx(c);
	vr_monitor_stop(c, inherited);
	vr_ctx_free(c, inherited);
}
