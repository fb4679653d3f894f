/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * epoch.h - the reader-epoch scheme (a tiny purpose-built RCU) shared by
 * the address registry and the callback sections.
 *
 * A reader enters a section: it increments the counter of the current
 * epoch's parity in its shard, reads what it needs, leaves (decrements
 * the same counter).  A writer publishes its change, then flips the epoch
 * twice and waits, each time, for the counters of the parity it left to
 * drain; after that no reader can still see the old state.  Counters are
 * sharded (one 64-byte line each) so that threads entering sections do not
 * bounce one cache line; a thread's shard is one initial-exec TLS index,
 * handed out on its first section, shared by every epoch.  All accesses
 * are seq_cst C11 atomics, which ThreadSanitizer understands.
 *
 * Async-signal-safe: enter/leave are atomics and TLS; synchronize only
 * yields.  A writer called while its own thread is inside a section of
 * the same epoch would wait for itself: callers that can be (callback.c)
 * check that first.
 */
#ifndef VR_EPOCH_H
#define VR_EPOCH_H

#include <stdatomic.h>

#define VR_EPOCH_SHARDS 16

struct vr_epoch {
	_Atomic unsigned long epoch;
	struct {
		_Atomic long n[2];
	} __attribute__((aligned(64))) readers[VR_EPOCH_SHARDS];
};

/* 1-based shard index of this thread; 0 = not assigned yet */
extern __thread unsigned vr_epoch_tls_shard __attribute__((tls_model("initial-exec")));
extern _Atomic unsigned vr_epoch_next_shard;

static inline unsigned vr_epoch_shard(void)
{
	unsigned s = vr_epoch_tls_shard;
	if (!s) {
		s = atomic_fetch_add(&vr_epoch_next_shard, 1) % VR_EPOCH_SHARDS + 1;
		vr_epoch_tls_shard = s;
	}
	return s - 1;
}

/* the counter a section of the current epoch increments and decrements */
static inline _Atomic long *vr_epoch_counter(struct vr_epoch *ep, unsigned long e)
{
	return &ep->readers[vr_epoch_shard()].n[e & 1];
}

static inline unsigned long vr_epoch_enter(struct vr_epoch *ep)
{
	unsigned long e = atomic_load(&ep->epoch);
	atomic_fetch_add(vr_epoch_counter(ep, e), 1);
	return e;
}

static inline void vr_epoch_leave(struct vr_epoch *ep, unsigned long e)
{
	atomic_fetch_sub(vr_epoch_counter(ep, e), 1);
}

/* waits until no section entered before this call is still running */
void vr_epoch_synchronize(struct vr_epoch *ep);
/* in a fork child (only the forking thread exists): every counter to 0,
 * then this thread's own open sections (mine[parity], or NULL: none) */
void vr_epoch_reset(struct vr_epoch *ep, const long *mine);

#endif
