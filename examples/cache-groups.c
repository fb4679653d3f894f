/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cache-groups.c - a keyed cache on libvrange: groups, side-car bytes,
 * purge notification, regeneration.
 *
 * Entries are blobs keyed by an integer.  Each entry is one object; its
 * key lives in the object's side-car (never purged), so the purge handler
 * knows which table slot to clear.  Cheap entries (easy to rebuild) go to
 * a group of priority 1 with a limit of its own; expensive ones to a
 * group of priority 6: under pressure the cheap ones go first.
 *
 * The rules a cache keeps:
 *   - pin an entry while using it, unpin it when done;
 *   - vr_obj_pin() returning VR_PURGED is a miss: rebuild the bytes;
 *   - the purge handler may run in another thread (the monitor): the
 *     table is under a mutex, and the handler checks that the object is
 *     still unpinned before dropping it (a lookup may have pinned it first,
 *     and then regenerates it itself).
 *
 * Build: cc cache-groups.c $(pkg-config --cflags --libs libvrange)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vrange.h>

#define NKEYS 64
#define BLOB 16384

struct meta { /* the side-car: what the handler needs */
	uint32_t key;
	uint32_t len;
};

static struct vr_obj *table[NKEYS];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static int dropped, rebuilt;

static void fill(uint8_t *p, uint32_t key, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(key * 31 + i);
}

/* purged: drop the entry (the next lookup misses and rebuilds it) */
static void on_purge(struct vr_obj *o, void *arg)
{
	(void)arg;
	struct meta *m = vr_obj_extra(o);
	pthread_mutex_lock(&table_lock);
	/* a lookup that pinned it meanwhile got VR_PURGED and rebuilds it */
	if (table[m->key] == o && vr_obj_status(o) & VR_STATE_PURGED) {
		table[m->key] = NULL;
		vr_obj_free(o);
		dropped++;
	}
	pthread_mutex_unlock(&table_lock);
}

/* the entry for key, pinned (created or rebuilt if needed); NULL on error */
static struct vr_obj *lookup(struct vr_group *cheap, struct vr_group *dear, uint32_t key)
{
	pthread_mutex_lock(&table_lock);
	struct vr_obj *o = table[key];
	int rc = o ? vr_obj_pin(o) : VR_PURGED;
	if (!o) {
		struct vr_group *g = key % 4 ? cheap : dear;
		if (vr_obj_new_in(g, BLOB, sizeof(struct meta), 0, &o) < 0) {
			pthread_mutex_unlock(&table_lock);
			return NULL;
		}
		*(struct meta *)vr_obj_extra(o) = (struct meta){ key, BLOB };
		table[key] = o;
	}
	if (rc == VR_PURGED) { /* a miss: regenerate */
		fill(vr_obj_ptr(o), key, BLOB);
		rebuilt++;
	}
	pthread_mutex_unlock(&table_lock);
	return rc < 0 ? NULL : o;
}

static int use(struct vr_obj *o, uint32_t key)
{
	const uint8_t *p = vr_obj_ptr(o);
	for (size_t i = 0; i < BLOB; i++)
		if (p[i] != (uint8_t)(key * 31 + i))
			return -1;
	return vr_obj_unpin(o);
}

int main(void)
{
	struct vr_ctx *ctx;
	struct vr_group *cheap, *dear;
	int err = vr_ctx_new(VR_CTX_NO_MONITOR, &ctx);
	if (!err)
		err = vr_group_new(ctx, 1, &cheap);
	if (!err)
		err = vr_group_new(ctx, 6, &dear);
	if (err) {
		fprintf(stderr, "cache-groups: %s\n", strerror(-err));
		return 1;
	}
	vr_group_set_purge_handler(cheap, on_purge, NULL);
	vr_group_set_purge_handler(dear, on_purge, NULL);
	/* at most 16 cheap entries' bytes stay unpurged */
	vr_group_set_limit(cheap, 16 * BLOB);

	for (int round = 0; round < 3; round++)
		for (uint32_t k = 0; k < NKEYS; k++) {
			struct vr_obj *o = lookup(cheap, dear, k);
			if (!o || use(o, k) < 0) {
				fprintf(stderr, "cache-groups: entry %u is wrong\n", k);
				return 1;
			}
		}
	uint64_t cheap_left = vr_group_stat(cheap, VR_STAT_VOLATILE_BYTES);
	/* memory is short: the ctx purges the cheap group first */
	ssize_t got = vr_ctx_purge(ctx, 8 * BLOB);
	uint64_t dear_purged = vr_group_stat(dear, VR_STAT_PURGES);
	printf("summary: cache-groups: %d rebuilt, %d dropped, %zd bytes purged, expensive "
	       "entries purged: %llu\n",
	       rebuilt, dropped, got, (unsigned long long)dear_purged);
	int ok = cheap_left <= 16 * BLOB && got >= 8 * BLOB && dear_purged == 0 && dropped > 0 &&
		 rebuilt > NKEYS;
	vr_ctx_destroy(ctx); /* frees the groups and their objects */
	return ok ? 0 : 1;
}
