// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * pcache.c - sqlite3_pcache_methods2 on libvrange objects (S38), and
 * vr_sqlite_pcache_install()
 *
 * The methods follow the documentation of sqlite3_pcache_methods2 in
 * sqlite3.h and, where it leaves a choice, what SQLite's default cache
 * (pcache1.c) does, so that SQLite behaves the same on both: cache_size
 * pages at most while some are released, the oldest released page
 * recycled, createFlag 1 refused when 90% of cache_size is pinned.
 */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "pcache.h"
#include "vrange-sqlite.h"

#define VSQ_RESERVE_DEFAULT 12 /* percent of the limit: about 1/8 */
#define VSQ_RESERVE_MAX 50
#define VSQ_SHARE_MAX 100
#define VSQ_CAP_MIN 32        /* pages: never less under a share */
#define VSQ_HEADROOM_DIV 4    /* the cache stops growing 1/4 of the limit below the budget */
#define VSQ_HOT_MAX 64        /* released pages kept pinned (pcache.h) */
#define VSQ_PRIORITY 4        /* a cache's group: as the default group and regions */
#define VSQ_SIDECAR_MAX 4096u /* S36 */

/* set while SQLite is not initialised; read by the methods */
static struct {
	struct vr_ctx *ctx;
	bool own;         /* ctx is ours: made by install/xInit, gone at xShutdown */
	unsigned reserve; /* percent of the memory limit, 0: policy off */
	unsigned share;   /* percent of a cgroup limit one cache holds, 0: no cap */
} g;

static _Atomic uint64_t totals[sizeof(struct vsq_stats) / sizeof(uint64_t)];

void vsq_stats_add(const struct vsq_stats *s)
{
	const uint64_t *v = (const uint64_t *)s;
	for (size_t i = 0; i < sizeof(*s) / sizeof(uint64_t); i++)
		atomic_fetch_add_explicit(&totals[i], v[i], memory_order_relaxed);
}

static _Atomic uint64_t peak;

uint64_t vsq_peak_bytes(void)
{
	return atomic_load_explicit(&peak, memory_order_relaxed);
}

void vsq_note_size(const struct vsq_cache *c)
{
	uint64_t b = (uint64_t)c->n_page * c->sz_page;
	uint64_t p = atomic_load_explicit(&peak, memory_order_relaxed);
	while (b > p && !atomic_compare_exchange_weak_explicit(&peak, &p, b, memory_order_relaxed,
							       memory_order_relaxed))
		;
}

void vsq_stats_get(struct vsq_stats *out)
{
	uint64_t *v = (uint64_t *)out;
	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		v[i] = atomic_load_explicit(&totals[i], memory_order_relaxed);
}

/*
 * The policy under a memory limit (vr_ctx_memory_limit() not 0), from the
 * budget for the ctx's volatile bytes (VR_STAT_BUDGET: the limit's line
 * less everything else counted, pinned pages included; 0 when there is no
 * limit or before the first poll):
 *   VSQ_TIGHT  the ctx's volatile bytes are within a quarter of the
 *              limit (VSQ_HEADROOM_DIV) of the budget: a new object would
 *              soon make the library purge another one (a hole punched, a
 *              TLB flush: measured, most of the time of a run under a
 *              cgroup limit), so a new page reuses the oldest released
 *              page's object instead (vsq_page_make), the cache stops
 *              growing.  The headroom absorbs the budget's moves between
 *              the monitor's polls (pinned pages, the heap, SQLite's
 *              sorter): with none, every unpin past the budget purged one
 *              object; measured on a 100 MB database at 128 MiB, 1/16 of
 *              the limit: 77k purges, 34 s; 1/8: 48k, 21 s; 1/4: 45k,
 *              14 s; 1/2: 45k, 14 s (6-8 s unlimited, same load).
 *              Since a big closed cache is destroyed whole (x_destroy),
 *              on a quiet machine: 1/8 6.0-6.2 s, 1/4 and 1/2 5.4-6.4 s
 *              (noise), 1.9-2.4 s unlimited; the time left was misses
 *              the disk served, which the share of a cgroup limit
 *              (cap_update, below) took away;
 *   VSQ_LOW    the budget, less the bytes of the objects this cache
 *              made since the monitor last measured (it polls), is below
 *              the reserve (VRANGE_SQLITE_RESERVE percent of the
 *              limit): the pinned pages (SQLite's dirty
 *              ones) are eating what is left, so createFlag 1 is answered
 *              "no page" and SQLite spills a dirty page, which becomes
 *              clean and purgeable, as its default cache does under
 *              sqlite3_soft_heap_limit64().
 */
