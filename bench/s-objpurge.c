/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * s-objpurge.c - part of scenario purge: purge throughput of many small
 * adjacent objects (issue 23), one trap backend per child.
 *
 * N objects of one page (each its own LRU unit) and of 256 bytes (16 to a
 * page, the page is the unit), every page written, all unpinned in
 * address order; vr_ctx_purge() 1 MiB at a time until nothing is left,
 * reported in objects/s.  Raw, on a plain memfd mapping of the same bytes
 * in this process: "each" traps (guard marker or mprotect, as the
 * backend) and punches every 4 KiB object on its own (what a purge cost
 * per object before batching), "span" traps and punches 1 MiB at a time
 * (the floor a batched purge can reach).  Afterwards the objects' pages
 * must be gone (VR_STAT_FOOTPRINT) and every object must pin VR_PURGED.
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vrange.h>

/* objects/s of one libvrange run over total bytes of size-byte objects */
static double run_vr(struct vr_ctx *ctx, size_t size, size_t total)
{
	size_t n = total / size;
	struct vr_obj **o = malloc(n * sizeof(*o));
	CHECK(o != NULL);
	for (size_t i = 0; i < n; i++) {
		VRCHECK(vr_obj_new(ctx, size, 0, &o[i]));
		memset(vr_obj_ptr(o[i]), 1, size);
	}
	for (size_t i = 0; i < n; i++)
		VRCHECK(vr_obj_unpin(o[i]));
	uint64_t fp0 = vr_ctx_stat(ctx, VR_STAT_FOOTPRINT), p0 = vr_ctx_stat(ctx, VR_STAT_PURGES);
	uint64_t t0 = now_ns();
	while (VRCHECK(vr_ctx_purge(ctx, MiB)) > 0)
		;
	uint64_t dt = now_ns() - t0;
	CHECK(vr_ctx_stat(ctx, VR_STAT_PURGES) - p0 == n);
	CHECK(fp0 - vr_ctx_stat(ctx, VR_STAT_FOOTPRINT) >= total);
	for (size_t i = 0; i < n; i++) {
		if (VRCHECK(vr_obj_pin(o[i])) != VR_PURGED)
			die("a purged object pinned intact");
		vr_obj_free(o[i]);
	}
	free(o);
	return (double)n / ((double)dt / 1e9);
}

/* objects/s of trapping and punching total bytes of a plain memfd
 * mapping, step bytes per trap call and fallocate, counted as objects of
 * size bytes */
static double run_raw(bool guard, size_t size, size_t step, size_t total)
{
	int fd = memfd_create("vrbench-objraw", MFD_CLOEXEC);
	CHECK(fd >= 0 && ftruncate(fd, (off_t)total) == 0);
	char *base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(base != MAP_FAILED);
	memset(base, 1, total);
	uint64_t t0 = now_ns();
	for (size_t off = 0; off < total; off += step) {
		int rc = guard ? madvise(base + off, step, MADV_GUARD_INSTALL)
			       : mprotect(base + off, step, PROT_NONE);
		if (rc < 0)
			die("raw trap: %s", strerror(errno));
		if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
			      (off_t)step) < 0)
			die("raw punch: %s", strerror(errno));
	}
	uint64_t dt = now_ns() - t0;
	munmap(base, total);
	close(fd);
	return (double)(total / size) / ((double)dt / 1e9);
}

void bench_obj_purge(const char *scen, bool guard)
{
	struct vr_ctx *ctx;
	VRCHECK(vr_ctx_new(VR_CTX_NO_MONITOR, &ctx));
	size_t total = BY_MODE(8 * MiB, 64 * MiB, 256 * MiB);
	struct samples v4 = { 0 }, v256 = { 0 }, each = { 0 }, span = { 0 };
	for (int rep = 0; rep < BY_MODE(2, 5, 7); rep++) {
		samples_add(&v4, run_vr(ctx, page_size, total) / 1e6);
		samples_add(&each, run_raw(guard, page_size, page_size, total) / 1e6);
		samples_add(&span, run_raw(guard, page_size, MiB, total) / 1e6);
		samples_add(&v256, run_vr(ctx, 256, total / 4) / 1e6);
	}
	emit_samples(scen, "vr-purge-obj-4k", &v4, "Mobj/s");
	emit_samples(scen, "raw-purge-obj-4k-each", &each, "Mobj/s");
	emit_samples(scen, "raw-purge-obj-4k-span", &span, "Mobj/s");
	emit_samples(scen, "vr-purge-obj-256", &v256, "Mobj/s");
	samples_free(&v4);
	samples_free(&v256);
	samples_free(&each);
	samples_free(&span);
	vr_ctx_destroy(ctx);
}
