/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * image-cache.c - a cache of decoded images that gives memory back under
 * pressure (the README's demo)
 *
 * Shows: the explicit style of libvrange.  Every decoded image lives in
 * a volatile byte range of one region.  Around each use the cache pins
 * the image with vr_unmark(), which says whether the kernel-side data is
 * still there (VR_INTACT: a hit) or was purged (VR_PURGED: decode it
 * again), and unpins it with vr_mark() afterwards.  Between rounds the
 * program plays the memory-pressure monitor by calling
 * vr_ctx_notify_pressure(), and prints hits, regenerations and how many
 * bytes are resident.  Every hit is verified byte for byte: the program
 * exits with status 1 if a hit ever returns data that is not the image.
 *
 * Layout: image i occupies slot i of the region, a page-aligned run of
 * IMG_BYTES followed by one gap page that is never written.  The gap
 * matters: adjacent volatile ranges coalesce into one range, and a range
 * is purged as a whole, so images packed edge to edge would be purged
 * together.  A memfd page that is never touched costs no memory, so the
 * gap costs address space only (except under VRANGE_TRAP=uffd, which
 * makes every page present when the region is created: the gaps then
 * hold one page each).
 *
 * Build (installed library):
 *   cc -o image-cache image-cache.c $(pkg-config --cflags --libs libvrange)
 * Run:
 *   ./image-cache [ROUNDS]        (default 8 rounds)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vrange.h>

#define NIMAGES 48
#define WIDTH 128
#define HEIGHT 128
#define IMG_BYTES ((size_t)WIDTH * HEIGHT * 4) /* RGBA, 64 KiB */
#define USES_PER_ROUND 256

struct image {
	size_t off;         /* offset of the pixels in the region */
	bool decoded;       /* was ever decoded into the region */
	unsigned long uses; /* how often the application asked for it */
};

struct cache {
	struct vr_ctx *ctx;
	struct vr_region *region;
	uint8_t *base;
	struct image img[NIMAGES];
	unsigned long hits, regens, decodes;
};

static void die(const char *what, int err)
{
	fprintf(stderr, "image-cache: %s: %s\n", what, strerror(-err));
	exit(1);
}

/* the "decoder": deterministic pixels, different for every image and
 * never all zero (a purged page reads as zeros) */
static void pixel(unsigned id, unsigned x, unsigned y, uint8_t px[4])
{
	px[0] = (uint8_t)(x * 2 + id * 37);
	px[1] = (uint8_t)(y * 2 + id * 11);
	px[2] = (uint8_t)((x ^ y) + id);
	px[3] = (uint8_t)(0x80 | id);
}

static void decode(struct cache *c, unsigned id)
{
	uint8_t *p = c->base + c->img[id].off;
	for (unsigned y = 0; y < HEIGHT; y++)
		for (unsigned x = 0; x < WIDTH; x++, p += 4)
			pixel(id, x, y, p);
}

/* "use" the image: here, check every pixel against the decoder */
static bool image_ok(const struct cache *c, unsigned id)
{
	const uint8_t *p = c->base + c->img[id].off;
	uint8_t px[4];
	for (unsigned i = 0; i < WIDTH * HEIGHT; i++, p += 4) {
		pixel(id, i % WIDTH, i / WIDTH, px);
		if (memcmp(p, px, 4) != 0) {
			fprintf(stderr, "image-cache: CORRUPTION: image %u, pixel %u\n", id, i);
			return false;
		}
	}
	return true;
}

/* get image id for use: a hit, or decode it (again) */
static void cache_get(struct cache *c, unsigned id)
{
	struct image *im = &c->img[id];
	im->uses++;
	if (!im->decoded) {
		decode(c, id); /* a new region is non-volatile: write it directly */
		im->decoded = true;
		c->decodes++;
		return;
	}
	int rc = vr_unmark(c->region, im->off, IMG_BYTES); /* pin */
	if (rc < 0)
		die("vr_unmark", rc);
	if (rc == VR_PURGED) {
		decode(c, id);
		c->regens++;
		return;
	}
	if (!image_ok(c, id))
		exit(1);
	c->hits++;
}

/* done with image id: it may be purged from now on */
static void cache_put(struct cache *c, unsigned id)
{
	int rc = vr_mark(c->region, c->img[id].off, IMG_BYTES);
	if (rc < 0)
		die("vr_mark", rc);
}

/* a skewed workload: 3 of 4 uses go to the first 8 images */
static unsigned next_image(uint64_t *seed)
{
	*seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
	unsigned r = (unsigned)(*seed >> 33);
	return (r & 3) ? (r >> 2) % 8 : (r >> 2) % NIMAGES;
}

static double mib(uint64_t bytes)
{
	return (double)bytes / (1024.0 * 1024.0);
}

/* bytes of memory the memfd really holds (tmpfs counts allocated blocks) */
static uint64_t memfd_bytes(const struct cache *c)
{
	struct stat st;
	if (fstat(vr_region_fd(c->region), &st) < 0)
		die("fstat", -errno);
	return (uint64_t)st.st_blocks * 512;
}

int main(int argc, char **argv)
{
	struct cache c = { 0 };
	unsigned rounds = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 8;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	size_t slot = IMG_BYTES + pg;
	uint64_t seed = 42;
	int rc;

	if (rounds == 0)
		rounds = 8;
	rc = vr_ctx_new(0, &c.ctx);
	if (rc < 0)
		die("vr_ctx_new", rc);
	rc = vr_region_new(c.ctx, "image-cache", NIMAGES * slot, 0, &c.region);
	if (rc < 0)
		die("vr_region_new", rc);
	c.base = vr_region_base(c.region);
	for (unsigned i = 0; i < NIMAGES; i++)
		c.img[i].off = i * slot;

	printf("image cache: %u images of %zu KiB in one region; pressure monitor: %s\n", NIMAGES,
	       IMG_BYTES / 1024, vr_monitor_source_name(vr_ctx_monitor_source(c.ctx)));
	printf("round  uses  hits  regen  decoded | pressure  reclaimed | volatile  purged  "
	       "memfd\n");

	for (unsigned round = 1; round <= rounds; round++) {
		unsigned long h0 = c.hits, r0 = c.regens, d0 = c.decodes;
		for (unsigned k = 0; k < USES_PER_ROUND; k++) {
			unsigned id = next_image(&seed);
			cache_get(&c, id);
			cache_put(&c, id);
		}
		/* every fourth round is critical, the others moderate */
		bool critical = round % 4 == 0;
		uint64_t before = vr_ctx_stat(c.ctx, VR_STAT_VOLATILE_BYTES);
		ssize_t got = vr_ctx_notify_pressure(c.ctx, critical ? VR_PRESSURE_CRITICAL
								     : VR_PRESSURE_MODERATE);
		if (got < 0)
			die("vr_ctx_notify_pressure", (int)got);
		uint64_t vol = vr_ctx_stat(c.ctx, VR_STAT_VOLATILE_BYTES);
		uint64_t held = memfd_bytes(&c);
		printf("%5u %5u %5lu %6lu %8lu | %-8s %7.2f MiB | %5.2f MiB %5.2f MiB %5.2f MiB\n",
		       round, USES_PER_ROUND, c.hits - h0, c.regens - r0, c.decodes - d0,
		       critical ? "critical" : "moderate", mib((uint64_t)got), mib(vol),
		       mib(vr_ctx_stat(c.ctx, VR_STAT_PURGED_BYTES)), mib(held));

		/* what the library promises (api.md S11): check it */
		uint64_t gaps =
			vr_trap_backend() == VR_TRAP_UFFD ? NIMAGES * sysconf(_SC_PAGESIZE) : 0;
		if (vol > before / 2 || (critical && (vol != 0 || held != gaps))) {
			fprintf(stderr,
				"image-cache: pressure did not free what it must: "
				"volatile %" PRIu64 " -> %" PRIu64 ", memfd %" PRIu64 "\n",
				before, vol, held);
			return 1;
		}
	}

	printf("(volatile: unpinned images still in memory; purged: unpinned images the library\n"
	       " discarded; memfd: memory the region really holds, from fstat st_blocks)\n");
	unsigned long uses = c.hits + c.regens + c.decodes;
	printf("summary: %lu uses: %lu hits (all verified), %lu regenerated after a purge, "
	       "%lu first decodes\n",
	       uses, c.hits, c.regens, c.decodes);
	printf("summary: %" PRIu64 " ranges purged, %.2f MiB given back to the kernel, "
	       "%" PRIu64 " pressure events\n",
	       vr_ctx_stat(c.ctx, VR_STAT_PURGES), mib(vr_ctx_stat(c.ctx, VR_STAT_RECLAIMED_BYTES)),
	       vr_ctx_stat(c.ctx, VR_STAT_PRESSURE_EVENTS));
	if (uses != (unsigned long)rounds * USES_PER_ROUND || c.hits == 0 ||
	    (rounds >= 2 && c.regens == 0)) {
		fprintf(stderr, "image-cache: unexpected counts\n");
		return 1;
	}
	vr_ctx_destroy(c.ctx); /* destroys the region too */
	return 0;
}