enum { VSQ_ROOMY, VSQ_TIGHT, VSQ_LOW };

static int budget_state(struct vsq_cache *c)
{
	if (!g.reserve || !c->purgeable)
		return VSQ_ROOMY;
	uint64_t limit = vr_ctx_memory_limit(c->ctx);
	uint64_t budget = limit ? vr_ctx_stat(c->ctx, VR_STAT_BUDGET) : 0;
	if (!budget)
		return VSQ_ROOMY;
	/* the budget is as of the monitor's last poll: less what this cache
	 * allocated since (a new poll shows as a new usage) */
	uint64_t usage = vr_ctx_stat(c->ctx, VR_STAT_LIMIT_USAGE);
	if (usage != c->seen_usage) {
		c->seen_usage = usage;
		c->grown = 0;
	}
	budget = budget > c->grown ? budget - c->grown : 0;
	/* the reserve rounded, not limit / 100 first: under 100 bytes that
	 * made it 0, and a spent budget (1) never low */
	if (budget < limit / 100 * g.reserve + limit % 100 * g.reserve / 100)
		return VSQ_LOW;
	if (vr_ctx_stat(c->ctx, VR_STAT_VOLATILE_BYTES) + c->sz_page + limit / VSQ_HEADROOM_DIV >=
	    budget)
		return VSQ_TIGHT;
	return VSQ_ROOMY;
}

/*
 * The share of a cgroup limit (VRANGE_SQLITE_SHARE percent, 6 by
 * default: about 1/16): under a memory limit that counts the kernel's
 * file cache (vr_ctx_memory_limit_scope() VR_LIMIT_CGROUP, not
 * VRANGE_MEMORY_LIMIT's VR_LIMIT_PROCESS), a purgeable cache
 * holds at most that many bytes of pages, as if cache_size were that
 * small: past it a new page takes the oldest released page's object, and
 * createFlag 1 answers "no page" once 90% of it is pinned, so SQLite
 * spills dirty pages early.  The file cache holds the same database's pages (every
 * page this cache reads passes through it), and only the kernel can
 * reclaim it: a page this cache holds is a page the file cache cannot,
 * twice the memory for one copy of the data, and what neither holds is
 * read from the disk.  Measured on a 100 MB database with a 256 MiB
 * cache_size in a 128 MiB cgroup (VT_BIG_MIB=100 VT_BIG_LIMIT=128
 * tests/test-sqlite --cgroup, release build): no share 5.6-7.2 s (the
 * cache grew to ~80 MB, the file cache squeezed; ORDER BY k alone 1.0 s);
 * four runs of each, interleaved: 20% 4.2-5.7 s, 12% 4.1-5.0 s, 8%
 * 3.8-4.3 s, 4% 3.7-4.0 s; 2.0-2.8 s unlimited.  SQLite's default cache
 * in the cgroup, its cache_size tuned by hand: 2 MiB 3.2-3.9 s, 48 MiB
 * 4.1-5.5 s.  Smaller is faster for a database that does not fit; a
 * database that fits lost nothing (32 MB at 128 MiB: 0.73 s at 6%,
 * 0.89-0.90 s without the share), nor did random reads of a 100 MB one
 * (200k point queries: 3.6-4.9 s with 0, 6 or 25%, in the noise).
 */
static void cap_update(struct vsq_cache *c)
{
	/* only a limit that counts the file cache (VR_LIMIT_CGROUP) */
	uint64_t limit = g.share && c->purgeable ? vr_ctx_memory_limit(c->ctx) : 0;
	if (limit && vr_ctx_memory_limit_scope(c->ctx) != VR_LIMIT_CGROUP)
		limit = 0;
	uint64_t pages = limit / 100 * g.share / c->sz_page;
	if (pages < VSQ_CAP_MIN)
		pages = VSQ_CAP_MIN;
	c->n_cap = limit && pages < c->n_max ? (unsigned)pages : c->n_max;
}

