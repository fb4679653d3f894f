/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pcache.h - libvrange-sqlite's page cache, internal (S38)
 *
 * One struct vsq_cache per SQLite cache (xCreate), one struct vsq_page per
 * page: the page buffer is a libvrange object of szPage bytes, SQLite's
 * szExtra bytes follow the struct in malloc'd memory, which is never
 * purged (the side-car of the objects API, S36, replaces that malloc).
 *
 * Rules for code here:
 *   - SQLite serialises the calls on one cache (its connection's or shared
 *     cache's mutex): nothing here locks; state shared between caches is
 *     only the global (set while SQLite is not initialised) and the
 *     counters (atomics, added to once per cache at xDestroy).
 *   - A page SQLite holds (pinned) has its object pinned.  A page SQLite
 *     released (on the cache's LRU) has its object unpinned (vol) in a
 *     purgeable cache, and pinned in an in-memory one (bPurgeable 0, whose
 *     pages are never released without discard anyway).
 *   - Except the hot pages: in a purgeable cache the hot_max pages SQLite
 *     released last stay pinned (hot), the youngest end of the LRU, and
 *     are unpinned when younger ones push them out (vsq_cool).  SQLite
 *     fetches the same few pages (b-tree roots and inner pages) again and
 *     again: measured on speedtest1, most fetches hit a page released a
 *     few fetches earlier, and a pin + unpin pair for each cost more than
 *     the default cache's whole fetch.  Hot pages are at most hot_max
 *     pages of pinned memory more; all are cooled when the memory budget
 *     runs low and at xShrink.
 *   - A dropped page's entry is kept as a spare, its object unpinned, while
 *     pages and spares together are within cache_size (purgeable caches):
 *     freeing an object returns its memory to the kernel (a hole punched,
 *     a TLB flush), and a new one faults its pages in again.
 *   - The library purges unpinned objects at any time; this code learns
 *     of it only through vr_obj_pin() (VR_PURGED) or vr_obj_status(): a
 *     purged page is a miss and its entry is freed (lazily, when seen).
 */
#ifndef VSQ_PCACHE_H
#define VSQ_PCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>
#include <vrange.h>

struct vsq_page {
	sqlite3_pcache_page base;       /* first: SQLite hands this pointer back */
	struct vr_obj *obj;             /* the page buffer (base.pBuf) */
	struct vsq_page *hnext;         /* hash chain */
	struct vsq_page *lprev, *lnext; /* the cache's LRU, while not pinned */
	unsigned key;
	bool pinned; /* held by SQLite: between xFetch and xUnpin */
	bool vol;    /* the object is unpinned (volatile) */
	bool hot;    /* released, object still pinned: one of the n_hot youngest */
		     /* szExtra bytes follow, 16-byte aligned: base.pExtra */
};

/* what a cache counted; summed into the totals at xDestroy */
struct vsq_stats {
	uint64_t fetches;        /* xFetch calls */
	uint64_t hits;           /* pages found intact */
	uint64_t purged;         /* pages found purged: a miss */
	uint64_t created;        /* pages made (new or recycled) */
	uint64_t recycled;       /* of those, an old page's object reused */
	uint64_t refused_budget; /* createFlag 1 answered NULL: budget low */
	uint64_t refused_pinned; /* createFlag 1 answered NULL: 90% pinned */
	uint64_t spared;         /* of those, a dropped page's object reused */
	uint64_t pooled;         /* of those, an object from the pool (pool.c) */
	uint64_t shrinks;        /* xShrink calls */
	uint64_t hot_hits;       /* of the hits, a hot page: no pin needed */
	uint64_t unpins;         /* objects unpinned when their page cooled */
};

struct vsq_cache {
	struct vr_ctx *ctx;
	size_t sz_page, sz_extra, sz_entry;
	bool purgeable;
	uint64_t seen_usage; /* VR_STAT_LIMIT_USAGE when last read */
	uint64_t grown;      /* bytes of new objects since it last changed */
	bool stress;         /* xFetch refused a page for the budget: see x_pagecount */
	unsigned n_max, n90; /* cache_size in pages, 90% of it */
	unsigned n_page;     /* entries, pinned or not (purged ones until seen) */
	unsigned n_pinned;
	unsigned max_key;
	unsigned n_hash; /* a power of two */
	struct vsq_page **hash;
	struct vsq_page *lru_old, *lru_young; /* unpinned entries, oldest first */
	struct vsq_page *lru_hot;             /* the oldest hot entry, or NULL */
	unsigned n_hot, hot_max;
	struct vsq_page *spare; /* dropped entries kept for reuse (hnext) */
	unsigned n_spare;
	struct vsq_stats st;
};

static inline unsigned vsq_slot(const struct vsq_cache *c, unsigned key)
{
	return key & (c->n_hash - 1);
}

/* the entry of page @key, or NULL (inline: once per xFetch) */
static inline struct vsq_page *vsq_find(const struct vsq_cache *c, unsigned key)
{
	if (!c->hash)
		return NULL;
	struct vsq_page *p = c->hash[vsq_slot(c, key)];
	while (p && p->key != key)
		p = p->hnext;
	return p;
}

/* table.c: the hash table, the LRU, entries */
int vsq_insert(struct vsq_cache *c, struct vsq_page *p);
void vsq_unhash(struct vsq_cache *c, struct vsq_page *p);
void vsq_lru_push(struct vsq_cache *c, struct vsq_page *p);
void vsq_cool(struct vsq_cache *c, unsigned keep);
void vsq_lru_del(struct vsq_cache *c, struct vsq_page *p);
void vsq_page_free(struct vsq_cache *c, struct vsq_page *p);
void vsq_spares_trim(struct vsq_cache *c, unsigned keep);
void vsq_entry_free(struct vsq_page *p);

/* pool.c: entries kept between caches (objects unpinned) */
struct vsq_page *vsq_pool_get(struct vsq_cache *c);
void vsq_pool_put(struct vsq_cache *c, struct vsq_page *p);
void vsq_pool_drain(void);
struct vsq_page *vsq_page_make(struct vsq_cache *c, unsigned key, bool tight);
void vsq_trim(struct vsq_cache *c, unsigned keep);
void vsq_sweep_purged(struct vsq_cache *c);
void vsq_truncate(struct vsq_cache *c, unsigned limit);

/* pcache.c: the totals of destroyed caches (for tests and benchmarks) */
void vsq_stats_add(const struct vsq_stats *s);
void vsq_stats_get(struct vsq_stats *out);

#endif
