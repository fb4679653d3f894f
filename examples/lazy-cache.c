/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lazy-cache.c - a cache read without pinning: purged data is rebuilt in
 * the fault handler
 *
 * Shows: the lazy style of libvrange.  The cache holds decompressed blocks
 * of a (synthetic) file.  Blocks stay volatile all the time and readers
 * read them directly, without vr_unmark() around the read.  When a reader
 * touches a page that a purge discarded, the library calls the region's
 * fault handler (vr_region_set_fault_handler) in that thread; the handler
 * decompresses the block again into a buffer, writes it into the still
 * trapped pages and unmarks the range (restoring access) in one call,
 * vr_unmark_fill(), marks it volatile again and returns VR_FAULT_RETRY, and the
 * read goes on as if nothing had happened.  Other threads touching the
 * block meanwhile wait for the handler and then read the rebuilt data:
 * nobody ever reads zeros, and each purge costs one rebuild.  Without a
 * handler the reader would get SIGBUS.
 *
 * Rules for this style (see the README):
 *   - the handler runs in signal context; it may call vr_* functions;
 *   - a block may be purged between two reads of it, even in the middle
 *     of one read, so the data must be rebuilt exactly as it was (this
 *     example decompresses deterministically), or the reader must pin it;
 *   - system calls that read discarded pages (write(fd, block, n)) fail
 *     with EFAULT instead of faulting: pin with vr_unmark() before
 *     handing volatile memory to the kernel.
 * Blocks are separated by an untouched gap page so that each is its own
 * range (adjacent volatile ranges coalesce, and a range is purged whole).
 *
 * Build (installed library):
 *   cc -o lazy-cache lazy-cache.c $(pkg-config --cflags --libs libvrange)
 * Run:
 *   ./lazy-cache
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vrange.h>

#define NBLOCKS 32
#define BLOCK_BYTES ((size_t)32 * 1024)
#define READS_PER_ROUND 200
#define ROUNDS 6

static size_t slot;                     /* BLOCK_BYTES + one gap page */
static uint8_t scratch[BLOCK_BYTES];    /* one handler runs per block at a time */
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

/*
 * The fault handler: [off, off + len) is the purged range that holds the
 * page the reader touched; here that is always one whole block.
 */
static int rebuild(struct vr_region *r, size_t off, size_t len, void *fault_addr, void *arg)
{
	(void)fault_addr;
	(void)arg;
	unsigned id = (unsigned)(off / slot);
	if (off % slot != 0 || len != BLOCK_BYTES || id >= NBLOCKS)
		return VR_FAULT_SIGBUS; /* not a range this cache made */
	/* fill first, through the memfd, while the pages still trap; this
	 * reader is single-threaded, a threaded one would use a per-thread
	 * buffer (handlers of different blocks may run at once) */
	decompress(id, scratch);
	if (vr_unmark_fill(r, off, len, scratch) < 0) /* writes, then restores access */
		return VR_FAULT_SIGBUS;
	if (vr_mark(r, off, len) < 0) /* volatile again, now the youngest */
		return VR_FAULT_SIGBUS;
	rebuilds++;
	return VR_FAULT_RETRY;
}

static void check(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "lazy-cache: FAILED: %s\n", what);
		exit(1);
	}
}

int main(void)
{
	struct vr_ctx *ctx;
	struct vr_region *r;
	uint64_t seed = 7;

	slot = BLOCK_BYTES + (size_t)sysconf(_SC_PAGESIZE);
	check(vr_ctx_new(0, &ctx) == 0, "vr_ctx_new");
	check(vr_region_new(ctx, "lazy-cache", NBLOCKS * slot, 0, &r) == 0, "vr_region_new");
	check(vr_region_set_fault_handler(r, rebuild, NULL) == 0, "set_fault_handler");
	uint8_t *base = vr_region_base(r);

	/* fill the cache once; from now on every block is volatile */
	for (unsigned id = 0; id < NBLOCKS; id++) {
		decompress(id, base + id * slot);
		check(vr_mark(r, id * slot, BLOCK_BYTES) == VR_INTACT, "vr_mark");
	}
	printf("lazy cache: %u blocks of %zu KiB, volatile at rest, rebuilt in the fault handler\n",
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
			/* a plain read of volatile memory: no vr_unmark() */
			check(block_ok(id, base + id * slot), "block data after read");
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
	vr_ctx_destroy(ctx);
	return 0;
}
