/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * s-purge.c - scenario 3: purge throughput, one trap backend per child.
 *
 * 1 GiB (full) of populated 64 KiB or 2 MiB ranges, each followed by a
 * one-page gap.  libvrange: mark every range, then vr_ctx_purge() 1 MiB
 * (or one 2 MiB range) at a time until nothing is left.  Raw: the same
 * ranges of a plain memfd mapping, each trapped (mprotect PROT_NONE or
 * MADV_GUARD_INSTALL, as the backend) then punched, the same number of
 * ranges per timed sample.  Both sides run in this process, alternating.
 * After each run the memfd must hold no page any more (st_blocks == 0).
 *
 * Style "anon" (scenario purge-anon): the same on private anonymous memory,
 * a VR_REGION_ANON region against a plain anonymous mapping whose ranges
 * are freed the raw way: MADV_GUARD_INSTALL alone (it frees and traps), or
 * mprotect PROT_NONE then MADV_DONTNEED.  Afterwards no page of either may
 * be resident (mincore).
 *
 * Scenario purge also runs s-objpurge.c: purge throughput of many small
 * adjacent objects against a raw trap + punch of the same bytes.
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vrange.h>

#define SCEN (anon ? "purge-anon" : "purge")

static bool guard, anon, uffd;

struct acc {
	struct samples per_range; /* us */
	struct samples unmark;    /* us per vr_unmark of a purged range */
	double bytes, ns;
};

static uint64_t file_bytes(int fd)
{
	struct stat st;
	CHECK(fstat(fd, &st) == 0);
	return (uint64_t)st.st_blocks * 512;
}

/* resident pages of [p, p + len) */
static size_t resident(const char *p, size_t len)
{
	size_t n = 0;
	unsigned char v[256];
	for (size_t off = 0; off < len; off += sizeof(v) * page_size) {
		size_t k =
			(len - off) / page_size < sizeof(v) ? (len - off) / page_size : sizeof(v);
		CHECK(mincore((void *)(p + off), k * page_size, v) == 0);
		for (size_t i = 0; i < k; i++)
			n += v[i] & 1;
	}
	return n;
}

/* what the purged memory still holds: the memfd's blocks, or the resident
 * pages of the anonymous mapping */
static uint64_t left(int fd, const char *base, size_t len)
{
	return fd >= 0 ? file_bytes(fd) : resident(base, len) * page_size;
}

static void run_vr(struct vr_ctx *ctx, size_t rlen, size_t total, struct acc *a)
{
	size_t nr = total / rlen, stride = rlen + page_size, k = rlen >= MiB ? 1 : MiB / rlen;
	struct vr_region *r;
	VRCHECK(vr_region_new(ctx, "vrbench-purge", nr * stride, anon ? VR_REGION_ANON : 0, &r));
	char *base = vr_region_base(r);
	for (size_t i = 0; i < nr; i++) {
		populate(base + i * stride, rlen);
		if (VRCHECK(vr_mark(r, i * stride, rlen)) != VR_INTACT)
			die("fresh mark purged");
	}
	CHECK(vr_ctx_stat(ctx, VR_STAT_VOLATILE_BYTES) == total);
	uint64_t skipped0 = vr_ctx_stat(ctx, VR_STAT_SKIPPED);
	size_t done = 0;
	for (;;) {
		uint64_t t0 = now_ns();
		ssize_t got = vr_ctx_purge(ctx, k * rlen);
		uint64_t dt = now_ns() - t0;
		VRCHECK(got);
		if (got == 0)
			break;
		size_t ranges = (size_t)got / rlen;
		CHECK(ranges * rlen == (size_t)got && ranges > 0);
		samples_add(&a->per_range, (double)dt / 1000.0 / (double)ranges);
		a->ns += (double)dt;
		a->bytes += (double)got;
		done += (size_t)got;
	}
	uint64_t skipped = vr_ctx_stat(ctx, VR_STAT_SKIPPED) - skipped0;
	if (done != total)
		emit_note(
			"purge %zu KiB ranges: libvrange reclaimed %zu of %zu bytes (%llu skipped)",
			rlen / KiB, done, total, (unsigned long long)skipped);
	CHECK(vr_ctx_stat(ctx, VR_STAT_VOLATILE_BYTES) == total - done);
	uint64_t held = left(vr_region_fd(r), base, nr * stride);
	/* uffd: the gap page after each range was made present at creation */
	uint64_t gaps = uffd ? nr * page_size : 0;
	if (done == total && held != gaps)
		die("libvrange purge left %llu bytes in the %s", (unsigned long long)held,
		    anon ? "mapping" : "memfd");
	/* unmark of a purged range: the trap is taken down (S5) */
	for (size_t i = 0; i < nr; i++) {
		uint64_t t0 = now_ns();
		int rc = VRCHECK(vr_unmark(r, i * stride, rlen));
		samples_add(&a->unmark, (double)(now_ns() - t0) / 1000.0);
		if (done == total && rc != VR_PURGED)
			die("unmark of a purged range said intact");
	}
	vr_region_destroy(r);
}

