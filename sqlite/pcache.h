/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pcache.h - libvrange-sqlite's page cache, internal (S38)
 *
 * One struct vsq_cache per SQLite cache (xCreate), with a libvrange group
 * of its own (S35): one struct vsq_page per page, which lives in the
 * side-car (S36) of the page's object, the page buffer (szPage bytes):
 * the entry, then SQLite's szExtra bytes, never purged.
 *
 * Rules for code here:
 *   - SQLite serialises the calls on one cache (its connection's or shared
 *     cache's mutex): the table, the LRU, the spares and every field of
 *     an entry but the queue's are touched only by those calls, without
 *     a lock.  State shared between caches is the global (set while
 *     SQLite is not initialised), the pool (its mutex) and the counters
 *     (atomics, added to once per cache at xDestroy).
 *   - The purge queue is the exception: the group's purge handler
 *     (vsq_on_purge, S37) runs on whichever thread purged (the monitor
 *     thread, or a thread in a vr_* call that purged, SQLite's own in
 *     vr_obj_unpin or vr_group_purge), with no library lock held, at any
 *     time.  It only queues the purged page's entry under qlock, and the
 *     cache's own calls drop the queued entries (vsq_drain).  Every
 *     vr_obj_free of an entry's object is made under qlock (vsq_entry_free),
 *     so the handler, which holds qlock while it reads the object's status
 *     and side-car, never sees a freed one.  Nothing calls into the library
 *     while holding qlock but vr_obj_free, vr_obj_status and vr_obj_extra,
 *     none of which purges or waits for a handler: no deadlock.
 *   - A page SQLite holds (pinned) has its object pinned.  A page SQLite
 *     released (on the cache's LRU) has its object unpinned (vol) in a
 *     purgeable cache, and pinned in an in-memory one (bPurgeable 0, whose
 *     pages are never released without discard anyway).
 *   - Except the hot pages: in a purgeable cache the pages SQLite
 *     released last stay pinned (hot), the youngest end of the LRU, at
 *     most hot_max of them; when one more comes, the oldest half are
 *     unpinned in one vr_obj_unpin_many() (vsq_cool: one clock read for
 *     the batch, measured on speedtest1 --size 25 under callgrind: 0.34%
 *     fewer instructions in all, the vDSO's clock from 0.7% of perf's
 *     samples to 0.05%).  SQLite
 *     fetches the same few pages (b-tree roots and inner pages) again and
 *     again: measured on speedtest1, most fetches hit a page released a
 *     few fetches earlier, and a pin + unpin pair for each cost more than
 *     the default cache's whole fetch.  Hot pages are at most hot_max
 *     pages of pinned memory more (64, at most 1/8 of cache_size: 62 at
 *     SQLite's default cache_size of 2000 KiB); all are cooled when the
 *     memory budget runs low and at xShrink.  64 rather than 16: on
 *     speedtest1 --size 25, 28% fewer pins (171k vs 237k of 1.2M
 *     fetches) and 0.36% fewer instructions; in time about 1% at most,
 *     within the noise (pinned, bench/speedtest1.sh -r 9, four runs of
 *     each, interleaved: vrange/default 1.005-1.043, median 1.031,
 *     against 1.018-1.044, median 1.040).
 *   - A dropped page's entry is kept as a spare, its object unpinned, while
 *     pages and spares together are within cache_size, or spares are fewer
 *     than a pool's worth (purgeable caches, vsq_spares_max):
 *     freeing an object returns its memory to the kernel (a hole punched,
 *     a TLB flush), and a new one faults its pages in again.
 *   - The library purges unpinned objects at any time; the purge handler
 *     queues them and the next xFetch past a held page, xPagecount or
 *     xShrink drops them from the table (a purged page is a miss).  A page
 *     found purged by vr_obj_pin() first is a miss as well.
 */
#ifndef VSQ_PCACHE_H
#define VSQ_PCACHE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>
#include <vrange.h>

/* in the side-car of its object (zeroed when the object is made) */
struct vsq_page {
	sqlite3_pcache_page base; /* first: SQLite hands this pointer back */
	/* what a lookup reads (key, pinned, hnext) in the side-car's first
	 * cache line, with base, which SQLite reads for the page it finds */
	unsigned key;
	bool pinned;            /* held by SQLite: between xFetch and xUnpin */
	bool vol;               /* the object is unpinned (volatile) */
	bool hot;               /* released, object still pinned: one of the n_hot youngest */
	bool spare;             /* not in the table: on the spare list */
	struct vsq_page *hnext; /* hash chain, or the spare list */
	struct vr_obj *obj;     /* the page buffer (base.pBuf) */
	struct vsq_page *lprev, *lnext; /* the cache's LRU, while not pinned */
	struct vsq_page *qprev, *qnext; /* the purge queue: under qlock */
	bool queued;                    /* on the purge queue: under qlock */
					/* szExtra bytes follow, 16-byte aligned: base.pExtra */
};

/* hot pages cooled at a time: hot_max / VSQ_COOL_DIV once there are more
 * than hot_max (table.c vsq_cool), at most VSQ_COOL_MAX per call */
#define VSQ_COOL_DIV 2
#define VSQ_COOL_MAX 32
/* percent of a cgroup limit one cache holds (pcache.c cap_update) */
#define VSQ_SHARE_DEFAULT 6
/* the entry's bytes before SQLite's extra */
#define VSQ_HDR ((sizeof(struct vsq_page) + 15) & ~(size_t)15)

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
	uint64_t refused_share;  /* createFlag 1 answered NULL: 90% of the share pinned */
};

struct vsq_cache {
	struct vr_ctx *ctx;
	struct vr_group *grp; /* this cache's objects (S35) */
	size_t sz_page, sz_extra, sz_entry;
	bool purgeable;
	uint64_t seen_usage; /* VR_STAT_LIMIT_USAGE when last read */
	uint64_t grown;      /* bytes of new objects since it last changed */
	bool stress;         /* xFetch refused a page for the budget: see x_pagecount */
	unsigned n_max, n90; /* cache_size in pages, 90% of it */
	unsigned n_cap;      /* n_max, or less under a memory limit (pcache.c) */
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
	pthread_mutex_t qlock;  /* the purge queue; held over vr_obj_free */
	struct vsq_page *queue; /* purged entries (qnext), under qlock */
	atomic_bool queued;     /* queue not empty: read without qlock */
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
unsigned vsq_spares_max(const struct vsq_cache *c);
void vsq_entry_free(struct vsq_cache *c, struct vsq_page *p);
struct vsq_page *vsq_page_make(struct vsq_cache *c, unsigned key, bool tight);
void vsq_trim(struct vsq_cache *c, unsigned keep);
void vsq_truncate(struct vsq_cache *c, unsigned limit);

/* purge.c: the purge handler and its queue */
void vsq_on_purge(struct vr_obj *o, void *arg);
void vsq_drain(struct vsq_cache *c);
void vsq_queue_forget(struct vsq_cache *c);

/* the purge queue has entries: drop them (once per slow xFetch) */
static inline void vsq_drain_queued(struct vsq_cache *c)
{
	if (atomic_load_explicit(&c->queued, memory_order_relaxed))
		vsq_drain(c);
}

/* pool.c: groups of destroyed caches kept for new ones (spares unpinned) */
bool vsq_pool_take(struct vsq_cache *c);
bool vsq_pool_give(struct vsq_cache *c);
unsigned vsq_pool_keep(size_t sz_page);
void vsq_pool_drain(void);

/* pcache.c: the totals of destroyed caches (for tests and benchmarks) */
void vsq_stats_add(const struct vsq_stats *s);
void vsq_stats_get(struct vsq_stats *out);
/* the most bytes of pages one cache held at once, since the process began */
uint64_t vsq_peak_bytes(void);
void vsq_note_size(const struct vsq_cache *c);

#endif
