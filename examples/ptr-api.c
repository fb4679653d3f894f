/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ptr-api.c - a slab allocator of purgeable objects, using the
 * pointer-style calls
 *
 * Shows: vr_mark_ptr() / vr_unmark_ptr() / vr_region_of(), which take an
 * address instead of (region, offset), the way an allocator hands out and
 * takes back plain pointers.  The pool's slabs are regions; objects are
 * 1000 bytes, packed, so they straddle pages.  Its interface:
 *
 *   obj_alloc()   a pinned object (free slots are volatile: the pool's
 *                 unused memory is reclaimable too)
 *   obj_unpin(p)  the object may be purged from now on (vr_mark_ptr)
 *   obj_pin(p)    pin it again; false if its contents were purged
 *                 (vr_unmark_ptr returned VR_PURGED)
 *   obj_free(p)   back to the free list, volatile
 *
 * Things to notice in the output:
 *   - neighbouring unpinned objects coalesce into one volatile range, so
 *     together they cover whole pages that a purge can discard, although
 *     each object alone is smaller than a page;
 *   - pinned objects are never lost, even when they share a page with
 *     purged ones (only whole pages of a purged range are discarded);
 *   - an unpinned object can come back intact: bytes on a page shared
 *     with a pinned neighbour are kept (vr_unmark_ptr still reports
 *     VR_PURGED if its range was purged, so the pool rebuilds it);
 *   - a pointer the pool did not hand out, or a span that leaves its
 *     slab, is rejected with -EINVAL.
 *
 * Build (installed library):
 *   cc -o ptr-api ptr-api.c $(pkg-config --cflags --libs libvrange)
 * Run:
 *   ./ptr-api
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

#define OBJ_SIZE 1000
#define NSLABS 2
#define SLAB_BYTES ((size_t)64 * 1024)
#define OBJS_PER_SLAB (SLAB_BYTES / OBJ_SIZE)

enum slot_state { SLOT_FREE, SLOT_PINNED, SLOT_UNPINNED };

struct slab {
	struct vr_region *region;
	uint8_t *base;
	enum slot_state state[OBJS_PER_SLAB];
};

struct pool {
	struct vr_ctx *ctx;
	struct slab slab[NSLABS];
};

static void check(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "ptr-api: FAILED: %s\n", what);
		exit(1);
	}
}

