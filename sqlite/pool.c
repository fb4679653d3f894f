// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * pool.c - entries of destroyed and shrunk caches kept for new ones
 *
 * SQLite opens and closes caches often (each connection, each temporary
 * database, VACUUM's copy).  Freeing an object returns its memory to the
 * kernel (a hole punched in the memfd, a TLB flush) and a new object
 * faults its pages in again: measured, 15% of a workload's time.  So
 * entries go to this process-wide pool instead, their objects unpinned
 * (the library may purge them like any volatile bytes), up to
 * VSQ_POOL_BYTES of pages per page size, and a new page of a cache with
 * the same page and extra sizes takes one from here.  The pool is emptied
 * at xShutdown: its objects belong to the ctx, which may go after that.
 * One mutex; taken only when a cache makes or drops an entry it had no
 * spare for.
 */
#include <pthread.h>
#include <stdlib.h>

#include "pcache.h"

#define VSQ_POOL_BYTES (8u << 20)
#define VSQ_POOL_MIN_SHIFT 9 /* 512 */
#define VSQ_POOL_SIZES 8     /* .. 65536 */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	size_t sz_extra;
	struct vsq_page *head; /* through hnext */
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

struct vsq_page *vsq_pool_get(struct vsq_cache *c)
{
	int i = slot_of(c->sz_page);
	struct vsq_page *p = NULL;
	if (i < 0)
		return NULL;
	pthread_mutex_lock(&lock);
	if (pool[i].head && pool[i].sz_extra == c->sz_extra) {
		p = pool[i].head;
		pool[i].head = p->hnext;
		pool[i].n--;
	}
	pthread_mutex_unlock(&lock);
	if (!p)
		return NULL;
	p->hnext = NULL;
	/* VR_PURGED is as good as VR_INTACT: the page gets new bytes */
	if (vr_obj_pin(p->obj) < 0) {
		vsq_entry_free(p);
		return NULL;
	}
	p->vol = false;
	return p;
}

void vsq_pool_put(struct vsq_cache *c, struct vsq_page *p)
{
	int i = slot_of(c->sz_page);
	if (i >= 0 && !p->vol && vr_obj_unpin(p->obj) == 0)
		p->vol = true;
	if (i >= 0 && p->vol) {
		pthread_mutex_lock(&lock);
		if (!pool[i].head)
			pool[i].sz_extra = c->sz_extra;
		bool fits = pool[i].sz_extra == c->sz_extra &&
			    (pool[i].n + 1) * c->sz_page <= VSQ_POOL_BYTES;
		if (fits) {
			p->hnext = pool[i].head;
			pool[i].head = p;
			pool[i].n++;
		}
		pthread_mutex_unlock(&lock);
		if (fits)
			return;
	}
	vsq_entry_free(p);
}

void vsq_pool_drain(void)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < VSQ_POOL_SIZES; i++) {
		while (pool[i].head) {
			struct vsq_page *p = pool[i].head;
			pool[i].head = p->hnext;
			vsq_entry_free(p);
		}
		pool[i].n = 0;
	}
	pthread_mutex_unlock(&lock);
}
