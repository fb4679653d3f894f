/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * thumb-cache.c - a keyed cache of thumbnails, 200 bytes to 256 KiB each
 *
 * Shows: objects as a cache author uses them.  A hash map from a key (a
 * file name) to an entry holding one purgeable object.  get() pins the
 * entry's object: VR_INTACT is a hit, VR_PURGED means the library took
 * the memory back and the thumbnail is rendered again; put() unpins it.
 * The library packs small thumbnails several to a page and gives big
 * ones their own pages; the ctx's byte limit (vr_ctx_set_limit) bounds
 * what unpinned thumbnails may hold, and the least recently unpinned go
 * first.  Entries whose object was purged are freed by an occasional
 * sweep (vr_obj_status says VR_STATE_PURGED), so the map does not grow
 * without bound.  Every hit is verified byte for byte.
 *
 * Build (installed library):
 *   cc -o thumb-cache thumb-cache.c $(pkg-config --cflags --libs libvrange)
 * Run:
 *   ./thumb-cache [REQUESTS]      (default 6000)
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vrange.h>

#define NBUCKETS 1024
#define NFILES 3000
#define LIMIT ((size_t)8 << 20) /* unpinned thumbnails: at most 8 MiB */

struct entry {
	char key[40];
	struct vr_obj *obj;
	size_t size;
	struct entry *next;
};

struct thumbs {
	struct vr_ctx *ctx;
	struct entry *bucket[NBUCKETS];
	unsigned long hits, misses, rerenders, swept;
};

static void fail(const char *what, int err)
{
	fprintf(stderr, "thumb-cache: %s: %s\n", what, err ? strerror(-err) : "check failed");
	exit(1);
}

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211ull;
	return h;
}

/* thumbnail sizes: mostly small, a few large (200 B .. 256 KiB) */
static size_t thumb_size(const char *key)
{
	uint64_t h = hash(key);
	unsigned k = (unsigned)(h % 11); /* 2^0 .. 2^10 times 200 B, capped */
	size_t s = 200u << k;
	s += (size_t)(h >> 32) % s;
	return s > 256 * 1024 ? 256 * 1024 : s;
}

/* the expensive part: "render" the thumbnail of key */
static void render(const char *key, uint8_t *p, size_t n)
{
	uint64_t x = hash(key) | 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)(x | 1); /* never 0: a purged byte reads 0 */
	}
}

static bool thumb_ok(const char *key, const uint8_t *p, size_t n)
{
	uint64_t x = hash(key) | 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (p[i] != (uint8_t)(x | 1))
			return false;
	}
	return true;
}

/* the thumbnail of key, pinned: use it, then thumbs_put() */
static struct entry *thumbs_get(struct thumbs *t, const char *key)
{
	struct entry **head = &t->bucket[hash(key) % NBUCKETS], *e;
	for (e = *head; e; e = e->next)
		if (strcmp(e->key, key) == 0)
			break;
	if (!e) { /* a miss: a new object, pinned and zero-filled */
		e = calloc(1, sizeof(*e));
		if (!e)
			fail("calloc", 0);
		snprintf(e->key, sizeof(e->key), "%s", key);
		e->size = thumb_size(key);
		int rc = vr_obj_new(t->ctx, e->size, 0, &e->obj);
		if (rc < 0)
			fail("vr_obj_new", rc);
		render(key, vr_obj_ptr(e->obj), e->size);
		e->next = *head;
		*head = e;
		t->misses++;
		return e;
	}
	int rc = vr_obj_pin(e->obj);
	if (rc < 0)
		fail("vr_obj_pin", rc);
	if (rc == VR_PURGED) { /* the library took it back: render again */
		render(key, vr_obj_ptr(e->obj), e->size);
		t->rerenders++;
	} else {
		if (!thumb_ok(key, vr_obj_ptr(e->obj), e->size))
			fail("a hit returned data that is not the thumbnail", 0);
		t->hits++;
	}
	return e;
}

static void thumbs_put(struct thumbs *t, struct entry *e)
{
	(void)t;
	int rc = vr_obj_unpin(e->obj); /* may be purged from now on */
	if (rc < 0)
		fail("vr_obj_unpin", rc);
}

/* free the entries whose thumbnails were purged (they would be rendered
 * again anyway): the map and the object count stay bounded */
static void thumbs_sweep(struct thumbs *t)
{
	for (unsigned b = 0; b < NBUCKETS; b++)
		for (struct entry **pe = &t->bucket[b]; *pe;) {
			struct entry *e = *pe;
			if (vr_obj_status(e->obj) & VR_STATE_PURGED) {
				*pe = e->next;
				vr_obj_free(e->obj);
				free(e);
				t->swept++;
			} else {
				pe = &e->next;
			}
		}
}

int main(int argc, char **argv)
{
	struct thumbs t = { 0 };
	unsigned long requests = argc > 1 ? strtoul(argv[1], NULL, 10) : 6000;
	uint64_t seed = 11;
	int rc = vr_ctx_new(0, &t.ctx);
	if (rc < 0)
		fail("vr_ctx_new", rc);
	rc = vr_ctx_set_limit(t.ctx, LIMIT);
	if (rc < 0)
		fail("vr_ctx_set_limit", rc);

	for (unsigned long i = 1; i <= requests; i++) {
		/* a skewed workload: 3 of 4 requests go to the first 200 files */
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		unsigned r = (unsigned)(seed >> 33);
		char key[40];
		snprintf(key, sizeof(key), "photos/IMG_%04u.jpg",
			 (r & 3) ? (r >> 2) % 200 : (r >> 2) % NFILES);
		struct entry *e = thumbs_get(&t, key);
		thumbs_put(&t, e);
		if (vr_ctx_stat(t.ctx, VR_STAT_VOLATILE_BYTES) > LIMIT)
			fail("the limit does not hold", 0);
		if (i % 2000 == 0) {
			thumbs_sweep(&t);
			printf("%6lu requests: %lu hits, %lu misses, %lu re-rendered, %lu swept | "
			       "%" PRIu64 " objects, %.2f MiB unpinned, %.2f MiB held\n",
			       i, t.hits, t.misses, t.rerenders, t.swept,
			       vr_ctx_stat(t.ctx, VR_STAT_OBJECTS),
			       vr_ctx_stat(t.ctx, VR_STAT_VOLATILE_BYTES) / 1048576.0,
			       vr_ctx_stat(t.ctx, VR_STAT_FOOTPRINT) / 1048576.0);
		}
	}
	/* nothing is pinned: what the cache holds is what the limit allows,
	 * plus pages shared with purged neighbours */
	uint64_t held = vr_ctx_stat(t.ctx, VR_STAT_FOOTPRINT);
	printf("summary: %lu requests, %lu hits (all verified), %lu re-rendered after a purge; "
	       "%.2f MiB held for a %.0f MiB limit\n",
	       requests, t.hits, t.rerenders, held / 1048576.0, LIMIT / 1048576.0);
	if (t.hits == 0 || (requests >= 6000 && t.rerenders == 0) || held > 2 * LIMIT)
		fail("unexpected counts", 0);
	for (unsigned b = 0; b < NBUCKETS; b++)
		while (t.bucket[b]) {
			struct entry *e = t.bucket[b];
			t.bucket[b] = e->next;
			vr_obj_free(e->obj);
			free(e);
		}
	vr_ctx_destroy(t.ctx);
	return 0;
}
