/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* epoch.c - the writer side of the reader-epoch scheme (epoch.h) */
#define _GNU_SOURCE
#include <sched.h>
#include <stddef.h>

#include "base/epoch.h"

__thread unsigned vr_epoch_tls_shard __attribute__((tls_model("initial-exec")));
_Atomic unsigned vr_epoch_next_shard;

void vr_epoch_synchronize(struct vr_epoch *ep)
{
	for (int i = 0; i < 2; i++) {
		unsigned long e = atomic_fetch_add(&ep->epoch, 1);
		for (int s = 0; s < VR_EPOCH_SHARDS; s++)
			while (atomic_load(&ep->readers[s].n[e & 1]) != 0)
				sched_yield();
	}
}

void vr_epoch_reset(struct vr_epoch *ep, const long *mine)
{
	for (int s = 0; s < VR_EPOCH_SHARDS; s++) {
		atomic_store(&ep->readers[s].n[0], 0);
		atomic_store(&ep->readers[s].n[1], 0);
	}
	if (mine && (mine[0] || mine[1])) {
		atomic_store(&ep->readers[vr_epoch_shard()].n[0], mine[0]);
		atomic_store(&ep->readers[vr_epoch_shard()].n[1], mine[1]);
	}
}