static void run_raw(size_t rlen, size_t total, struct acc *a)
{
	size_t nr = total / rlen, stride = rlen + page_size, k = rlen >= MiB ? 1 : MiB / rlen;
	size_t len = nr * stride;
	int fd = -1;
	char *base;
	if (anon) {
		base = map_anon(len);
	} else {
		fd = memfd_create("vrbench-raw", MFD_CLOEXEC);
		CHECK(fd >= 0 && ftruncate(fd, (off_t)len) == 0);
		base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		CHECK(base != MAP_FAILED);
	}
	for (size_t i = 0; i < nr; i++)
		populate(base + i * stride, rlen);
	/* uffd: registered once, the punch alone traps */
	int ufd = uffd ? uffd_register(base, len) : -1;
	if (uffd && ufd < 0)
		die("userfaultfd refused for the raw purge");
	for (size_t i = 0; i < nr; i += k) {
		size_t n = nr - i < k ? nr - i : k;
		uint64_t t0 = now_ns();
		for (size_t j = i; j < i + n; j++) {
			char *p = base + j * stride;
			int rc = uffd    ? 0
				 : guard ? madvise(p, rlen, MADV_GUARD_INSTALL)
					 : mprotect(p, rlen, PROT_NONE);
			if (rc < 0)
				die("raw trap: %s", strerror(errno));
			if (anon && !guard && madvise(p, rlen, MADV_DONTNEED) < 0)
				die("raw MADV_DONTNEED: %s", strerror(errno));
			if (!anon && fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					       (off_t)(j * stride), (off_t)rlen) < 0)
				die("raw punch: %s", strerror(errno));
		}
		uint64_t dt = now_ns() - t0;
		samples_add(&a->per_range, (double)dt / 1000.0 / (double)n);
		a->ns += (double)dt;
		a->bytes += (double)(n * rlen);
	}
	if (left(fd, base, len) != 0)
		die("raw purge left bytes in the %s", anon ? "mapping" : "memfd");
	munmap(base, len);
	if (fd >= 0)
		close(fd);
	if (ufd >= 0)
		close(ufd);
}

static void bench_size(struct vr_ctx *ctx, size_t rlen, const char *tag)
{
	size_t total = BY_MODE(16 * MiB, 128 * MiB, 1 * GiB), reps = BY_MODE(1, 2, 3);
	struct acc vr = { 0 }, raw = { 0 };
	char nm[48];
	for (size_t rep = 0; rep < reps; rep++) {
		/* alternate which side goes first */
		if (rep & 1) {
			run_raw(rlen, total, &raw);
			run_vr(ctx, rlen, total, &vr);
		} else {
			run_vr(ctx, rlen, total, &vr);
			run_raw(rlen, total, &raw);
		}
	}
	snprintf(nm, sizeof(nm), "vr-purge-%s", tag);
	emit_samples(SCEN, nm, &vr.per_range, "us/range");
	snprintf(nm, sizeof(nm), "raw-purge-%s", tag);
	emit_samples(SCEN, nm, &raw.per_range, "us/range");
	snprintf(nm, sizeof(nm), "vr-unmark-purged-%s", tag);
	emit_samples(SCEN, nm, &vr.unmark, "us");
	snprintf(nm, sizeof(nm), "vr-purge-%s-bw", tag);
	emit_row(SCEN, nm, vr.bytes / vr.ns, NAN, "GB/s", (long)vr.per_range.n);
	snprintf(nm, sizeof(nm), "raw-purge-%s-bw", tag);
	emit_row(SCEN, nm, raw.bytes / raw.ns, NAN, "GB/s", (long)raw.per_range.n);
	samples_free(&vr.per_range);
	samples_free(&vr.unmark);
	samples_free(&raw.per_range);
}

int run_purge(const char *style)
{
	anon = style && strcmp(style, "anon") == 0;
	struct vr_ctx *ctx;
	int rc = vr_ctx_new(VR_CTX_NO_MONITOR, &ctx);
	if (rc == -EOPNOTSUPP && bopt.backend) {
		emit_note("trap backend %s not supported here: purge scenario skipped",
			  bopt.backend);
		return 77;
	}
	VRCHECK(rc);
	guard = vr_trap_backend() == VR_TRAP_GUARD;
	uffd = vr_trap_backend() == VR_TRAP_UFFD;
	const char *name = uffd ? "uffd" : guard ? "guard" : "mprotect";
	if (uffd) {
		emit_note("userfaultfd traps shared regions only: private ones use guard "
			  "markers under VRANGE_TRAP=uffd too (scenario shared measures it)");
		vr_ctx_destroy(ctx);
		return 77;
	}
	if (bopt.backend && strcmp(bopt.backend, name) != 0)
		die("asked for backend %s, libvrange uses %s", bopt.backend, name);
	bench_size(ctx, 64 * KiB, "64k");
	bench_size(ctx, 2 * MiB, "2m");
	vr_ctx_destroy(ctx);
	if (!anon) /* many small adjacent objects (s-objpurge.c) */
		bench_obj_purge(SCEN, guard);
	return 0;
}
