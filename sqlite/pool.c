// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * pool.c - the groups of destroyed caches kept for new ones
 *
 * SQLite opens and closes caches often (each connection, each temporary
 * database, VACUUM's copy).  Freeing an object returns its memory to the
 * kernel (a hole punched in the memfd, a TLB flush) and a new object
 * faults its pages in again: measured, 15% of a workload's time.  So a
 * destroyed cache's group goes to this process-wide pool instead, with
 * its spare entries, their objects unpinned (the library may purge them
 * like any volatile bytes), when they are at most VSQ_POOL_BYTES of pages
 * (a larger cache's group is destroyed whole: trimming it object by
 * object punched a hole per page), one group per page size; a new cache
 * with the same page and extra sizes takes it over (objects cannot move
 * between groups, S35).  The pool is emptied at
 * xShutdown: its groups belong to the ctx, which may go after that.
 * One mutex, taken at xCreate and xDestroy.
 */
#include <pthread.h>
#include <stdint.h>

#include "pcache.h"

#define VSQ_POOL_BYTES (8u << 20)
#define VSQ_POOL_MIN_SHIFT 9 /* 512 */
#define VSQ_POOL_SIZES 8     /* .. 65536 */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	struct vr_group *grp; /* no purge handler */
	size_t sz_extra;
	struct vsq_page *spare; /* through hnext */
	unsigned n;
} pool[VSQ_POOL_SIZES];

/* the pool's slot for page size @sz, or -1 */
static int slot_of(size_t sz)
{
	for (int i = 0; i < VSQ_POOL_SIZES; i++)
		if (sz == (size_t)1 << (VSQ_POOL_MIN_SHIFT + i))
			return i;
	return -1;
}

/* a pooled group for new cache @c (its group and spares), or false */
bool vsq_pool_take(struct vsq_cache *c)
{
	int i = slot_of(c->sz_page);
	if (i < 0)
		return false;
	pthread_mutex_lock(&lock);
	bool got = pool[i].grp && pool[i].sz_extra == c->sz_extra;
	if (got) {
		c->grp = pool[i].grp;
		c->spare = pool[i].spare;
		c->n_spare = pool[i].n;
		pool[i].grp = NULL;
	}
	pthread_mutex_unlock(&lock);
	if (got)
		c->st.pooled++;
	return got;
}

/* cache @c's group and spares to the pool (the group's purge handler
 * removed, no page left in the table), or false: the slot is taken */
bool vsq_pool_give(struct vsq_cache *c)
{
	int i = slot_of(c->sz_page);
	if (i < 0)
		return false;
	pthread_mutex_lock(&lock);
	bool fits = !pool[i].grp;
	if (fits) {
		pool[i].grp = c->grp;
		pool[i].sz_extra = c->sz_extra;
		pool[i].spare = c->spare;
		pool[i].n = c->n_spare;
	}
	pthread_mutex_unlock(&lock);
	return fits;
}

/* the spares a pooled group keeps: VSQ_POOL_BYTES of pages */
unsigned vsq_pool_keep(size_t sz_page)
{
	return (unsigned)(VSQ_POOL_BYTES / sz_page);
}

void vsq_pool_drain(void)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < VSQ_POOL_SIZES; i++) {
		vr_group_destroy(pool[i].grp); /* frees its objects */
		pool[i].grp = NULL;
		pool[i].spare = NULL;
		pool[i].n = 0;
	}
	pthread_mutex_unlock(&lock);
}