static int x_init(void *arg)
{
	(void)arg;
	/* a caller's ctx is forgotten at xShutdown (it may be gone since):
	 * install again first */
	if (!g.own && !g.ctx)
		return SQLITE_MISUSE;
	if (g.own && !g.ctx && vr_ctx_new(0, &g.ctx) < 0)
		return SQLITE_NOMEM;
	return SQLITE_OK;
}

static void x_shutdown(void *arg)
{
	(void)arg;
	vsq_pool_drain(); /* its objects are the ctx's */
	if (g.own)
		vr_ctx_destroy(g.ctx);
	/* a caller's ctx may be destroyed once sqlite3_shutdown() returns
	 * (vrange-sqlite.h): not used again */
	g.ctx = NULL;
}

/* 90% of @n pages, rounded down (SQLite's rule for cache_size, and the
 * share's) */
static unsigned ninety(unsigned n)
{
	return n / 10 * 9 + n % 10 * 9 / 10;
}

/* hot pages (pcache.h): VSQ_HOT_MAX, at most 1/8 of cache_size */
static unsigned hot_max_of(unsigned n_max)
{
	return n_max / 8 < VSQ_HOT_MAX ? n_max / 8 : VSQ_HOT_MAX;
}

static void cache_free(struct vsq_cache *c)
{
	pthread_mutex_destroy(&c->qlock);
	free(c->hash);
	free(c);
}

/* its own group (or a pooled one), the purge handler set: NULL when the
 * entry does not fit in a side-car (S36: 4096 bytes; SQLite's szExtra is
 * a few hundred) or on an error */
static sqlite3_pcache *x_create(int sz_page, int sz_extra, int purgeable)
{
	if (!g.ctx || sz_page <= 0 || sz_extra < 0 || VSQ_HDR + (size_t)sz_extra > VSQ_SIDECAR_MAX)
		return NULL;
	struct vsq_cache *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	pthread_mutex_init(&c->qlock, NULL);
	c->ctx = g.ctx;
	c->sz_page = (size_t)sz_page;
	c->sz_extra = (size_t)sz_extra;
	c->sz_entry = VSQ_HDR + c->sz_extra;
	c->purgeable = purgeable != 0;
	c->n_max = 100; /* SQLite sets cache_size right after creating a cache */
	c->n90 = 90;
	c->n_cap = 100;
	c->hot_max = hot_max_of(c->n_max);
	if (!vsq_pool_take(c) && vr_group_new(c->ctx, VSQ_PRIORITY, &c->grp) < 0) {
		cache_free(c);
		return NULL;
	}
	vr_group_set_purge_handler(c->grp, vsq_on_purge, c);
	return (sqlite3_pcache *)c;
}

static void x_cachesize(sqlite3_pcache *pc, int n)
{
	struct vsq_cache *c = (struct vsq_cache *)pc;
	c->n_max = n > 0 ? (unsigned)n : 0;
	c->n90 = ninety(c->n_max);
	c->hot_max = hot_max_of(c->n_max);
	c->n_cap = c->n_max;
	if (c->purgeable) {
		vsq_cool(c, c->hot_max);
		vsq_trim(c, c->n_max);
		vsq_spares_trim(c, vsq_spares_max(c));
	}
}

/*
 * Right after xFetch refused a page for the budget, SQLite asks the page
 * count (sqlite3PcacheFetchStress) and spills a dirty page only if it is
 * above its spill size: cache_spill, or for VACUUM's copy the larger of
 * the main database's cache_spill and cache_size, which with a large
 * cache_size the cache never reaches under a limit (measured: VACUUM's
 * dirty pages grew until the cgroup OOM-killed the process).  So that one
 * answer is INT_MAX, "full whatever the spill size", and SQLite spills.
 */
static int x_pagecount(sqlite3_pcache *pc)
{
	struct vsq_cache *c = (struct vsq_cache *)pc;
	if (c->stress) {
		c->stress = false;
		return INT_MAX;
	}
	vsq_drain_queued(c);
	return (int)c->n_page;
}

