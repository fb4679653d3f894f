/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* lock.c - the per-thread held-lock stack and the lock-order check (lock.h) */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "vrange.h"
#include "base/lock.h"
#include "base/lock.h"
#include "base/log.h"

__thread struct vr_held vr_tls_held __attribute__((tls_model("initial-exec")));

#ifndef NDEBUG
#define VR_RANK_NAME_(id, name) name,
static const char *const rank_names[] = { "?", VR_LOCK_RANKS(VR_RANK_NAME_) };
#undef VR_RANK_NAME_
_Static_assert(VR_ARRAY_SIZE(rank_names) == VR_RANK_NR, "a lock rank without its name");

static const char *rank_name(unsigned rank)
{
	return rank < VR_RANK_NR ? rank_names[rank] : "?";
}

void vr_lock_order_violation(const pthread_mutex_t *m, unsigned rank, int top)
{
	char buf[256];
	const void *held = top >= 0 ? (const void *)vr_tls_held.lock[top] : NULL;
	unsigned hrank = top >= 0 ? vr_tls_held.rank[top] : 0;
	if (rank)
		snprintf(buf, sizeof(buf),
			 "vrange: lock order violation: taking %s lock %p while holding %s lock "
			 "%p\n",
			 rank_name(rank), (const void *)m, rank_name(hrank), held);
	else
		snprintf(buf, sizeof(buf),
			 "vrange: lock order violation: releasing %p, innermost held is %p\n",
			 (const void *)m, held);
	vr_log_raw(buf);
	abort();
}
#endif
