/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * acct.h - what units report and ctx and the purge engine read: the
 * sharded gauges (no function, no lock)
 */
#ifndef VR_ACCT_H
#define VR_ACCT_H

#include <stdatomic.h>
#include <stdint.h>

/*
 * Gauges (ranges, unpurged and purged volatile bytes) are sharded: each
 * region adds to one of VR_NSHARDS cache-line-sized shards of its ctx,
 * chosen round-robin at creation, and readers sum the shards.  Two
 * threads working on two regions then never bounce a shared cache line
 * (S16: no serialization between regions in the intact case).
 */
#define VR_NSHARDS 16
struct vr_shard {
	_Atomic uint64_t ranges, volatile_bytes, purged_bytes;
	_Atomic int64_t objects; /* live objects (obj.c) */
} __attribute__((aligned(64)));

enum vr_gauge { VR_G_RANGES, VR_G_VOLATILE, VR_G_PURGED };

#endif
