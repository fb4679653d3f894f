// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * table.c - a cache's entries: hash table by page number, LRU of the
 * pages SQLite released, entries made, recycled and freed (pcache.h)
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pcache.h"

#define VSQ_HASH_MIN 256u

/* doubles the table (or makes the first one); -ENOMEM leaves it as it was */
static int grow(struct vsq_cache *c)
{
	unsigned n = c->n_hash ? c->n_hash * 2 : VSQ_HASH_MIN;
	struct vsq_page **h = calloc(n, sizeof(*h));
	if (!h)
		return -ENOMEM;
	for (unsigned i = 0; i < c->n_hash; i++) {
		for (struct vsq_page *p = c->hash[i], *next; p; p = next) {
			next = p->hnext;
			p->hnext = h[p->key & (n - 1)];
			h[p->key & (n - 1)] = p;
		}
	}
	free(c->hash);
	c->hash = h;
	c->n_hash = n;
	return 0;
}

int vsq_insert(struct vsq_cache *c, struct vsq_page *p)
{
	/* a full table only slows lookups: failing to grow one is no error */
	if ((c->n_page >= c->n_hash || !c->hash) && grow(c) < 0 && !c->hash)
		return -ENOMEM;
	unsigned s = vsq_slot(c, p->key);
	p->hnext = c->hash[s];
	c->hash[s] = p;
	c->n_page++;
	if (p->key > c->max_key)
		c->max_key = p->key;
	return 0;
}

void vsq_unhash(struct vsq_cache *c, struct vsq_page *p)
{
	struct vsq_page **pp = &c->hash[vsq_slot(c, p->key)];
	while (*pp != p)
		pp = &(*pp)->hnext;
	*pp = p->hnext;
	p->hnext = NULL;
	c->n_page--;
}

/* @p, just released by SQLite, to the young end of the LRU: hot (object
 * still pinned) in a purgeable cache, the oldest hot one cooled when there
 * are more than hot_max */
void vsq_lru_push(struct vsq_cache *c, struct vsq_page *p)
{
	p->lnext = NULL;
	p->lprev = c->lru_young;
	if (c->lru_young)
		c->lru_young->lnext = p;
	else
		c->lru_old = p;
	c->lru_young = p;
	if (c->purgeable && !p->vol) {
		p->hot = true;
		if (!c->lru_hot)
			c->lru_hot = p;
		if (++c->n_hot > c->hot_max)
			vsq_cool(c, c->hot_max - c->hot_max / VSQ_COOL_DIV);
	}
}

void vsq_lru_del(struct vsq_cache *c, struct vsq_page *p)
{
	if (p->hot) {
		p->hot = false;
		c->n_hot--;
		if (c->lru_hot == p)
			c->lru_hot = p->lnext; /* younger: hot too, or NULL */
	}
	if (p->lprev)
		p->lprev->lnext = p->lnext;
	else
		c->lru_old = p->lnext;
	if (p->lnext)
		p->lnext->lprev = p->lprev;
	else
		c->lru_young = p->lprev;
	p->lprev = p->lnext = NULL;
}

/* unpins the oldest hot pages until at most @keep are hot, several in one
 * vr_obj_unpin_many() (one clock read, the gauges and the limit settled
 * once); a page whose object cannot be unpinned is dropped (it is clean:
 * SQLite reads it again) */
void vsq_cool(struct vsq_cache *c, unsigned keep)
{
	while (c->n_hot > keep) {
		struct vsq_page *pg[VSQ_COOL_MAX];
		struct vr_obj *o[VSQ_COOL_MAX];
		unsigned n = 0;
		for (; n < VSQ_COOL_MAX && c->n_hot > keep; n++) {
			struct vsq_page *p = c->lru_hot;
			p->hot = false;
			c->n_hot--;
			c->lru_hot = p->lnext;
			pg[n] = p;
			o[n] = p->obj;
		}
		c->st.unpins += n;
		bool failed = vr_obj_unpin_many(o, n) < 0;
		for (unsigned i = 0; i < n; i++) {
			/* on an error, each object says whether it was unpinned */
			if (failed && !(vr_obj_status(o[i]) & VR_STATE_VOLATILE))
				vsq_page_free(c, pg[i]);
			else
				pg[i]->vol = true;
		}
	}
}

/* an entry that is in no table nor list: its object, and with it the
 * entry (the side-car); under qlock, off the purge queue (pcache.h) */
void vsq_entry_free(struct vsq_cache *c, struct vsq_page *p)
{
	pthread_mutex_lock(&c->qlock);
	if (p->queued) {
		if (p->qprev)
			p->qprev->qnext = p->qnext;
		else
			c->queue = p->qnext;
		if (p->qnext)
			p->qnext->qprev = p->qprev;
	}
	vr_obj_free(p->obj);
	pthread_mutex_unlock(&c->qlock);
}

/* frees spares until at most @keep are left */
void vsq_spares_trim(struct vsq_cache *c, unsigned keep)
{
	while (c->n_spare > keep) {
		struct vsq_page *p = c->spare;
		c->spare = p->hnext;
		c->n_spare--;
		vsq_entry_free(c, p);
	}
}

/* the spares a cache keeps: as many as fit in cache_size (or the share
 * of a limit, pcache.c) beside its
 * pages, and at least a pool's worth (pool.c): freeing an object costs a
 * hole punched and a TLB flush, and SQLite drops pages in bursts
 * (xTruncate, a temporary database) that it makes again soon after */
