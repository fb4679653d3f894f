/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * adopt.c - a cache that already owns its memory makes it purgeable
 *
 * Shows: vr_region_adopt(), the MADV_VOLATILE style.  The cache keeps
 * its entries in one big malloc'd buffer (posix_memalign, so the entries
 * start on page boundaries) that it allocated long before it knew about
 * libvrange.  It hands the buffer to the library with vr_region_adopt()
 * (no copy, no memfd, the contents stay as they are) and marks each entry
 * volatile while nobody uses it.  To use an entry it unmarks it: VR_INTACT
 * means the bytes are as it left them, VR_PURGED that the library gave the
 * pages back to the kernel and the entry must be rebuilt (the pages read
 * 0).  A byte limit (vr_ctx_set_limit) keeps at most a quarter of the
 * entries volatile and unpurged.  When the cache is done it destroys the
 * region: the buffer is its own again, every page readable and writable,
 * and it frees it with free() as usual.
 *
 * Rules for adopted memory (see the README):
 *   - the span must be page aligned, a whole number of pages, and lie in
 *     one private anonymous read/write mapping (malloc, mmap);
 *   - destroy the region before freeing, unmapping or remapping the
 *     memory;
 *   - mlock'ed pages are never discarded (the purge skips them).
 *
 * Build (installed library):
 *   cc -o adopt adopt.c $(pkg-config --cflags --libs libvrange)
 * Run:
 *   ./adopt
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vrange.h>

#define NENTRIES 64
#define ENTRY_PAGES 4
#define ROUNDS 8

static size_t entry_bytes;

/* an entry's content: what an expensive computation would produce */
static void build(unsigned id, uint8_t *p)
{
	uint32_t x = 2654435761u * (id + 1);
	for (size_t i = 0; i < entry_bytes; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (uint8_t)((x >> 16) | 1); /* never 0: a purge is visible */
	}
}

static bool intact(unsigned id, const uint8_t *p)
{
	uint8_t *want = malloc(entry_bytes);
	if (!want)
		return false;
	build(id, want);
	bool ok = memcmp(want, p, entry_bytes) == 0;
	free(want);
	return ok;
}

static int fail(const char *what, int rc)
{
	fprintf(stderr, "adopt: %s failed: %d (%s)\n", what, rc, rc < 0 ? strerror(-rc) : "");
	return 1;
}

int main(void)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	entry_bytes = ENTRY_PAGES * pg;
	size_t total = NENTRIES * entry_bytes;

	/* the cache's own buffer, allocated the usual way */
	uint8_t *buf = NULL;
	if (posix_memalign((void **)&buf, pg, total) != 0)
		return fail("posix_memalign", -1);
	for (unsigned i = 0; i < NENTRIES; i++)
		build(i, buf + i * entry_bytes);

	struct vr_ctx *ctx = NULL;
	struct vr_region *r = NULL;
	int rc = vr_ctx_new(VR_CTX_NO_MONITOR, &ctx);
	if (rc < 0)
		return fail("vr_ctx_new", rc);
	rc = vr_region_adopt(ctx, buf, total, 0, &r);
	if (rc < 0)
		return fail("vr_region_adopt", rc);
	if (vr_region_fd(r) != -EBADF || vr_region_base(r) != buf)
		return fail("adopted region getters", -EINVAL);
	rc = vr_ctx_set_limit(ctx, total / 4);
	if (rc < 0)
		return fail("vr_ctx_set_limit", rc);

	/* every entry unused: volatile (the limit purges the oldest) */
	for (unsigned i = 0; i < NENTRIES; i++) {
		rc = vr_mark(r, i * entry_bytes, entry_bytes);
		if (rc < 0)
			return fail("vr_mark", rc);
	}

	unsigned hits = 0, rebuilt = 0;
	uint32_t x = 7;
	for (unsigned round = 0; round < ROUNDS; round++) {
		for (unsigned k = 0; k < NENTRIES; k++) {
			x = x * 1664525u + 1013904223u;
			unsigned id = (x >> 8) % NENTRIES;
			uint8_t *p = buf + id * entry_bytes;
			/* use: pin, check or rebuild, read, unpin */
			rc = vr_unmark(r, id * entry_bytes, entry_bytes);
			if (rc < 0)
				return fail("vr_unmark", rc);
			if (rc == VR_PURGED) {
				if (p[0] != 0 || p[entry_bytes - 1] != 0)
					return fail("a purged entry reads 0", -EIO);
				build(id, p);
				rebuilt++;
			} else {
				hits++;
			}
			if (!intact(id, p))
				return fail("entry content", -EIO);
			rc = vr_mark(r, id * entry_bytes, entry_bytes);
			if (rc < 0)
				return fail("vr_mark", rc);
		}
	}
	uint64_t reclaimed = vr_ctx_stat(ctx, VR_STAT_RECLAIMED_BYTES);
	printf("adopt: %u hits, %u rebuilt, %llu KiB given back to the kernel\n", hits, rebuilt,
	       (unsigned long long)(reclaimed / 1024));
	unsigned uses = hits + rebuilt;
	if (rebuilt == 0 || reclaimed == 0)
		return fail("the limit purged nothing", -EIO);

	/* the buffer is the cache's again: readable, writable, purged
	 * entries reading 0; free() it as usual */
	vr_region_destroy(r);
	vr_ctx_destroy(ctx);
	unsigned zeroed = 0;
	for (unsigned i = 0; i < NENTRIES; i++) {
		uint8_t *p = buf + i * entry_bytes;
		if (p[0] == 0)
			zeroed++;
		else if (!intact(i, p))
			return fail("entry content after destroy", -EIO);
	}
	memset(buf, 0, total);
	free(buf);
	printf("summary: %u uses: %u hits (all verified), %u rebuilt after a purge, %u entries "
	       "purged at close\n",
	       uses, hits, rebuilt, zeroed);
	return 0;
}
