/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lazy-objects.c - a cache of objects read without pinning: purged
 * objects are rebuilt in the ctx's object fault handler
 *
 * Shows: the lazy style of libvrange, with objects.  The cache holds
 * decompressed blocks of a (synthetic) file, one object each.  Blocks
 * stay unpinned all the time and readers read them directly, without
 * vr_obj_pin() around the read.  When a reader touches a page that a
 * purge discarded, the library calls the ctx's object fault handler
 * (vr_ctx_set_obj_fault_handler) in that thread with the object; the
 * handler pins it, decompresses the block again, unpins it and returns
 * VR_FAULT_RETRY, and the read goes on as if nothing had happened.
 * Without a handler the reader would get SIGBUS.  (lazy-cache.c shows the
 * same style with a region and vr_region_set_fault_handler().)
 *
 * Rules for this style (see the README):
 *   - the handler runs in signal context; it may call vr_* functions;
 *   - a block may be purged between two reads of it, even in the middle
 *     of one read, so the data must be rebuilt exactly as it was (this
 *     example decompresses deterministically), or the reader must pin it;
 *   - system calls that read discarded pages (write(fd, block, n)) fail
 *     with EFAULT instead of faulting: pin with vr_obj_pin() before
 *     handing volatile memory to the kernel.
 *
 * Build (installed library):
 *   cc -o lazy-objects lazy-objects.c $(pkg-config --cflags --libs libvrange)
 * Run:
 *   ./lazy-objects
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vrange.h>

#define NBLOCKS 32
#define BLOCK_BYTES ((size_t)32 * 1024)
#define READS_PER_ROUND 200
#define ROUNDS 6

static struct vr_obj *blocks[NBLOCKS];
static volatile unsigned long rebuilds; /* fault handler calls that rebuilt a block */

/* the "decompressor": block id's bytes, deterministic, never all zero */
static void decompress(unsigned id, uint8_t *p)
{
	uint32_t x = 0x9e3779b9u * (id + 1);
	for (size_t i = 0; i < BLOCK_BYTES; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)(x | 1);
	}
}

static bool block_ok(unsigned id, const uint8_t *p)
{
	uint32_t x = 0x9e3779b9u * (id + 1);
	for (size_t i = 0; i < BLOCK_BYTES; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		if (p[i] != (uint8_t)(x | 1)) /* reading p[i] may fault: see rebuild() */
			return false;
	}
	return true;
}

/* The fault handler: o is the purged object whose page the reader touched */
static int rebuild(struct vr_obj *o, void *fault_addr, void *arg)
{
	(void)fault_addr;
	(void)arg;
	unsigned id = 0;
	while (id < NBLOCKS && blocks[id] != o)
		id++;
	if (id == NBLOCKS)
		return VR_FAULT_SIGBUS; /* not an object of this cache */
	if (vr_obj_pin(o) < 0)          /* restores access; returns VR_PURGED */
		return VR_FAULT_SIGBUS;
	decompress(id, vr_obj_ptr(o));
	if (vr_obj_unpin(o) < 0) /* volatile again, now the youngest */
		return VR_FAULT_SIGBUS;
	rebuilds++;
	return VR_FAULT_RETRY;
}

static void check(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "lazy-objects: FAILED: %s\n", what);
		exit(1);
	}
}

int main(void)
{
	struct vr_ctx *ctx;
	uint64_t seed = 7;

	check(vr_ctx_new(0, &ctx) == 0, "vr_ctx_new");
	check(vr_ctx_set_obj_fault_handler(ctx, rebuild, NULL) == 0, "set_obj_fault_handler");

	/* fill the cache once; from now on every block is unpinned */
	for (unsigned id = 0; id < NBLOCKS; id++) {
		check(vr_obj_new(ctx, BLOCK_BYTES, 0, &blocks[id]) == 0, "vr_obj_new");
		decompress(id, vr_obj_ptr(blocks[id]));
		check(vr_obj_unpin(blocks[id]) == 0, "vr_obj_unpin");
	}
	printf("lazy objects: %u blocks of %zu KiB, volatile at rest, rebuilt in the fault "
	       "handler\n",
	       NBLOCKS, BLOCK_BYTES / 1024);
	printf("round reads distinct faults | pressure  reclaimed | volatile   purged\n");

	bool after_critical = false;
	for (unsigned round = 1; round <= ROUNDS; round++) {
		bool seen[NBLOCKS] = { false };
		unsigned distinct = 0;
		unsigned long f0 = rebuilds;
		for (unsigned k = 0; k < READS_PER_ROUND; k++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			unsigned id = (unsigned)(seed >> 33) % NBLOCKS;
			distinct += !seen[id];
			seen[id] = true;
			/* a plain read of unpinned memory: no vr_obj_pin() */
			check(block_ok(id, vr_obj_ptr(blocks[id])), "block data after read");
		}
		unsigned long faults = rebuilds - f0;
		/* after a critical purge every block read must have been rebuilt */
		check(!after_critical || faults >= distinct, "purged blocks were rebuilt");

		bool critical = round % 2 == 0;
		ssize_t got = vr_ctx_notify_pressure(ctx, critical ? VR_PRESSURE_CRITICAL
								   : VR_PRESSURE_MODERATE);
		check(got >= 0, "vr_ctx_notify_pressure");
		after_critical = critical;
		printf("%5u %5u %8u %6lu | %-8s %6.2f MiB | %5.2f MiB %5.2f MiB\n", round,
		       READS_PER_ROUND, distinct, faults, critical ? "critical" : "moderate",
		       (double)got / 1048576, vr_ctx_stat(ctx, VR_STAT_VOLATILE_BYTES) / 1048576.0,
		       vr_ctx_stat(ctx, VR_STAT_PURGED_BYTES) / 1048576.0);
		if (critical)
			check(vr_ctx_stat(ctx, VR_STAT_VOLATILE_BYTES) == 0,
			      "critical pressure purges every block");
	}

	uint64_t stat_faults = vr_ctx_stat(ctx, VR_STAT_FAULTS);
	printf("summary: %u reads verified, %lu blocks rebuilt in the fault handler, "
	       "VR_STAT_FAULTS %" PRIu64 "\n",
	       ROUNDS * READS_PER_ROUND, rebuilds, stat_faults);
	check(rebuilds > 0, "some block was rebuilt");
	check(stat_faults == rebuilds, "one handler call per fault");
	vr_ctx_destroy(ctx); /* frees the blocks */
	return 0;
}