static int pool_init(struct pool *p)
{
	int rc = vr_ctx_new(0, &p->ctx);
	if (rc < 0)
		return rc;
	for (int i = 0; i < NSLABS; i++) {
		struct slab *s = &p->slab[i];
		rc = vr_region_new(p->ctx, "ptr-api-slab", SLAB_BYTES, 0, &s->region);
		if (rc < 0)
			return rc;
		s->base = vr_region_base(s->region);
		/* all slots start free, and free slots are volatile */
		rc = vr_mark_ptr(s->base, OBJS_PER_SLAB * OBJ_SIZE);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* the slab and slot of p, found through the region registry */
static enum slot_state *slot_of(struct pool *p, void *obj)
{
	struct vr_region *r = vr_region_of(obj);
	for (int i = 0; r && i < NSLABS; i++) {
		struct slab *s = &p->slab[i];
		if (s->region == r)
			return &s->state[((uint8_t *)obj - s->base) / OBJ_SIZE];
	}
	return NULL;
}

static void *obj_alloc(struct pool *p)
{
	for (int i = 0; i < NSLABS; i++)
		for (size_t k = 0; k < OBJS_PER_SLAB; k++) {
			struct slab *s = &p->slab[i];
			if (s->state[k] != SLOT_FREE)
				continue;
			void *obj = s->base + k * OBJ_SIZE;
			/* whatever a free slot held is garbage: ignore VR_PURGED */
			if (vr_unmark_ptr(obj, OBJ_SIZE) < 0)
				return NULL;
			s->state[k] = SLOT_PINNED;
			return obj;
		}
	return NULL;
}

static void obj_unpin(struct pool *p, void *obj)
{
	check(vr_mark_ptr(obj, OBJ_SIZE) >= 0, "vr_mark_ptr");
	*slot_of(p, obj) = SLOT_UNPINNED;
}

static bool obj_pin(struct pool *p, void *obj)
{
	int rc = vr_unmark_ptr(obj, OBJ_SIZE);
	check(rc >= 0, "vr_unmark_ptr");
	*slot_of(p, obj) = SLOT_PINNED;
	return rc == VR_INTACT;
}

static void obj_free(struct pool *p, void *obj)
{
	check(vr_mark_ptr(obj, OBJ_SIZE) >= 0, "vr_mark_ptr");
	*slot_of(p, obj) = SLOT_FREE;
}

/* the application's objects: a record that can be rebuilt from its key */
static void obj_build(uint8_t *obj, unsigned key)
{
	for (size_t i = 0; i < OBJ_SIZE; i++)
		obj[i] = (uint8_t)(key * 131 + i * 7 + 1) | 0x10;
}

static bool obj_ok(const uint8_t *obj, unsigned key)
{
	for (size_t i = 0; i < OBJ_SIZE; i++)
		if (obj[i] != ((uint8_t)(key * 131 + i * 7 + 1) | 0x10))
			return false;
	return true;
}

#define NOBJ 100

int main(void)
{
	struct pool pool = { 0 };
	uint8_t *obj[NOBJ];

	check(pool_init(&pool) == 0, "pool_init");
	for (unsigned i = 0; i < NOBJ; i++) {
		obj[i] = obj_alloc(&pool);
		check(obj[i] != NULL, "obj_alloc");
		obj_build(obj[i], i);
	}
	/* the application keeps every 8th object in use and unpins the rest;
	 * then it frees 10 objects */
	for (unsigned i = 0; i < NOBJ; i++)
		if (i % 8 != 0)
			obj_unpin(&pool, obj[i]);
	for (unsigned i = 1; i < NOBJ; i += 10) {
		obj_free(&pool, obj[i]);
		obj[i] = NULL;
	}
	printf("pool: %d slabs of %zu KiB, %u objects of %d bytes (every 8th pinned, 10 freed)\n",
	       NSLABS, SLAB_BYTES / 1024, NOBJ, OBJ_SIZE);
	printf("before pressure: %llu volatile ranges, %llu volatile bytes\n",
	       (unsigned long long)vr_ctx_stat(pool.ctx, VR_STAT_RANGES),
	       (unsigned long long)vr_ctx_stat(pool.ctx, VR_STAT_VOLATILE_BYTES));

	ssize_t got = vr_ctx_notify_pressure(pool.ctx, VR_PRESSURE_CRITICAL);
	check(got > 0, "critical pressure reclaims memory");
	printf("critical pressure: %zd bytes reclaimed (%zd pages)\n", got,
	       got / sysconf(_SC_PAGESIZE));

	unsigned pinned = 0, intact = 0, rebuilt = 0;
	for (unsigned i = 0; i < NOBJ; i++) {
		if (!obj[i])
			continue;
		if (i % 8 == 0) { /* pinned: never purged (api.md S9) */
			check(obj_ok(obj[i], i), "a pinned object kept its data");
			pinned++;
		} else if (obj_pin(&pool, obj[i])) {
			check(obj_ok(obj[i], i), "an intact object kept its data");
			intact++;
		} else {
			obj_build(obj[i], i);
			rebuilt++;
		}
	}
	printf("after: %u pinned objects kept, %u unpinned came back intact (verified), "
	       "%u were purged and rebuilt\n",
	       pinned, intact, rebuilt);
	check(rebuilt > 0, "some unpinned object was purged");

	/* pointers that are not the pool's, spans that leave a slab */
	void *heap = malloc(OBJ_SIZE);
	check(heap && vr_mark_ptr(heap, OBJ_SIZE) == -EINVAL, "a heap pointer is rejected");
	uint8_t *end = pool.slab[0].base + SLAB_BYTES;
	check(vr_mark_ptr(end - 10, 20) == -EINVAL, "a span past the slab is rejected");
	check(vr_region_of(heap) == NULL && vr_region_of(end - 1) == pool.slab[0].region,
	      "vr_region_of");
	free(heap);
	printf("rejected: heap pointer and a span leaving its slab (-EINVAL)\n");

	/* freed slots are reused: obj[1] was the first one freed */
	uint8_t *again = obj_alloc(&pool);
	check(again == pool.slab[0].base + OBJ_SIZE, "obj_alloc reuses the first free slot");
	obj_free(&pool, again);
	vr_ctx_destroy(pool.ctx);
	printf("summary: ok\n");
	return 0;
}