/* a page found in the table that SQLite does not hold: pinned again and
 * off the LRU when its bytes are intact (true), else dropped (a miss) */
static bool take(struct vsq_cache *c, struct vsq_page *p)
{
	if (p->vol) {
		int rc = vr_obj_pin(p->obj);
		if (rc >= 0)
			p->vol = false; /* pinned, also when VR_PURGED */
		if (rc != VR_INTACT) {
			/* purged (or access not restored): SQLite reads it again */
			c->st.purged++;
			vsq_page_free(c, p);
			return false;
		}
	} else {
		c->st.hot_hits++;
	}
	vsq_lru_del(c, p);
	p->pinned = true;
	c->n_pinned++;
	c->st.hits++;
	return true;
}

/* xFetch past a page SQLite holds: kept out of line so that the common
 * case (a page SQLite holds already, a hash lookup) needs no stack frame */
static __attribute__((noinline)) sqlite3_pcache_page *
fetch_slow(struct vsq_cache *c, struct vsq_page *p, unsigned key, int create)
{
	if (atomic_load_explicit(&c->queued, memory_order_relaxed)) {
		vsq_drain(c); /* p may be dropped: found again */
		p = vsq_find(c, key);
	}
	if (p && take(c, p))
		return &p->base;
	if (create == 0)
		return NULL;
	if (create == 1 && c->n_pinned >= c->n90) {
		c->st.refused_pinned++;
		return NULL;
	}
	cap_update(c);
	if (create == 1 && c->n_cap < c->n_max && c->n_pinned >= ninety(c->n_cap)) {
		c->st.refused_share++;
		c->stress = true; /* spill now, not at cache_spill (x_pagecount) */
		return NULL;
	}
	int state = budget_state(c);
	if (state == VSQ_LOW && create == 1) {
		vsq_cool(c, 0); /* the hot pages may go too */
		c->st.refused_budget++;
		c->stress = true; /* see x_pagecount */
		return NULL;
	}
	p = vsq_page_make(c, key, state != VSQ_ROOMY);
	if (!p)
		return NULL;
	vsq_note_size(c);
	return &p->base;
}

static sqlite3_pcache_page *x_fetch(sqlite3_pcache *pc, unsigned key, int create)
{
	struct vsq_cache *c = (struct vsq_cache *)pc;
	c->st.fetches++;
	c->stress = false;
	struct vsq_page *p = vsq_find(c, key);
	if (p && p->pinned) {
		c->st.hits++;
		return &p->base;
	}
	return fetch_slow(c, p, key, create);
}

static void x_unpin(sqlite3_pcache *pc, sqlite3_pcache_page *pg, int discard)
{
	struct vsq_cache *c = (struct vsq_cache *)pc;
	struct vsq_page *p = (struct vsq_page *)pg;
	if (discard || (c->purgeable && c->n_page > c->n_cap)) {
		vsq_page_free(c, p);
		return;
	}
	/* an in-memory database's page stays pinned: its bytes exist nowhere
	 * else (SQLite discards them anyway, sqlite3.h on bPurgeable) */
	p->pinned = false;
	c->n_pinned--;
	vsq_lru_push(c, p); /* hot in a purgeable cache: unpinned when it cools */
}

static void x_rekey(sqlite3_pcache *pc, sqlite3_pcache_page *pg, unsigned old_key, unsigned new_key)
{
	struct vsq_cache *c = (struct vsq_cache *)pc;
	struct vsq_page *p = (struct vsq_page *)pg;
	(void)old_key;
	/* sqlite3.h: an entry at new_key is not pinned; it is dropped */
	struct vsq_page *q = vsq_find(c, new_key);
	if (q && q != p)
		vsq_page_free(c, q);
	vsq_unhash(c, p);
	p->key = new_key;
	/* the table has room for the entry it just held: insert cannot fail */
	vsq_insert(c, p);
}

static void x_truncate(sqlite3_pcache *pc, unsigned limit)
{
	vsq_truncate((struct vsq_cache *)pc, limit);
}

