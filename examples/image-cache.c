/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * image-cache.c - a cache of decoded images that gives memory back under
 * pressure (the README's demo)
 *
 * Shows: purgeable objects.  Every decoded image is one object
 * (vr_obj_new).  Around each use the cache pins it with vr_obj_pin(),
 * which says whether the data is still there (VR_INTACT: a hit) or was
 * purged (VR_PURGED: decode it again), and unpins it with vr_obj_unpin()
 * afterwards.  No layout, no offsets: the library places the objects and
 * purges them one at a time, least recently unpinned first.  Between
 * rounds the program plays the memory-pressure monitor by calling
 * vr_ctx_notify_pressure(), and prints hits, regenerations and how many
 * bytes the cache really holds (VR_STAT_FOOTPRINT).  Every hit is verified
 * byte for byte: the program exits with status 1 if a hit ever returns
 * data that is not the image.
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
#include <unistd.h>

#include <vrange.h>

#define NIMAGES 48
#define WIDTH 128
#define HEIGHT 128
#define IMG_BYTES ((size_t)WIDTH * HEIGHT * 4) /* RGBA, 64 KiB */
#define USES_PER_ROUND 256

struct image {
	struct vr_obj *obj; /* the decoded pixels, NULL until first decoded */
	unsigned long uses; /* how often the application asked for it */
};

struct cache {
	struct vr_ctx *ctx;
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
	uint8_t *p = vr_obj_ptr(c->img[id].obj);
	for (unsigned y = 0; y < HEIGHT; y++)
		for (unsigned x = 0; x < WIDTH; x++, p += 4)
			pixel(id, x, y, p);
}

/* "use" the image: here, check every pixel against the decoder */
static bool image_ok(const struct cache *c, unsigned id)
{
	const uint8_t *p = vr_obj_ptr(c->img[id].obj);
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
	if (!im->obj) {
		int rc = vr_obj_new(c->ctx, IMG_BYTES, 0, &im->obj); /* new objects are pinned */
		if (rc < 0)
			die("vr_obj_new", rc);
		decode(c, id);
		c->decodes++;
		return;
	}
	int rc = vr_obj_pin(im->obj);
	if (rc < 0)
		die("vr_obj_pin", rc);
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
	int rc = vr_obj_unpin(c->img[id].obj);
	if (rc < 0)
		die("vr_obj_unpin", rc);
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

int main(int argc, char **argv)
{
	struct cache c = { 0 };
	unsigned rounds = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 8;
	uint64_t seed = 42;
	int rc;

	if (rounds == 0)
		rounds = 8;
	rc = vr_ctx_new(0, &c.ctx);
	if (rc < 0)
		die("vr_ctx_new", rc);

	printf("image cache: %u images of %zu KiB, one object each; pressure monitor: %s\n",
	       NIMAGES, IMG_BYTES / 1024, vr_monitor_source_name(vr_ctx_monitor_source(c.ctx)));
	printf("round  uses  hits  regen  decoded | pressure  reclaimed | volatile  purged  "
	       "held\n");

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
		uint64_t held = vr_ctx_stat(c.ctx, VR_STAT_FOOTPRINT);
		printf("%5u %5u %5lu %6lu %8lu | %-8s %7.2f MiB | %5.2f MiB %5.2f MiB %5.2f MiB\n",
		       round, USES_PER_ROUND, c.hits - h0, c.regens - r0, c.decodes - d0,
		       critical ? "critical" : "moderate", mib((uint64_t)got), mib(vol),
		       mib(vr_ctx_stat(c.ctx, VR_STAT_PURGED_BYTES)), mib(held));

		/* what the library promises (api.md S11): check it; after a
		 * critical event only the images never unpinned are held (none) */
		if (vol > before / 2 || (critical && (vol != 0 || held != 0))) {
			fprintf(stderr,
				"image-cache: pressure did not free what it must: "
				"volatile %" PRIu64 " -> %" PRIu64 ", held %" PRIu64 "\n",
				before, vol, held);
			return 1;
		}
	}

	printf("(volatile: unpinned images still in memory; purged: unpinned images the library\n"
	       " discarded; held: memory the cache really holds, VR_STAT_FOOTPRINT)\n");
	unsigned long uses = c.hits + c.regens + c.decodes;
	printf("summary: %lu uses: %lu hits (all verified), %lu regenerated after a purge, "
	       "%lu first decodes\n",
	       uses, c.hits, c.regens, c.decodes);
	printf("summary: %" PRIu64 " images purged, %.2f MiB given back to the kernel, "
	       "%" PRIu64 " pressure events\n",
	       vr_ctx_stat(c.ctx, VR_STAT_PURGES), mib(vr_ctx_stat(c.ctx, VR_STAT_RECLAIMED_BYTES)),
	       vr_ctx_stat(c.ctx, VR_STAT_PRESSURE_EVENTS));
	if (uses != (unsigned long)rounds * USES_PER_ROUND || c.hits == 0 ||
	    (rounds >= 2 && c.regens == 0)) {
		fprintf(stderr, "image-cache: unexpected counts\n");
		return 1;
	}
	for (unsigned i = 0; i < NIMAGES; i++)
		vr_obj_free(c.img[i].obj); /* NULL is fine */
	vr_ctx_destroy(c.ctx);             /* would free them too */
	return 0;
}
