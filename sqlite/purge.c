// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * purge.c - a cache's purge handler (S37) and its queue (pcache.h)
 *
 * The handler runs on the thread that purged, concurrently with SQLite's
 * calls on the cache, so it touches nothing of the cache but the queue,
 * under qlock; the cache's own calls drop the queued entries from the
 * table.  An entry's object is freed only under qlock (vsq_entry_free):
 * holding it, the handler reads a live object's status and side-car.
 */
#include "pcache.h"

void vsq_on_purge(struct vr_obj *o, void *arg)
{
	struct vsq_cache *c = arg;
	pthread_mutex_lock(&c->qlock);
	/* purged, and not pinned again by SQLite's thread since (nor freed:
	 * then the status is an error, or that of a new page of the same
	 * group, which is queued only if it is purged too) */
	int st = vr_obj_status(o);
	struct vsq_page *p = st >= 0 && (st & VR_STATE_PURGED) && (st & VR_STATE_VOLATILE)
				     ? vr_obj_extra(o)
				     : NULL;
	if (p && !p->queued) {
		p->queued = true;
		p->qprev = NULL;
		p->qnext = c->queue;
		if (c->queue)
			c->queue->qprev = p;
		c->queue = p;
		atomic_store_explicit(&c->queued, true, memory_order_relaxed);
	}
	pthread_mutex_unlock(&c->qlock);
}

/* the first queued entry, off the queue, or NULL */
static struct vsq_page *pop(struct vsq_cache *c)
{
	pthread_mutex_lock(&c->qlock);
	struct vsq_page *p = c->queue;
	if (p) {
		c->queue = p->qnext;
		if (c->queue)
			c->queue->qprev = NULL;
		p->queued = false;
	} else {
		atomic_store_explicit(&c->queued, false, memory_order_relaxed);
	}
	pthread_mutex_unlock(&c->qlock);
	return p;
}

/*
 * Drops the queued entries that are still released pages, purged: a miss
 * from now on, their entries spares or freed (vsq_page_free).  An entry
 * SQLite took again (pinned), a spare, or one whose object was pinned and
 * unpinned since (intact), stays.  One entry off the queue at a time: the
 * handler may queue it again while it is looked at, and qlock is not held
 * over vsq_page_free, which takes it.
 */
void vsq_drain(struct vsq_cache *c)
{
	struct vsq_page *p;
	while ((p = pop(c))) {
		if (p->pinned || p->spare || !p->vol)
			continue;
		int st = vr_obj_status(p->obj);
		if (st < 0 || !(st & VR_STATE_PURGED))
			continue;
		c->st.purged++;
		vsq_page_free(c, p);
	}
}

/* empties the queue without looking at the entries: the handler is
 * removed (no call in flight), the entries left are spares */
void vsq_queue_forget(struct vsq_cache *c)
{
	pthread_mutex_lock(&c->qlock);
	for (struct vsq_page *p = c->queue; p; p = p->qnext)
		p->queued = false;
	c->queue = NULL;
	atomic_store_explicit(&c->queued, false, memory_order_relaxed);
	pthread_mutex_unlock(&c->qlock);
}