unsigned vsq_spares_max(const struct vsq_cache *c)
{
	unsigned keep = vsq_pool_keep(c->sz_page);
	unsigned room = c->n_cap > c->n_page ? c->n_cap - c->n_page : 0;
	return room > keep ? room : keep;
}

/* drops an entry of the table: a spare (object unpinned) while there is
 * room for one (vsq_spares_max), else freed */
void vsq_page_free(struct vsq_cache *c, struct vsq_page *p)
{
	if (p->pinned)
		c->n_pinned--;
	else
		vsq_lru_del(c, p);
	vsq_unhash(c, p);
	if (!c->purgeable || c->n_spare >= vsq_spares_max(c) ||
	    (!p->vol && vr_obj_unpin(p->obj) < 0)) {
		vsq_entry_free(c, p);
		return;
	}
	p->vol = true;
	p->pinned = false;
	p->spare = true;
	p->hnext = c->spare;
	c->spare = p;
	c->n_spare++;
}

/* a spare with its object pinned (its bytes are of no interest), or NULL */
static struct vsq_page *spare_take(struct vsq_cache *c)
{
	while (c->spare) {
		struct vsq_page *p = c->spare;
		c->spare = p->hnext;
		c->n_spare--;
		p->hnext = NULL;
		p->spare = false;
		if (vr_obj_pin(p->obj) >= 0) {
			p->vol = false;
			c->st.spared++;
			return p;
		}
		vsq_entry_free(c, p);
	}
	return NULL;
}

/* a released page (of the LRU), taken out of the table and the LRU with
 * its object pinned (its bytes are of no interest: the page gets new
 * ones), or NULL */
static struct vsq_page *recycle(struct vsq_cache *c, struct vsq_page *p)
{
	vsq_lru_del(c, p);
	vsq_unhash(c, p);
	/* VR_PURGED is as good as VR_INTACT here; an error loses the entry */
	if (p->vol && vr_obj_pin(p->obj) < 0) {
		vsq_entry_free(c, p);
		return NULL;
	}
	p->vol = false;
	c->st.recycled++;
	return p;
}

/* a new object of the cache's group, the entry in its side-car (zeroed) */
static struct vsq_page *entry_new(struct vsq_cache *c)
{
	struct vr_obj *o;
	if (vr_obj_new_in(c->grp, c->sz_page, c->sz_entry, 0, &o) < 0)
		return NULL;
	c->grown += c->sz_page; /* memory the budget has not seen yet (pcache.c) */
	struct vsq_page *p = vr_obj_extra(o);
	p->obj = o;
	p->base.pBuf = vr_obj_ptr(o);
	p->base.pExtra = (char *)p + VSQ_HDR;
	return p;
}

/*
 * A new page for @key, pinned, in the table: a spare, else the oldest
 * released page's entry when the cache holds cache_size pages already (as
 * SQLite's default cache recycles) or memory is @tight (the budget is
 * low: an object reused costs no system call, while a new one would grow
 * the memory the library then has to purge, a hole punched and a TLB
 * flush for each page), else a new object.  The first pointer
 * of its extra is zeroed, as SQLite's default cache does: SQLite takes a
 * page whose extra starts with a NULL pointer for one it must initialise
 * (and initialises the rest itself).
 */
struct vsq_page *vsq_page_make(struct vsq_cache *c, unsigned key, bool tight)
{
	if (tight)
		vsq_drain_queued(c); /* recycling a purged page would grow memory */
	bool full = c->purgeable && c->lru_old && (tight || c->n_page + 1 >= c->n_cap);
	struct vsq_page *p = NULL;
	if (full && tight)
		p = recycle(c, c->lru_old); /* a spare may be purged: pinning it grows memory */
	if (!p)
		p = spare_take(c);
	if (!p && full)
		p = recycle(c, c->lru_old);
	if (!p)
		p = entry_new(c);
	if (!p)
		return NULL;
	p->key = key;
	p->pinned = true;
	memset(p->base.pExtra, 0, c->sz_extra < sizeof(void *) ? c->sz_extra : sizeof(void *));
	if (vsq_insert(c, p) < 0) {
		vsq_entry_free(c, p);
		return NULL;
	}
	c->n_pinned++;
	c->st.created++;
	return p;
}

/* frees released pages, oldest first, until at most @keep are left */
void vsq_trim(struct vsq_cache *c, unsigned keep)
{
	while (c->n_page > keep && c->lru_old)
		vsq_page_free(c, c->lru_old);
}

/* frees every entry with a key >= @limit, pinned or not */
void vsq_truncate(struct vsq_cache *c, unsigned limit)
{
	if (!c->hash || limit > c->max_key)
		return;
	if (c->max_key - limit < c->n_hash / 2) {
		for (uint64_t k = limit; k <= c->max_key; k++) {
			struct vsq_page *p = vsq_find(c, (unsigned)k);
			if (p)
				vsq_page_free(c, p);
		}
	} else {
		for (unsigned i = 0; i < c->n_hash; i++) {
			for (struct vsq_page *p = c->hash[i], *next; p; p = next) {
				next = p->hnext;
				if (p->key >= limit)
					vsq_page_free(c, p);
			}
		}
	}
	c->max_key = limit ? limit - 1 : 0;
}