/*
 * Every page freed or a spare; then the group goes to the pool with its
 * spares (a pool's worth of them), or is destroyed with its objects.  The
 * purge handler is removed first: when that returns no call is in flight,
 * and the queue (spares only, now) is forgotten.
 */
static void x_destroy(sqlite3_pcache *pc)
{
	struct vsq_cache *c = (struct vsq_cache *)pc;
	/* a cache with more pages than the pool keeps is not trimmed object
	 * by object (a hole punched and a TLB flush each: 54k of them in a
	 * run on a 100 MB database, most of its system time), nor are its
	 * pages made spares first (an unpin each): its group goes whole,
	 * vr_group_destroy frees the objects, entries and all, and returns
	 * its chunks at once */
	unsigned keep = vsq_pool_keep(c->sz_page);
	bool pool = c->purgeable && c->n_page + c->n_spare <= keep;
	if (pool)
		vsq_truncate(c, 0); /* every page a spare: at most keep */
	vsq_stats_add(&c->st);
	vr_group_set_purge_handler(c->grp, NULL, NULL);
	vsq_queue_forget(c);
	/* spares come only from pages: with pool, n_spare <= keep here */
	if (pool && vsq_pool_give(c))
		c->grp = NULL;
	vr_group_destroy(c->grp); /* frees the spares' objects */
	cache_free(c);
}

/*
 * sqlite3_db_release_memory() and friends: this cache's released pages
 * purged (its group's, S35: not another cache's, nor the application's
 * objects), the hot ones unpinned first.  The purge handler queues them
 * (on this thread: vr_group_purge calls it before it returns), and they
 * are dropped; the spares, purged too, are freed.
 */
static void x_shrink(sqlite3_pcache *pc)
{
	struct vsq_cache *c = (struct vsq_cache *)pc;
	c->st.shrinks++;
	if (!c->purgeable)
		return;
	vsq_cool(c, 0);
	vr_group_purge(c->grp, SIZE_MAX);
	vsq_drain(c);
	vsq_spares_trim(c, 0);
}

static const sqlite3_pcache_methods2 methods = {
	.iVersion = 1,
	.pArg = NULL,
	.xInit = x_init,
	.xShutdown = x_shutdown,
	.xCreate = x_create,
	.xCachesize = x_cachesize,
	.xPagecount = x_pagecount,
	.xFetch = x_fetch,
	.xUnpin = x_unpin,
	.xRekey = x_rekey,
	.xTruncate = x_truncate,
	.xDestroy = x_destroy,
	.xShrink = x_shrink,
};

/* environment variable @name: percent 0..@max, @def when unset, or -EINVAL */
static int percent_from_env(const char *name, int def, unsigned long max)
{
	const char *e = getenv(name);
	if (!e || !*e)
		return def;
	char *end;
	errno = 0;
	unsigned long v = strtoul(e, &end, 10);
	if (errno || *end || e[0] == '-' || v > max)
		return -EINVAL;
	return (int)v;
}

__attribute__((visibility("default"))) int vr_sqlite_pcache_install(struct vr_ctx *ctx)
{
	int reserve =
		percent_from_env("VRANGE_SQLITE_RESERVE", VSQ_RESERVE_DEFAULT, VSQ_RESERVE_MAX);
	int share = percent_from_env("VRANGE_SQLITE_SHARE", VSQ_SHARE_DEFAULT, VSQ_SHARE_MAX);
	if (reserve < 0 || share < 0)
		return -EINVAL;
	struct vr_ctx *own = NULL;
	if (!ctx) {
		int rc = vr_ctx_new(0, &own);
		if (rc < 0)
			return rc;
	}
	int rc = sqlite3_config(SQLITE_CONFIG_PCACHE2, &methods);
	if (rc != SQLITE_OK) {
		vr_ctx_destroy(own);
		return rc == SQLITE_MISUSE ? -EBUSY : -EINVAL;
	}
	/* SQLite is not running: nothing reads g now */
	if (g.own)
		vr_ctx_destroy(g.ctx);
	g.ctx = ctx ? ctx : own;
	g.own = !ctx;
	g.reserve = (unsigned)reserve;
	g.share = (unsigned)share;
	return 0;
}
